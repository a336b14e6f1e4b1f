// Package gcfloor keeps the garbage collector's heap goal from falling below a floor.
//
// With GOGC=100 the collector runs each time the heap doubles its live size. A server that
// keeps little (some ten MiB) but allocates much per request (a page of 50 runs is some 750 KB
// of GraphQL field contexts and buffers) then collects every few requests, and that work lands
// on the requests' latency. A floor of some tens of MiB lets the small heap grow that far
// before a collection, while a heap already larger than the floor (10,000 open subscriptions)
// keeps GOGC's own goal, so its memory is not raised. This is what a heap "ballast" did, done
// with the collector's own setting: after each collection the percent is set so that the next
// goal is the floor, or GOGC's when that is higher. GOMEMLIMIT still bounds the heap.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// sentinel is the object whose collection tells the floor a GC cycle ended. It holds a
// pointer so it is never batched with other tiny objects (which may never be freed).
type sentinel struct{ _ *byte }

// minHeap is the runtime's smallest heap goal at GOGC=100; it scales with the percent, so a
// percent set for a tiny live heap must be capped or this minimum would pass the floor.
const minHeap = 4 << 20

type floor struct {
	bytes   uint64
	base    int // the GOGC the process started with: the percent when the heap is past the floor
	mu      sync.Mutex
	stopped bool
	sample  []metrics.Sample // the live heap, and the stacks and globals the collector scans
}

// Start keeps the heap goal at least bytes until stop is called, which restores the GOGC the
// process had. It does nothing when bytes is 0 or the collector is off (GOGC=off), and only
// one floor should run in a process: the percent it sets is the runtime's, global, and a
// percent set by anyone else is replaced after the next collection.
//
// The floor follows the live heap one cycle late: the percent is set after a collection, from
// its cleanup goroutine, so the goal of the cycle that just ended is the old percent's.
func Start(bytes uint64) (stop func()) {
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(gogc)
	base := int(int32(gogc[0].Value.Uint64())) // GOGC=off reads as -1
	if bytes == 0 || base < 0 {
		return func() {}
	}
	f := &floor{bytes: bytes, base: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	f.adjust()
	f.arm()
	return f.stop
}

// arm asks to be called after the next GC cycle: a fresh sentinel is dropped at once, so the
// next cycle frees it and runs its cleanup.
func (f *floor) arm() {
	runtime.AddCleanup(new(sentinel), func(f *floor) {
		if f.adjust() {
			f.arm()
		}
	}, f)
}

// adjust sets the percent for the heap just measured, reporting false once stopped.
func (f *floor) adjust() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	metrics.Read(f.sample)
	live, roots := f.sample[0].Value.Uint64(), f.sample[1].Value.Uint64()+f.sample[2].Value.Uint64()
	debug.SetGCPercent(Percent(live, roots, f.bytes, f.base))
	return true
}

func (f *floor) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.stopped = true
		debug.SetGCPercent(f.base)
	}
}

// Percent is the GOGC that puts the next heap goal at floor when GOGC=base would put it lower.
// The runtime's goal is live + (live+roots)*percent/100, roots being the stacks and globals it
// scans, but never under minHeap*percent/100: the percent is capped so that this minimum is at
// most the floor (which also keeps it far inside the int32 the runtime stores).
func Percent(live, roots, floor uint64, base int) int {
	if live == 0 || live >= floor {
		return base
	}
	p := min((floor-live)*100/(live+roots), floor*100/minHeap)
	if int(p) > base {
		return int(p)
	}
	return base
}
