package runs_test

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// fixture is a run service over a real database, serving the demo agent and a test agent whose
// tool counts its executions.
type fixture struct {
	svc      *runs.Service
	db       *gorm.DB
	executed *atomic.Int64
}

func setup(t testing.TB, db *gorm.DB, cfg runs.Config) *fixture {
	t.Helper()
	return setupWith(t, db, cfg, setupOpts{})
}

// setupOpts adds agents to a fixture's registry and wraps its store (to count or fail calls).
type setupOpts struct {
	agents []*agent.Agent
	wrap   func(runs.Store) runs.Store
}

func setupWith(t testing.TB, db *gorm.DB, cfg runs.Config, o setupOpts) *fixture {
	t.Helper()
	var executed atomic.Int64
	counted := &agent.Agent{
		ID: "counter-agent", Name: "Counter", Model: &llm.Demo{},
		Tools: []*agent.Tool{{
			Name: "issue_refund", RequireApproval: true,
			InputSchema: json.RawMessage(`{"type":"object"}`),
			ExecuteFunc: func(ctx context.Context, c *agent.Call) (any, error) {
				executed.Add(1)
				return map[string]any{"ok": true}, nil
			},
		}},
	}
	reg, err := agent.NewRegistry(append(append(agent.DemoAgents(&llm.Demo{}), counted), o.agents...))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var st runs.Store = gormstore.New(db)
	if o.wrap != nil {
		st = o.wrap(st)
	}
	svc, err := runs.New(st, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &fixture{svc: svc, db: db, executed: &executed}
}

func ptr[T any](v T) *T { return &v }

// record reads a run's record straight from the store: what the service keeps of it beside what
// its API shows (version, snapshot, lease), which a test checks the rules' writes by.
func (f *fixture) record(t testing.TB, runID string) *runs.Record {
	t.Helper()
	r, err := gormstore.New(f.db).GetRecord(bg(), runID)
	if err != nil || r == nil {
		t.Fatalf("GetRecord %s = %v, %v", runID, r, err)
	}
	return r
}

// start begins a run and fails the test on error.
func (f *fixture) start(t *testing.T, p runs.StartParams) *runtype.Run {
	t.Helper()
	if p.AgentID == "" {
		p.AgentID = "support-agent"
	}
	r, err := f.svc.StartRun(bg(), p)
	if err != nil {
		t.Fatalf("StartRun(%q): %v", p.Prompt, err)
	}
	return r
}

// until follows a run from seq `after` until an event with a status in want (or the stream
// ends), and returns the events seen.
func (f *fixture) until(t *testing.T, runID string, after int64, want ...runtype.Status) []runtype.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	ch, err := f.svc.Follow(ctx, runID, after)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	var seen []runtype.Event
	for ev := range ch {
		seen = append(seen, ev)
		for _, s := range want {
			if ev.Status == string(s) && ev.Type != runtype.EventRunResumed && ev.Type != runtype.EventRunStarted {
				return seen
			}
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("run %s: no %v within 20s; saw %d events", runID, want, len(seen))
	}
	return seen
}

// suspended starts a run and waits for it to suspend.
func (f *fixture) suspended(t *testing.T, p runs.StartParams) *runtype.Run {
	t.Helper()
	r := f.start(t, p)
	f.until(t, r.ID, 0, runtype.StatusSuspended, runtype.StatusCompleted, runtype.StatusFailed)
	got, err := f.svc.Get(bg(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runtype.StatusSuspended {
		t.Fatalf("run %s is %s, want SUSPENDED", r.ID, got.Status)
	}
	return got
}

// finished waits for a run to finish and returns it.
func (f *fixture) finished(t *testing.T, runID string) *runtype.Run {
	t.Helper()
	f.until(t, runID, 0, runtype.StatusCompleted, runtype.StatusFailed)
	f.svc.Wait()
	got, err := f.svc.Get(bg(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func wantCode(t *testing.T, err error, code runtype.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	if got := runtype.ErrorCode(err); got != code {
		t.Fatalf("error %q has code %s, want %s", err, got, code)
	}
}

// bg is a context acting for the server itself (runtype.System). The service fails closed, so a test
// that is not about who acts acts for the server; one that is about it uses as.
func bg() context.Context { return runtype.WithSystem(context.Background()) }

// loopPasses is a store that counts the passes of a service's background loops over it: the
// expiry loop's reads of the due calls, the notify loop's reads of the changes made elsewhere.
// A test waits for passes instead of sleeping "long enough" for them.
type loopPasses struct {
	runs.Store
	expiry, notify atomic.Int64
}

func (p *loopPasses) DueExpiries(ctx context.Context, now time.Time, limit int) ([]runs.DueCall, error) {
	defer p.expiry.Add(1)
	return p.Store.DueExpiries(ctx, now, limit)
}

func (p *loopPasses) Changes(ctx context.Context, since time.Time, notInstance string) ([]runs.ChangeRecord, error) {
	defer p.notify.Add(1)
	return p.Store.Changes(ctx, since, notInstance)
}

// waitPasses waits until n more passes than now are counted by passes (one of loopPasses's
// counters), failing the test after 20s.
func waitPasses(t *testing.T, what string, passes *atomic.Int64, n int64) {
	t.Helper()
	want := passes.Load() + n
	for deadline := time.Now().Add(20 * time.Second); passes.Load() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d passes within 20s", what, passes.Load()-want+n, n)
		}
	}
}

// waitingTestsInParallel lets 8 parallel tests run at once (or GOMAXPROCS, when more) unless
// -parallel says otherwise. go test's default, GOMAXPROCS, is for tests that compute; these
// mostly wait — on the database, a tool, a lease or an outage of 15 s
// (TestSQLiteWriteLockHeldByAnotherConnection, TestDatabaseFaultsAtScale) — and on 2 CPUs two
// such waits held up every other test.
func waitingTestsInParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(max(8, runtime.GOMAXPROCS(0))))
	}
}
