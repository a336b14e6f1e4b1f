package storetest

import (
	"fmt"
	"sync"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// testConcurrentWrites checks that writes of many runs at the same moment — which a store may
// share transactions between — each get the answer they would get alone: every run's log is
// gapless and complete, and a write with a lost lease is refused and writes nothing while the
// writes beside it commit.
func testConcurrentWrites(t *testing.T, open Opener) {
	each(t, open, "EachRunsLogIsWhole", func(t *testing.T, f *fixture) {
		const n, steps = 24, 4
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for i := 1; i <= n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- writeRun(f, i, steps)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i <= n; i++ {
			evs := f.events(id(i))
			wantGapless(t, evs, 1+steps+1)
			for s, ev := range evs[1 : 1+steps] {
				if want := fmt.Sprintf("run %d step %d", i, s); ev.Text != want {
					t.Errorf("run %d event %d: text %q, want %q", i, ev.Seq, ev.Text, want)
				}
			}
			got := f.get(id(i))
			if got.Status != runtype.StatusCompleted || got.LastSeq != 1+steps+1 {
				t.Errorf("run %d: status %s, last seq %d; want COMPLETED, %d", i, got.Status, got.LastSeq, 1+steps+1)
			}
		}
	})

	each(t, open, "ALostLeaseFailsAloneAmongOthers", func(t *testing.T, f *fixture) {
		const n = 16
		rs := make([]*live, n)
		for i := range rs {
			rs[i] = f.insert(runOpts{})
		}
		stolen := rs[n/2]
		before := f.get(stolen.ID)
		// Again and again, so that the lost write shares a moment with the others.
		for round := range 5 {
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i, r := range rs {
				c := cp(r, at(10+round), runtype.Event{Type: runtype.EventTextDelta, Text: fmt.Sprintf("round %d", round)})
				if r == stolen {
					c.Lease = "someone-else"
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = f.s.Checkpoint(f.ctx, c)
				}()
			}
			wg.Wait()
			for i, r := range rs {
				if r == stolen {
					wantLeaseLost(t, "a checkpoint with another lease among others", errs[i])
					continue
				}
				if errs[i] != nil {
					t.Fatalf("round %d: checkpoint of run %s beside a lost one: %v", round, r.ID, errs[i])
				}
				r.Seq++
			}
		}
		for _, r := range rs {
			if r == stolen {
				wantUnchanged(t, "lost checkpoints", f.get(r.ID), before)
				wantGapless(t, f.events(r.ID), 1)
				continue
			}
			wantGapless(t, f.events(r.ID), 6)
		}
	})
}

// writeRun makes run i as an instance would, without a pause: insert, steps checkpoints and a
// finish.
func writeRun(f *fixture, i, steps int) error {
	lease := fmt.Sprintf("lease-%d", i)
	r := runtype.Run{ID: id(i), AgentID: "agent", Prompt: "concurrent", Status: runtype.StatusRunning, CreatedAt: at(i), UpdatedAt: at(i), LastSeq: 1}
	started := []runtype.Event{{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)}}
	if err := f.s.InsertRun(f.ctx, runs.NewRun{Run: r, Snapshot: `{}`, Lease: lease, TTL: hour, Events: started}); err != nil {
		return fmt.Errorf("InsertRun %d: %w", i, err)
	}
	l := &live{ID: r.ID, Lease: lease, Seq: 1}
	for s := range steps {
		c := cp(l, at(100+s), runtype.Event{Type: runtype.EventTextDelta, Text: fmt.Sprintf("run %d step %d", i, s)})
		if err := f.s.Checkpoint(f.ctx, c); err != nil {
			return fmt.Errorf("Checkpoint %d of run %d: %w", s, i, err)
		}
		l.Seq++
	}
	if err := f.s.Finish(f.ctx, finishing(l, at(200))); err != nil {
		return fmt.Errorf("Finish of run %d: %w", i, err)
	}
	return nil
}
