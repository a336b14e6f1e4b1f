// Package httpguard holds the HTTP-level protections in front of the GraphQL endpoint and the
// console: the request body limit and its errors, per-request deadlines that spare streams, and
// browser security headers. It knows nothing of the run service.
package httpguard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"interlock/gqlhttp"
)

// graphQLRequest is the shape of a POSTed GraphQL request, the same as gqlgen's RawParams, so a
// body this package admits is one gqlgen decodes.
type graphQLRequest struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
	Extensions    map[string]any `json:"extensions"`
}

// fieldKinds says what each field of a GraphQL request must be, for the error message.
var fieldKinds = map[string]string{
	"query": "a string", "operationName": "a string", "variables": "an object", "extensions": "an object",
}

// Body reads the body of every request to next itself, at most limit bytes, so that next sees
// only bodies that fit. A larger body is answered 413; a POSTed JSON body that is not a JSON
// object of a GraphQL request is answered 400. Both with one short GraphQL error (code
// BAD_USER_INPUT) that names the problem only, in the JSON media type the client prefers: a
// body should never come back echoed in full, with Go type names, as gqlgen's own POST
// transport did.
func Body(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			if isJSONPost(r) {
				WriteError(w, r, http.StatusBadRequest, "the request body is empty; send a JSON object with a query")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				WriteError(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", limit))
				return
			}
			WriteError(w, r, http.StatusBadRequest, "the request body could not be read")
			return
		}
		if isJSONPost(r) {
			if msg := checkGraphQLRequest(body); msg != "" {
				WriteError(w, r, http.StatusBadRequest, msg)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// isJSONPost reports whether gqlgen's POST (or SSE) transport will decode r's body as JSON.
func isJSONPost(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get("Upgrade") != "" {
		return false
	}
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mediaType == "application/json"
}

// checkGraphQLRequest decodes body as gqlgen will and returns what is wrong with it, in words a
// client can act on, or "" when it decodes.
func checkGraphQLRequest(body []byte) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return "the request body is empty; send a JSON object with a query"
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var req graphQLRequest
	err := dec.Decode(&req)
	if err == nil {
		return ""
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if kind, ok := fieldKinds[typeErr.Field]; ok {
			return fmt.Sprintf("the request body is not a GraphQL request: %q must be %s", typeErr.Field, kind)
		}
		return "the request body must be a JSON object with a query"
	}
	return "the request body is not valid JSON"
}

// WriteError answers r with status and a GraphQL response holding one error with code
// BAD_USER_INPUT, in the JSON media type r prefers (gqlhttp.WriteError): the shape every
// GraphQL client reads, for refusals made before gqlgen runs.
func WriteError(w http.ResponseWriter, r *http.Request, status int, message string) {
	gqlhttp.WriteError(w, r, status, gqlhttp.CodeBadUserInput, message)
}
