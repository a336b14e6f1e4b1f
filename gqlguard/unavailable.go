package gqlguard

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/99designs/gqlgen/graphql"

	"interlock/gqlhttp"
)

// CodeUnavailable is the run service's code for storage that could not be reached: the request
// may succeed when retried, after extensions.retryAfter seconds.
const CodeUnavailable = "UNAVAILABLE"

// Unavailable makes the answer to a plain HTTP request (one JSON answer of gqlhttp, not a
// WebSocket or an event stream, whose status is long sent) 503 Service Unavailable with a
// Retry-After header when it holds an UNAVAILABLE error and no data: a load balancer, a proxy or
// a plain HTTP client then knows to retry without reading GraphQL. An answer with some data (one
// field answered, another UNAVAILABLE) stays 200: it carries a result the client can use, and
// its errors say which fields to ask for again.
type Unavailable struct{}

var _ graphql.ResponseInterceptor = Unavailable{}

func (Unavailable) ExtensionName() string                   { return "Unavailable" }
func (Unavailable) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptResponse sets the status of an answer that is all UNAVAILABLE.
func (Unavailable) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp == nil || len(resp.Errors) == 0 {
		return resp
	}
	secs := 0
	for _, e := range resp.Errors {
		if code, _ := e.Extensions["code"].(string); code == CodeUnavailable {
			secs, _ = e.Extensions["retryAfter"].(int)
			secs = max(secs, 1)
			break
		}
	}
	if secs == 0 || hasData(resp.Data) {
		return resp
	}
	gqlhttp.SetStatus(ctx, http.StatusServiceUnavailable, gqlhttp.RetryAfter(secs))
	return resp
}

// hasData reports whether an answer's data holds a value for any of its top-level fields.
func hasData(data json.RawMessage) bool {
	var fields map[string]json.RawMessage
	if len(data) == 0 || json.Unmarshal(data, &fields) != nil {
		return false
	}
	for _, v := range fields {
		if string(v) != "null" {
			return true
		}
	}
	return false
}
