package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/introspection"

	"interlock/internal/apptest"
)

// TestVariableErrorsAreValidationErrors: a missing or mistyped variable is the client's mistake,
// told with its code (a request error: 200 as application/json), never "internal server error".
func TestVariableErrorsAreValidationErrors(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/vars.db")
	const q = `query($r: ID!) { run(runId: $r) { id } }`
	for name, req := range map[string]map[string]any{
		"missing":      {"query": q},
		"null":         {"query": q, "variables": map[string]any{"r": nil}},
		"wrong type":   {"query": q, "variables": map[string]any{"r": map[string]any{"x": 1}}},
		"input object": {"query": `mutation($i: StartRunInput!) { startRun(input: $i) { status } }`, "variables": map[string]any{"i": map[string]any{"agentId": "support-agent", "prompt": "hi", "requireToolApproval": "yes"}}},
		"unknown field": {"query": `mutation($i: StartRunInput!) { startRun(input: $i) { status } }`,
			"variables": map[string]any{"i": map[string]any{"agentId": "support-agent", "prompt": "hi", "nope": 1}}},
	} {
		t.Run(name, func(t *testing.T) {
			r := s.PostJSON(t, req)
			if r.Code() != "GRAPHQL_VALIDATION_FAILED" || r.Status != http.StatusOK {
				t.Fatalf("status %d, errors %+v; want 200 GRAPHQL_VALIDATION_FAILED", r.Status, r.Errors)
			}
			// gqlgen says what is wrong and where: "must be defined" at path variable.r.
			if e := r.Errors[0]; strings.Contains(e.Message, "internal") || len(e.Path) < 2 || e.Path[0] != "variable" {
				t.Fatalf("error %+v is not gqlgen's", e)
			}
		})
	}
}

// TestBodyErrorsAreShort: a body over the limit is refused with 413, a body that is not a JSON
// GraphQL request with 400; each with one short GraphQL error that neither echoes the body nor
// names Go types.
func TestBodyErrorsAreShort(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/body.db")
	const marker = "SECRET-BODY-TEXT"
	big := `{"query": "{ agents { id } }", "variables": {"pad": "` + strings.Repeat("x", 1<<20) + `"}}`
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"oversized", big, http.StatusRequestEntityTooLarge, "larger than"},
		{"malformed", `{"query": "{ agents { id } }", "variables": {"x": "` + marker + `"`, http.StatusBadRequest, "not valid JSON"},
		{"not json", marker, http.StatusBadRequest, "not valid JSON"},
		{"empty", ``, http.StatusBadRequest, "empty"},
		{"query not a string", `{"query": {"q": "` + marker + `"}}`, http.StatusBadRequest, `"query" must be a string`},
		{"variables not an object", `{"query": "{ agents { id } }", "variables": ["` + marker + `"]}`, http.StatusBadRequest, `"variables" must be an object`},
		{"not an object", `["` + marker + `"]`, http.StatusBadRequest, "JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.PostBody(t, "application/json", []byte(tc.body))
			if r.Status != tc.status || r.Code() != "BAD_USER_INPUT" || len(r.Errors) != 1 {
				t.Fatalf("status %d, errors %+v; want %d with one BAD_USER_INPUT error", r.Status, r.Errors, tc.status)
			}
			msg := r.Errors[0].Message
			if !strings.Contains(msg, tc.want) || len(r.Body) > 300 {
				t.Fatalf("message %q (body %d bytes), want a short one with %q", msg, len(r.Body), tc.want)
			}
			for _, leak := range []string{marker, "map[", "[]interface", "RawParams", "Go struct", "json:"} {
				if strings.Contains(r.Body, leak) {
					t.Fatalf("answer %s contains %q", r.Body, leak)
				}
			}
		})
	}
	// A body just under the limit is still served.
	pad := strings.Repeat("x", 1<<20-200)
	if r := s.PostJSON(t, map[string]any{"query": "{ agents { id } }", "variables": map[string]any{"pad": pad}}); r.Status != 200 || len(r.Errors) != 0 {
		t.Fatalf("a body under the limit: status %d, errors %+v", r.Status, r.Errors)
	}
}

