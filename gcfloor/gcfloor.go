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
//
// A raised percent is also capped with a soft memory limit, because it is one cycle late. After
// a burst (a thousand MCP calls arriving at once), the cycle that ends in it marks a larger heap
// and scans far larger stacks than the idle one the percent was set for, and the runtime sets
// the next goal from them with that percent (some 1,500 % for an idle heap of 4 MiB): 368 MiB
// instead of 64 was measured, the heap grew to 172 MiB before the floor's cleanup ran, and the
// process kept the pages. While the percent is raised, the limit is the floor and a quarter
// more, plus the memory that is not heap at the last collection (stacks, the runtime's own); a
// percent at GOGC's lifts it (back to GOMEMLIMIT, or none).
package gcfloor

import (
	"math"
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
	base    int   // the GOGC the process started with: the percent when the heap is past the floor
	limit   int64 // the memory limit it started with (GOMEMLIMIT; math.MaxInt64: none)
	mu      sync.Mutex
	stopped bool
	// The live heap, the stacks and globals the collector scans, and what the memory limit
	// counts (all mapped memory less what was returned) with the heap's part of it.
	sample []metrics.Sample
}

// The samples a floor reads after each collection, in this order.
var samples = []string{
	"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes",
	"/memory/classes/total:bytes", "/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/memory/classes/heap/free:bytes",
}

// Start keeps the heap goal at least bytes until stop is called, which restores the GOGC and
// the memory limit the process had. It does nothing when bytes is 0 or the collector is off (GOGC=off), and only
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
	f := &floor{bytes: bytes, base: base, limit: debug.SetMemoryLimit(-1)}
	for _, name := range samples {
		f.sample = append(f.sample, metrics.Sample{Name: name})
	}
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
	v := func(i int) uint64 { return f.sample[i].Value.Uint64() }
	live, roots := v(0), v(1)+v(2)
	percent := Percent(live, roots, f.bytes, f.base)
	limit := f.limit
	if percent > f.base {
		counted := v(3) - v(4)     // what the memory limit counts: mapped, less returned
		heap := v(5) + v(6) + v(7) // of which the heap's (objects, unused, free)
		limit = Limit(f.bytes, counted-min(heap, counted), f.limit)
	}
	// A raised percent is set after its limit, and a limit lifted after the percent is
	// lowered, so that at no moment is a raised percent uncapped.
	if percent > f.base {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(percent)
	} else {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
	return true
}

// Limit is the memory limit that goes with a raised percent: the floor and a quarter more, plus
// nonHeap (the memory that is not heap: stacks, the runtime's own), or base (GOMEMLIMIT) when
// that is lower. A stale percent then cannot let the heap grow much past the floor before the
// floor adjusts it; a heap that truly grows past it is collected more often for a cycle, until
// the percent is GOGC's again and the limit lifted.
func Limit(floor, nonHeap uint64, base int64) int64 {
	if floor > math.MaxInt64/4 || nonHeap > math.MaxInt64/4 { // past any memory: no cap
		return base
	}
	return min(int64(floor+floor/4+nonHeap), base)
}

func (f *floor) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.stopped {
		f.stopped = true
		debug.SetGCPercent(f.base)
		debug.SetMemoryLimit(f.limit)
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
