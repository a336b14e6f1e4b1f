package gqlhttp

import (
	"context"
	"io"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// writeMultipart answers with multipart/mixed, incremental delivery as Apollo Client reads it
// (deferSpec=20220824): each response one JSON part, the first the initial result, the later
// ones a query's @defer payloads, flushed as they come. The boundary is "-", as the incremental
// delivery RFC suggests: no JSON line starts with it.
func writeMultipart(ctx context.Context, w http.ResponseWriter, responses graphql.ResponseHandler, op ast.Operation) {
	h := w.Header()
	h.Set("Content-Type", `multipart/mixed; boundary="-"; deferSpec=20220824`)
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	first := true
	for {
		resp := responses(ctx)
		if resp == nil {
			break
		}
		if _, err := io.WriteString(w, "\r\n---\r\nContent-Type: application/json; charset=utf-8\r\n\r\n"); err != nil {
			return
		}
		if _, err := w.Write(marshal(payload(resp, first, op))); err != nil {
			return
		}
		_ = rc.Flush()
		first = false
	}
	_, _ = io.WriteString(w, "\r\n-----\r\n")
}
