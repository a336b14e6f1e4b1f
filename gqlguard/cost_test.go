package gqlguard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

func parse(t *testing.T, q string) *ast.QueryDocument {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: q})
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// chain is n fragments each spreading the next twice: 2^n paths if each spread were walked.
func chain(n int) string {
	var b strings.Builder
	b.WriteString("{ ...F0 }\n")
	for i := range n {
		fmt.Fprintf(&b, "fragment F%d on Query { a%d { ...F%d ...F%d } }\n", i, i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { leaf }\n", n)
	return b.String()
}

// TestDepth: fields count, fragments count where spread, cycles in an unvalidated document end,
// and a doubling chain of 200 fragments is measured (it would never end walked path by path).
func TestDepth(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  int
	}{
		{`{ a }`, 1},
		{`{ a { b { c } } d }`, 3},
		{`{ a { ... on T { b { c } } } }`, 3},
		{`{ a { ...F } } fragment F on T { b { c } }`, 3},
		{`{ ...F } fragment F on T { a { ...F } }`, 1}, // a cycle
		{`{ ...F } fragment F on T { a { ...G } } fragment G on T { b { ...F } }`, 2}, // a longer one
		{`{ a { ...Missing } }`, 1},
		{chain(200), 201},
	} {
		doc := parse(t, tc.query)
		if got := Depth(doc, doc.Operations[0].SelectionSet); got != tc.want {
			t.Errorf("%.50s: depth %d, want %d", tc.query, got, tc.want)
		}
	}
}

// TestComplexityWithoutSchema: an unvalidated document (no definitions) still counts each field
// once per path, fragments memoized, cycles ended, saturating instead of overflowing.
func TestComplexityWithoutSchema(t *testing.T) {
	c := &ComplexityLimit{Max: 10}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{`{ a b { c } }`, 3},
		{`{ ...F ...F } fragment F on T { a }`, 2},
		{`{ ...F } fragment F on T { a { ...F } }`, 1},
		{chain(3), 1 + 2*(1+2*(1+2*1))}, // a0 + 2×(a1 + 2×(a2 + 2×leaf))
		{chain(100), 1<<63 - 1},
	} {
		doc := parse(t, tc.query)
		if got := c.Complexity(context.Background(), doc, doc.Operations[0], nil); got != tc.want {
			t.Errorf("%.50s: complexity %d, want %d", tc.query, got, tc.want)
		}
	}
}

// TestMutationRateKeys: buckets are per key, and the least recently used are dropped beyond the
// bound, so memory stays bounded however many clients come.
func TestMutationRateKeys(t *testing.T) {
	m := NewMutationRate(1, 2, nil, 3)
	now := time.Unix(1_000_000, 0)
	m.now = func() time.Time { return now }
	if m.take("a", 1) != 0 || m.take("a", 1) != 0 {
		t.Fatal("a's burst refused")
	}
	if d := m.take("a", 1); d <= 0 || d > time.Second {
		t.Fatalf("a over its burst waits %s", d)
	}
	if m.take("b", 1) != 0 {
		t.Fatal("b is limited by a")
	}
	now = now.Add(time.Second)
	if m.take("a", 1) != 0 {
		t.Fatal("a is not refilled after a second")
	}
	// Several tokens are taken at once or not at all: c's two go in one, then none is left.
	if m.take("c", 2) != 0 {
		t.Fatal("c's two mutations at once refused with a full bucket")
	}
	if d := m.take("c", 2); d <= time.Second || d > 2*time.Second {
		t.Fatalf("c's next two wait %s, want the 2s the two tokens take", d)
	}
	now = now.Add(time.Second)
	if m.take("c", 2) == 0 {
		t.Fatal("c took two tokens when one was there")
	}
	if m.take("c", 1) != 0 {
		t.Fatal("c's refused request took tokens")
	}
	for i := range 100 {
		m.take(fmt.Sprint("client", i), 1)
	}
	if m.Keys() != 3 {
		t.Fatalf("%d limiters kept, want 3", m.Keys())
	}
	if err := NewMutationRate(0, 1, nil, 0).Validate(nil); err == nil {
		t.Fatal("a zero rate is accepted")
	}
}
