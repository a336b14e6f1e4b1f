package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"interlock/observe"
	"interlock/runtype"
)

// PresentError is the one place errors become GraphQL errors, and the one place the errors a
// client is not shown are logged (as WTF Dial's http.Error logs what it hides). Application
// errors (runtype.Error) keep their message and get their code in extensions.code (UNAVAILABLE
// also gets extensions.retryAfter, in seconds: storage could not be reached, and the driver's
// words stay in the server); errors gqlgen classified itself (extensions.code already set:
// parse and validation errors, variables included) pass as they are (variable and
// operation-name errors reworded, explainRequestError); a request its client abandoned (the
// error is the cancellation, or the request's context was cancelled) is CANCELLED, logged at
// INFO: it is no fault of the server's, and an alert on internal errors must not fire for
// requests nobody waits for; anything else — an application error coded INTERNAL included — is
// INTERNAL with a plain message, so that no SQL or driver text reaches a client, and is logged
// at ERROR once, with the operation it happened in (name and type), the field's path and the
// error itself.
func PresentError(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		detail := err.Error() // before the message below is rewritten, in place when err is a *gqlerror.Error
		var gqlErr *gqlerror.Error
		if !errors.As(err, &gqlErr) {
			gqlErr = gqlerror.WrapPath(graphql.GetPath(ctx), err)
		}
		var appErr *runtype.Error
		if errors.As(err, &appErr) && appErr.Code != runtype.CodeInternal {
			gqlErr.Message = appErr.Message
			gqlErr.Err = appErr
			setCode(gqlErr, string(appErr.Code))
			if appErr.Code == runtype.CodeUnavailable {
				// Retry, and when: over a WebSocket or an event stream there is no Retry-After.
				gqlErr.Extensions["retryAfter"] = runtype.RetryAfter
			}
			return gqlErr
		}
		if code, _ := gqlErr.Extensions["code"].(string); code != "" && appErr == nil {
			// gqlgen classified it (errcode: parse and validation errors, including those of
			// variable coercion, which carry a path like variable.r): about the request itself,
			// in gqlgen's words, made plainer where they name no type or no reason.
			explainRequestError(ctx, gqlErr)
			return gqlErr
		}
		if gqlErr.Err == nil && len(gqlErr.Path) == 0 {
			// Other errors gqlgen raised about the request before executing it: safe to show.
			setCode(gqlErr, string(runtype.CodeBadUserInput))
			return gqlErr
		}
		// Past here the client is shown none of the error's words. An error gqlgen raised on a
		// field while answering (a null in a non-null field: Err is nil) is the server's fault.
		fieldError := gqlErr.Err == nil
		gqlErr.Err = nil
		if !fieldError && appErr == nil && (errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled)) {
			// The client went away: nobody reads this, and the server did nothing wrong.
			logHidden(ctx, log, slog.LevelInfo, "graphql: request cancelled by its client", gqlErr, detail)
			gqlErr.Message = "the request was cancelled by its client"
			setCode(gqlErr, string(runtype.CodeCancelled))
			return gqlErr
		}
		logHidden(ctx, log, slog.LevelError, "graphql: internal error", gqlErr, detail)
		gqlErr.Message = "internal server error"
		setCode(gqlErr, string(runtype.CodeInternal))
		return gqlErr
	}
}

// logHidden logs an error the client is not shown in full, with the operation it happened in
// as the operation's own log line names it (observe.OperationOf), so the two lines can be
// matched.
func logHidden(ctx context.Context, log *slog.Logger, level slog.Level, msg string, e *gqlerror.Error, detail string) {
	name, typ := observe.OperationOf(ctx)
	log.LogAttrs(ctx, level, msg,
		slog.String("operation", name), slog.String("type", typ),
		slog.String("path", e.Path.String()), slog.String("err", detail))
}

// Recover turns a panic in a resolver into an INTERNAL error, logging the value.
func Recover(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, v any) error {
		log.Error("graphql: panic", "value", fmt.Sprint(v))
		return errors.New("panic in resolver")
	}
}

func setCode(e *gqlerror.Error, code string) {
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	e.Extensions["code"] = code
}
