// Package gqlhttp serves GraphQL over HTTP as the GraphQL-over-HTTP specification and the
// graphql-sse protocol write it, in place of gqlgen's GET, POST, SSE and Options transports,
// which answer a request error with 422 whatever the client accepts (Apollo Client 3 then sees a
// network error with no GraphQL errors), write "data": null where the spec wants no data key,
// stream SSE whenever text/event-stream is listed rather than preferred, run a subscription
// sent as a plain POST until the write timeout, and drop every payload of a @defer after the
// first.
//
// What it does, by request:
//
//   - POST (application/json) and GET: the answer's media type is negotiated with Accept (q-values,
//     then order): application/json (also for */* and no Accept), application/graphql-response+json,
//     text/event-stream (graphql-sse's distinct connections mode) or multipart/mixed (incremental
//     delivery of @defer). A request error is 200 as application/json and 4xx as
//     application/graphql-response+json, with no data key; an extension's SetStatus (429, 503) wins.
//   - A subscription is streamed as SSE when Accept names text/event-stream at all (urql lists it
//     after the JSON types), and is otherwise refused at once with an error that says how to
//     send it (a plain POST, or "*/*", would otherwise wait for events it cannot read).
//   - A mutation over GET is 405 with Allow: POST (QueriesOverGET); another method is 405; a
//     body that is not JSON is 415; Accept with nothing served is 406; each with a GraphQL error
//     carrying extensions.code.
//   - graphql-sse's single connection mode: PUT reserves a stream and answers its token;
//     GET with the token (X-GraphQL-Event-Stream-Token, or ?token=) and Accept:
//     text/event-stream connects it; POST (or GET) with the token runs an operation on it
//     (202, results as events carrying the operation's id); DELETE with the token and
//     ?operationId= stops one. Every request of a stream must come from its reservation's owner.
//
// It knows nothing of who is calling: the application hands it Options (the owner of a
// request, when its credentials expire, the cap on streams).
package gqlhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Defaults of Options.
const (
	// DefaultHeartbeat is graphql-sse's own ping interval: well under the minute after which
	// proxies and load balancers drop a connection that says nothing.
	DefaultHeartbeat = 12 * time.Second
	// DefaultReservationTimeout is how long a reserved stream waits to be connected.
	DefaultReservationTimeout = 30 * time.Second
)

// Options are what the application tells the transport.
type Options struct {
	// Heartbeat is how long an event stream may stay silent before it sends a comment line
	// (":"), so that idle subscriptions are not cut by proxies. Default DefaultHeartbeat.
	Heartbeat time.Duration
	// ReservationTimeout ends a reservation (single connection mode) that no stream connected to
	// within it, giving back its connection slot. Default DefaultReservationTimeout.
	ReservationTimeout time.Duration
	// MaxOperations is how many operations may be active at once on one single connection
	// stream (the next is refused); 0 is no limit.
	MaxOperations int
	// StreamFunc, when set, takes a connection slot for the client of ctx before an event stream
	// opens (distinct connections) or a reservation is made (single connection), returning the
	// func that gives it back; an error that is a *Refusal is the answer (429 over a cap).
	StreamFunc func(ctx context.Context) (release func(), err error)
	// OwnerFunc names the client of ctx (the authenticated principal): a reservation's stream
	// and operations are served only to the client that made it. Nil: every client is one.
	OwnerFunc func(ctx context.Context) string
	// ExpiresFunc is when the credentials of ctx expire (zero: never): a single connection stream
	// ends then, as a WebSocket is closed.
	ExpiresFunc func(ctx context.Context) time.Time
}

// Transport is the gqlgen transport of every request that is not a WebSocket's.
type Transport struct {
	opts    Options
	streams *registry
}

var _ graphql.Transport = (*Transport)(nil)

// New returns a transport with opts (zero values take their defaults).
func New(opts Options) *Transport {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.ReservationTimeout <= 0 {
		opts.ReservationTimeout = DefaultReservationTimeout
	}
	return &Transport{opts: opts, streams: &registry{streams: map[string]*stream{}}}
}

// Allowed is the endpoint's Allow header: what a 405 and an OPTIONS answer list.
const Allowed = "GET, POST, PUT, DELETE, OPTIONS"

// Supports takes every request that does not ask for a protocol upgrade: whatever its method or
// headers, it gets an answer of this transport (a 405, 406 or 415 with a GraphQL error), never
// gqlgen's bare "transport not supported".
func (t *Transport) Supports(r *http.Request) bool { return r.Header.Get("Upgrade") == "" }

