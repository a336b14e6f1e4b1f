package gormstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// TestGroupCommitSharesOneTransaction holds the group committer busy while three checkpoints
// of three runs queue, then lets it commit them: their events go in one INSERT, and a lost
// lease among them sends each write to a transaction of its own, with its own answer.
func TestGroupCommitSharesOneTransaction(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s := gormstore.New(db)
		ctx := t.Context()
		var mu sync.Mutex
		inserts := 0 // INSERT statements into run_events
		err := db.Callback().Create().After("gorm:create").Register("test:count", func(tx *gorm.DB) {
			if tx.Statement.Table == "run_events" {
				mu.Lock()
				inserts++
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		for i := range 3 {
			if err := s.InsertRun(ctx, newRun(fmt.Sprintf("run-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		// round writes one checkpoint of each run at once, with lease of run i as leases(i); when
		// cancel is a run's number, its caller gives up while its write waits in the queue. It
		// returns their errors and the INSERTs into run_events they made.
		round := func(after int64, leases func(i int) string, cancel int) ([]error, int) {
			hold := s.HoldGroup(t)
			mu.Lock()
			inserts = 0
			mu.Unlock()
			errs := make([]error, 3)
			stop := make([]context.CancelFunc, 3)
			var wg sync.WaitGroup
			for i := range 3 {
				var wctx context.Context
				wctx, stop[i] = context.WithCancel(ctx)
				defer stop[i]()
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := runs.Checkpoint{RunID: fmt.Sprintf("run-%d", i), Lease: leases(i), TTL: time.Hour, After: after, At: now, Events: []runtype.Event{{Type: runtype.EventStepFinished}}}
					errs[i] = s.Checkpoint(wctx, c)
				}()
			}
			hold.WaitQueued(3)
			if cancel >= 0 {
				stop[cancel]()
				hold.WaitQueued(2) // it left the queue
			}
			hold.Commit()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			return errs, inserts
		}
		own := func(i int) string { return fmt.Sprintf("lease-run-%d", i) }

		errs, n := round(1, own, -1)
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("grouped checkpoints: %v", err)
		}
		if n != 1 {
			t.Errorf("three grouped checkpoints made %d INSERTs into run_events, want 1", n)
		}

		errs, n = round(2, func(i int) string {
			if i == 1 {
				return "someone-else"
			}
			return own(i)
		}, -1)
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], runs.ErrLeaseLost) {
			t.Fatalf("grouped checkpoints with one lost lease: %v; want nil, lease lost, nil", errs)
		}
		if n != 2 {
			// The group's INSERT never ran (the lost lease came first), then one each alone.
			t.Errorf("a group with a lost lease made %d INSERTs into run_events, want 2 (one per write alone)", n)
		}
		// A caller that gives up while its write waits leaves with its context's error, and
		// only the others are written, together (run-1's write would be refused anyway).
		errs, n = round(3, own, 1)
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], context.Canceled) {
			t.Fatalf("grouped checkpoints, the second given up while queued: %v; want nil, context canceled, nil", errs)
		}
		if n != 1 {
			t.Errorf("a group of two after one gave up made %d INSERTs into run_events, want 1", n)
		}
		for i, want := range []int64{4, 2, 4} {
			var last int64
			if err := db.Model(&gormstore.Run{}).Where("id = ?", fmt.Sprintf("run-%d", i)).Pluck("last_seq", &last).Error; err != nil {
				t.Fatal(err)
			}
			var count int64
			if err := db.Model(&gormstore.Event{}).Where("run_id = ?", fmt.Sprintf("run-%d", i)).Count(&count).Error; err != nil {
				t.Fatal(err)
			}
			if last != want || count != want {
				t.Errorf("run-%d: last seq %d and %d events, want %d of each", i, last, count, want)
			}
		}
	})
}

