package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
)

// TestAnAbandonedRequestIsNotAnInternalError: a startRun whose client gives up while the
// database is frozen (nothing answers, nothing fails) is answered for nobody. It is logged at
// INFO and counted as outcome CANCELLED, never as an internal error: an alert on INTERNAL must
// not fire for requests nobody waits for (MariaDB through a proxy the test controls).
func TestAnAbandonedRequestIsNotAnInternalError(t *testing.T) {
	t.Parallel()
	t.Run("graphql", abandonedGraphQL)
	t.Run("approvals", abandonedApproval)
}

func abandonedGraphQL(t *testing.T) {
	t.Parallel()
	s, proxy, logs, _ := unavailableServer(t)
	proxy.Freeze()
	t.Cleanup(proxy.Restore)

	body, _ := json.Marshal(map[string]any{"query": `mutation Start { startRun(input: {agentId: "support-agent", prompt: "refund order 42"}) { id } }`})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("startRun answered %s while the database was frozen", resp.Status)
	}

	// The server notices the client left, gives up on the database, and says so in the log.
	var line string
	for deadline := time.Now().Add(20 * time.Second); line == ""; time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "msg=graphql ") && strings.Contains(l, "operation=Start") {
				line = l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line of the abandoned startRun within 20s:\n%s", logs.String())
		}
	}
	proxy.Restore()
	if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "outcome=CANCELLED") {
		t.Errorf("the abandoned startRun is logged %q; want INFO with outcome=CANCELLED", line)
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, "INTERNAL") {
			t.Errorf("an abandoned request logged as an error: %s", l)
		}
	}
	sc := s.Scrape(t)
	const ops = "interlock_graphql_operations_total"
	if n := sc.Value(t, ops, "operation=Start", "outcome=INTERNAL"); n != 0 {
		t.Errorf("%s{outcome=INTERNAL} = %v for an abandoned startRun; want 0", ops, n)
	}
	if n := sc.Value(t, ops, "operation=Start", "outcome=CANCELLED"); n != 1 {
		t.Errorf("%s{outcome=CANCELLED} = %v; want 1", ops, n)
	}
}

// abandonedApproval: the same for POST /approvals, whose answers are plain HTTP: an approval
// request whose caller gives up during the freeze is logged at INFO, not as an internal error.
func abandonedApproval(t *testing.T) {
	t.Parallel()
	s, proxy, logs, _ := unavailableServer(t, "--auth=on", "--config", apptest.WriteConfig(t, approvalsYAML()))
	proxy.Freeze()
	t.Cleanup(proxy.Restore)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	body, _ := json.Marshal(deployRequest(nil))
	approvalRequest(t, s, ctx, "Bearer "+apptest.TokenOf("bot"), http.MethodPost, "/approvals", string(body))

	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(logs.String(), "approvals: request cancelled by its client"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log of the abandoned approval request within 20s:\n%s", logs.String())
		}
	}
	proxy.Restore()
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			t.Errorf("an abandoned request logged as an error: %s", l)
		}
	}
}
