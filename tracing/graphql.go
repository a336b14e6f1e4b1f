package tracing

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// GraphQL is the gqlgen extension that makes a span per GraphQL operation, named by its type and
// name ("mutation ApproveCall", "query" when it has no name), with the errors of its response
// recorded. A subscription's span lasts as long as the subscription, with each error as an event.
// Resolvers run in its context, so what they cause (SQL, the execution's link) points to it. The
// document itself is not recorded: its literals may hold what people typed.
type GraphQL struct{ t *Tracing }

// GraphQL returns the extension; nil when tracing is off (add it only when not nil).
func (t *Tracing) GraphQL() *GraphQL {
	if t == nil {
		return nil
	}
	return &GraphQL{t: t}
}

var (
	_ graphql.HandlerExtension     = (*GraphQL)(nil)
	_ graphql.OperationInterceptor = (*GraphQL)(nil)
)

// ExtensionName names the extension in gqlgen's stats.
func (*GraphQL) ExtensionName() string { return "OpenTelemetry" }

// Validate accepts every schema.
func (*GraphQL) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation starts the operation's span and ends it with the (last) response.
func (g *GraphQL) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	op := graphql.GetOperationContext(ctx)
	kind, name := "", op.OperationName
	if op.Operation != nil {
		kind = string(op.Operation.Operation)
		if name == "" {
			name = op.Operation.Name
		}
	}
	spanName := strings.TrimSpace(kind + " " + name)
	if spanName == "" {
		spanName = "graphql"
	}
	attrs := []attribute.KeyValue{semconv.GraphQLOperationTypeKey.String(kind)}
	if name != "" {
		attrs = append(attrs, semconv.GraphQLOperationName(name))
	}
	ctx, span := g.t.tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	respond := next(ctx)
	subscription := op.Operation != nil && op.Operation.Operation == ast.Subscription
	ended := false
	return func(ctx context.Context) *graphql.Response {
		resp := respond(ctx)
		if ended {
			return resp
		}
		if resp != nil {
			recordErrors(span, resp)
		}
		if resp == nil || !subscription {
			ended = true
			span.End()
		}
		return resp
	}
}

// recordErrors records each error of a response on span, and marks the span failed.
func recordErrors(span trace.Span, resp *graphql.Response) {
	if len(resp.Errors) == 0 {
		return
	}
	for _, e := range resp.Errors {
		opts := []trace.EventOption{}
		if code, ok := e.Extensions["code"].(string); ok {
			opts = append(opts, trace.WithAttributes(attribute.String("graphql.error.code", code)))
		}
		span.RecordError(e, opts...)
	}
	span.SetStatus(codes.Error, resp.Errors[0].Message)
}
