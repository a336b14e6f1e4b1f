package runs_test

import (
	"context"
	"encoding/json"
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

// BenchmarkStartRunUngatedCall is BenchmarkStartRun for runs whose model calls one tool that
// needs no approval (the demo's "status of order N": lookup_order), then answers: what recording
// each ungated call as a decision (AUTO_APPROVED, with its row in run_tool_calls) costs on the
// hot path, in SQL statements per run and runs/s. Receipts are off, as in BenchmarkStartRun.
//
//	go test -run '^$' -bench StartRunUngatedCall ./runs/
func BenchmarkStartRunUngatedCall(b *testing.B) {
	for _, dialect := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", dbtest.SQLite}, {"mysql", dbtest.MySQL}} {
		b.Run(dialect.name, func(b *testing.B) {
			db := dialect.open(b)
			statements := dbtest.CountStatements(b, db)
			lookup := &agent.Tool{Name: "lookup_order", InputSchema: json.RawMessage(`{"type":"object"}`),
				ExecuteFunc: func(context.Context, *agent.Call) (any, error) { return map[string]any{"status": "shipped"}, nil }}
			bench := &agent.Agent{ID: "bench-agent", Name: "Bench", Model: &llm.Demo{}, HistoryMessages: -1, Tools: []*agent.Tool{lookup}}
			f := setupWith(b, db, runs.Config{}, setupOpts{agents: []*agent.Agent{bench}})
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			statements.Store(0)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					_, err := f.svc.StartRun(bg(), runs.StartParams{
						AgentID: "bench-agent", Prompt: fmt.Sprintf("status of order %d", i),
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
