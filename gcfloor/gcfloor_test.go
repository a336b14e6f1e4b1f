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
		live, roots, floor uint64
		base, want         int
	}{
		{10 * mib, 0, 64 * mib, 100, 540},        // goal 10 + 10*5.4 = 64 MiB
		{10 * mib, 2 * mib, 64 * mib, 100, 450},  // the stacks and globals count in the goal
		{32 * mib, 0, 64 * mib, 100, 100},        // GOGC's own goal is the floor already
		{30 * mib, 10 * mib, 64 * mib, 100, 100}, // GOGC's 30 + 40 = 70 MiB is over it: kept
		{200 * mib, 0, 64 * mib, 100, 100},
		{40 * mib, 0, 64 * mib, 50, 60},
		{10 * mib, 0, 64 * mib, 800, 800},    // a higher GOGC stands
		{1 * mib, 0, 64 * mib, 100, 1600},    // capped: the minimum heap, 4 MiB x 16, is the floor
		{1 << 10, 0, 1 << 40, 100, 26214400}, // capped far inside int32 even at the largest floor
		{0, 0, 64 * mib, 100, 100},
	} {
		if got := gcfloor.Percent(c.live, c.roots, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d MiB live, %d MiB roots, %d MiB floor, %d) = %d, want %d", c.live/mib, c.roots/mib, c.floor/mib, c.base, got, c.want)
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

// TestFloorFollowsTheLiveHeap runs the floor on this process's own collector: a tiny heap and
// a middling one get a goal at the floor (not above: the runtime's minimum heap grows with the
// percent), a heap past it GOGC's own, and stop puts GOGC back.
func TestFloorFollowsTheLiveHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const floor = 32 << 20
	atFloor := func(gogc, goal uint64) bool { return gogc > 100 && goal >= floor*9/10 && goal <= floor*11/10 }
	stop := gcfloor.Start(floor)
	collectUntil(t, "a tiny heap under a 32 MiB floor", atFloor)

	kept := make([][]byte, 0, 16)
	for range 3 { // 12 MiB live
		kept = append(kept, make([]byte, 4<<20))
	}
	collectUntil(t, "12 MiB live under a 32 MiB floor", func(gogc, goal uint64) bool { return atFloor(gogc, goal) && gogc < 300 })

	for range 13 { // 64 MiB live: past the floor
		kept = append(kept, make([]byte, 4<<20))
	}
	collectUntil(t, "64 MiB live over a 32 MiB floor", func(gogc, _ uint64) bool { return gogc == 100 })
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
