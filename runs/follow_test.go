package runs_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// TestIdleStreamsHoldNoGoroutine follows one suspended run forty times: once each stream has
// sent what is stored, it waits without a goroutine of its own; the approval wakes every one
// of them, each gets the rest of the run once, in order, and closes.
//
// Not parallel: it counts the goroutines of the process that run Follow streams, which other
// tests would add to.
func TestIdleStreamsHoldNoGoroutine(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		r := f.suspended(t, runs.StartParams{Prompt: "refund order 1"})
		f.svc.Wait()

		const n = 40
		streams := make([]<-chan runtype.Event, n)
		for i := range streams {
			ch, err := f.svc.Follow(runtype.WithSystem(t.Context()), r.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			for ev := range within(t, ch) {
				if ev.Seq == r.LastSeq {
					break
				}
			}
			streams[i] = ch
		}
		waitStreamGoroutines(t, "forty idle streams", 0)

		if _, err := f.svc.Approve(runtype.WithSystem(t.Context()), runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		for i, ch := range streams {
			seq := r.LastSeq
			var last runtype.EventType
			for ev := range within(t, ch) {
				if ev.Seq != seq+1 {
					t.Fatalf("stream %d: seq %d after %d", i, ev.Seq, seq)
				}
				seq, last = ev.Seq, ev.Type
			}
			if !last.Terminal() {
				t.Fatalf("stream %d closed after %s (seq %d), before the run finished", i, last, seq)
			}
		}
		waitStreamGoroutines(t, "forty ended streams", 0)
	})
}

// TestCancelledIdleStreamCloses ends a stream that waits on a suspended run by cancelling its
// context: its channel closes, and the run has no follower left. The notify loop polls once an
// hour, so nothing but the cancellation wakes the stream.
//
// Not parallel: it counts the goroutines of the process that run Follow streams, which other
// tests would add to.
func TestCancelledIdleStreamCloses(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{PollInterval: time.Hour})
		r := f.suspended(t, runs.StartParams{Prompt: "refund order 1"})
		f.svc.Wait()
		ctx, cancel := context.WithCancel(runtype.WithSystem(t.Context()))
		ch, err := f.svc.Follow(ctx, r.ID, r.LastSeq)
		if err != nil {
			t.Fatal(err)
		}
		waitStreamGoroutines(t, "a stream with nothing to send", 0)
		cancel()
		select {
		case ev, ok := <-ch:
			if ok {
				t.Fatalf("a cancelled stream sent %s", ev.Type)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a cancelled idle stream did not close within 5s")
		}
		for deadline := time.Now().Add(5 * time.Second); f.svc.Followers(r.ID) != 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d followers 5s after the last stream closed, want 0", f.svc.Followers(r.ID))
			}
		}
	})
}

// within yields the events of ch until it closes, failing the test when one takes over 20s.
func within(t *testing.T, ch <-chan runtype.Event) func(yield func(runtype.Event) bool) {
	return func(yield func(runtype.Event) bool) {
		for {
			select {
			case ev, ok := <-ch:
				if !ok || !yield(ev) {
					return
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no event and no end of the stream within 20s")
			}
		}
	}
}

// waitStreamGoroutines waits up to 5s for at most max goroutines to be running Follow streams
// (a stream's, or the one per stream of before), whatever the database driver's own do.
func waitStreamGoroutines(t *testing.T, what string, max int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := streamGoroutines()
		if n <= max {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d goroutines run streams, want at most %d", what, n, max)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func streamGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "runs.(*stream[") || strings.Contains(g, "runs.FollowAs") || strings.Contains(g, "runs.(*Service).Follow.func") {
			count++
		}
	}
	return count
}
