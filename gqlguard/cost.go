package gqlguard

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Codes of the refusals in this file. Each is a request error, like gqlgen's own validation
// errors: over HTTP 200 as application/json and 400 as application/graphql-response+json
// (gqlhttp), and an error message (not a result) over WebSocket (errcode.KindProtocol).
const (
	// CodeQueryTooDeep refuses an operation nested deeper than DepthLimit.Max.
	CodeQueryTooDeep = "QUERY_TOO_DEEP"
	// CodeComplexityLimitExceeded refuses an operation costlier than ComplexityLimit.Max; the
	// code gqlgen's own complexity extension uses.
	CodeComplexityLimitExceeded = "COMPLEXITY_LIMIT_EXCEEDED"
	// CodeIntrospectionDisabled refuses __schema and __type when introspection is off.
	CodeIntrospectionDisabled = "INTROSPECTION_DISABLED"
)

func init() {
	// errcode's table is a plain map: registered once, before any request reads it.
	for _, code := range []string{CodeQueryTooDeep, CodeComplexityLimitExceeded, CodeIntrospectionDisabled} {
		errcode.RegisterErrorType(code, errcode.KindProtocol)
	}
}

func protocolError(code, format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, code)
	return err
}

// DepthLimit refuses, after validation and before execution, an operation whose fields nest
// more than Max deep: `{ agents { id } }` is 2 deep. Fragments count where they are spread.
// gqlgen's introspection query is 13 deep, GraphiQL's (ofType nested 9 times) 14.
type DepthLimit struct {
	Max int
}

var (
	_ graphql.HandlerExtension        = DepthLimit{}
	_ graphql.OperationContextMutator = DepthLimit{}
)

func (DepthLimit) ExtensionName() string { return "DepthLimit" }

func (l DepthLimit) Validate(graphql.ExecutableSchema) error {
	if l.Max < 1 {
		return fmt.Errorf("DepthLimit: Max must be positive")
	}
	return nil
}

func (l DepthLimit) MutateOperationContext(_ context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation == nil {
		return nil
	}
	if d := Depth(opCtx.Doc, opCtx.Operation.SelectionSet); d > l.Max {
		return protocolError(CodeQueryTooDeep, "the operation nests fields %d deep; the limit is %d", d, l.Max)
	}
	return nil
}

// Depth is how deep the fields of set nest, following doc's fragments by name. Each fragment is
// measured once (so a chain of fragments spreading the next twice costs its length, not 2^n),
// and a fragment spread inside itself counts as empty there, so an unvalidated document with a
// cycle ends too.
func Depth(doc *ast.QueryDocument, set ast.SelectionSet) int {
	w := depthWalker{doc: doc, memo: map[string]int{}, visiting: map[string]bool{}}
	return w.set(set)
}

type depthWalker struct {
	doc      *ast.QueryDocument
	memo     map[string]int
	visiting map[string]bool
}

func (w depthWalker) set(set ast.SelectionSet) int {
	d := 0
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			d = max(d, 1+w.set(s.SelectionSet))
		case *ast.InlineFragment:
			d = max(d, w.set(s.SelectionSet))
		case *ast.FragmentSpread:
			d = max(d, w.fragment(s.Name))
		}
	}
	return d
}

func (w depthWalker) fragment(name string) int {
	if d, ok := w.memo[name]; ok {
		return d
	}
	frag := w.doc.Fragments.ForName(name)
	if frag == nil || w.visiting[name] {
		return 0 // unknown, or a cycle: validation reports both
	}
	w.visiting[name] = true
	d := w.set(frag.SelectionSet)
	delete(w.visiting, name)
	w.memo[name] = d
	return d
}

// ComplexityLimit refuses, after validation and before execution, an operation whose complexity
// is over Max. It counts as gqlgen's complexity package does (every field 1 plus what it
// selects, or the schema's own complexity function where one is set) with two differences:
//
//   - A field with a page-size argument (PageSizeArgs: perPage, last) costs 1 plus its page size
//     times what it selects, so `threads(perPage: 500) { threads { runs(perPage: 500) … } }` costs
//     what it could load. Without the argument the page counts DefaultPageSize items.
//   - Each fragment is counted once and its cost reused: gqlgen's own extension walks a fragment
//     again at every spread, which makes a chain of 30 fragments, each spreading the next twice,
//     take it minutes. And introspection fields count too (gqlgen skips __schema), or ten thousand
//     aliased __schema would cost nothing.
type ComplexityLimit struct {
	Max             int
	PageSizeArgs    []string
	DefaultPageSize int
	// PageSizeDefaults are the page sizes of arguments whose default is not DefaultPageSize
	// (Thread.messages' last: the server's maximum).
	PageSizeDefaults map[string]int

	es graphql.ExecutableSchema
}

var (
	_ graphql.HandlerExtension        = (*ComplexityLimit)(nil)
	_ graphql.OperationContextMutator = (*ComplexityLimit)(nil)
)

func (*ComplexityLimit) ExtensionName() string { return "ComplexityLimit" }

