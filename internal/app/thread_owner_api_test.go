package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"interlock/gormstore"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// A scoped operator of r2, added to authServer's principals.
var scopedOperator = fmt.Sprintf("    - {subject: opal, role: operator, resources: [r2], sha256: %s}\n", apptest.Sha256Hex(apptest.TokenOf("opal")))

// TestThreadBelongsToTheResourceOfItsFirstRun: thread ids are global. r1's conversation claims
// its thread; a scoped operator of r2 naming that thread is refused with BAD_USER_INPUT (the
// same answer as for a thread of no resource, and the same for an admin: it names neither the
// owner nor anything of the thread), nothing is stored, and an unscoped reader sees the thread
// under r1 only, with r1's messages only. r1's next run continues the conversation.
func TestThreadBelongsToTheResourceOfItsFirstRun(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, scopedOperator, func(t *testing.T, s *apptest.Server) {
		root, opal := apptest.TokenOf("root"), apptest.TokenOf("opal")
		finishAs(t, s, root, map[string]any{"prompt": "hello, my secret is PINEAPPLE", "threadId": "shared-id", "resourceId": "r1"})
		finishAs(t, s, root, map[string]any{"prompt": "hello from nobody", "threadId": "nobody-id"})

		start := `mutation($i: StartRunInput!) { startRun(input: $i) { id } }`
		refusal := func(token, thread string, resource any) apptest.Result {
			t.Helper()
			input := map[string]any{"agentId": "support-agent", "prompt": "hello from r2", "threadId": thread}
			if resource != nil {
				input["resourceId"] = resource
			}
			got := s.PostAs(t, token, start, map[string]any{"i": input})
			if got.Code != "BAD_USER_INPUT" || (got.Data != nil && string(got.Data) != "null") {
				t.Fatalf("startRun in %s as %s: %q %q %s; want BAD_USER_INPUT and no run", thread, token, got.Code, got.Msg, got.Data)
			}
			return got
		}
		got := refusal(opal, "shared-id", "r2")
		want := `threadId "shared-id" is already used with another resourceId; a thread stays with the resource of its first run, so give this run a threadId of its own`
		if got.Msg != want {
			t.Errorf("the refusal says %q, want %q", got.Msg, want)
		}
		for _, leak := range []string{"r1", "PINEAPPLE", "support-agent"} {
			if strings.Contains(got.Msg, leak) {
				t.Errorf("the refusal %q names %q", got.Msg, leak)
			}
		}
		// A thread of no resource gets the very same answer, and so does an unscoped admin.
		if other := refusal(opal, "nobody-id", "r2"); strings.ReplaceAll(other.Msg, "nobody-id", "shared-id") != got.Msg {
			t.Errorf("a thread of no resource: %q; one of r1: %q; want the same words", other.Msg, got.Msg)
		}
		if admin := refusal(root, "shared-id", "r2"); admin.Msg != got.Msg {
			t.Errorf("root: %q, opal: %q; want the same words", admin.Msg, got.Msg)
		}
		refusal(root, "shared-id", nil)
		refusal(root, "nobody-id", "r1")

		// Nothing was stored: the thread's runs are r1's one, r2 has none.
		var runs struct {
			All  struct{ Total int }
			Mine struct{ Total int }
		}
		s.MustAs(t, root, `{ all: recentRuns(statuses: [RUNNING, SUSPENDED, COMPLETED, FAILED], threadId: "shared-id") { total } mine: recentRuns(statuses: [RUNNING, SUSPENDED, COMPLETED, FAILED], resourceId: "r2") { total } }`, nil, &runs)
		if runs.All.Total != 1 || runs.Mine.Total != 0 {
			t.Errorf("runs of shared-id: %d, of r2: %d; want 1 and 0", runs.All.Total, runs.Mine.Total)
		}

		// The unscoped reader sees the thread under r1 only, with r1's conversation.
		type thread struct {
			ID         string
			ResourceID *string
			Messages   []struct{ Content string }
		}
		var seen struct {
			Thread  *thread
			Threads struct {
				Total   int
				Threads []thread
			}
			R2 struct{ Total int }
		}
		s.MustAs(t, root, `{ thread(id: "shared-id") { id resourceId messages { content } }
			threads(perPage: 10) { total threads { id resourceId } }
			r2: threads(resourceId: "r2") { total } }`, nil, &seen)
		if th := seen.Thread; th == nil || th.ResourceID == nil || *th.ResourceID != "r1" || len(th.Messages) != 2 || th.Messages[0].Content != "hello, my secret is PINEAPPLE" {
			t.Fatalf("shared-id, unscoped: %+v; want r1's two messages", th)
		}
		labels := map[string]string{}
		for _, th := range seen.Threads.Threads {
			labels[th.ID] = deref(th.ResourceID)
		}
		if seen.Threads.Total != 2 || labels["shared-id"] != "r1" || labels["nobody-id"] != "<nil>" || seen.R2.Total != 0 {
			t.Errorf("threads: %v (total %d), of r2: %d; want shared-id of r1 and nobody-id of none, none of r2", labels, seen.Threads.Total, seen.R2.Total)
		}
		var opals struct{ Thread *thread }
		s.MustAs(t, opal, `{ thread(id: "shared-id") { id } }`, nil, &opals)
		if opals.Thread != nil {
			t.Errorf("shared-id as opal: %+v, want null", opals.Thread)
		}

		// r1 goes on in its thread, with its memory.
		finishAs(t, s, root, map[string]any{"prompt": "what was my secret?", "threadId": "shared-id", "resourceId": "r1"})
		s.MustAs(t, root, `{ thread(id: "shared-id") { id resourceId messages { content } } }`, nil, &seen)
		if th := seen.Thread; th == nil || len(th.Messages) != 4 || th.Messages[2].Content != "what was my secret?" {
			t.Fatalf("shared-id after r1's second run: %+v", th)
		}

		if got := s.PostAs(t, root, `{ thread(id: "shared-id") { messages(last: 0) { content } } }`, nil); got.Code != "BAD_USER_INPUT" {
			t.Errorf("messages(last: 0): %q, want BAD_USER_INPUT", got.Code)
		}
		if got := s.PostAs(t, opal, `{ threads(perPage: 500) { threads { messages { content } } } }`, nil); got.Code != "COMPLEXITY_LIMIT_EXCEEDED" {
			t.Errorf("every message of 500 threads: %q, want COMPLEXITY_LIMIT_EXCEEDED", got.Code)
		}
	})
}

