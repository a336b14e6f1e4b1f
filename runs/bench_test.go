package runs_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// BenchmarkSuspendedRuns measures discovery over 100,000 stored runs of which 10% are suspended,
// spread over 20 agents, 1,000 threads and 100 resources, on each dialect:
//
//	go test ./runs -run '^$' -bench SuspendedRuns -benchtime 200x
func BenchmarkSuspendedRuns(b *testing.B) {
	onSeeded(b, func(b *testing.B, f *fixture) {
		from, to := base.Add(20*time.Hour), base.Add(60*time.Hour)
		for _, q := range []struct {
			name string
			p    runs.ListSuspendedParams
		}{
			{"inbox/page0", runs.ListSuspendedParams{Page: ptr(0), PerPage: ptr(50)}},
			{"inbox/page100", runs.ListSuspendedParams{Page: ptr(100), PerPage: ptr(50)}},
			{"agent/page2", runs.ListSuspendedParams{AgentID: ptr("agent-7"), Page: ptr(2), PerPage: ptr(50)}},
			{"thread", runs.ListSuspendedParams{ThreadID: ptr("thread-42")}},
			{"resource+dates/page0", runs.ListSuspendedParams{ResourceID: ptr("user-3"), FromDate: &from, ToDate: &to, Page: ptr(0), PerPage: ptr(20)}},
			{"agent+thread+resource", runs.ListSuspendedParams{AgentID: ptr("agent-2"), ThreadID: ptr("thread-2"), ResourceID: ptr("user-2")}},
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
	})
}

// seedMany stores n runs, every tenth one suspended, one minute apart; the suspended ones are
// spread evenly over the agents, threads and resources.
func seedMany(b *testing.B, db *gorm.DB, n int) {
	b.Helper()
	list := make([]seedOpts, 0, 1000)
	flush := func() {
		seed(b, db, list...)
		list = list[:0]
	}
	for i := 0; i < n; i++ {
		status := runtype.StatusCompleted
		if i%10 == 0 {
			status = runtype.StatusSuspended
		}
		list = append(list, seedOpts{
			id: fmt.Sprintf("bench-%08d", i), agent: fmt.Sprintf("agent-%d", i/10%20),
			thread: fmt.Sprintf("thread-%d", i/10%1000), resource: fmt.Sprintf("user-%d", i/10%100),
			at: time.Duration(i) * time.Minute, status: status,
		})
		if len(list) == cap(list) {
			flush()
		}
	}
	flush()
	// Fresh bulk-loaded tables have no statistics yet; a database in use has them.
	stmt := "ANALYZE"
	if db.Dialector.Name() == "mysql" {
		stmt = "ANALYZE TABLE agent_runs, run_tool_calls"
	}
	if err := db.Exec(stmt).Error; err != nil {
		b.Fatal(err)
	}
	if os.Getenv("INTERLOCK_BENCH_EXPLAIN") != "" {
		var plan []map[string]any
		db.Raw("EXPLAIN SELECT * FROM agent_runs WHERE status = 'SUSPENDED' AND parent_run_id IS NULL AND thread_id = 'thread-42' ORDER BY created_at DESC, id DESC").Scan(&plan)
		b.Logf("plan: %v", plan)
	}
}

// onSeeded runs fn as a sub-benchmark on each dialect, over a service whose database holds
// seedMany's 100,000 runs (10% suspended).
func onSeeded(b *testing.B, fn func(b *testing.B, f *fixture)) {
	for _, dialect := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", dbtest.SQLite}, {"mysql", dbtest.MySQL}} {
		b.Run(dialect.name, func(b *testing.B) {
			db := dialect.open(b)
			seedMany(b, db, 100_000)
			fn(b, setup(b, db, runs.Config{}))
		})
	}
}
