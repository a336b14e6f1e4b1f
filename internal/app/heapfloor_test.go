package app_test

import (
	"path/filepath"
	"testing"

	"interlock/internal/apptest"
)

// TestServerRunsWithAHeapFloor starts the server as a process: by default its collector's
// percent is raised above GOGC's 100 (its heap is far under the 64 MiB floor), with
// --heap-floor-mib 0 it is GOGC's own. (gcfloor's tests cover GOGC=off and a heap past the
// floor; TestConfigErrorsNameTheSetting a bad value.)
func TestServerRunsWithAHeapFloor(t *testing.T) {
	db := func() string { return "sqlite:" + filepath.Join(t.TempDir(), "floor.db") }
	gogc := func(p *apptest.Proc) float64 { return p.Scrape(t).Value(t, "go_gc_gogc_percent") }
	p := apptest.StartProc(t, db())
	if got := gogc(p); got <= 100 {
		t.Errorf("with the default floor GOGC is %v, want above 100 for a small heap", got)
	}
	// The goal is the floor, not more: the runtime's minimum heap grows with the percent.
	if goal := p.Scrape(t).Value(t, "go_memstats_next_gc_bytes"); goal < 60<<20 || goal > 70<<20 {
		t.Errorf("with the default floor the heap goal is %.1f MiB, want 64", goal/(1<<20))
	}
	if got := gogc(apptest.StartProc(t, db(), "--heap-floor-mib", "0")); got != 100 {
		t.Errorf("with --heap-floor-mib 0 GOGC is %v, want 100", got)
	}
}
