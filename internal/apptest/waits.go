package apptest

import (
	"testing"
	"time"
)

// Eventually waits until cond holds, looking every 20 ms; when it still does not hold after
// 30 s (a bound for failures, not a timing the test relies on) the test fails with describe's
// words.
func Eventually(t testing.TB, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(describe())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Until is Eventually for a condition described once: "what" did not happen within 30 s.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Eventually(t, cond, func() string { return what + ": not within 30s" })
}

// WaitWatchers waits until the server serves n suspendedRunsChanged streams, so a test can
// change runs knowing its subscription is active. A server in another process is asked through
// its metrics: n GraphQL subscriptions open over WebSockets.
func (s *Server) WaitWatchers(t testing.TB, n int) {
	t.Helper()
	if s.App == nil {
		Until(t, "subscriptions open", func() bool {
			return s.Scrape(t).Value(t, "interlock_graphql_subscriptions_open", "transport=websocket") >= float64(n)
		})
		return
	}
	Until(t, "suspendedRunsChanged subscriptions active", func() bool { return s.App.Service.Watchers() >= n })
}

// ExpiryRun is a run with the deadlines of its calls and its decisions, as WaitStatus reads it.
type ExpiryRun struct {
	RunID       string  `json:"runId"`
	Status      string  `json:"status"`
	SuspendedAt *string `json:"suspendedAt"`
	Output      *string `json:"output"`
	ToolCalls   []struct {
		ToolCallID string  `json:"toolCallId"`
		ExpiresAt  *string `json:"expiresAt"`
	} `json:"toolCalls"`
	Decisions []struct {
		ToolCallID string  `json:"toolCallId"`
		Kind       string  `json:"kind"`
		DecidedBy  *string `json:"decidedBy"`
		Reason     *string `json:"reason"`
	} `json:"decisions"`
}

const ExpiryRunFields = `runId status suspendedAt output toolCalls { toolCallId expiresAt } decisions { toolCallId kind decidedBy reason }`

func (s *Server) ExpiryRun(t *testing.T, id string) ExpiryRun {
	t.Helper()
	var out struct{ Run ExpiryRun }
	s.Must(t, `query($id: ID!) { run(runId: $id) { `+ExpiryRunFields+` } }`, map[string]any{"id": id}, &out)
	return out.Run
}

// WaitStatus polls a run until it has the status.
func (s *Server) WaitStatus(t *testing.T, id, status string) ExpiryRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := s.ExpiryRun(t, id)
		if r.Status == status {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after 20s, want %s", id, r.Status, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
