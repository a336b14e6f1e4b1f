package gcfloor_test

import (
	"math"
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
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	const floor = 32 << 20
	atFloor := func(gogc, goal uint64) bool { return gogc > 100 && goal >= floor*9/10 && goal <= floor*11/10 }
	stop := gcfloor.Start(floor)
	collectUntil(t, "a tiny heap under a 32 MiB floor", atFloor)
	// The raised percent is capped: a limit past the floor and a quarter (the stacks and the
	// runtime's own memory come on top), far under none.
	if l := debug.SetMemoryLimit(-1); l < floor*5/4 || l > floor*5/4+64<<20 {
		t.Fatalf("under the floor the memory limit is %d MiB, want the floor and a quarter (40 MiB) and the memory that is not heap", l>>20)
	}

	kept := make([][]byte, 0, 16)
	for range 3 { // 12 MiB live
		kept = append(kept, make([]byte, 4<<20))
	}
	collectUntil(t, "12 MiB live under a 32 MiB floor", func(gogc, goal uint64) bool { return atFloor(gogc, goal) && gogc < 300 })

	for range 13 { // 64 MiB live: past the floor
		kept = append(kept, make([]byte, 4<<20))
	}
	collectUntil(t, "64 MiB live over a 32 MiB floor", func(gogc, _ uint64) bool { return gogc == 100 })
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Fatalf("past the floor the memory limit is %d MiB, want none (the process had none)", l>>20)
	}
	runtime.KeepAlive(kept)

	stop()
	kept = nil
	runtime.GC()
	if gogc, _ := read(); gogc != 100 {
		t.Fatalf("after stop GOGC is %d, want the 100 the process had", gogc)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Fatalf("after stop the memory limit is %d MiB, want none (the process had none)", l>>20)
	}
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	if gogc, _ := read(); gogc != 100 {
		t.Fatalf("a stopped floor changed GOGC to %d after a collection", gogc)
	}
}

// TestLimit: the limit that caps a raised percent is the floor and a quarter plus what is not
// heap, never above GOMEMLIMIT.
func TestLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, nonHeap uint64
		base, want     int64
	}{
		{64 * mib, 12 * mib, math.MaxInt64, 92 * mib},
		{64 * mib, 40 * mib, math.MaxInt64, 120 * mib},
		{64 * mib, 12 * mib, 70 * mib, 70 * mib}, // GOMEMLIMIT lower: it stays
		{math.MaxUint64 / 2, math.MaxUint64 / 2, math.MaxInt64, math.MaxInt64},
	} {
		if got := gcfloor.Limit(c.floor, c.nonHeap, c.base); got != c.want {
			t.Errorf("Limit(%d, %d, %d) = %d, want %d", c.floor, c.nonHeap, c.base, got, c.want)
		}
	}
}

// TestGOMEMLIMITStays: a process's own memory limit is kept when lower, and restored by stop.
func TestGOMEMLIMITStays(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(30 << 20))
	stop := gcfloor.Start(64 << 20)
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if l := debug.SetMemoryLimit(-1); l > 30<<20 {
		t.Fatalf("with GOMEMLIMIT=30MiB the floor set the limit to %d MiB", l>>20)
	}
	stop()
	if l := debug.SetMemoryLimit(-1); l != 30<<20 {
		t.Fatalf("after stop the memory limit is %d MiB, want the 30 the process had", l>>20)
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
