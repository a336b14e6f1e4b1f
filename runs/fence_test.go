package runs_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// timeline records what happened, in order, across instances: tools starting and being
// cancelled, and log messages, so a test can wait for one and check what came before it.
type timeline struct {
	mu      sync.Mutex
	entries []string
	changed chan struct{}
}

func newTimeline() *timeline { return &timeline{changed: make(chan struct{})} }

func (tl *timeline) add(s string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.entries = append(tl.entries, s)
	close(tl.changed)
	tl.changed = make(chan struct{})
}

func (tl *timeline) list() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.entries)
}

// wait blocks until an entry containing s is recorded, and returns its index.
func (tl *timeline) wait(t *testing.T, s string, within time.Duration) int {
	t.Helper()
	deadline := time.After(within)
	for {
		tl.mu.Lock()
		for i, e := range tl.entries {
			if strings.Contains(e, s) {
				tl.mu.Unlock()
				return i
			}
		}
		changed := tl.changed
		tl.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %q within %s; saw %q", s, within, tl.list())
		}
	}
}

func (tl *timeline) index(s string) int {
	return slices.IndexFunc(tl.list(), func(e string) bool { return strings.Contains(e, s) })
}

// timelineLog is a slog handler that records each message as "<name>: <message>".
type timelineLog struct {
	name  string
	tl    *timeline
	attrs string
}

func (h timelineLog) Enabled(context.Context, slog.Level) bool { return true }
func (h timelineLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(h.name + ": " + r.Message + h.attrs)
	r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
	h.tl.add(b.String())
	return nil
}
func (h timelineLog) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		h.attrs += " " + a.String()
	}
	return h
}
func (h timelineLog) WithGroup(string) slog.Handler { return h }

// counted is what a blocking tool saw.
type counted struct {
	executed atomic.Int64 // executions begun
	live     atomic.Int64 // executions in progress, on any instance
	overlap  atomic.Bool  // two executions were in progress at once
}

// blockingAgent is an agent whose issue_refund (no approval needed) records on tl when it starts
// and when its context is cancelled, and returns once release is closed.
func blockingAgent(name string, tl *timeline, c *counted, release <-chan struct{}) *agent.Agent {
	return &agent.Agent{
		ID: "fence-agent", Name: "Fence", Model: &llm.Demo{},
		Tools: []*agent.Tool{{
			Name: "issue_refund", InputSchema: json.RawMessage(`{"type":"object"}`),
			ExecuteFunc: func(ctx context.Context, _ *agent.Call) (any, error) {
				c.executed.Add(1)
				if c.live.Add(1) > 1 {
					c.overlap.Store(true)
				}
				defer c.live.Add(-1)
				tl.add(name + ": tool started")
				select {
				case <-ctx.Done():
					tl.add(name + ": tool cancelled")
					return nil, ctx.Err()
				case <-release:
					return map[string]any{"refunded": true}, nil
				}
			},
		}},
	}
}

