package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"interlock/internal/apptest"
)

// aliasedStartRuns is one mutation with n startRun fields under aliases s0…, all of input $i.
func aliasedStartRuns(n int) string {
	var b strings.Builder
	b.WriteString("mutation($i: StartRunInput!) {")
	for i := range n {
		fmt.Fprintf(&b, " s%d: startRun(input: $i) { runId }", i)
	}
	b.WriteString(" }")
	return b.String()
}

var startInput = map[string]any{"i": map[string]any{"agentId": "support-agent", "prompt": "refund order 42 for 30"}}

// postRaw sends one operation over HTTP POST and returns the response (body read) with it.
func postRaw(t *testing.T, base, query string, vars map[string]any) (*http.Response, apptest.Response, []byte) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	resp, err := http.Post(base+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r apptest.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
	}
	return resp, r, raw
}

// TestMutationRateCountsAliases: with the default burst (100; the rate slowed so that nothing
// refills during the test), 800 aliased startRuns in one request
// (each a paid model call on a real provider) used to cost one token and start 800 runs; now the
// request holds more mutations than the burst, so it can never pass: it is refused whole with
// BAD_USER_INPUT (a request error: 200 as application/json, no Retry-After) saying to split it, no run is stored, over HTTP, both
// WebSocket subprotocols and SSE, and it costs nothing: a full burst still passes after it.
func TestMutationRateCountsAliases(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/aliases.db", "--mutation-rate", "1/h")
	resp, r, raw := postRaw(t, s.URL, aliasedStartRuns(800), startInput)
	if resp.StatusCode != http.StatusOK || r.Code() != "BAD_USER_INPUT" || len(r.Errors) != 1 || resp.Header.Get("Retry-After") != "" ||
		!strings.Contains(r.Errors[0].Message, "holds 800 mutations") || !strings.Contains(r.Errors[0].Message, "split it into requests of at most 100") ||
		strings.Contains(string(r.Data), "runId") {
		t.Fatalf("800 aliased startRuns: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		ws := apptest.DialWS(t, s.URL, protocol)
		if _, _, errs := ws.Next(ws.Subscribe(aliasedStartRuns(800), startInput)); !strings.Contains(string(errs), "BAD_USER_INPUT") || !strings.Contains(string(errs), "holds 800 mutations") {
			t.Fatalf("over %s: %s", protocol, errs)
		}
	}
	if out := sse(t, t.Context(), s, aliasedStartRuns(800), startInput, nil); len(out) != 1 || !strings.Contains(string(out[0]), "holds 800 mutations") {
		t.Fatalf("over SSE: %s", out)
	}
	if n := storedRuns(t, s); n != 0 {
		t.Fatalf("the refused requests stored %d runs", n)
	}
	// The refusals took no token: the whole burst of 100 passes in one request, then the bucket
	// is empty.
	if resp, r, raw := postRaw(t, s.URL, aliasedStartRuns(100), startInput); resp.StatusCode != 200 || len(r.Errors) != 0 {
		t.Fatalf("a burst of 100 after the refusals: %d %.300s", resp.StatusCode, raw)
	}
	if resp, r, _ := postRaw(t, s.URL, cheapMutation, nil); resp.StatusCode != http.StatusTooManyRequests || r.Code() != "RATE_LIMITED" {
		t.Fatalf("after the burst: %d %+v", resp.StatusCode, r.Errors)
	}
	s.App.Service.Wait()
	if n := storedRuns(t, s); n != 100 {
		t.Fatalf("%d runs stored, want the burst's 100", n)
	}
}

// TestMutationRateCountsFragments: fields spread from fragments and inline fragments on
// Mutation cost a token each like any other; a request needing more tokens than are left
// (but no more than the burst) is RATE_LIMITED as a whole (429, Retry-After, the number of
// mutations it holds), none of its fields run, and it takes nothing, so a smaller one passes.
func TestMutationRateCountsFragments(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/fragments.db", "--mutation-rate", "1/h", "--mutation-burst", "5")
	three := `mutation($i: StartRunInput!) {
		a: startRun(input: $i) { runId }
		...F
		... on Mutation { c: startRun(input: $i) { runId } }
	}
	fragment F on Mutation { b: startRun(input: $i) { runId } }`
	if resp, r, raw := postRaw(t, s.URL, three, startInput); resp.StatusCode != 200 || len(r.Errors) != 0 {
		t.Fatalf("three mutations within the burst: %d %s", resp.StatusCode, raw)
	}
	// Two tokens are left: three more are refused together.
	resp, r, raw := postRaw(t, s.URL, three, startInput)
	if resp.StatusCode != http.StatusTooManyRequests || r.Code() != "RATE_LIMITED" || len(r.Errors) != 1 {
		t.Fatalf("three mutations with two tokens left: %d %s", resp.StatusCode, raw)
	}
	secs, _ := r.Errors[0].Extensions["retryAfter"].(float64)
	if n, _ := r.Errors[0].Extensions["mutations"].(float64); n != 3 || secs < 1 || resp.Header.Get("Retry-After") != fmt.Sprint(int(secs)) ||
		!strings.Contains(r.Errors[0].Message, "holds 3 mutations") || !strings.Contains(r.Errors[0].Message, fmt.Sprintf("retry in %d seconds", int(secs))) {
		t.Fatalf("the refusal: Retry-After %q %s", resp.Header.Get("Retry-After"), raw)
	}
	s.App.Service.Wait()
	if n := storedRuns(t, s); n != 3 {
		t.Fatalf("%d runs stored, want the first request's 3 (the refused one ran some)", n)
	}
	// The two tokens are still there.
	two := `mutation($i: StartRunInput!) { ...F } fragment F on Mutation { a: startRun(input: $i) { runId } b: startRun(input: $i) { runId } }`
	if resp, r, raw := postRaw(t, s.URL, two, startInput); resp.StatusCode != 200 || len(r.Errors) != 0 {
		t.Fatalf("two mutations with two tokens left: %d %s", resp.StatusCode, raw)
	}
	if resp, r, _ := postRaw(t, s.URL, cheapMutation, nil); resp.StatusCode != http.StatusTooManyRequests || r.Code() != "RATE_LIMITED" {
		t.Fatalf("the bucket is empty, yet: %d %+v", resp.StatusCode, r.Errors)
	}
}

// storedRuns is how many runs s holds, whatever their status.
func storedRuns(t *testing.T, s *apptest.Server) int {
	t.Helper()
	var out struct{ RecentRuns struct{ Total int } }
	s.Must(t, `{ recentRuns(statuses: [RUNNING, SUSPENDED, COMPLETED, FAILED]) { total } }`, nil, &out)
	return out.RecentRuns.Total
}
