package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"interlock/runtype"
)

// PresentError is the one place errors become GraphQL errors. Application errors (runtype.Error)
// keep their message and get their code in extensions.code (UNAVAILABLE also gets
// extensions.retryAfter, in seconds: storage could not be reached, and the driver's words stay
// in the server); errors gqlgen classified itself
// (extensions.code already set: parse and validation errors, variables included) pass as they
// are (variable and operation-name errors reworded, explainRequestError); a request its client
// abandoned (the error is the cancellation, or the request's context was cancelled) is
// CANCELLED; anything else is logged and shown as INTERNAL with a plain message,
// so no SQL or driver text reaches a client.
func PresentError(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		var gqlErr *gqlerror.Error
		if !errors.As(err, &gqlErr) {
			gqlErr = gqlerror.WrapPath(graphql.GetPath(ctx), err)
		}
		var appErr *runtype.Error
		if errors.As(err, &appErr) {
			gqlErr.Message = appErr.Message
			gqlErr.Err = appErr
			setCode(gqlErr, string(appErr.Code))
			if appErr.Code == runtype.CodeUnavailable {
				// Retry, and when: over a WebSocket or an event stream there is no Retry-After.
				gqlErr.Extensions["retryAfter"] = runtype.RetryAfter
			}
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
			setCode(gqlErr, string(runtype.CodeBadUserInput))
			return gqlErr
		}
		if gqlErr.Err == nil {
			// An error gqlgen raised on a field while answering (a null in a non-null field):
			// the server's fault.
			log.Error("graphql: field error", "path", gqlErr.Path.String(), "err", gqlErr.Message)
			gqlErr.Message = "internal server error"
			setCode(gqlErr, string(runtype.CodeInternal))
			return gqlErr
		}
		gqlErr.Err = nil
		if errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled) {
			// The client went away: nobody reads this, and the server did nothing wrong.
			gqlErr.Message = "the request was cancelled by its client"
			setCode(gqlErr, string(runtype.CodeCancelled))
			return gqlErr
		}
		log.Error("graphql: internal error", "path", gqlErr.Path.String(), "err", err)
		gqlErr.Message = "internal server error"
		setCode(gqlErr, string(runtype.CodeInternal))
		return gqlErr
	}
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
