package graph

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// schema is the server's schema, for the expected type of a variable's inner field.
var schema = sync.OnceValue(func() *ast.Schema { return NewExecutableSchema(Config{}).Schema() })

// explainRequestError rewrites, in place, the message of a request error gqlgen words for a
// program rather than a person: a variable that failed coercion ("must be defined" at path
// variable.r) is named with the type it must have, and an operation that cannot be picked says
// why ("operation  not found", when a document of several operations names none). The path and
// code stay as gqlgen set them.
func explainRequestError(ctx context.Context, e *gqlerror.Error) {
	if !graphql.HasOperationContext(ctx) {
		return
	}
	oc := graphql.GetOperationContext(ctx)
	switch {
	case len(e.Path) >= 2 && e.Path[0] == ast.PathName("variable") && oc.Operation != nil && !strings.HasPrefix(e.Message, `Variable "$`):
		explainVariable(e, oc.Operation)
	case oc.Doc != nil && oc.Operation == nil && len(e.Path) == 0 && len(e.Locations) == 0:
		// The only request error raised between parsing and picking the operation.
		explainOperationName(e, oc.Doc, oc.OperationName)
	}
}

// explainVariable names the variable at e.Path[1], its declared type, and for an inner value
// where it is and what type was expected there.
func explainVariable(e *gqlerror.Error, op *ast.OperationDefinition) {
	name, ok := e.Path[1].(ast.PathName)
	if !ok {
		return
	}
	def := op.VariableDefinitions.ForName(string(name))
	if def == nil || def.Type == nil {
		return
	}
	head := fmt.Sprintf("Variable \"$%s\" of type %q", name, def.Type.String())
	if len(e.Path) == 2 {
		switch e.Message {
		case "must be defined":
			e.Message = fmt.Sprintf("Variable \"$%s\" of required type %q was not provided.", name, def.Type.String())
		case "cannot be null":
			e.Message = fmt.Sprintf("Variable \"$%s\" of non-null type %q must not be null.", name, def.Type.String())
		default:
			e.Message = fmt.Sprintf("%s got an invalid value: %s.", head, e.Message)
		}
		return
	}
	at := make([]string, 0, len(e.Path)-1)
	for _, p := range e.Path[1:] {
		switch p := p.(type) {
		case ast.PathName:
			at = append(at, string(p))
		case ast.PathIndex:
			at = append(at, fmt.Sprint(int(p)))
		}
	}
	where := strings.Join(at, ".")
	want, parent := innerType(def.Type, e.Path[2:])
	switch {
	case want == nil && e.Message == "unknown field" && parent != "":
		e.Message = fmt.Sprintf("%s got an invalid value: %q is not a field of %s.", head, at[len(at)-1], parent)
	case want == nil:
		e.Message = fmt.Sprintf("%s got an invalid value at %s: %s.", head, where, e.Message)
	case e.Message == "must be defined":
		e.Message = fmt.Sprintf("%s got an invalid value: %s of required type %q was not provided.", head, where, want.String())
	case e.Message == "cannot be null":
		e.Message = fmt.Sprintf("%s got an invalid value: %s of non-null type %q must not be null.", head, where, want.String())
	default:
		e.Message = fmt.Sprintf("%s got an invalid value at %s, which must be %q: %s.", head, where, want.String(), e.Message)
	}
}

// innerType follows path (field names and list indexes) from the variable's type t to the type
// expected there; nil when the path leaves the schema, with the input type whose field was not
// found.
func innerType(t *ast.Type, path ast.Path) (want *ast.Type, parent string) {
	for _, p := range path {
		switch p := p.(type) {
		case ast.PathIndex:
			if t.Elem == nil {
				return nil, ""
			}
			t = t.Elem
		case ast.PathName:
			def := schema().Types[t.Name()]
			if def == nil {
				return nil, ""
			}
			f := def.Fields.ForName(string(p))
			if f == nil {
				return nil, def.Name
			}
			t = f.Type
		}
	}
	return t, ""
}

// explainOperationName says why no operation of doc could be picked for name.
func explainOperationName(e *gqlerror.Error, doc *ast.QueryDocument, name string) {
	names := make([]string, 0, len(doc.Operations))
	for _, op := range doc.Operations {
		if op.Name != "" {
			names = append(names, op.Name)
		}
	}
	list := strings.Join(names, ", ")
	if name == "" {
		e.Message = fmt.Sprintf(`The document holds %d operations (%s) and the request names none: set "operationName" to the one to run.`, len(doc.Operations), list)
		return
	}
	e.Message = fmt.Sprintf(`No operation named %q in the document: "operationName" must be one of %s.`, name, list)
}
