package observe

import (
	"context"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// PresentError wraps the error presenter: every error it shows as INTERNAL is logged at error
// level with the operation it happened in (name and type), the field's path and the error
// itself, which the client never sees; one it shows as CANCELLED (the client gave up on the
// request) at info level, the same way: it is no fault of the server's, and an alert on internal
// errors must not fire for requests nobody waits for. Give the wrapped presenter a logger that
// discards, or each internal error is logged twice.
func PresentError(log *slog.Logger, present graphql.ErrorPresenterFunc) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		detail := err.Error() // before present, which may rewrite the error in place
		out := present(ctx, err)
		level, msg := slog.LevelError, "graphql: internal error"
		switch code, _ := out.Extensions["code"].(string); code {
		case "INTERNAL":
		case "CANCELLED":
			level, msg = slog.LevelInfo, "graphql: request cancelled by its client"
		default:
			return out
		}
		name, typ := "anonymous", "unknown"
		if graphql.HasOperationContext(ctx) {
			oc := graphql.GetOperationContext(ctx)
			if oc.OperationName != "" {
				name = oc.OperationName
			}
			if oc.Operation != nil {
				typ = string(oc.Operation.Operation)
				if oc.Operation.Name != "" {
					name = oc.Operation.Name
				}
			}
		}
		if len(name) > maxLoggedName {
			name = name[:maxLoggedName] + "…"
		}
		log.LogAttrs(ctx, level, msg,
			slog.String("operation", name), slog.String("type", typ),
			slog.String("path", out.Path.String()), slog.String("err", detail))
		return out
	}
}
