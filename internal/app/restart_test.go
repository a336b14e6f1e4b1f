package app_test

import (
	"context"
	"path/filepath"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// TestSuspendedRunsSurviveARestart: suspend runs, stop the server, start a new one on the same
// database: it lists every run and each can be decided.
func TestSuspendedRunsSurviveARestart(t *testing.T) {
	t.Parallel()
	for name, db := range map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "restart.db") },
		"mysql":  func(t *testing.T) string { return dbtest.MySQLURL(dbtest.MySQLDSN(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			setting := db(t)
			first := apptest.Start(t, setting)
			prompts := []string{"refund order 1", "refund order 2 for 5", "ask the customer for a date"}
			ids := map[string]bool{}
			for _, p := range prompts {
				r := first.StartRun(t, p, map[string]any{"threadId": "restart"})
				ids[r.RunID] = true
				ws := apptest.DialWS(t, first.URL, "graphql-transport-ws")
				apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": r.RunID}), apptest.IsType("RUN_SUSPENDED"))
				ws.Conn.CloseNow()
			}
			first.App.Service.Shutdown(context.Background())
			first.App.Close()

			second := apptest.Start(t, setting)
			var list struct {
				SuspendedRuns struct {
					Total int
					Runs  []apptest.Run
				}
			}
			second.Must(t, `{ suspendedRuns(threadId: "restart") { total runs { `+apptest.RunFields+` } } }`, nil, &list)
			if list.SuspendedRuns.Total != len(prompts) {
				t.Fatalf("after restart %d suspended runs, want %d", list.SuspendedRuns.Total, len(prompts))
			}
			for _, r := range list.SuspendedRuns.Runs {
				if !ids[r.RunID] {
					t.Fatalf("unknown run %s", r.RunID)
				}
				tc := r.ToolCalls[0]
				var out map[string]apptest.Run
				if tc.RequiresApproval {
					second.Must(t, `mutation($id: ID!) { d: approveToolCall(runId: $id) { status } }`, map[string]any{"id": r.RunID}, &out)
				} else {
					second.Must(t, `mutation($id: ID!) { d: resumeRun(runId: $id, resumeData: {answer: "Friday"}) { status } }`, map[string]any{"id": r.RunID}, &out)
				}
				ws := apptest.DialWS(t, second.URL, "graphql-transport-ws")
				evs := apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": r.RunID}), nil)
				checkSeqs(t, evs)
				if last := evs[len(evs)-1]; last.Type != "RUN_FINISHED" {
					t.Fatalf("run %s after restart ends with %s", r.RunID, last.Type)
				}
			}
		})
	}
}