// TestFailedGroupCommitIsNotRetried: when the COMMIT of a group fails, the database may have
// committed it, so no write is made again: every caller gets the error. The group's
// connection is killed just before its COMMIT; MariaDB then rolls the transaction back, so the
// three runs are not stored — a write retried alone would have stored its run. MySQL only:
// SQLite has no way to lose the connection of a transaction from outside.
func TestFailedGroupCommitIsNotRetried(t *testing.T) {
	t.Parallel()
	db := dbtest.MySQL(t)
	s := gormstore.New(db)
	ctx := t.Context()
	s.BeforeGroupCommit(func(tx *gorm.DB) {
		var id int64
		if err := tx.Raw("SELECT CONNECTION_ID()").Scan(&id).Error; err != nil {
			t.Errorf("read the group's connection id: %v", err)
			return
		}
		if err := db.Exec("KILL CONNECTION ?", id).Error; err != nil {
			t.Errorf("kill the group's connection: %v", err)
			return
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			var n int64
			if err := db.Raw("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n).Error; err != nil || n == 0 {
				return
			}
		}
		t.Errorf("connection %d still listed 10s after KILL", id)
	})
	hold := s.HoldGroup(t)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { errs[i] = s.InsertRun(ctx, newRun(fmt.Sprintf("killed-%d", i))) })
	}
	hold.WaitQueued(3)
	hold.Commit()
	wg.Wait()
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "commit the writes of 3 runs") {
			t.Errorf("write %d of a group whose COMMIT failed: %v, want the COMMIT's error", i, err)
		}
	}
	var stored, logged int64
	if err := db.Model(&gormstore.Run{}).Where("id LIKE 'killed-%'").Count(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Model(&gormstore.Event{}).Where("run_id LIKE 'killed-%'").Count(&logged).Error; err != nil {
		t.Fatal(err)
	}
	if stored != 0 || logged != 0 {
		t.Errorf("after a failed COMMIT, %d runs and %d events are stored, want none: a write was made again", stored, logged)
	}
	// The pool drops the dead connection: the next writes commit.
	s.BeforeGroupCommit(nil)
	if err := s.InsertRun(ctx, newRun("after-kill")); err != nil {
		t.Fatalf("a write after the failed COMMIT: %v", err)
	}
}

// BenchmarkRunWrites measures the writes of a run's life — InsertRun, a Checkpoint, Finish —
// made by 16 writers at once (runs of their own, as lease holders make them), with group commit
// and without it. One op is one run's three writes; runs/s is what one instance can sustain.
//
//	go test -run XXX -bench RunWrites ./gormstore/
func BenchmarkRunWrites(b *testing.B) {
	for _, dialect := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", dbtest.SQLite}, {"mysql", dbtest.MySQL}} {
		for _, grouped := range []bool{true, false} {
			name := dialect.name + "/grouped"
			if !grouped {
				name = dialect.name + "/alone"
			}
			b.Run(name, func(b *testing.B) {
				s := gormstore.New(dialect.open(b))
				if !grouped {
					s.NoGrouping()
				}
				ctx := context.Background()
				var next atomic.Int64
				b.SetParallelism(8)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						n := newRun(fmt.Sprintf("run-%d", next.Add(1)))
						id, lease, now := n.Run.ID, n.Lease, n.Run.CreatedAt
						if err := s.InsertRun(ctx, n); err != nil {
							b.Error(err)
							return
						}
						step := runs.Checkpoint{RunID: id, Lease: lease, TTL: time.Hour, After: 1, At: now, Events: []runtype.Event{{Type: runtype.EventStepFinished}}}
						if err := s.Checkpoint(ctx, step); err != nil {
							b.Error(err)
							return
						}
						out := "done"
						end := runs.Finish{Checkpoint: runs.Checkpoint{RunID: id, Lease: lease, After: 2, At: now, Events: []runtype.Event{{Type: runtype.EventRunFinished}}}, Status: runtype.StatusCompleted, Output: &out}
						if err := s.Finish(ctx, end); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			})
		}
	}
}

// groupSpy is a GroupTracer that records what it is told.
type groupSpy struct {
	mu      sync.Mutex
	members [][]gormstore.GroupMember
	ends    []gormstore.GroupEnd
}

type groupKey struct{}

func (g *groupSpy) StartGroup(base context.Context, members []gormstore.GroupMember) (context.Context, func(gormstore.GroupEnd)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members = append(g.members, members)
	return context.WithValue(base, groupKey{}, len(g.members)), func(end gormstore.GroupEnd) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.ends = append(g.ends, end)
	}
}

