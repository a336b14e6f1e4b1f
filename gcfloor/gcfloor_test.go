package gcfloor_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"interlock/gcfloor"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{10 * mib, 64 * mib, 100, 540}, // goal 64 MiB
		{32 * mib, 64 * mib, 100, 100}, // GOGC's own goal is the floor already
		{200 * mib, 64 * mib, 100, 100},
		{40 * mib, 64 * mib, 50, 60},
		{10 * mib, 64 * mib, 800, 800}, // a higher GOGC stands
		{0, 64 * mib, 100, 100},
	} {
		if got := gcfloor.Percent(c.live, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d MiB live, %d MiB floor, %d) = %d, want %d", c.live/mib, c.floor/mib, c.base, got, c.want)
		}
	}
}

// read returns the runtime's GOGC and heap goal.
func read() (gogc, goal uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// collectUntil runs collections until ok holds of the runtime's GOGC and goal, for up to 5 s:
// the floor adjusts after a cycle, from the runtime's cleanup goroutine.
func collectUntil(t *testing.T, what string, ok func(gogc, goal uint64) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		if ok(read()) {
			return
		}
	}
	gogc, goal := read()
	t.Fatalf("%s: GOGC is %d and the heap goal %d MiB", what, gogc, goal>>20)
}

// TestFloorFollowsTheLiveHeap runs the floor on this process's own collector: a small heap
// gets a goal at the floor, a heap past it GOGC's own, and stop puts GOGC back.
func TestFloorFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const floor = 128 << 20
	stop := gcfloor.Start(floor)
	collectUntil(t, "a small heap under a 128 MiB floor", func(gogc, goal uint64) bool {
		return gogc > 100 && goal >= floor*9/10
	})

	kept := make([][]byte, 0, 64)
	for range 64 { // 256 MiB live: past the floor
		kept = append(kept, make([]byte, 4<<20))
	}
	collectUntil(t, "256 MiB live over a 128 MiB floor", func(gogc, _ uint64) bool { return gogc == 100 })
	runtime.KeepAlive(kept)

	stop()
	kept = nil
	runtime.GC()
	if gogc, _ := read(); gogc != 100 {
		t.Fatalf("after stop GOGC is %d, want the 100 the process had", gogc)
	}
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	if gogc, _ := read(); gogc != 100 {
		t.Fatalf("a stopped floor changed GOGC to %d after a collection", gogc)
	}
}

func TestZeroOrGCOffDoesNothing(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gcfloor.Start(0)()
	runtime.GC()
	if gogc, _ := read(); gogc != 100 {
		t.Fatalf("a zero floor set GOGC to %d", gogc)
	}
	debug.SetGCPercent(-1)
	stop := gcfloor.Start(64 << 20)
	runtime.GC()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("with GOGC=off the floor turned the collector on (GOGC %d)", got)
	}
	stop()
}
