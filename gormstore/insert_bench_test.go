package gormstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
)

// BenchmarkInsertRun measures run creation in the store alone: InsertRun from 16 writers at
// once, as startRun makes it, with a thread (1,000 threads of 100 resources, as
// cmd/interlock-bench's create spreads its runs: most runs find their thread claimed) and with
// an idempotency key too. It reports runs/s and the SQL statements per run (BEGIN and COMMIT
// not counted), the figure that does not depend on how busy the machine is.
//
//	go test -run '^$' -bench InsertRun -cpuprofile cpu.out ./gormstore/
func BenchmarkInsertRun(b *testing.B) {
	for _, dialect := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", dbtest.SQLite}, {"mysql", dbtest.MySQL}} {
		for _, shape := range []struct {
			name          string
			thread, keyed bool
		}{{"plain", false, false}, {"thread", true, false}, {"thread+key", true, true}} {
			b.Run(dialect.name+"/"+shape.name, func(b *testing.B) {
				db := dialect.open(b)
				statements := dbtest.CountStatements(b, db)
				s := gormstore.New(db)
				ctx := context.Background()
				var next atomic.Int64
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := next.Add(1)
						n := newRun(fmt.Sprintf("run-%d", i))
						if shape.thread {
							n.Run.ThreadID = ptr(fmt.Sprintf("thread-%d", i%1000))
							n.Run.ResourceID = ptr(fmt.Sprintf("resource-%d", i%100))
						}
						if shape.keyed {
							n.Idempotency = &runs.Idempotency{KeyHash: fmt.Sprintf("key-%d", i), RequestHash: "request"}
						}
						if err := s.InsertRun(ctx, n); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
				b.ReportMetric(float64(statements.Load())/float64(b.N), "statements/run")
			})
		}
	}
}
