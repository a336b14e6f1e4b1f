package runs_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// BenchmarkStartRun measures run creation as cmd/interlock-bench's create does, without HTTP:
// StartRun from 16 callers at once, each run on one of 1,000 threads of 100 resources, answered
// by the demo model and completed, its memory off (as the bench's agents: no thread history is
// read); the clock stops when the last run has completed. It reports
// runs/s and the SQL statements per run (the store's and the service's, reads included; BEGIN
// and COMMIT not counted), the figure a busy machine does not change.
//
//	go test -run '^$' -bench StartRun -cpuprofile cpu.out ./runs/
func BenchmarkStartRun(b *testing.B) {
	for _, dialect := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", dbtest.SQLite}, {"mysql", dbtest.MySQL}} {
		b.Run(dialect.name, func(b *testing.B) {
			db := dialect.open(b)
			statements := dbtest.CountStatements(b, db)
			bench := &agent.Agent{ID: "bench-agent", Name: "Bench", Model: &llm.Demo{}, HistoryMessages: -1}
			f := setupWith(b, db, runs.Config{}, setupOpts{agents: []*agent.Agent{bench}})
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			statements.Store(0)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					_, err := f.svc.StartRun(bg(), runs.StartParams{
						AgentID: "bench-agent", Prompt: fmt.Sprintf("hello, bench %d", i),
						ThreadID: ptr(fmt.Sprintf("bench-thread-%d", i%1000)), ResourceID: ptr(fmt.Sprintf("bench-resource-%d", i%100)),
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			for {
				var running int64
				if err := db.Model(&gormstore.Run{}).Where("status = ?", runtype.StatusRunning).Count(&running).Error; err != nil {
					b.Fatal(err)
				}
				if running == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			b.ReportMetric(float64(statements.Load())/float64(b.N), "statements/run")
		})
	}
}
