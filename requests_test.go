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
