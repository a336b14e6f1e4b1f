package gqlhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Codes of the errors this package answers with itself.
const (
	// CodeBadUserInput is a request to fix, not to retry: no query, a body that is not JSON, a
	// mutation over GET, a media type the server does not take.
	CodeBadUserInput = "BAD_USER_INPUT"
	// CodeNotFound is a single connection stream that does not exist (or is not the caller's).
	CodeNotFound = "NOT_FOUND"
	// CodeConflict is a second stream on one reservation, or an operation id already in use.
	CodeConflict = "CONFLICT"
)

// result is a GraphQL response as the spec shapes it: without a data key when nothing was
// executed (a request error), where gqlgen's Response always writes "data": null.
type result struct {
	Errors     gqlerror.List   `json:"errors,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`
	HasNext    *bool           `json:"hasNext,omitempty"`
	Extensions map[string]any  `json:"extensions,omitempty"`
}

func resultOf(r *graphql.Response) result {
	return result{Errors: r.Errors, Data: r.Data, HasNext: r.HasNext, Extensions: r.Extensions}
}

// executed reports whether a response carries the result of an execution (a data key, even
// null): only a request error has none.
func executed(r *graphql.Response) bool { return len(r.Data) > 0 }

// marshal encodes v, which holds only JSON-ready values; a failure is the server's bug, told
// to the client as an internal error rather than a panic.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(result{Errors: gqlerror.List{{Message: "internal server error", Extensions: map[string]any{"code": "INTERNAL"}}}})
	}
	return b
}

// Refusal is an answer given instead of serving a request: a status with one GraphQL error,
// in the JSON media type the client prefers. The connection cap of event streams returns one.
type Refusal struct {
	Status  int
	Message string
	// Code is the error's extensions.code.
	Code string
	// Extensions are further entries of the error's extensions (retryAfter, …).
	Extensions map[string]any
	// Header holds headers to send with it (Retry-After, Allow).
	Header http.Header
}

func (r *Refusal) Error() string { return r.Message }

// Write answers req with the refusal.
func (r *Refusal) Write(w http.ResponseWriter, req *http.Request) {
	ext := map[string]any{"code": r.Code}
	maps.Copy(ext, r.Extensions)
	for k, v := range r.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Cache-Control", "no-store")
	writeResult(w, ErrorType(req), r.Status, result{Errors: gqlerror.List{{Message: r.Message, Extensions: ext}}})
}

// WriteError answers r with status and one GraphQL error (extensions.code code), as
// application/graphql-response+json when the client prefers it and application/json otherwise:
// the shape every GraphQL client reads, for refusals made before any GraphQL runs.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	(&Refusal{Status: status, Code: code, Message: message}).Write(w, r)
}

// writeResult writes one GraphQL response.
func writeResult(w http.ResponseWriter, mediaType string, status int, res result) {
	h := w.Header()
	h.Set("Content-Type", mediaType+"; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(marshal(res))
}

type hintKey struct{}

// hint is where an extension asks for the status of a plain HTTP answer.
type hint struct {
	mu     sync.Mutex
	status int
	header http.Header
}

// withHint gives ctx a place for SetStatus.
func withHint(ctx context.Context) (context.Context, *hint) {
	h := &hint{}
	return context.WithValue(ctx, hintKey{}, h), h
}

func (h *hint) get() (int, http.Header) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status, h.header
}

// SetStatus asks that the answer to the request of ctx be status, with header, when it is one
// JSON answer (a plain POST or GET): a mutation refused by the rate limit is 429 with
// Retry-After, storage that cannot be reached 503. A stream has long sent its status when an
// event is refused, so there it changes nothing, and neither does it over a WebSocket (ctx comes
// from no request of this transport). It reports whether ctx belongs to a plain request.
func SetStatus(ctx context.Context, status int, header http.Header) bool {
	h, ok := ctx.Value(hintKey{}).(*hint)
	if !ok || h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.status, h.header = status, header
	return true
}

// RetryAfter is the Retry-After header of an answer to retry in secs seconds.
func RetryAfter(secs int) http.Header {
	return http.Header{"Retry-After": {fmt.Sprint(secs)}}
}

// statusOf is the status of one JSON answer. A response with data (even null) is 200: the
// request was executed, its errors are field errors. A request error (no data) is 200 as
// application/json (the legacy rule: a client cannot trust a 4xx) and 4xx as
// application/graphql-response+json: 401 or 403 for an operation refused to its principal, 400
// for every other, as graphql-http's audit asks of parse, validation and variable errors. An
// extension's SetStatus (429, 503, 405) comes first either way.
func statusOf(mediaType string, resp *graphql.Response, h *hint) int {
	if h != nil {
		if status, _ := h.get(); status != 0 {
			return status
		}
	}
	if executed(resp) || mediaType != GraphQLResponse {
		return http.StatusOK
	}
	for _, e := range resp.Errors {
		switch code, _ := e.Extensions["code"].(string); code {
		case "UNAUTHENTICATED":
			return http.StatusUnauthorized
		case "FORBIDDEN":
			return http.StatusForbidden
		}
	}
	return http.StatusBadRequest
}

// writeResponse writes resp as one JSON answer of mediaType, with the status statusOf gives.
func writeResponse(w http.ResponseWriter, mediaType string, resp *graphql.Response, h *hint) {
	status := statusOf(mediaType, resp, h)
	if h != nil {
		if s, header := h.get(); s != 0 {
			for k, v := range header {
				w.Header()[k] = v
			}
		}
	}
	writeResult(w, mediaType, status, resultOf(resp))
}