// TestThreadRunsAreItsOwners: a thread used under several resources before threads had owners
// (as migration 0010 leaves it: owned by the resource of its first run) lists, as its runs,
// only its owner's — and a thread of no resource only the runs without one — so that an
// unscoped reader sees no other resource's run under the thread's label.
func TestThreadRunsAreItsOwners(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "interlock.db") },
		"mysql":  func(t *testing.T) string { return dbtest.MySQLURL(dbtest.MySQLDSN(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			setting := db(t)
			s := apptest.AuthServer(t, setting, scopedOperator)
			conn, err := gormstore.Open(context.Background(), setting)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if sqlDB, err := conn.DB(); err == nil {
					sqlDB.Close()
				}
			})
			at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			r1, r2 := "r1", "r2"
			old := func(id, thread string, resource *string, n int) {
				t.Helper()
				r := gormstore.Run{ID: id, AgentID: "support-agent", ThreadID: &thread, ResourceID: resource, Prompt: "p", Status: "COMPLETED",
					CreatedAt: at.Add(time.Duration(n) * time.Second), UpdatedAt: at.Add(time.Duration(n) * time.Second)}
				if err := conn.Create(&r).Error; err != nil {
					t.Fatal(err)
				}
			}
			old("0190e0e0-0000-7000-8000-000000000001", "legacy", &r1, 1)
			old("0190e0e0-0000-7000-8000-000000000002", "legacy", &r2, 2)
			old("0190e0e0-0000-7000-8000-000000000003", "legacy-none", nil, 3)
			old("0190e0e0-0000-7000-8000-000000000004", "legacy-none", &r2, 4)
			owners := []gormstore.Thread{{ID: "legacy", ResourceID: &r1, CreatedAt: at}, {ID: "legacy-none", CreatedAt: at}}
			if err := conn.Create(&owners).Error; err != nil {
				t.Fatal(err)
			}
			type runsOf struct {
				Thread *struct {
					ResourceID *string
					Runs       struct {
						Total int
						Runs  []struct{ RunID string }
					}
				}
			}
			for thread, want := range map[string]string{"legacy": "0190e0e0-0000-7000-8000-000000000001", "legacy-none": "0190e0e0-0000-7000-8000-000000000003"} {
				var got runsOf
				s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { thread(id: $id) { resourceId runs { total runs { runId } } } }`, map[string]any{"id": thread}, &got)
				if got.Thread == nil || got.Thread.Runs.Total != 1 || len(got.Thread.Runs.Runs) != 1 || got.Thread.Runs.Runs[0].RunID != want {
					t.Errorf("runs of %s: %+v; want only %s, its owner's", thread, got.Thread, want)
				}
			}
			// r2 still finds its own old runs among its runs.
			var mine struct{ RecentRuns struct{ Total int } }
			s.MustAs(t, apptest.TokenOf("opal"), `{ recentRuns(statuses: [COMPLETED]) { total } }`, nil, &mine)
			if mine.RecentRuns.Total != 2 {
				t.Errorf("r2's runs: %d, want its 2", mine.RecentRuns.Total)
			}
		})
	}
}

// finishAs starts a run of the support agent on s with the token and input fields and waits
// for it to complete.
func finishAs(t *testing.T, s *apptest.Server, token string, input map[string]any) apptest.Run {
	t.Helper()
	input["agentId"] = "support-agent"
	var out struct{ StartRun apptest.Run }
	s.MustAs(t, token, `mutation($i: StartRunInput!) { startRun(input: $i) { `+apptest.RunFields+` } }`, map[string]any{"i": input}, &out)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var got struct{ Run apptest.Run }
		s.MustAs(t, token, `query($id: ID!) { run(runId: $id) { `+apptest.RunFields+` } }`, map[string]any{"id": out.StartRun.ID}, &got)
		if got.Run.Status == "COMPLETED" {
			return got.Run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s", out.StartRun.ID, got.Run.Status)
		}
	}
}