// Do answers one request.
func (t *Transport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	switch r.Method {
	case http.MethodOptions:
		w.Header().Set("Allow", Allowed)
		w.WriteHeader(http.StatusOK)
	case http.MethodGet, http.MethodPost:
		if token := streamToken(r); token != "" {
			t.single(w, r, exec, token)
			return
		}
		params, refusal := readParams(r)
		if refusal != nil {
			refusal.Write(w, r)
			return
		}
		t.serve(w, r, exec, params)
	case http.MethodPut:
		t.reserve(w, r)
	case http.MethodDelete:
		t.stop(w, r)
	default:
		(&Refusal{Status: http.StatusMethodNotAllowed, Code: CodeBadUserInput,
			Message: fmt.Sprintf("%s is not served here: send GraphQL requests with POST (or GET for queries)", r.Method),
			Header:  http.Header{"Allow": {Allowed}}}).Write(w, r)
	}
}

// serve runs one operation of a request without a stream token and answers it in the media
// type the client prefers.
func (t *Transport) serve(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor, params *graphql.RawParams) {
	accept := r.Header.Values("Accept")
	want := Negotiate(accept, answerTypes...)
	if want == "" {
		WriteError(w, r, http.StatusNotAcceptable, CodeBadUserInput,
			"none of the media types in Accept is served here: accept application/graphql-response+json, application/json, text/event-stream or multipart/mixed")
		return
	}
	if want == EventStream {
		release := t.acquire(w, r)
		if release == nil {
			return
		}
		defer release()
	}
	ctx, h := withHint(context.WithValue(r.Context(), methodKey{}, r.Method))
	rc, errs := exec.CreateOperationContext(ctx, params)
	if errs == nil && r.Method == http.MethodGet && rc.Operation.Operation == ast.Mutation {
		errs = gqlerror.List{mutationOverGET(ctx)} // QueriesOverGET was not installed
	}
	if errs != nil {
		resp := exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		if status, _ := h.get(); want == EventStream && status != http.StatusMethodNotAllowed {
			// graphql-sse: errors found before execution (validation, limits, the rate) go
			// through the accepted stream, so that an EventSource, which shows no body of a
			// refused stream, sees them. Only a method refused is HTTP's own answer.
			t.stream(ctx, w, graphql.OneShot(resp), ast.Query)
			return
		}
		writeResponse(w, jsonType(want, accept), resp, h)
		return
	}
	if rc.Operation.Operation == ast.Subscription && want != EventStream {
		if !Names(accept, EventStream) {
			resp := exec.DispatchError(graphql.WithOperationContext(ctx, rc), gqlerror.List{{
				Message:    "a subscription is a stream: send it with Accept: text/event-stream (graphql-sse), or over a WebSocket (graphql-transport-ws)",
				Extensions: map[string]any{"code": CodeBadUserInput},
			}})
			writeResponse(w, jsonType(want, accept), resp, h)
			return
		}
		want = EventStream // the only representation of a stream the client takes
		release := t.acquire(w, r)
		if release == nil {
			return
		}
		defer release()
	}
	responses, ctx := exec.DispatchOperation(ctx, rc)
	switch want {
	case EventStream:
		t.stream(ctx, w, responses, rc.Operation.Operation)
	case Multipart:
		writeMultipart(ctx, w, responses, rc.Operation.Operation)
	default:
		writeResponse(w, want, collect(ctx, responses), h)
	}
}

// jsonType is the JSON media type of an answer to a client that preferred want: want itself
// when it is one, else the JSON type it accepts best, else application/json.
func jsonType(want string, accept []string) string {
	if want == JSON || want == GraphQLResponse {
		return want
	}
	if t := Negotiate(accept, JSON, GraphQLResponse); t != "" {
		return t
	}
	return JSON
}

// acquire takes a connection slot for a stream of r's client, or answers the refusal and
// returns nil.
func (t *Transport) acquire(w http.ResponseWriter, r *http.Request) (release func()) {
	if t.opts.StreamFunc == nil {
		return func() {}
	}
	release, err := t.opts.StreamFunc(r.Context())
	if err != nil {
		var refusal *Refusal
		if !errors.As(err, &refusal) {
			refusal = &Refusal{Status: http.StatusServiceUnavailable, Code: "UNAVAILABLE", Message: "the event stream could not be opened; retry later"}
		}
		refusal.Write(w, r)
		return nil
	}
	return release
}

type methodKey struct{}