func (c *ComplexityLimit) Validate(es graphql.ExecutableSchema) error {
	if c.Max < 1 || c.DefaultPageSize < 0 {
		return fmt.Errorf("ComplexityLimit: Max must be positive and DefaultPageSize not negative")
	}
	c.es = es
	return nil
}

func (c *ComplexityLimit) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation == nil {
		return nil
	}
	n := c.Complexity(ctx, opCtx.Doc, opCtx.Operation, opCtx.Variables)
	if n > c.Max {
		return protocolError(CodeComplexityLimitExceeded, "operation has complexity %d, which exceeds the limit of %d; select fewer fields or smaller pages", n, c.Max)
	}
	return nil
}

// Complexity is the complexity of a validated operation of doc, with vars its variables.
func (c *ComplexityLimit) Complexity(ctx context.Context, doc *ast.QueryDocument, op *ast.OperationDefinition, vars map[string]any) int {
	w := complexityWalker{c: c, ctx: ctx, doc: doc, vars: vars, memo: map[string]int{}, visiting: map[string]bool{}}
	return w.set(op.SelectionSet)
}

type complexityWalker struct {
	c        *ComplexityLimit
	ctx      context.Context
	doc      *ast.QueryDocument
	vars     map[string]any
	memo     map[string]int
	visiting map[string]bool
}

func (w complexityWalker) set(set ast.SelectionSet) int {
	total := 0
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			total = satAdd(total, w.field(s))
		case *ast.InlineFragment:
			total = satAdd(total, w.set(s.SelectionSet))
		case *ast.FragmentSpread:
			total = satAdd(total, w.fragment(s.Name))
		}
	}
	return total
}

func (w complexityWalker) field(f *ast.Field) int {
	child := w.set(f.SelectionSet)
	if f.Definition == nil || f.ObjectDefinition == nil {
		return satAdd(1, child) // not validated (it is, in the server): count it plainly
	}
	args := f.ArgumentMap(w.vars)
	if n, ok := w.c.es.Complexity(w.ctx, f.ObjectDefinition.Name, f.Name, child, args); ok && n >= 1 {
		return n
	}
	for _, name := range w.c.PageSizeArgs {
		if f.Definition.Arguments.ForName(name) == nil {
			continue
		}
		size := w.c.DefaultPageSize
		if d, ok := w.c.PageSizeDefaults[name]; ok {
			size = d
		}
		if v, ok := args[name]; ok && v != nil {
			size = pageSize(v)
		}
		return satAdd(1, satMul(max(size, 1), child))
	}
	return satAdd(1, child)
}

func (w complexityWalker) fragment(name string) int {
	if n, ok := w.memo[name]; ok {
		return n
	}
	frag := w.doc.Fragments.ForName(name)
	if frag == nil || w.visiting[name] {
		return 0
	}
	w.visiting[name] = true
	n := w.set(frag.SelectionSet)
	delete(w.visiting, name)
	w.memo[name] = n
	return n
}

// pageSize reads an Int argument as gqlparser leaves it (int64 from a literal, a json.Number
// or a coerced integer from a variable); anything else counts as a page of one, which the
// resolver refuses anyway.
func pageSize(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(min(n, math.MaxInt32))
	case int32:
		return int(n)
	case float64:
		return int(min(n, math.MaxInt32))
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return int(min(i, math.MaxInt32))
		}
	}
	return 1
}

// satAdd and satMul saturate at math.MaxInt, so no query overflows its cost to a small one.
func satAdd(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

func satMul(a, b int) int {
	if a != 0 && b > math.MaxInt/a {
		return math.MaxInt
	}
	return a * b
}

// NoIntrospection refuses operations that select __schema or __type, with
// INTROSPECTION_DISABLED, for a server that does not publish its schema. (Without
// extension.Introspection gqlgen still validates such a query and fails the field at run time
// with a plain error, which the error presenter would show as INTERNAL.) __typename stays allowed:
// clients such as Apollo add it everywhere.
type NoIntrospection struct{}

var (
	_ graphql.HandlerExtension        = NoIntrospection{}
	_ graphql.OperationContextMutator = NoIntrospection{}
)

func (NoIntrospection) ExtensionName() string                   { return "NoIntrospection" }
func (NoIntrospection) Validate(graphql.ExecutableSchema) error { return nil }

func (NoIntrospection) MutateOperationContext(_ context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation != nil && introspects(opCtx.Doc, opCtx.Operation.SelectionSet, nil) {
		return protocolError(CodeIntrospectionDisabled, "introspection is disabled on this server")
	}
	return nil
}

// introspects reports whether set selects __schema or __type at its top level, through
// fragments (each followed once).
func introspects(doc *ast.QueryDocument, set ast.SelectionSet, seen []string) bool {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name == "__schema" || s.Name == "__type" {
				return true
			}
		case *ast.InlineFragment:
			if introspects(doc, s.SelectionSet, seen) {
				return true
			}
		case *ast.FragmentSpread:
			if slices.Contains(seen, s.Name) {
				continue
			}
			seen = append(seen, s.Name)
			if f := doc.Fragments.ForName(s.Name); f != nil && introspects(doc, f.SelectionSet, seen) {
				return true
			}
		}
	}
	return false
}
