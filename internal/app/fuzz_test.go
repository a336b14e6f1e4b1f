package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"interlock/internal/apptest"
)

// fuzzServer is a server for a fuzz target, on a temporary SQLite database, without the
// mutation rate limit (which would answer most inputs before they reach a resolver).
func fuzzServer(f *testing.F) *apptest.Server {
	f.Helper()
	return apptest.Start(f, "sqlite:"+filepath.Join(f.TempDir(), "fuzz.db"), "--mutation-rate", "0")
}

// suspendedRun starts a run with prompt and waits until it is suspended.
func suspendedRun(f testing.TB, s *apptest.Server, prompt string) string {
	f.Helper()
	r := s.StartRun(f, prompt, nil)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s.Run(f, r.RunID).Status == "SUSPENDED" {
			return r.RunID
		}
	}
	f.Fatalf("run %s did not suspend", r.RunID)
	return ""
}

// fuzzPost sends query with variables as raw JSON text (what the fuzzer made, valid or not)
// and fails on what must never happen: a 5xx, an answer that is not a GraphQL response, an
// INTERNAL error. Errors about the input, and a decision refused as CONFLICT, are fine.
func fuzzPost(t *testing.T, s *apptest.Server, query, variables string) apptest.Response {
	t.Helper()
	q, _ := json.Marshal(query)
	body := []byte(`{"query": ` + string(q) + `, "variables": ` + variables + `}`)
	resp, err := http.Post(s.URL+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r apptest.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("variables %q: status %d, not a GraphQL response: %.300s", variables, resp.StatusCode, raw)
	}
	if resp.StatusCode >= 500 {
		t.Fatalf("variables %q: status %d: %.300s", variables, resp.StatusCode, raw)
	}
	for _, e := range r.Errors {
		if e.Extensions["code"] == "INTERNAL" || e.Extensions["code"] == nil {
			t.Fatalf("variables %q: error %+v", variables, e)
		}
	}
	return r
}

// waiting holds the run a decision fuzzer decides: when an input is accepted (the run goes on),
// another run is suspended in its place, so every later input meets a waiting call and its
// checks, not a CONFLICT.
type waiting struct {
	s      *apptest.Server
	prompt string
	mu     sync.Mutex
	id     string
}

func newWaiting(f *testing.F, s *apptest.Server, prompt string) *waiting {
	return &waiting{s: s, prompt: prompt, id: suspendedRun(f, s, prompt)}
}

// decide sends the mutation for the current run with vars(id) and replaces the run when the
// decision was taken.
func (w *waiting) decide(t *testing.T, query string, vars func(id string) string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := fuzzPost(t, w.s, query, vars(w.id)); len(r.Errors) == 0 {
		w.id = suspendedRun(t, w.s, w.prompt)
	}
}

// rawJSON marshals v, for seeds.
func rawJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzSuspendedRunsArgs: any variables for every argument of suspendedRuns.
func FuzzSuspendedRunsArgs(f *testing.F) {
	s := fuzzServer(f)
	suspendedRun(f, s, "refund order 42 for 30")
	for _, seed := range []any{
		map[string]any{},
		map[string]any{"agentId": "support-agent", "page": 0, "perPage": 10},
		map[string]any{"page": -1, "perPage": 0},
		map[string]any{"page": 1 << 40, "perPage": 1 << 31},
		map[string]any{"page": 0, "perPage": 500},
		map[string]any{"fromDate": "2026-12-02T10:00:00.000Z", "toDate": "2020-01-01T00:00:00Z"},
		map[string]any{"fromDate": "yesterday", "toDate": 12},
		map[string]any{"fromDate": "9999-12-31T23:59:59.999999999+14:00"},
		map[string]any{"threadId": "", "resourceId": "\x00'; DROP TABLE runs; --"},
		map[string]any{"agentId": []any{1}, "threadId": map[string]any{"a": nil}},
		map[string]any{"perPage": 1.5, "page": "0"},
	} {
		f.Add(rawJSON(seed))
	}
	f.Add(`{"page": 1e400}`)
	f.Add(`null`)
	f.Add(`{"perPage": -0}`)
	const q = `query($agentId: ID, $threadId: ID, $resourceId: ID, $fromDate: DateTime, $toDate: DateTime, $page: Int, $perPage: Int) {
		suspendedRuns(agentId: $agentId, threadId: $threadId, resourceId: $resourceId, fromDate: $fromDate, toDate: $toDate, page: $page, perPage: $perPage) {
			total runs { id status createdAt toolCalls { id toolName args } } } }`
	f.Fuzz(func(t *testing.T, variables string) { fuzzPost(t, s, q, variables) })
}

// FuzzResumeData: any resumeData for a run waiting for resume data; an accepted one resumes it
// and the next input meets a new waiting run.
func FuzzResumeData(f *testing.F) {
	s := fuzzServer(f)
	w := newWaiting(f, s, "ask the customer which size they want")
	for _, seed := range []string{`{}`, `{"answer": 42}`, `{"answer": "size M"}`, `null`, `[]`, `"x"`, `1e400`,
		`{"answer": {"nested": [[[[[[]]]]]]}}`, `{"answer": "\u0000\ud800"}`, `{"__proto__": {"answer": 1}}`, `true`, `-0`} {
		f.Add(seed)
	}
	const q = `mutation($id: ID!, $d: JSON!) { resumeRun(runId: $id, resumeData: $d) { status toolCalls { id } } }`
	f.Fuzz(func(t *testing.T, data string) {
		w.decide(t, q, func(id string) string { return `{"id": ` + rawJSON(id) + `, "d": ` + data + `}` })
	})
}

// FuzzApproveArgs: any edited arguments for a call waiting for approval; accepted ones approve
// it and the next input meets a new waiting run.
func FuzzApproveArgs(f *testing.F) {
	s := fuzzServer(f)
	w := newWaiting(f, s, "refund order 42 for 30")
	for _, seed := range []string{`{}`, `{"orderId": "42", "amount": 30}`, `{"orderId": 42, "amount": "30"}`, `{"amount": -1e308}`,
		`null`, `[]`, `"args"`, `{"orderId": "42", "amount": 30, "extra": {"a": [1, 2, {"b": null}]}}`, `{"amount": 1e400}`, `{"": ""}`} {
		f.Add(seed)
	}
	const q = `mutation($id: ID!, $a: JSON) { approveToolCall(runId: $id, args: $a) { status } }`
	f.Fuzz(func(t *testing.T, args string) {
		w.decide(t, q, func(id string) string { return `{"id": ` + rawJSON(id) + `, "a": ` + args + `}` })
	})
}
