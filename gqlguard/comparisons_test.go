package gqlguard

import (
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql/introspection"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// TestCountComparisons pins the count for shapes whose cost is known: pairs of one response
// name, their sub-selections, fragments; and that counting stops at the budget.
func TestCountComparisons(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  int
	}{
		{`{ a b c }`, 0},
		{`{ a a a }`, 3},                           // three pairs
		{`{ x: a y: a }`, 0},                       // different response names are not compared
		{`{ a { b b } a { b b } }`, 1 + 4 + 1 + 1}, // the two a's (and their b's 2×2), then each a's own pair
		{`{ a ... on T { a } }`, 1},                // inline fragments merge in
		{`{ a ...F } fragment F on T { a }`, 2},    // the field against the fragment, then a's pair
		{"{ " + strings.Repeat("a ", 1000) + "}", 101},
		{`{ ...F } fragment F on T { a ...F }`, 3}, // a cycle (invalid) ends // stops past the budget
	} {
		doc, err := parser.ParseQuery(&ast.Source{Input: tc.query})
		if err != nil {
			t.Fatal(err)
		}
		if got := countComparisons(doc, 100); got != tc.want {
			t.Errorf("%.40s: %d comparisons, want %d", tc.query, got, tc.want)
		}
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: introspection.Query})
	if err != nil {
		t.Fatal(err)
	}
	if n := countComparisons(doc, DefaultMaxComparisons); n > DefaultMaxComparisons/50 {
		t.Errorf("introspection makes %d comparisons: too close to the limit", n)
	}
}
