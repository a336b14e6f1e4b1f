package app_test

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// BenchmarkApproveToFirstEvent measures, on MySQL with two instances (two apps, each with its own
// service, hubs and notify loop, over one database), the time from sending approveToolCall to a
// subscriber on instance A receiving the first event of the continued run (TOOL_CALL_APPROVED)
// and its TOOL_RESULT, when the approval goes to A itself (same) or to B (cross: the run
// continues on B and A learns of its events from storage):
//
//	INTERLOCK_TEST_MYSQL_DSN=... go test -run '^$' -bench ApproveToFirstEvent -benchtime 200x .
func BenchmarkApproveToFirstEvent(b *testing.B) {
	db := dbtest.MySQLURL(dbtest.MySQLDSN(b))
	a, other := apptest.Start(b, db), apptest.Start(b, db)
	for _, tc := range []struct {
		name    string
		decider *apptest.Server
	}{{"same-instance", a}, {"cross-instance", other}} {
		b.Run(tc.name, func(b *testing.B) {
			ws := apptest.DialWS(b, a.URL, "graphql-transport-ws")
			var first, result []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				run := a.StartRun(b, "refund order 9 for 1", nil)
				op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
				apptest.Follow(b, ws, op, apptest.IsType("RUN_SUSPENDED"))
				// Approvals arrive at random moments, not in step with the notify loop's ticks.
				time.Sleep(time.Duration(rand.Int64N(int64(100 * time.Millisecond))))
				b.StartTimer()
				sent := time.Now()
				r := tc.decider.Post(b, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID})
				if len(r.Errors) > 0 {
					b.Fatal(r.Errors)
				}
				apptest.Follow(b, ws, op, apptest.IsType("TOOL_CALL_APPROVED"))
				first = append(first, time.Since(sent))
				apptest.Follow(b, ws, op, apptest.IsType("TOOL_RESULT"))
				result = append(result, time.Since(sent))
				b.StopTimer()
				apptest.Follow(b, ws, op, nil)
			}
			report(b, first, "first")
			report(b, result, "result")
		})
	}
}

func report(b *testing.B, d []time.Duration, what string) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	pct := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), what+"-p50-ms")
	b.ReportMetric(pct(0.99), what+"-p99-ms")
}
