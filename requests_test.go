package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestVariableErrorsAreValidationErrors: a missing or mistyped variable is the client's mistake,
// told in gqlgen's own words with its code and status, never "internal server error".
func TestVariableErrorsAreValidationErrors(t *testing.T) {
	s := startServer(t, "sqlite:"+t.TempDir()+"/vars.db")
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
			r := s.postJSON(t, req)
			if r.code() != "GRAPHQL_VALIDATION_FAILED" || r.status != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, errors %+v; want 422 GRAPHQL_VALIDATION_FAILED", r.status, r.Errors)
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
	s := startServer(t, "sqlite:"+t.TempDir()+"/body.db")
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
			r := s.postBody(t, "application/json", []byte(tc.body))
			if r.status != tc.status || r.code() != "BAD_USER_INPUT" || len(r.Errors) != 1 {
				t.Fatalf("status %d, errors %+v; want %d with one BAD_USER_INPUT error", r.status, r.Errors, tc.status)
			}
			msg := r.Errors[0].Message
			if !strings.Contains(msg, tc.want) || len(r.body) > 300 {
				t.Fatalf("message %q (body %d bytes), want a short one with %q", msg, len(r.body), tc.want)
			}
			for _, leak := range []string{marker, "map[", "[]interface", "RawParams", "Go struct", "json:"} {
				if strings.Contains(r.body, leak) {
					t.Fatalf("answer %s contains %q", r.body, leak)
				}
			}
		})
	}
	// A body just under the limit is still served.
	pad := strings.Repeat("x", 1<<20-200)
	if r := s.postJSON(t, map[string]any{"query": "{ agents { id } }", "variables": map[string]any{"pad": pad}}); r.status != 200 || len(r.Errors) != 0 {
		t.Fatalf("a body under the limit: status %d, errors %+v", r.status, r.Errors)
	}
}
