package apptest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"
)

// The documented bodies and answer shapes of Claude Code's and Codex's PermissionRequest hooks
// (approvals/testdata/hooks/README.md says where each comes from).
func HookFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(RepoPath("approvals", "testdata", "hooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// HookAnswer is what a hook endpoint answered.
type HookAnswer struct {
	Status int
	Header http.Header
	Body   []byte
}

// PostHookAsync is postHook in the background: the hook is held until a decision.
func (s *Server) PostHookAsync(t testing.TB, path, auth string, body []byte) <-chan HookAnswer {
	ch := make(chan HookAnswer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", auth)
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err != nil {
			ch <- HookAnswer{Status: -1, Body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ch <- HookAnswer{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}()
	return ch
}

func Answered(t testing.TB, ch <-chan HookAnswer) HookAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(45 * time.Second):
		t.Fatal("the hook was not answered")
		return HookAnswer{}
	}
}

// HookRun is an approval request as the API shows it.
type HookRun struct {
	RunID     string          `json:"runId"`
	Status    string          `json:"status"`
	ThreadID  *string         `json:"threadId"`
	StartedBy *string         `json:"startedBy"`
	Context   *string         `json:"context"`
	External  *bool           `json:"external"`
	ToolCalls []HookToolCall  `json:"toolCalls"`
	Decisions []HookDecision  `json:"decisions"`
	Args      json.RawMessage `json:"-"`
}

type HookToolCall struct {
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
}

type HookDecision struct {
	Kind       string          `json:"kind"`
	DecidedBy  *string         `json:"decidedBy"`
	Reason     *string         `json:"reason"`
	EditedArgs json.RawMessage `json:"editedArgs"`
}

const HookRunFields = `runId status threadId startedBy context external toolCalls { toolCallId toolName args } decisions { kind decidedBy reason editedArgs }`

// HookRequests is every run of agent, as recentRuns lists them.
func (s *Server) HookRequests(t testing.TB, agent string) []HookRun {
	t.Helper()
	var out struct {
		RecentRuns struct{ Runs []HookRun }
	}
	s.MustAs(t, TokenOf("alice"), `query($a: ID) { recentRuns(agentId: $a, perPage: 100, statuses: [RUNNING, SUSPENDED, COMPLETED, FAILED]) { runs { `+HookRunFields+` } } }`, map[string]any{"a": agent}, &out)
	return out.RecentRuns.Runs
}

// SameJSONValue reports whether a and b are the same JSON value, whitespace and key order aside.
func SameJSONValue(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %s (%v)", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %s (%v)", b, err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

// WantAnswer checks that a is a 200 whose body is exactly the JSON value want.
func WantAnswer(t testing.TB, what string, a HookAnswer, want []byte) {
	t.Helper()
	if a.Status != http.StatusOK || a.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s: %d %s %s, want 200 application/json", what, a.Status, a.Header.Get("Content-Type"), a.Body)
	}
	if !SameJSONValue(t, a.Body, want) {
		t.Fatalf("%s: answered %s\nwant exactly %s", what, a.Body, want)
	}
}
