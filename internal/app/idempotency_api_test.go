package app_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// TestStartRunIdempotencyKey: a client that retries startRun with its idempotency key — after a
// timeout, at another instance, or several times at once — gets the run of its first request,
// never a second (ghost) run; the key with another request is BAD_USER_INPUT, and keys are each
// principal's own. Two server instances over one database, over real HTTP.
func TestStartRunIdempotencyKey(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "sqlite:" + t.TempDir() + "/interlock.db" },
		"mysql":  func(t *testing.T) string { return dbtest.MySQLURL(dbtest.MySQLDSN(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			url := db(t)
			a, b := apptest.AuthServer(t, url, ""), apptest.AuthServer(t, url, "")
			const start = `mutation($input: StartRunInput!) { startRun(input: $input) { runId } }`
			startAs := func(s *apptest.Server, who, key, prompt string) apptest.Result {
				t.Helper()
				return s.PostAs(t, apptest.TokenOf(who), start, map[string]any{"input": map[string]any{
					"agentId": "support-agent", "prompt": prompt, "idempotencyKey": key}})
			}
			runID := func(r apptest.Result) string {
				t.Helper()
				if r.Code != "" {
					t.Fatalf("startRun: %s %s", r.Code, r.Msg)
				}
				var out struct{ StartRun struct{ RunID string } }
				if err := json.Unmarshal(r.Data, &out); err != nil || out.StartRun.RunID == "" {
					t.Fatalf("startRun data %s: %v", r.Data, err)
				}
				return out.StartRun.RunID
			}

			first := runID(startAs(a, "otto", "key-1", "hello"))
			if again := runID(startAs(b, "otto", "key-1", "hello")); again != first {
				t.Fatalf("the retry at the other instance started %s, want the first run %s", again, first)
			}
			// Retries at once, at both instances: one run.
			var wg sync.WaitGroup
			ids := make([]string, 8)
			codes := make([]string, 8)
			for i := range ids {
				s := a
				if i%2 == 1 {
					s = b
				}
				wg.Go(func() {
					r := s.PostAs(t, apptest.TokenOf("otto"), start, map[string]any{"input": map[string]any{
						"agentId": "support-agent", "prompt": "hello again", "idempotencyKey": "key-2"}})
					codes[i] = r.Code
					var out struct{ StartRun struct{ RunID string } }
					_ = json.Unmarshal(r.Data, &out)
					ids[i] = out.StartRun.RunID
				})
			}
			wg.Wait()
			for i := range ids {
				if codes[i] != "" || ids[i] == "" || ids[i] != ids[0] {
					t.Fatalf("racing retries: %v %v, want one run for all", codes, ids)
				}
			}
			// The key with another request is refused, and stores nothing.
			if r := startAs(a, "otto", "key-1", "refund order 9 for 9000"); r.Code != "BAD_USER_INPUT" {
				t.Fatalf("key-1 with another prompt: %s %s, want BAD_USER_INPUT", r.Code, r.Msg)
			}
			// Another principal's key-1 is another key.
			if other := runID(startAs(b, "root", "key-1", "hello")); other == first {
				t.Fatalf("root's key-1 named otto's run %s", first)
			}
			var total struct{ RecentRuns struct{ Total int } }
			a.MustAs(t, apptest.TokenOf("root"), `{ recentRuns(statuses: [RUNNING, SUSPENDED, COMPLETED, FAILED]) { total } }`, nil, &total)
			if total.RecentRuns.Total != 3 {
				t.Fatalf("%d runs stored, want 3 (otto's key-1 and key-2, root's key-1)", total.RecentRuns.Total)
			}
			a.App.Service.Wait()
			b.App.Service.Wait()
		})
	}
}

// TestARetriedDecisionOverTheAPI: alice's approval, sent again over HTTP (her client lost the
// answer), is answered with the run and changes nothing; the same approval by bob, or a decline
// by alice, is CONFLICT naming alice — through the whole handler, with real tokens.
func TestARetriedDecisionOverTheAPI(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		r := s.SuspendAs(t, apptest.TokenOf("otto"), "refund order 3 for 5", nil)
		call := r.ToolCalls[0].ToolCallID
		const approve = `mutation($id: ID!, $c: ID) { approveToolCall(runId: $id, toolCallId: $c) { runId decisions { toolCallId decidedBy } } }`
		vars := map[string]any{"id": r.ID, "c": call}
		for i := range 2 {
			got := s.PostAs(t, apptest.TokenOf("alice"), approve, vars)
			var out struct {
				ApproveToolCall struct {
					RunID     string
					Decisions []struct{ ToolCallID, DecidedBy string }
				}
			}
			if got.Code != "" || json.Unmarshal(got.Data, &out) != nil || len(out.ApproveToolCall.Decisions) != 1 || out.ApproveToolCall.Decisions[0].DecidedBy != "alice" {
				t.Fatalf("alice's approval (time %d): %s %s %s; want the run with her one decision", i+1, got.Code, got.Msg, got.Data)
			}
		}
		if got := s.PostAs(t, apptest.TokenOf("bob"), approve, vars); got.Code != "CONFLICT" || !strings.Contains(got.Msg, "by alice") {
			t.Fatalf("bob's approval: %s %q, want CONFLICT naming alice", got.Code, got.Msg)
		}
		decline := `mutation($id: ID!, $c: ID) { declineToolCall(runId: $id, toolCallId: $c, reason: "no") { runId } }`
		if got := s.PostAs(t, apptest.TokenOf("alice"), decline, vars); got.Code != "CONFLICT" {
			t.Fatalf("alice's decline after her approval: %s %q, want CONFLICT", got.Code, got.Msg)
		}
		s.App.Service.Wait()
		var done struct{ Run apptest.Run }
		s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { `+apptest.RunFields+` } }`, map[string]any{"id": r.ID}, &done)
		if done.Run.Status != "COMPLETED" || done.Run.Output == nil || strings.Count(*done.Run.Output, "rf_3") != 1 {
			t.Fatalf("run after the retries: %s %v, want COMPLETED with one refund", done.Run.Status, done.Run.Output)
		}
	})
}
