package runs_test

import (
	"testing"

	"interlock/runs"
)

// BenchmarkSearch measures suspendedRuns(search:) and recentRuns(search:) over seedMany's
// 100,000 runs (10,000 suspended, each with its call row), on each dialect (docs/performance.md):
//
//	go test ./runs -run '^$' -bench Search -benchtime 20x
func BenchmarkSearch(b *testing.B) {
	onSeeded(b, func(b *testing.B, f *fixture) {
		page := func(p runs.ListSuspendedParams) runs.ListSuspendedParams {
			p.Page, p.PerPage = ptr(0), ptr(50)
			return p
		}
		for _, q := range []struct {
			name string
			p    runs.ListSuspendedParams
		}{
			{"inbox/none", page(runs.ListSuspendedParams{})},
			{"inbox/thread", page(runs.ListSuspendedParams{Search: "thread-42"})},
			{"inbox/id-prefix", page(runs.ListSuspendedParams{Search: "bench-0009"})},
			{"inbox/args-every-run", page(runs.ListSuspendedParams{Search: "orderid"})},
			{"inbox/no-match", page(runs.ListSuspendedParams{Search: "no such text"})},
			{"inbox/agent+no-match", page(runs.ListSuspendedParams{AgentID: ptr("agent-7"), Search: "no such text"})},
		} {
			b.Run(q.name, func(b *testing.B) {
				var total int64
				for b.Loop() {
					res, err := f.svc.ListSuspended(bg(), q.p)
					if err != nil {
						b.Fatal(err)
					}
					total = res.Total
				}
				b.ReportMetric(float64(total), "matches")
			})
		}
		for _, q := range []struct {
			name string
			p    runs.RecentParams
		}{
			{"history/none", runs.RecentParams{PerPage: 20}},
			{"history/resource", runs.RecentParams{PerPage: 20, Search: "user-42"}},
			{"history/no-match", runs.RecentParams{PerPage: 20, Search: "no such text"}},
		} {
			b.Run(q.name, func(b *testing.B) {
				var total int64
				for b.Loop() {
					res, err := f.svc.RecentRuns(bg(), q.p)
					if err != nil {
						b.Fatal(err)
					}
					total = res.Total
				}
				b.ReportMetric(float64(total), "matches")
			})
		}
	})
}