// nested repeats each of names d times inside each repeat of the one before:
// nested([a b], 2) is "a { b b } a { b b }".
func nested(names []string, d int) string {
	if len(names) == 1 {
		return strings.Repeat(names[0]+" ", d)
	}
	return strings.Repeat(names[0]+" { "+nested(names[1:], d)+"} ", d)
}

// TestCostlyQueriesAreRefusedBeforeValidation: a query too large, or whose validation would
// take too long (gqlparser's check of overlapping fields is quadratic in repeated fields, and
// multiplies with nesting), is refused at once with GRAPHQL_VALIDATION_FAILED and a message
// naming the limit, over HTTP and WebSocket; introspection and ordinary queries pass.
func TestCostlyQueriesAreRefusedBeforeValidation(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/cost.db")
	for _, tc := range []struct{ name, query, want string }{
		{"100,000 repeated fields", "{ agents { " + strings.Repeat("id ", 100_000) + "} }", "the query has 100005 tokens; the limit is 10000"},
		{"5,000 repeated fields", "{ agents { " + strings.Repeat("id ", 5_000) + "} }", "more than 100000 field comparisons"},
		{"repeats nested", "{ " + nested([]string{"suspendedRuns", "runs", "toolCalls", "id"}, 8) + "}", "more than 100000 field comparisons"},
		{"introspection nested", "{ " + nested([]string{"__schema", "types", "fields", "type", "name"}, 5) + "}", "more than 100000 field comparisons"},
		{"repeated fragment spreads", "{ agents { " + strings.Repeat("...A ", 3000) + "} } fragment A on Agent { id }", "more than 100000 field comparisons"},
		{"inline fragments", "{ agents { " + strings.Repeat("... on Agent { id } ", 1000) + "} }", "more than 100000 field comparisons"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.PostJSONWithin(t, 10*time.Second, map[string]any{"query": tc.query})
			if r.Status != http.StatusOK || r.Code() != "GRAPHQL_VALIDATION_FAILED" || !strings.Contains(r.Errors[0].Message, tc.want) {
				t.Fatalf("status %d, errors %+v; want 200 GRAPHQL_VALIDATION_FAILED with %q", r.Status, r.Errors, tc.want)
			}
		})
	}
	// Over WebSocket too, as an error message for the operation.
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	id := ws.Subscribe("{ agents { "+strings.Repeat("id ", 100_000)+"} }", nil)
	if _, _, errs := ws.Next(id); !strings.Contains(string(errs), "the limit is 10000") {
		t.Fatalf("over WebSocket: %s", errs)
	}

	// What clients really send passes: introspection (gqlgen's, with and without isOneOf), a few
	// repeats, fragments.
	for _, q := range []string{
		introspection.Query,
		introspection.NewQuery(introspection.QueryOptions{OneOf: true}),
		`{ agents { id id name ...A ... on Agent { id tools { name } } } } fragment A on Agent { id name tools { name name } }`,
		"{ agents { " + strings.Repeat("id ", 100) + "} }",
	} {
		if r := s.PostJSON(t, map[string]any{"query": q}); r.Status != 200 || len(r.Errors) != 0 {
			t.Fatalf("%.60s…: status %d, errors %+v", q, r.Status, r.Errors)
		}
	}
	// The limit is a setting.
	small := apptest.Start(t, "sqlite:"+t.TempDir()+"/small.db", "--max-query-tokens", "50")
	if r := small.PostJSON(t, map[string]any{"query": introspection.Query}); r.Code() != "GRAPHQL_VALIDATION_FAILED" || !strings.Contains(r.Errors[0].Message, "the limit is 50") {
		t.Fatalf("with --max-query-tokens 50: %+v", r.Errors)
	}
}