// QueriesOverGET is the gqlgen extension that refuses a mutation sent with GET (a link, an
// <img>, a prefetch: nothing a person meant) with 405, Allow: POST and BAD_USER_INPUT, before it
// runs. Add it with Use before any extension that charges a mutation (the rate limit), so that
// a refused one costs the client nothing. Without it the transport still refuses such a
// mutation, after the other extensions saw it.
type QueriesOverGET struct{}

var _ graphql.OperationContextMutator = QueriesOverGET{}

func (QueriesOverGET) ExtensionName() string                   { return "QueriesOverGET" }
func (QueriesOverGET) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext refuses a mutation of a GET request.
func (QueriesOverGET) MutateOperationContext(ctx context.Context, rc *graphql.OperationContext) *gqlerror.Error {
	if method, _ := ctx.Value(methodKey{}).(string); method == http.MethodGet && rc.Operation != nil && rc.Operation.Operation == ast.Mutation {
		return mutationOverGET(ctx)
	}
	return nil
}

func mutationOverGET(ctx context.Context) *gqlerror.Error {
	SetStatus(ctx, http.StatusMethodNotAllowed, http.Header{"Allow": {http.MethodPost}})
	return &gqlerror.Error{
		Message:    "a mutation is not run over GET (a link or an image could send one): send it with POST",
		Extensions: map[string]any{"code": CodeBadUserInput},
	}
}

// readParams reads the GraphQL request of a GET (its URL) or a POST (its JSON body).
func readParams(r *http.Request) (*graphql.RawParams, *Refusal) {
	params := &graphql.RawParams{Headers: r.Header}
	params.ReadTime.Start = graphql.Now()
	if r.Method == http.MethodGet {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return nil, badRequest("the address's query string could not be read")
		}
		params.Query, params.OperationName = q.Get("query"), q.Get("operationName")
		if v := q.Get("variables"); v != "" {
			if err := decodeObject(v, &params.Variables); err != nil {
				return nil, badRequest(`"variables" must be a JSON object`)
			}
		}
		if v := q.Get("extensions"); v != "" {
			if err := decodeObject(v, &params.Extensions); err != nil {
				return nil, badRequest(`"extensions" must be a JSON object`)
			}
		}
	} else {
		if mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mediaType != "application/json" {
			return nil, &Refusal{Status: http.StatusUnsupportedMediaType, Code: CodeBadUserInput,
				Message: "the request body must be a JSON GraphQL request sent with Content-Type: application/json"}
		}
		var body struct {
			Query         *string        `json:"query"`
			OperationName *string        `json:"operationName"`
			Variables     map[string]any `json:"variables"`
			Extensions    map[string]any `json:"extensions"`
		}
		dec := json.NewDecoder(r.Body)
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil {
			return nil, badRequest("the request body is not a JSON object of a GraphQL request (query, operationName, variables, extensions)")
		}
		if body.Query != nil {
			params.Query = *body.Query
		}
		if body.OperationName != nil {
			params.OperationName = *body.OperationName
		}
		params.Variables, params.Extensions = body.Variables, body.Extensions
	}
	params.ReadTime.End = graphql.Now()
	if params.Query == "" && params.Extensions["persistedQuery"] == nil {
		return nil, badRequest(`the request has no query: send the GraphQL document in "query"`)
	}
	return params, nil
}

func badRequest(message string) *Refusal {
	return &Refusal{Status: http.StatusBadRequest, Code: CodeBadUserInput, Message: message}
}

// decodeObject decodes s, which must be a JSON object (or null), into v.
func decodeObject(s string, v *map[string]any) error {
	if t := strings.TrimSpace(s); t != "null" && !strings.HasPrefix(t, "{") {
		return errors.New("not an object")
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	return dec.Decode(v)
}

// collect is the one answer of a plain JSON request: the first response, with the payloads
// of its @defer fragments merged in (a client that asked for no stream gets them inline,
// which the @defer proposal allows: a server SHOULD, not MUST, defer).
func collect(ctx context.Context, responses graphql.ResponseHandler) *graphql.Response {
	first := responses(ctx)
	if first == nil {
		return &graphql.Response{Errors: gqlerror.List{{Message: "internal server error", Extensions: map[string]any{"code": "INTERNAL"}}}}
	}
	for first.HasNext != nil && *first.HasNext {
		next := responses(ctx)
		if next == nil {
			break
		}
		mergeDeferred(first, next)
		first.HasNext = next.HasNext
	}
	first.HasNext = nil
	return first
}
