package gqlhttp

import (
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// TestMergeDeferred: a @defer payload replaces the null gqlgen left in its place, at its path
// through objects and lists, keeping the order of the fields; a payload whose object is gone adds
// only its errors.
func TestMergeDeferred(t *testing.T) {
	t.Parallel()
	resp := &graphql.Response{Data: []byte(`{"a":{"list":[{"x":1,"late":null,"y":2},{"x":3,"late":null}]},"b":true}`)}
	mergeDeferred(resp, &graphql.Response{Data: []byte(`{"late":{"z":"ok"}}`), Path: ast.Path{ast.PathName("a"), ast.PathName("list"), ast.PathIndex(0)}})
	mergeDeferred(resp, &graphql.Response{Data: []byte(`{"late":[1,2],"extra":"e"}`), Path: ast.Path{ast.PathName("a"), ast.PathName("list"), ast.PathIndex(1)}})
	mergeDeferred(resp, &graphql.Response{Data: []byte(`{"late":1}`), Path: ast.Path{ast.PathName("gone")}, Errors: gqlerror.List{{Message: "boom"}}})
	const want = `{"a":{"list":[{"x":1,"late":{"z":"ok"},"y":2},{"x":3,"late":[1,2],"extra":"e"}]},"b":true}`
	if string(resp.Data) != want || len(resp.Errors) != 1 || resp.Errors[0].Message != "boom" {
		t.Fatalf("merged: %s %v\nwant %s", resp.Data, resp.Errors, want)
	}
}