// TestGroupTracer: a shared transaction is announced to the store's GroupTracer with the
// callers' writes, its statements run in the context the tracer returns, and it is ended once
// with how it ended — committed, or rolled back with each write made again alone; a write
// committed alone is not announced, and its statements run in its caller's context.
func TestGroupTracer(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		spy := &groupSpy{}
		s := gormstore.New(db).TraceGroups(spy)
		var mu sync.Mutex
		var inserts []context.Context // the contexts of the INSERTs into run_events
		err := db.Callback().Create().After("gorm:create").Register("test:contexts", func(tx *gorm.DB) {
			if tx.Statement.Table == "run_events" {
				mu.Lock()
				inserts = append(inserts, tx.Statement.Context)
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		type caller struct{}
		// together makes the writes at once, in one group, each in a context of its own
		// (caller{} = its index), and returns their errors.
		together := func(writes ...func(ctx context.Context) error) []error {
			hold := s.HoldGroup(t)
			errs := make([]error, len(writes))
			var wg sync.WaitGroup
			for i, write := range writes {
				wg.Go(func() { errs[i] = write(context.WithValue(t.Context(), caller{}, i)) })
			}
			hold.WaitQueued(len(writes))
			hold.Commit()
			wg.Wait()
			return errs
		}
		insert := func(id string) func(context.Context) error {
			return func(ctx context.Context) error { return s.InsertRun(ctx, newRun(id)) }
		}
		start := time.Now()
		if err := errors.Join(together(insert("traced-0"), insert("traced-1"))...); err != nil {
			t.Fatal(err)
		}
		if len(spy.members) != 1 || len(spy.ends) != 1 || spy.ends[0] != (gormstore.GroupEnd{}) {
			t.Fatalf("the tracer was told of %d groups and ends %v, want one group that committed", len(spy.members), spy.ends)
		}
		got := map[any]bool{}
		for _, m := range spy.members[0] {
			got[m.Ctx.Value(caller{})] = true
			if m.Write != "insert run" || m.Queued.Before(start) || m.Queued.After(time.Now()) {
				t.Errorf("member %+v: want an insert run queued during the test", m)
			}
		}
		if len(spy.members[0]) != 2 || !got[0] || !got[1] {
			t.Errorf("the group's members are the contexts of callers %v, want 0 and 1", got)
		}
		if len(inserts) != 1 || inserts[0].Value(groupKey{}) != 1 {
			t.Errorf("%d INSERTs into run_events, the first not in the group's context", len(inserts))
		}

		// A lost lease rolls the group back and each write is made alone: the group's end says
		// so, and the other write still succeeds.
		stolen := runs.Checkpoint{RunID: "traced-1", Lease: "someone-else", TTL: time.Hour, After: 1, At: time.Now().UTC(), Events: []runtype.Event{{Type: runtype.EventStepFinished}}}
		errs := together(insert("traced-2"), func(ctx context.Context) error { return s.Checkpoint(ctx, stolen) })
		if errs[0] != nil || !errors.Is(errs[1], runs.ErrLeaseLost) {
			t.Fatalf("a group with a lost lease: %v; want nil, lease lost", errs)
		}
		if len(spy.ends) != 2 || !spy.ends[1].Alone || !errors.Is(spy.ends[1].Err, runs.ErrLeaseLost) {
			t.Errorf("the second group ended %+v, want rolled back for the lost lease and written alone", spy.ends[1:])
		}

		inserts = nil
		ctx := context.WithValue(t.Context(), caller{}, "alone")
		if err := s.InsertRun(ctx, newRun("traced-alone")); err != nil {
			t.Fatal(err)
		}
		if len(spy.members) != 2 {
			t.Errorf("a write committed alone was announced as a group")
		}
		if len(inserts) != 1 || inserts[0].Value(caller{}) != "alone" || inserts[0].Value(groupKey{}) != nil {
			t.Errorf("the lone write's INSERT did not run in its caller's context")
		}
	})
}

// newRun is a new RUNNING run id, leased by "lease-" + id, with its first event.
func newRun(id string) runs.NewRun {
	now, lease := time.Now().UTC(), "lease-"+id
	r := runtype.Run{ID: id, AgentID: "agent", Prompt: "p", Status: runtype.StatusRunning, CreatedAt: now, UpdatedAt: now, LastSeq: 1}
	return runs.NewRun{Run: r, Snapshot: `{}`, Lease: lease, TTL: time.Hour, Events: []runtype.Event{{Type: runtype.EventRunStarted}}}
}
