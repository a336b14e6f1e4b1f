package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// step is one answer of a scripted model.
type step func(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error)

// scripted is a model whose answers the test writes: call n gets steps[n] (the last one again
// once they run out). It stands in for a provider this machine cannot reach.
type scripted struct {
	mu    sync.Mutex
	steps []step
	reqs  []llm.Request
}

var _ llm.Model = (*scripted)(nil)

func (m *scripted) Name() string { return "test/scripted" }

func (m *scripted) Stream(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
	m.mu.Lock()
	s := m.steps[min(len(m.reqs), len(m.steps)-1)]
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return s(ctx, req, onText)
}

func (m *scripted) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

func answer(text string) step {
	return func(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
		if err := onText(text); err != nil {
			return llm.Response{}, err
		}
		return llm.Response{Text: text}, nil
	}
}

// blocked streams first, then waits until release is closed (or the run is cancelled).
func blocked(first string, started chan<- struct{}, release <-chan struct{}) step {
	return func(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
		if first != "" {
			if err := onText(first); err != nil {
				return llm.Response{}, err
			}
		}
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
		return llm.Response{Text: first + "done"}, nil
	}
}

// scriptedAgent is an agent on model m with a lookup tool that needs no approval.
func scriptedAgent(m llm.Model, executed *atomic.Int64) *agent.Agent {
	return &agent.Agent{
		ID: "scripted-agent", Name: "Scripted", Model: m,
		Tools: []*agent.Tool{{
			Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`),
			ExecuteFunc: func(ctx context.Context, c *agent.Call) (any, error) {
				executed.Add(1)
				return "found", nil
			},
		}},
	}
}

// logBuffer is a log sink tests read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// allEvents reads a run's events through Follow: all of them when the run finishes; for a run
// that waits for a person (SUSPENDED when the stream begins), those up to its last seq — the
// stream would stay open for events that do not come.
func allEvents(t *testing.T, f *fixture, runID string) []runtype.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
	defer cancel()
	ch, err := f.svc.Follow(ctx, runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	upTo := int64(math.MaxInt64)
	if r, err := f.svc.Get(ctx, runID); err != nil {
		t.Fatal(err)
	} else if r.Status == runtype.StatusSuspended {
		upTo = r.LastSeq
	}
	var out []runtype.Event
	for ev := range ch {
		out = append(out, ev)
		if ev.Seq >= upTo {
			return out
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("run %s: the stream did not end within 20s; saw %d events", runID, len(out))
	}
	return out
}

func ofType(evs []runtype.Event, typ runtype.EventType) []runtype.Event {
	var out []runtype.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func checkSeqs(t *testing.T, evs []runtype.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: %v", i, ev.Seq, evs)
		}
	}
}

func TestMalformedToolArgumentsAreAToolError(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		var executed atomic.Int64
		m := &scripted{steps: []step{
			func(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
				return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "lookup", Args: json.RawMessage(`{"orderId": 4`)}}}, nil
			},
			answer("Sorry, let me try again later."),
		}}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{scriptedAgent(m, &executed)}})
		r := f.start(t, runs.StartParams{AgentID: "scripted-agent", Prompt: "look it up"})
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted {
			t.Fatalf("run is %s (%v), want COMPLETED", done.Status, done.Error)
		}
		if executed.Load() != 0 {
			t.Fatal("the tool ran with arguments that are not JSON")
		}
		evs := allEvents(t, f, r.ID)
		results := ofType(evs, runtype.EventToolResult)
		if len(results) != 1 || !strings.Contains(results[0].Error, "not valid JSON") {
			t.Fatalf("TOOL_RESULT events: %+v", results)
		}
		calls := ofType(evs, runtype.EventToolCallRequested)
		if len(calls) != 1 || string(calls[0].ToolCall.Args) != `"{\"orderId\": 4"` {
			t.Fatalf("TOOL_CALL events: %+v", calls)
		}
		reqs := m.requests()
		last := reqs[len(reqs)-1].Messages
		if tm := last[len(last)-1]; tm.Role != llm.RoleTool || !strings.HasPrefix(tm.Content, "Error: invalid arguments") {
			t.Fatalf("the model was told %+v", tm)
		}
	})
}

func TestPanicInAnExecutionFailsTheRunNotTheServer(t *testing.T) {
	t.Parallel()
	var executed atomic.Int64
	m := &scripted{steps: []step{func(context.Context, llm.Request, func(string) error) (llm.Response, error) {
		panic("model exploded")
	}}}
	var logs logBuffer
	f := setupWith(t, dbtest.SQLite(t), runs.Config{Logger: logs.logger()}, setupOpts{agents: []*agent.Agent{scriptedAgent(m, &executed)}})
	r := f.start(t, runs.StartParams{AgentID: "scripted-agent", Prompt: "hi"})
	done := f.finished(t, r.ID)
	if done.Status != runtype.StatusFailed || done.Error == nil || *done.Error != "the run stopped on an internal error" || done.ErrorCode == nil || *done.ErrorCode != runs.FailureInternal {
		t.Fatalf("run after a panic: %s %v %v", done.Status, done.Error, done.ErrorCode)
	}
	if !strings.Contains(logs.String(), "model exploded") {
		t.Fatalf("the panic is not in the log: %s", logs.String())
	}
	other := f.finished(t, f.start(t, runs.StartParams{Prompt: "hello"}).ID)
	if other.Status != runtype.StatusCompleted {
		t.Fatalf("the next run is %s", other.Status)
	}
}

func TestModelErrorTextGoesToTheLogNotToClients(t *testing.T) {
	t.Parallel()
	var executed atomic.Int64
	m := &scripted{steps: []step{func(context.Context, llm.Request, func(string) error) (llm.Response, error) {
		return llm.Response{}, errors.New("401 from upstream: key sk-secret-123 rejected")
	}}}
	var logs logBuffer
	f := setupWith(t, dbtest.SQLite(t), runs.Config{Logger: logs.logger()}, setupOpts{agents: []*agent.Agent{scriptedAgent(m, &executed)}})
	r := f.start(t, runs.StartParams{AgentID: "scripted-agent", Prompt: "hi"})
	done := f.finished(t, r.ID)
	want := "the model call failed (test/scripted)"
	if done.Status != runtype.StatusFailed || done.Error == nil || *done.Error != want || *done.ErrorCode != runs.FailureModel {
		t.Fatalf("failed run: %s %v %v", done.Status, *done.Error, done.ErrorCode)
	}
	failed := ofType(allEvents(t, f, r.ID), runtype.EventRunFailed)
	if len(failed) != 1 || failed[0].Error != want || failed[0].ErrorCode != runs.FailureModel {
		t.Fatalf("RUN_FAILED: %+v", failed)
	}
	if !strings.Contains(logs.String(), "sk-secret-123") {
		t.Fatal("the provider's words are not in the log")
	}
}

// expiredRun stores a RUNNING run whose lease expired at leaseUntil, with its events.
func expiredRun(t *testing.T, db *gorm.DB, id, agentID string, snapshot *string, leaseUntil time.Time, evs ...string) {
	t.Helper()
	owner := "dead-instance"
	at := runtype.StoredTime(leaseUntil.Add(-time.Minute))
	row := gormstore.Run{
		ID: id, AgentID: agentID, Prompt: "hello", Status: string(runtype.StatusRunning), Snapshot: snapshot,
		CreatedAt: at, UpdatedAt: at, LastSeq: int64(len(evs)), LeaseOwner: &owner, LeaseUntil: ptr(runtype.StoredTime(leaseUntil)),
	}
	if err := db.Create(&row).Error; err != nil {
		t.Fatal(err)
	}
	for i, typ := range evs {
		data := "{}"
		if typ == string(runtype.EventTextDelta) {
			data = `{"text":"partial "}`
		}
		if err := db.Create(&gormstore.Event{RunID: id, Seq: int64(i + 1), Type: typ, Data: data, CreatedAt: at}).Error; err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecoveryIsNotStarvedByRunsItCannotRecover(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{RecoveryInterval: time.Hour, RecoveryBackoff: time.Millisecond, MaxRecoveryAttempts: 3})
		ctx := bg()
		old := time.Now().Add(-time.Hour)
		snap := `{"messages":[{"role":"user","content":"hello"}],"steps":0}`
		for i := range 60 {
			expiredRun(t, db, fmt.Sprintf("gone-%02d", i), "gone-agent", &snap, old.Add(time.Duration(i)*time.Millisecond), "RUN_STARTED")
		}
		bad := "{not json"
		expiredRun(t, db, "bad-snapshot", "support-agent", &bad, old, "RUN_STARTED")
		// The good run's lease expired last and its id sorts last: it must not wait behind the rest.
		expiredRun(t, db, "zz-good", "support-agent", &snap, time.Now().Add(-time.Second), "RUN_STARTED")

		n, err := f.svc.RecoverExpired(ctx)
		if err != nil || n != 1 {
			t.Fatalf("recovered %d runs (err %v), want the one good run", n, err)
		}
		if got := f.finished(t, "zz-good"); got.Status != runtype.StatusCompleted {
			t.Fatalf("good run is %s", got.Status)
		}
		b, _ := f.svc.Get(ctx, "bad-snapshot")
		if b.Status != runtype.StatusFailed || *b.ErrorCode != runs.FailureUnrecoverable || !strings.Contains(*b.Error, "cannot be read") {
			t.Fatalf("run with a bad snapshot: %s %v", b.Status, b.Error)
		}
		// The runs of an agent no instance serves fail after MaxRecoveryAttempts attempts.
		deadline := time.Now().Add(20 * time.Second)
		for {
			g, _ := f.svc.Get(ctx, "gone-59")
			if g.Status == runtype.StatusFailed {
				if !strings.Contains(*g.Error, `"gone-agent" is not served`) {
					t.Fatalf("gone run error: %s", *g.Error)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("gone-59 is still %s after %d attempts", g.Status, f.record(t, "gone-59").RecoveryAttempts)
			}
			if _, err := f.svc.RecoverExpired(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // past the backoff; the recovery loop itself is off
		}
	})
}

func TestLeasesUseTheDatabaseClock(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		started, release := make(chan struct{}), make(chan struct{})
		var executed atomic.Int64
		m := &scripted{steps: []step{blocked("", started, release)}}
		// Instance A's clock is two minutes slow; B's is right.
		slow := func() time.Time { return time.Now().Add(-2 * time.Minute) }
		a := setupWith(t, db, runs.Config{NowFunc: slow, RecoveryInterval: time.Hour}, setupOpts{agents: []*agent.Agent{scriptedAgent(m, &executed)}})
		b := setupWith(t, db, runs.Config{RecoveryInterval: time.Hour}, setupOpts{agents: []*agent.Agent{scriptedAgent(m, &executed)}})
		r := a.start(t, runs.StartParams{AgentID: "scripted-agent", Prompt: "hi"})
		<-started
		n, err := b.svc.RecoverExpired(bg())
		close(release)
		if err != nil || n != 0 {
			t.Fatalf("B took over %d runs (err %v) whose lease A holds", n, err)
		}
		if got := a.finished(t, r.ID); got.Status != runtype.StatusCompleted {
			t.Fatalf("run is %s", got.Status)
		}
	})
}

// flakyStore fails the first commits of a tool's result, as a dropped connection would.
type flakyStore struct {
	runs.Store
	failures atomic.Int32
}

func (s *flakyStore) Checkpoint(ctx context.Context, c runs.Checkpoint) error {
	if len(ofType(c.Events, runtype.EventToolResult)) > 0 && s.failures.Add(-1) >= 0 {
		return errors.New("driver: bad connection (injected)")
	}
	return s.Store.Checkpoint(ctx, c)
}

func TestToolResultCommitIsTriedAgain(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		flaky := &flakyStore{}
		flaky.failures.Store(2)
		f := setupWith(t, db, runs.Config{RecoveryInterval: 50 * time.Millisecond}, setupOpts{wrap: func(st runs.Store) runs.Store {
			flaky.Store = st
			return flaky
		}})
		r := f.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 1"})
		if _, err := f.svc.Approve(bg(), runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		f.until(t, r.ID, r.LastSeq, runtype.StatusCompleted, runtype.StatusSuspended, runtype.StatusFailed)
		f.svc.Wait()
		got, _ := f.svc.Get(bg(), r.ID)
		if got.Status != runtype.StatusCompleted || f.executed.Load() != 1 {
			t.Fatalf("run is %s after the tool ran %d times; want COMPLETED, once", got.Status, f.executed.Load())
		}
		if n := len(ofType(allEvents(t, f, r.ID), runtype.EventToolCallInterrupted)); n != 0 {
			t.Fatalf("%d TOOL_CALL_INTERRUPTED events for a result that was known", n)
		}
	})
}

func TestRecoveredModelCallDiscardsPartialText(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{RecoveryInterval: time.Hour})
		past := time.Now().Add(-time.Minute)
		// Stored at seq 1; seqs 2 and 3 are text of the model call that was cut off.
		cut := `{"messages":[{"role":"user","content":"hello"}],"steps":0,"seq":1}`
		expiredRun(t, db, "run-cut", "support-agent", &cut, past, "RUN_STARTED", "TEXT_DELTA", "TEXT_DELTA")
		clean := `{"messages":[{"role":"user","content":"hello"}],"steps":0,"seq":1}`
		expiredRun(t, db, "run-clean", "support-agent", &clean, past, "RUN_STARTED")
		if n, err := f.svc.RecoverExpired(bg()); err != nil || n != 2 {
			t.Fatalf("recovered %d, %v", n, err)
		}
		evs := f.until(t, "run-cut", 3, runtype.StatusCompleted, runtype.StatusFailed)
		if evs[0].Type != runtype.EventModelCallRetried || evs[0].Seq != 4 || evs[1].Type != runtype.EventTextDelta {
			t.Fatalf("events after recovering a cut-off model call: %+v", evs)
		}
		evs = f.until(t, "run-clean", 1, runtype.StatusCompleted, runtype.StatusFailed)
		if len(ofType(evs, runtype.EventModelCallRetried)) != 0 {
			t.Fatalf("MODEL_CALL_RETRIED without partial text: %+v", evs)
		}
	})
}

func TestFollowBeyondTheLastEvent(t *testing.T) {
	t.Parallel()
	db := dbtest.SQLite(t)
	started, release := make(chan struct{}), make(chan struct{})
	var executed atomic.Int64
	m := &scripted{steps: []step{blocked("", started, release)}}
	f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{scriptedAgent(m, &executed)}})
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()

	r := f.start(t, runs.StartParams{AgentID: "scripted-agent", Prompt: "hi"})
	<-started
	ch, err := f.svc.Follow(ctx, r.ID, 1000)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	for ev := range ch {
		t.Fatalf("an event beyond 1000: %+v", ev)
	}
	if ctx.Err() != nil {
		t.Fatal("the stream beyond the last event did not complete when the run finished")
	}
	done := f.finished(t, r.ID)
	_, err = f.svc.Follow(ctx, r.ID, done.LastSeq+5)
	wantCode(t, err, runtype.CodeBadUserInput)
	ch, err = f.svc.Follow(ctx, r.ID, done.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	for range ch {
		t.Fatal("events after the last one")
	}
}

func TestDeclinedCallHasNoToolResult(t *testing.T) {
	t.Parallel()
	f := setup(t, dbtest.SQLite(t), runs.Config{})
	r := f.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 1"})
	if _, err := f.svc.Decline(bg(), runs.DecideParams{RunID: r.ID}, "not today"); err != nil {
		t.Fatal(err)
	}
	f.finished(t, r.ID)
	evs := allEvents(t, f, r.ID)
	if n := len(ofType(evs, runtype.EventToolResult)); n != 0 {
		t.Fatalf("%d TOOL_RESULT events for a declined call", n)
	}
	if d := ofType(evs, runtype.EventToolCallDeclined); len(d) != 1 || d[0].Reason != "not today" {
		t.Fatalf("TOOL_CALL_DECLINED: %+v", d)
	}
}

// Not parallel: the default batch (1 KiB, or 50 ms after the first piece) makes at most 4
// events of the 300 numbers only while nothing holds the stream up for 100 ms; the load of other
// tests must not.
func TestTextDeltasAreBatched(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		want := ""
		for i := 1; i <= 300; i++ {
			want += fmt.Sprintf("%d ", i)
		}
		for _, c := range []struct {
			bytes int
			most  int
		}{{0, 4}, {1, 302}} {
			f := setup(t, db, runs.Config{TextFlushBytes: c.bytes})
			r := f.start(t, runs.StartParams{Prompt: "count to 300"})
			f.finished(t, r.ID)
			evs := allEvents(t, f, r.ID)
			checkSeqs(t, evs)
			deltas := ofType(evs, runtype.EventTextDelta)
			text := ""
			for _, d := range deltas {
				text += d.Text
			}
			if text != want || len(deltas) > c.most || c.bytes == 1 && len(deltas) != 300 {
				t.Fatalf("flush bytes %d: %d TEXT_DELTA events with %q", c.bytes, len(deltas), text[:min(40, len(text))])
			}
		}
	})
}

func TestWaitingTextIsFlushedInTime(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	var executed atomic.Int64
	m := &scripted{steps: []step{blocked("thinking ", started, release)}}
	f := setupWith(t, dbtest.SQLite(t), runs.Config{TextFlushInterval: 20 * time.Millisecond}, setupOpts{agents: []*agent.Agent{scriptedAgent(m, &executed)}})
	defer close(release)
	r := f.start(t, runs.StartParams{AgentID: "scripted-agent", Prompt: "hi"})
	<-started
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	ch, err := f.svc.Follow(ctx, r.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	ev := <-ch
	if ev.Type != runtype.EventTextDelta || ev.Text != "thinking " {
		t.Fatalf("while the model is still streaming, got %+v (ctx %v)", ev, ctx.Err())
	}
}

// countingStore counts GetRun calls.
type countingStore struct {
	runs.Store
	gets atomic.Int64
}

func (s *countingStore) GetRun(ctx context.Context, id string) (*runtype.Run, error) {
	s.gets.Add(1)
	return s.Store.GetRun(ctx, id)
}

func TestWatchersShareOneReadPerChange(t *testing.T) {
	t.Parallel()
	counting := &countingStore{}
	f := setupWith(t, dbtest.SQLite(t), runs.Config{}, setupOpts{wrap: func(st runs.Store) runs.Store {
		counting.Store = st
		return counting
	}})
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	var chans []<-chan runs.RunChange
	for range 20 {
		ch, err := f.svc.WatchSuspended(ctx, runs.WatchFilter{})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	r := f.start(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 1"})
	for i, ch := range chans {
		c := <-ch
		if c.Run == nil || c.Run.ID != r.ID || c.Kind != runs.ChangeSuspended {
			t.Fatalf("watcher %d got %+v (ctx %v)", i, c, ctx.Err())
		}
	}
	if n := counting.gets.Load(); n != 1 {
		t.Fatalf("%d reads of the run for one change and 20 watchers", n)
	}
}

// failingGetStore fails the next GetRun once fail is set, as storage that cannot be reached
// for a moment does.
type failingGetStore struct {
	runs.Store
	fail atomic.Bool
}

func (s *failingGetStore) GetRun(ctx context.Context, id string) (*runtype.Run, error) {
	if s.fail.CompareAndSwap(true, false) {
		return nil, fmt.Errorf("read run %s: %w", id, runtype.ErrUnavailable)
	}
	return s.Store.GetRun(ctx, id)
}

// A change whose run cannot be read is not dropped in silence: the watchers end, as when they
// fall behind, so that they subscribe again and re-read what they show (the console's count
// of waiting runs stayed wrong until the next change).
func TestWatchersEndWhenAChangeCannotBeRead(t *testing.T) {
	t.Parallel()
	failing := &failingGetStore{}
	f := setupWith(t, dbtest.SQLite(t), runs.Config{}, setupOpts{wrap: func(st runs.Store) runs.Store {
		failing.Store = st
		return failing
	}})
	ctx, cancel := context.WithTimeout(bg(), 10*time.Second)
	defer cancel()
	ch, err := f.svc.WatchSuspended(ctx, runs.WatchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	failing.fail.Store(true)
	f.start(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 1"})
	select {
	case c, ok := <-ch:
		if ok {
			t.Fatalf("watcher got %+v after its change could not be read, want its end", c)
		}
	case <-ctx.Done():
		t.Fatal("the watcher neither ended nor got the change it missed")
	}
}

func TestLongThreadAndResourceIDsAreBadInput(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		long, limit := strings.Repeat("é", 192), strings.Repeat("é", 191)
		_, err := f.svc.StartRun(bg(), runs.StartParams{AgentID: "support-agent", Prompt: "hi", ThreadID: &long})
		wantCode(t, err, runtype.CodeBadUserInput)
		_, err = f.svc.StartRun(bg(), runs.StartParams{AgentID: "support-agent", Prompt: "hi", ResourceID: &long})
		wantCode(t, err, runtype.CodeBadUserInput)
		r := f.start(t, runs.StartParams{Prompt: "hello", ThreadID: &limit, ResourceID: &limit})
		if got := f.finished(t, r.ID); got.Status != runtype.StatusCompleted || *got.ThreadID != limit {
			t.Fatalf("run with 191-character ids: %s", got.Status)
		}
	})
}

func TestConfigRejectsBadIntervals(t *testing.T) {
	t.Parallel()
	reg, _ := agent.NewRegistry(nil)
	st := gormstore.New(dbtest.SQLite(t))
	for _, cfg := range []runs.Config{{PollInterval: -time.Second}, {RecoveryInterval: -1}, {RetentionInterval: -time.Minute}, {MaxRecoveryAttempts: -1}} {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if svc, err := runs.New(st, reg, cfg); err == nil {
			svc.Close()
			t.Errorf("runs.New(%+v) accepted it", cfg)
		}
	}
}

// TestNoLeaseLossUnderLoadOnMySQL: forty runs writing an event per number, with leases of 3 s,
// lose none of them: renewals are not starved by the runs' own writes.
//
// Not parallel: the load it measures itself against is its own. 3 s, not 1 s: a renewal goes
// out every half second among some 6,000 event writes, as before, but the process may now go
// 2.7 s (the lease less its margin) without one, where 0.9 s was once not enough on a machine
// at load 24 — other work held the process, not these writes. The renewals are counted, so a
// run that outpaced them all would show.
func TestNoLeaseLossUnderLoadOnMySQL(t *testing.T) {
	db := dbtest.MySQL(t)
	var logs logBuffer
	renewals := &renewalCounter{}
	// Renewals every sixth of the lease race with the event writes of each run.
	f := setupWith(t, db, runs.Config{LeaseTTL: 3 * time.Second, TextFlushBytes: 1, Logger: logs.logger()}, setupOpts{wrap: func(st runs.Store) runs.Store {
		renewals.Store = st
		return renewals
	}})
	const n, count = 40, 150
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.start(t, runs.StartParams{Prompt: fmt.Sprintf("count to %d", count)}).ID
	}
	for _, id := range ids {
		got := f.finished(t, id)
		evs := allEvents(t, f, id)
		checkSeqs(t, evs)
		if got.Status != runtype.StatusCompleted || len(ofType(evs, runtype.EventTextDelta)) != count || len(ofType(evs, runtype.EventRunFinished)) != 1 {
			t.Fatalf("run %s: %s with %d events", id, got.Status, len(evs))
		}
	}
	if l := logs.String(); strings.Contains(l, "lease lost") || strings.Contains(l, "recovering run") || strings.Contains(l, "storage error") {
		t.Fatalf("healthy runs lost their lease:\n%s", l)
	}
	t.Logf("%d lease renewals during the runs", renewals.n.Load())
}

// renewalCounter counts the successful lease renewals.
type renewalCounter struct {
	runs.Store
	n atomic.Int64
}

func (s *renewalCounter) RenewLease(ctx context.Context, runID, lease string, ttl time.Duration) error {
	err := s.Store.RenewLease(ctx, runID, lease, ttl)
	if err == nil {
		s.n.Add(1)
	}
	return err
}
