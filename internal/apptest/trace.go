package apptest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// PostTraced sends a GraphQL request over POST with a W3C traceparent header and decodes the answer.
func (s *Server) PostTraced(t testing.TB, traceparent, query string, vars map[string]any, v any) Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := DecodeGQL(t, resp)
	if v != nil {
		if len(out.Errors) > 0 {
			t.Fatalf("errors %+v", out.Errors)
		}
		if err := json.Unmarshal(out.Data, v); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
