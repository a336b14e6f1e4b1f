package graph

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// StreamErrors lets a subscription end with an error: a stream that breaks (storage could not be
// read: UNAVAILABLE) sends one last result holding the error, with no data, and then ends, so a
// client can tell it from the end of the stream's subject (a run that finished) and resubscribe.
//
// It works the same on every transport, because the error is an ordinary result: over SSE and
// over both WebSocket subprotocols it is a next (data) message with errors, followed by the
// transport's usual complete. (gqlgen's transport.AddSubscriptionError serves WebSockets only,
// and crashes an SSE stream.) The error goes through the error presenter as any other.
//
// Install it with Use; a resolver whose stream broke calls endWith.
type StreamErrors struct{}

var (
	_ graphql.OperationInterceptor = StreamErrors{}
	_ graphql.ResponseInterceptor  = StreamErrors{}
)

func (StreamErrors) ExtensionName() string                   { return "StreamErrors" }
func (StreamErrors) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation gives each subscription the place where its stream leaves its error.
func (StreamErrors) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if oc := graphql.GetOperationContext(ctx); oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	return next(context.WithValue(ctx, streamEndKey{}, &streamEnd{}))
}

// InterceptResponse turns the end of a stream that left an error into one result with the error.
func (StreamErrors) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp != nil {
		return resp
	}
	end, ok := ctx.Value(streamEndKey{}).(*streamEnd)
	if !ok {
		return nil
	}
	err := end.take()
	if err == nil {
		return nil
	}
	graphql.AddError(ctx, err)
	return &graphql.Response{Errors: graphql.GetErrors(ctx)}
}

type streamEndKey struct{}

// streamEnd holds the error a subscription's stream ended with, until it is sent once.
type streamEnd struct {
	mu  sync.Mutex
	err error
}

func (e *streamEnd) take() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.err
	e.err = nil
	return err
}

// endWith returns what a stream of the subscription field of ctx calls with the error it broke
// with, just before it closes its channel; nil without StreamErrors.
func endWith(ctx context.Context) func(error) {
	end, ok := ctx.Value(streamEndKey{}).(*streamEnd)
	if !ok {
		return nil
	}
	path := graphql.GetPath(ctx)
	return func(err error) {
		end.mu.Lock()
		end.err = gqlerror.WrapPath(path, err)
		end.mu.Unlock()
	}
}
