package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// loopCalls is a store that tells when each background loop first reads it, and fails the test
// when one reads it after the service was closed.
type loopCalls struct {
	runs.Store
	t      *testing.T
	closed atomic.Bool
	mu     sync.Mutex
	seen   map[string]chan struct{}
}

func newLoopCalls(t *testing.T, st runs.Store) *loopCalls {
	c := &loopCalls{Store: st, t: t, seen: map[string]chan struct{}{}}
	for _, loop := range []string{"notify", "recovery", "expiry", "retention"} {
		c.seen[loop] = make(chan struct{})
	}
	return c
}

func (c *loopCalls) called(loop string) {
	if c.closed.Load() {
		c.t.Errorf("the %s loop read the store after Close returned", loop)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.seen[loop]:
	default:
		close(c.seen[loop])
	}
}

// wait waits until every loop has read the store.
func (c *loopCalls) wait(t *testing.T) {
	t.Helper()
	for loop, ch := range c.seen {
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatalf("the %s loop never read the store", loop)
		}
	}
}

func (c *loopCalls) Changes(ctx context.Context, since time.Time, notInstance string) ([]runs.ChangeRecord, error) {
	c.called("notify")
	return c.Store.Changes(ctx, since, notInstance)
}

func (c *loopCalls) ExpiredRuns(ctx context.Context, limit int) ([]*runs.Record, error) {
	c.called("recovery")
	return c.Store.ExpiredRuns(ctx, limit)
}

func (c *loopCalls) DueExpiries(ctx context.Context, now time.Time, limit int) ([]runs.DueCall, error) {
	c.called("expiry")
	return c.Store.DueExpiries(ctx, now, limit)
}

func (c *loopCalls) PurgeFinished(ctx context.Context, cutoff, keysBefore time.Time, limit int) (int, error) {
	c.called("retention")
	return c.Store.PurgeFinished(ctx, cutoff, keysBefore, limit)
}

// busy makes every loop of a service run every millisecond.
var busy = runs.Config{PollInterval: time.Millisecond, RecoveryInterval: time.Millisecond, ExpiryInterval: time.Millisecond, RetentionInterval: time.Millisecond}

func newService(t *testing.T, st runs.Store) *runs.Service {
	t.Helper()
	reg, err := agent.NewRegistry(agent.DemoAgents(&llm.Demo{}))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := runs.New(st, reg, busy)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestServiceStartsNothingUntilStart follows a service through its life (see runs.Service): New
// starts no goroutine, although a run started on it executes; Start starts the loops, which
// read the store; a second Start is ErrAlreadyStarted; Close stops the loops and returns once
// they have; a Start after it is ErrStopped.
//
// Not parallel: it counts the goroutines of the process, which other tests would change.
func TestServiceStartsNothingUntilStart(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		st := newLoopCalls(t, gormstore.New(db))
		before := goleak.IgnoreCurrent()
		svc := newService(t, st)
		t.Cleanup(svc.Close)
		if err := goleak.Find(before); err != nil {
			t.Fatalf("New started goroutines: %v", err)
		}

		r, err := svc.StartRun(bg(), runs.StartParams{AgentID: "support-agent", Prompt: "look up order 7"})
		if err != nil {
			t.Fatal(err)
		}
		svc.Wait()
		if got, err := svc.Get(bg(), r.ID); err != nil || got.Status != runtype.StatusCompleted {
			t.Fatalf("a run started before Start: %+v, %v; want it COMPLETED", got, err)
		}
		for loop, ch := range st.seen {
			select {
			case <-ch:
				t.Errorf("the %s loop ran before Start", loop)
			default:
			}
		}

		if err := svc.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		st.wait(t)
		if err := svc.Start(context.Background()); !errors.Is(err, runs.ErrAlreadyStarted) {
			t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
		}
		svc.Close()
		st.closed.Store(true)
		// The loops are gone; MySQL connections the pool opened meanwhile keep a goroutine each.
		if err := goleak.Find(before, goleak.IgnoreTopFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1")); err != nil {
			t.Errorf("goroutines left after Close: %v", err)
		}
		svc.Close() // again: nothing left to stop
		if err := svc.Start(context.Background()); !errors.Is(err, runs.ErrStopped) {
			t.Errorf("Start after Close = %v, want ErrStopped", err)
		}
	})
}

// TestServiceStopsWithoutStart: Shutdown and Close of a service never started return at once,
// and it cannot be started afterwards.
func TestServiceStopsWithoutStart(t *testing.T) {
	t.Parallel()
	st := newLoopCalls(t, gormstore.New(dbtest.SQLite(t)))
	svc := newService(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	svc.Shutdown(ctx)
	svc.Close()
	if ctx.Err() != nil {
		t.Fatal("Shutdown of a service never started waited for its deadline")
	}
	if err := svc.Start(context.Background()); !errors.Is(err, runs.ErrStopped) {
		t.Errorf("Start after Shutdown = %v, want ErrStopped", err)
	}
}

// TestServiceStopsWhenStartsContextEnds: when the ctx given to Start ends, the service stops at
// once, as Close would: an execution in flight is cancelled (its tool would wait for ever), and
// the service is stopped for good.
func TestServiceStopsWhenStartsContextEnds(t *testing.T) {
	t.Parallel()
	running := make(chan struct{})
	waiter := &agent.Agent{ID: "waiter", Model: &llm.Demo{}, Tools: []*agent.Tool{{
		Name: "slow_task", InputSchema: json.RawMessage(`{"type":"object"}`),
		ExecuteFunc: func(ctx context.Context, _ *agent.Call) (any, error) {
			close(running)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}}}
	reg, err := agent.NewRegistry([]*agent.Agent{waiter})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := runs.New(gormstore.New(dbtest.SQLite(t)), reg, runs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.StartRun(bg(), runs.StartParams{AgentID: "waiter", Prompt: "slow 5"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-time.After(20 * time.Second):
		t.Fatal("the tool never started")
	}
	cancel()
	idle := make(chan struct{})
	go func() { svc.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-time.After(20 * time.Second):
		t.Fatal("the execution still runs 20s after Start's ctx ended")
	}
	if err := svc.Start(context.Background()); !errors.Is(err, runs.ErrStopped) {
		t.Errorf("Start after its ctx ended = %v, want ErrStopped", err)
	}
}
