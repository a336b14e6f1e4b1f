package gormstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
)

// BenchmarkDecisionsPage reads a page of 500 decisions (the audit export's and the team
// figures' page) at the start of a period of 50,000 decisions and at its end, after the cursor
// of the 49,500th: the keyset walk on (decided_at, id) costs the same at any depth. Rows are
// crafted (one decided call per run, a second apart):
//
//	go test -run '^$' -bench DecisionsPage -count 3 ./gormstore
func BenchmarkDecisionsPage(b *testing.B) {
	const n, page = 50_000, 500
	dialects := []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{gormstore.DialectSQLite, dbtest.SQLite}, {gormstore.DialectMySQL, dbtest.MySQL}}
	for _, d := range dialects {
		b.Run(d.name, func(b *testing.B) {
			db := d.open(b)
			t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			args, by := `{"orderId":"42","amount":30}`, "alice"
			runRows, callRows := make([]gormstore.Run, 0, 1000), make([]gormstore.ToolCall, 0, 1000)
			for i := range n {
				at := t0.Add(time.Duration(i) * time.Second)
				id := fmt.Sprintf("run-%06d", i)
				runRows = append(runRows, gormstore.Run{ID: id, AgentID: "agent", Prompt: "p", Status: "COMPLETED", CreatedAt: at, UpdatedAt: at})
				callRows = append(callRows, gormstore.ToolCall{RunID: id, ToolCallID: "tc_1", ToolName: "issue_refund", Args: &args,
					RequiresApproval: true, State: gormstore.ToolCallApproved, CreatedAt: at.Add(-time.Minute), DecidedBy: &by, DecidedAt: &at})
				if len(runRows) == cap(runRows) || i == n-1 {
					if err := db.Create(&runRows).Error; err != nil {
						b.Fatal(err)
					}
					if err := db.Create(&callRows).Error; err != nil {
						b.Fatal(err)
					}
					runRows, callRows = runRows[:0], callRows[:0]
				}
			}
			st := gormstore.New(db)
			q := runs.DecisionQuery{From: t0, To: t0.Add(n * time.Second), Limit: page}
			var deepest runs.DecisionRecord
			{ // the cursor of the 49,500th decision
				var last gormstore.ToolCall
				if err := db.Order("decided_at, id").Offset(n - page - 1).First(&last).Error; err != nil {
					b.Fatal(err)
				}
				deepest.DecidedAt, deepest.ID = *last.DecidedAt, last.ID
			}
			deep := q
			deep.After = &runs.DecisionCursor{At: deepest.DecidedAt, ID: deepest.ID}
			var first, last time.Duration
			for b.Loop() {
				t1 := time.Now()
				if got, err := st.Decisions(context.Background(), q); err != nil || len(got) != page {
					b.Fatal(len(got), err)
				}
				t2 := time.Now()
				if got, err := st.Decisions(context.Background(), deep); err != nil || len(got) != page {
					b.Fatal(len(got), err)
				}
				first, last = first+t2.Sub(t1), last+time.Since(t2)
			}
			b.ReportMetric(float64(first.Microseconds())/float64(b.N), "first-page-µs")
			b.ReportMetric(float64(last.Microseconds())/float64(b.N), "last-page-µs")
		})
	}
}
