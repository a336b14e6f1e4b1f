package gormstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// BenchmarkRunRead compares the API's read of one run, GetRun (the columns a client sees), with
// the record read of the service's rules, GetRecord (the whole row, snapshot included: what the
// API's read was before runs.Record), on a suspended run waiting on one call whose snapshot is
// small (a run suspended at its first step, as cmd/interlock-bench seeds them) or 16 KB (a run
// some steps and tool results in). Each iteration reads the run both ways, timed apart:
//
//	go test -run '^$' -bench RunRead -count 3 ./gormstore
func BenchmarkRunRead(b *testing.B) {
	dialects := []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{gormstore.DialectSQLite, dbtest.SQLite}, {gormstore.DialectMySQL, dbtest.MySQL}}
	for _, d := range dialects {
		for _, size := range []int{350, 16 << 10} {
			b.Run(fmt.Sprintf("%s/snapshot=%dB", d.name, size), func(b *testing.B) {
				st := gormstore.New(d.open(b))
				id := suspendedRun(b, st, size)
				// One read of each per iteration, timed apart: whatever else the machine does
				// falls on both alike.
				var view, record time.Duration
				for b.Loop() {
					t0 := time.Now()
					if r, err := st.GetRun(context.Background(), id); err != nil || r == nil {
						b.Fatal(r, err)
					}
					t1 := time.Now()
					if r, err := st.GetRecord(context.Background(), id); err != nil || r == nil {
						b.Fatal(r, err)
					}
					view, record = view+t1.Sub(t0), record+time.Since(t1)
				}
				b.ReportMetric(float64(view.Nanoseconds())/float64(b.N), "GetRun-ns/op")
				b.ReportMetric(float64(record.Nanoseconds())/float64(b.N), "GetRecord-ns/op")
			})
		}
	}
}

// suspendedRun stores a run suspended on one approval with a snapshot of about size bytes.
func suspendedRun(b *testing.B, st *gormstore.Store, size int) string {
	b.Helper()
	ctx, now := context.Background(), time.Now().UTC()
	r := runtype.Run{ID: "run-1", AgentID: "agent", Prompt: "refund order 42", Status: runtype.StatusRunning, CreatedAt: now, UpdatedAt: now, LastSeq: 1}
	err := st.InsertRun(ctx, runs.NewRun{Run: r, Snapshot: `{}`, Lease: "lease", TTL: time.Hour,
		Events: []runtype.Event{{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)}}})
	if err != nil {
		b.Fatal(err)
	}
	snap := `{"pad":"` + strings.Repeat("x", max(size-10, 0)) + `"}`
	call := runtype.ToolCall{ToolCallID: "tc_1", ToolName: "issue_refund", Args: []byte(`{"orderId":"42","amount":30}`), RequiresApproval: true}
	err = st.Suspend(ctx, runs.Suspension{
		Checkpoint: runs.Checkpoint{RunID: r.ID, Lease: "lease", TTL: time.Hour, After: 1, At: now, Snapshot: &snap,
			Events: []runtype.Event{{Type: runtype.EventToolCallApproval, ToolCall: &call}, {Type: runtype.EventRunSuspended, Status: string(runtype.StatusSuspended)}}},
		Calls: []runtype.ToolCall{call}, InstanceID: "i",
	})
	if err != nil {
		b.Fatal(err)
	}
	return r.ID
}
