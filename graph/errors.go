package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"interlock/observe"
	"interlock/runtype"
)

// PresentError is the one place errors become GraphQL errors, and the one place the errors a
// client is not shown in full are logged (as WTF Dial's http.Error logs what it hides):
//
//   - an application error (runtype.Error) keeps its message and gets its code in
//     extensions.code; UNAVAILABLE also gets extensions.retryAfter, in seconds (storage could
//     not be reached, and the driver's words stay in the server);
//   - an error gqlgen classified itself (extensions.code already set: parse and validation
//     errors, variables included) passes as it is, variable and operation-name errors reworded
//     (explainRequestError); other errors gqlgen raised before executing are BAD_USER_INPUT;
//   - a request its client abandoned (the error is the cancellation, or the request's context
//     was cancelled; or an application error coded CANCELLED) is CANCELLED and logged at INFO:
//     it is no fault of the server's, and an alert on internal errors must not fire for
//     requests nobody waits for;
//   - anything else, an application error coded INTERNAL included, is INTERNAL with a plain
//     message, so that no SQL or driver text reaches a client, and is logged at ERROR.
//
// Each is logged once, with the operation it happened in (name and type, as the operation's own
// log line names it), the field's path and the error itself. A panic was logged by Recover.
func PresentError(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		var gqlErr *gqlerror.Error
		if !errors.As(err, &gqlErr) {
			gqlErr = gqlerror.WrapPath(graphql.GetPath(ctx), err)
		}
		if errors.Is(err, errPanicked) {
			return gqlErr // logged and presented by Recover, cancelled request or not
		}
		// What is logged: the resolver's error, without the position and path gqlgen wrapped it
		// in (the path is logged apart), read before the message is rewritten in place.
		detail := gqlErr.Message
		if gqlErr.Err != nil {
			detail = gqlErr.Err.Error()
		}
		var appErr *runtype.Error
		if errors.As(err, &appErr) {
			gqlErr.Message = appErr.Message
			gqlErr.Err = appErr
			switch appErr.Code {
			case runtype.CodeInternal:
				return internal(ctx, log, gqlErr, detail)
			case runtype.CodeCancelled:
				logHidden(ctx, log, slog.LevelInfo, "graphql: request cancelled by its client", gqlErr, detail)
			case runtype.CodeUnavailable:
				// Retry, and when: over a WebSocket or an event stream there is no Retry-After.
				setExtension(gqlErr, "retryAfter", runtype.RetryAfter)
			}
			setExtension(gqlErr, "code", string(appErr.Code))
			return gqlErr
		}
		if code, _ := gqlErr.Extensions["code"].(string); code != "" {
			// gqlgen classified it (errcode: parse and validation errors, including those of
			// variable coercion, which carry a path like variable.r): about the request itself,
			// in gqlgen's words, made plainer where they name no type or no reason.
			explainRequestError(ctx, gqlErr)
			return gqlErr
		}
		if gqlErr.Err == nil && len(gqlErr.Path) == 0 {
			// Other errors gqlgen raised about the request before executing it: safe to show.
			setExtension(gqlErr, "code", string(runtype.CodeBadUserInput))
			return gqlErr
		}
		if gqlErr.Err == nil {
			// An error gqlgen raised on a field while answering (a null in a non-null field):
			// the server's fault, cancelled request or not.
			return internal(ctx, log, gqlErr, detail)
		}
		if errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
			// The client went away: nobody reads this, and the server did nothing wrong.
			logHidden(ctx, log, slog.LevelInfo, "graphql: request cancelled by its client", gqlErr, detail)
			gqlErr.Err = nil
			gqlErr.Message = "the request was cancelled by its client"
			setExtension(gqlErr, "code", string(runtype.CodeCancelled))
			return gqlErr
		}
		return internal(ctx, log, gqlErr, detail)
	}
}

// internal logs the error e stands for (detail) and turns e into a plain INTERNAL error.
func internal(ctx context.Context, log *slog.Logger, e *gqlerror.Error, detail string) *gqlerror.Error {
	logHidden(ctx, log, slog.LevelError, "graphql: internal error", e, detail)
	e.Err = nil
	e.Message = "internal server error"
	setExtension(e, "code", string(runtype.CodeInternal))
	return e
}

// logHidden logs an error the client is not shown in full (or, cancelled, that nobody reads),
// with the operation it happened in as the operation's own log line names it
// (observe.OperationOf), so that the two lines can be matched.
func logHidden(ctx context.Context, log *slog.Logger, level slog.Level, msg string, e *gqlerror.Error, detail string) {
	name, typ := observe.OperationOf(ctx)
	log.LogAttrs(ctx, level, msg,
		slog.String("operation", name), slog.String("type", typ),
		slog.String("path", e.Path.String()), slog.String("err", detail))
}

// Recover is where a panic in a resolver is logged — at ERROR, as an internal error, with the
// operation, the field's path, the panic's value and the stack — and becomes an INTERNAL error
// already presented: gqlgen's WebSocket transport sends the error of a panic in a
// subscription's stream to its client without the error presenter, so the plain message and
// the code must be there from the start. PresentError passes it on as it is, without logging
// it again.
func Recover(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, v any) error {
		name, typ := observe.OperationOf(ctx)
		log.LogAttrs(ctx, slog.LevelError, "graphql: internal error",
			slog.String("operation", name), slog.String("type", typ), slog.String("path", graphql.GetPath(ctx).String()),
			slog.String("err", fmt.Sprintf("panic in resolver: %v", v)), slog.String("stack", string(debug.Stack())))
		return &gqlerror.Error{Message: "internal server error", Extensions: map[string]any{"code": string(runtype.CodeInternal)}, Err: errPanicked}
	}
}

// errPanicked marks the error of a panic, which Recover logged and presented.
var errPanicked = errors.New("panic in resolver")

func setExtension(e *gqlerror.Error, key string, v any) {
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	e.Extensions[key] = v
}
