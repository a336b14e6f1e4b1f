package gqlguard

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"
)

// DefaultMaxComparisons bounds the field comparisons one query may cost the validation rule
// "overlapping fields can be merged", whose cost grows with the square of how often a response
// name repeats in a selection set, multiplied at every level of nesting: `{ agents { id id … } }`
// with 10,000 ids (30 KB) takes gqlparser about 50 s. gqlparser makes about five million
// comparisons a second on one core, so this many take it 15–20 ms; a full introspection query
// makes 833, thirty fragments spread together a few thousand.
const DefaultMaxComparisons = 100_000

// QueryLimit refuses, before gqlgen parses and validates it, a query that is too large (more
// than MaxTokens tokens) or whose validation would cost too much (more than MaxComparisons field
// comparisons): gqlparser's validation cannot be interrupted, and goes on after the client hung
// up. It also stops an operation whose client went away while it was being validated, before it
// executes. Add it with handler.Server.Use after extension.AutomaticPersistedQuery, so that it sees
// the query a hash stands for.
type QueryLimit struct {
	// MaxTokens is the most lexical tokens a query may have.
	MaxTokens int
	// MaxComparisons is the most field comparisons its validation may make; 0 means
	// DefaultMaxComparisons.
	MaxComparisons int
	// Cache, when set, is the server's query cache: a query found there passed validation
	// already and is not checked again.
	Cache graphql.Cache[*ast.QueryDocument]
}

var (
	_ graphql.HandlerExtension          = QueryLimit{}
	_ graphql.OperationParameterMutator = QueryLimit{}
	_ graphql.OperationContextMutator   = QueryLimit{}
)

// ExtensionName names the extension in gqlgen's stats.
func (QueryLimit) ExtensionName() string { return "QueryLimit" }

// Validate checks the limits when the extension is added.
func (l QueryLimit) Validate(graphql.ExecutableSchema) error {
	if l.MaxTokens < 1 || l.MaxComparisons < 0 {
		return fmt.Errorf("QueryLimit: MaxTokens must be positive and MaxComparisons not negative")
	}
	return nil
}

// MutateOperationParameters refuses a query over the limits, with GRAPHQL_VALIDATION_FAILED
// (a request error, like gqlgen's own validation errors) and a message naming the limit.
func (l QueryLimit) MutateOperationParameters(ctx context.Context, req *graphql.RawParams) *gqlerror.Error {
	if err := ctx.Err(); err != nil {
		return refusal("the request was cancelled")
	}
	if req.Query == "" {
		return nil // gqlgen says so
	}
	if l.Cache != nil {
		if _, ok := l.Cache.Get(ctx, req.Query); ok {
			return nil
		}
	}
	if n := countTokens(req.Query); n > l.MaxTokens {
		return refusal(fmt.Sprintf("the query has %d tokens; the limit is %d", n, l.MaxTokens))
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: req.Query})
	if err != nil {
		return nil // gqlgen parses it again and reports the error in its words
	}
	max := l.MaxComparisons
	if max == 0 {
		max = DefaultMaxComparisons
	}
	if !withinComparisons(doc, max) {
		return refusal(fmt.Sprintf("the query repeats fields too often: checking it would take more than %d field comparisons; select each field once per selection set", max))
	}
	return nil
}

// MutateOperationContext stops an operation whose client went away during validation.
func (QueryLimit) MutateOperationContext(ctx context.Context, _ *graphql.OperationContext) *gqlerror.Error {
	if ctx.Err() != nil {
		return refusal("the request was cancelled")
	}
	return nil
}

func refusal(message string) *gqlerror.Error {
	err := &gqlerror.Error{Message: message}
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

// countTokens counts q's lexical tokens the way gqlparser's parser does (punctuators, names,
// values; not comments); a lexing error ends the count, and the parser reports it.
func countTokens(q string) int {
	lx := lexer.New(&ast.Source{Input: q})
	n := 0
	for {
		tok, err := lx.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return n
		}
		if tok.Kind != lexer.Comment {
			n++
		}
	}
}
