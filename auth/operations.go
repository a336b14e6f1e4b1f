package auth

import (
	"context"
	"errors"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"interlock/runtype"
)

// Operations is the GraphQL side of authentication, a gqlgen extension:
//
//   - An operation whose context acts for nobody is refused UNAUTHENTICATED before it runs, on
//     every transport. The HTTP middleware lets only a WebSocket handshake through without a
//     token, and the socket's connection_init must then authenticate it; this is the rule
//     that keeps any other path, present or future, from running an operation for nobody.
//   - A subscription lasts no longer than its token: when the principal's Expires passes, its
//     stream ends with an UNAUTHENTICATED error (then complete), which a client tells from the
//     run's own end and answers by asking for a new token. Over SSE this is what the client
//     sees; a WebSocket is also closed with 4401 at that instant (see the server's InitFunc).
type Operations struct{}

var (
	_ graphql.HandlerExtension     = Operations{}
	_ graphql.OperationInterceptor = Operations{}
)

// ErrTokenExpired is the cause of a subscription's context ending because its token expired.
var ErrTokenExpired = errors.New("the token expired: authenticate again with a new one")

// TokenExpired reports whether ctx ended because the token it was authenticated by expired.
func TokenExpired(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrTokenExpired) }

func (Operations) ExtensionName() string                   { return "Authentication" }
func (Operations) Validate(graphql.ExecutableSchema) error { return nil }
func unauthenticated(msg string) *graphql.Response {
	return &graphql.Response{Errors: gqlerror.List{{Message: msg, Extensions: map[string]any{"code": "UNAUTHENTICATED"}}}}
}

// InterceptOperation refuses an operation without a principal, and ends a subscription when its
// principal's credentials expire.
func (Operations) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	p := runtype.PrincipalFrom(ctx)
	if p == nil {
		return graphql.OneShot(unauthenticated(msgMissing))
	}
	op := graphql.GetOperationContext(ctx)
	if p.Expires.IsZero() || op.Operation == nil || op.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	stream, cancel := context.WithDeadlineCause(ctx, p.Expires, ErrTokenExpired)
	responses := next(stream)
	ended := false
	return func(ctx context.Context) *graphql.Response {
		if ended {
			return nil
		}
		if resp := responses(ctx); resp != nil {
			return resp
		}
		ended = true
		expired := TokenExpired(stream)
		cancel()
		if expired {
			return unauthenticated("token expired: the subscription ended; subscribe again with a new token (after: the last seq seen loses nothing)")
		}
		return nil
	}
}