// cutOffPair is one MySQL database reached directly and through a proxy the test controls.
func cutOffPair(t *testing.T) (direct, proxied *gorm.DB, proxy *dbtest.Proxy) {
	t.Helper()
	dsn := dbtest.MySQLDSN(t)
	quiet := gormstore.DriverLog(slog.New(slog.DiscardHandler)) // broken connections are the point
	open := func(dsn string) *gorm.DB {
		db, err := gormstore.OpenMySQL(context.Background(), dsn, quiet)
		if err != nil {
			t.Fatalf("open mysql: %v", err)
		}
		t.Cleanup(func() {
			if sqlDB, err := db.DB(); err == nil {
				sqlDB.Close()
			}
		})
		return db
	}
	direct = open(dsn)
	if err := gormstore.Migrate(context.Background(), direct); err != nil {
		t.Fatal(err)
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy = dbtest.NewProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	return direct, open(cfg.FormatDSN()), proxy
}

// An instance cut off from the database (the proxy freezes: nothing answers, nothing fails)
// cancels its tool's execution before another instance may claim the run, and the other
// instance does not run the tool while the first one's execution is live: it asks a person.
//
// Not parallel: what it checks turns on leases of a few seconds, renewed (or not) in time;
// the load of other tests must not decide it.
func TestCutOffInstanceStopsItsToolBeforeAnotherClaimsTheRun(t *testing.T) {
	direct, proxied, proxy := cutOffPair(t)
	tl := newTimeline()
	var c counted
	release := make(chan struct{})
	ttl := 2 * time.Second
	a := setupWith(t, proxied, runs.Config{LeaseTTL: ttl, InstanceID: "a", Logger: slog.New(timelineLog{name: "a", tl: tl})},
		setupOpts{agents: []*agent.Agent{blockingAgent("a", tl, &c, release)}})
	b := setupWith(t, direct, runs.Config{LeaseTTL: ttl, InstanceID: "b", RecoveryInterval: 50 * time.Millisecond, Logger: slog.New(timelineLog{name: "b", tl: tl})},
		setupOpts{agents: []*agent.Agent{blockingAgent("b", tl, &c, release)}})
	t.Cleanup(proxy.Restore) // before the services close: a's writes may finish

	r := a.start(t, runs.StartParams{AgentID: "fence-agent", Prompt: "refund order 1"})
	tl.wait(t, "a: tool started", 10*time.Second)
	proxy.Freeze()
	claimed := tl.wait(t, "b: recovering run", 15*time.Second)
	cancelled := tl.index("a: tool cancelled")
	if cancelled < 0 || cancelled > claimed {
		t.Fatalf("a's tool was not cancelled before b claimed the run: %q", tl.list())
	}
	evs := b.until(t, r.ID, 0, runtype.StatusSuspended)
	i := slices.IndexFunc(evs, func(ev runtype.Event) bool { return ev.Type == runtype.EventToolCallInterrupted })
	if i < 0 {
		t.Fatalf("no TOOL_CALL_INTERRUPTED: %+v", evs)
	}
	// The reason says what is known: the call was sent, by instance a, whose answer never came.
	if why := evs[i].Reason; !strings.Contains(why, "issue_refund may have been sent to the tool: instance a, which was executing it, stored that it was starting it") ||
		!strings.Contains(why, "could not reach the database") {
		t.Fatalf("reason %q does not say what is known", why)
	}
	got, err := b.svc.Get(bg(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || !got.ToolCalls[0].Interrupted {
		t.Fatalf("run after b recovered it: %s with %+v; want SUSPENDED on the interrupted call", got.Status, got.ToolCalls)
	}
	if n := c.executed.Load(); n != 1 || c.overlap.Load() {
		t.Fatalf("the tool ran %d times (overlapping: %v); want once, by a", n, c.overlap.Load())
	}
}

// A database outage shorter than the lease, while a tool finishes, does not lose its result:
// the result is stored once the database answers again, the run goes on, and no call is
// reported interrupted (nor run again).
//
// Not parallel: what it checks turns on leases of a few seconds, renewed (or not) in time;
// the load of other tests must not decide it.
func TestToolResultIsStoredAfterAnOutageShorterThanTheLease(t *testing.T) {
	direct, proxied, proxy := cutOffPair(t)
	tl := newTimeline()
	var c counted
	release := make(chan struct{})
	ttl := 4 * time.Second
	a := setupWith(t, proxied, runs.Config{LeaseTTL: ttl, InstanceID: "a", Logger: slog.New(timelineLog{name: "a", tl: tl})},
		setupOpts{agents: []*agent.Agent{blockingAgent("a", tl, &c, release)}})
	b := setupWith(t, direct, runs.Config{LeaseTTL: ttl, InstanceID: "b", RecoveryInterval: 50 * time.Millisecond, Logger: slog.New(timelineLog{name: "b", tl: tl})},
		setupOpts{agents: []*agent.Agent{blockingAgent("b", tl, &c, release)}})
	t.Cleanup(proxy.Restore)

	r := a.start(t, runs.StartParams{AgentID: "fence-agent", Prompt: "refund order 1"})
	tl.wait(t, "a: tool started", 10*time.Second)
	proxy.Cut(true) // every connection killed, new ones refused
	outage := time.Now()
	close(release) // the tool finishes during the outage
	tl.wait(t, "a: run: storing a tool result failed", 10*time.Second)
	time.Sleep(2*time.Second - time.Since(outage))
	proxy.Restore()

	evs := b.until(t, r.ID, 0, runtype.StatusCompleted, runtype.StatusSuspended, runtype.StatusFailed)
	for _, ev := range evs {
		if ev.Type == runtype.EventToolCallInterrupted {
			t.Fatalf("the call was reported interrupted: %s", ev.Reason)
		}
	}
	if last := evs[len(evs)-1]; last.Status != string(runtype.StatusCompleted) {
		t.Fatalf("run ended %s (%s); want COMPLETED. Log: %q", last.Status, last.Type, tl.list())
	}
	if n := c.executed.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; want once", n)
	}
	if i := tl.index("recovering run"); i >= 0 {
		t.Fatalf("the run was taken over: %q", tl.list()[i])
	}
}

// A graceful stop whose deadline passes while a tool still runs cuts the call, and says so in
// the log, naming the run, the tool and the call.
func TestShutdownTimeoutLogsEachCutCall(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		tl := newTimeline()
		var c counted
		f := setupWith(t, db, runs.Config{InstanceID: "a", Logger: slog.New(timelineLog{name: "a", tl: tl})},
			setupOpts{agents: []*agent.Agent{blockingAgent("a", tl, &c, make(chan struct{}))}})
		r := f.start(t, runs.StartParams{AgentID: "fence-agent", Prompt: "refund order 1"})
		tl.wait(t, "a: tool started", 10*time.Second)
		ctx, cancel := context.WithTimeout(bg(), 100*time.Millisecond)
		defer cancel()
		f.svc.Shutdown(ctx)
		i := tl.index("a: shutdown: timeout cuts a tool call")
		if i < 0 {
			t.Fatalf("no log of the cut call: %q", tl.list())
		}
		line := tl.list()[i]
		for _, want := range []string{"run=" + r.ID, "tool=issue_refund", "tool_call=tc_"} {
			if !strings.Contains(line, want) {
				t.Fatalf("log line %q does not name %s", line, want)
			}
		}
		if tl.index("a: tool cancelled") < 0 {
			t.Fatalf("the tool was not cancelled: %q", tl.list())
		}
	})
}
