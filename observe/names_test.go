package observe

import (
	"context"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// TestOperationOf: the document's name wins over the request's operationName; a name a
// client chose is cut at maxLoggedName; without an operation the name is "anonymous" and the
// type "unknown".
func TestOperationOf(t *testing.T) {
	long := strings.Repeat("a", maxLoggedName+50)
	for _, c := range []struct {
		oc        *graphql.OperationContext
		name, typ string
	}{
		{nil, "anonymous", "unknown"},
		{&graphql.OperationContext{OperationName: "Inbox"}, "Inbox", "unknown"},
		{&graphql.OperationContext{OperationName: "Other", Operation: &ast.OperationDefinition{Operation: ast.Mutation, Name: "Approve"}}, "Approve", "mutation"},
		{&graphql.OperationContext{Operation: &ast.OperationDefinition{Operation: ast.Query}}, "anonymous", "query"},
		{&graphql.OperationContext{OperationName: long}, long[:maxLoggedName] + "…", "unknown"},
	} {
		ctx := context.Background()
		if c.oc != nil {
			ctx = graphql.WithOperationContext(ctx, c.oc)
		}
		if name, typ := OperationOf(ctx); name != c.name || typ != c.typ {
			t.Errorf("%+v: %q %q, want %q %q", c.oc, name, typ, c.name, c.typ)
		}
	}
}
