package runs_test

import (
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// BenchmarkStats measures what one scrape of /metrics costs the database for the run gauges
// (runs by status, suspended runs), over 100,000 stored runs on each dialect:
//
//	go test ./runs -run '^$' -bench Stats -benchtime 50x
func BenchmarkStats(b *testing.B) {
	onSeeded(b, func(b *testing.B, f *fixture) {
		var st runs.RunStats
		for b.Loop() {
			var err error
			if st, err = f.svc.Stats(bg()); err != nil {
				b.Fatal(err)
			}
		}
		if st.ByStatus[runtype.StatusCompleted] != 90_000 || st.Suspended != 10_000 {
			b.Fatalf("stats %+v", st)
		}
	})
}
