package runs_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// toolBackend records every execution of its tools and every answer they gave, by call.
type toolBackend struct {
	mu       sync.Mutex
	executed map[string]int    // run/call → executions
	answers  map[string]string // run/call → the last answer given
	tl       *timeline
	release  chan struct{}
}

func newToolBackend(tl *timeline) *toolBackend {
	return &toolBackend{executed: map[string]int{}, answers: map[string]string{}, tl: tl, release: make(chan struct{})}
}

func (b *toolBackend) record(c *agent.Call, answer string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answers[c.Run.RunID+"/"+c.ID] = answer
}

func (b *toolBackend) execs() (n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, v := range b.executed {
		n += v
	}
	return n
}

// tool is a tool of the backend: it starts (recorded on the timeline as "<name>: tool started"),
// waits for release when hold is set, and answers with a refund or, for ask_customer, by
// suspending with a question.
func (b *toolBackend) tool(name, instance string, hold bool) *agent.Tool {
	return &agent.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`),
		ExecuteFunc: func(ctx context.Context, c *agent.Call) (any, error) {
			b.mu.Lock()
			b.executed[c.Run.RunID+"/"+c.ID]++
			b.mu.Unlock()
			b.tl.add(instance + ": tool started")
			if hold {
				select {
				case <-b.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if name == "ask_customer" {
				b.record(c, `{"question":"Which card should the refund go to?"}`)
				return nil, c.Suspend(map[string]any{"question": "Which card should the refund go to?"})
			}
			b.record(c, `{"refunded":true}`)
			return map[string]any{"refunded": true}, nil
		}}
}

// leaseRouted is an instance's store whose writes under one lease (the execution the test cuts
// off) go through the proxy, and everything else (its recovery, reads, other executions) directly:
// a partition that strands one execution's connections while the instance's others work.
type leaseRouted struct {
	runs.Store // direct
	cut        runs.Store
	lease      atomic.Pointer[string]
}

func (s *leaseRouted) via(lease string) runs.Store {
	if l := s.lease.Load(); l != nil && *l == lease {
		return s.cut
	}
	return s.Store
}
func (s *leaseRouted) Checkpoint(ctx context.Context, c runs.Checkpoint) error {
	return s.via(c.Lease).Checkpoint(ctx, c)
}
func (s *leaseRouted) Suspend(ctx context.Context, p runs.Suspension) error {
	return s.via(p.Lease).Suspend(ctx, p)
}
func (s *leaseRouted) Finish(ctx context.Context, f runs.Finish) error {
	return s.via(f.Lease).Finish(ctx, f)
}
func (s *leaseRouted) RenewLease(ctx context.Context, runID, lease string, ttl time.Duration) error {
	return s.via(lease).RenewLease(ctx, runID, lease, ttl)
}
func (s *leaseRouted) ReleaseLease(ctx context.Context, runID, lease string) error {
	return s.via(lease).ReleaseLease(ctx, runID, lease)
}

// TestALateAnswerIsOnTheInterruptedCall: the instance executing a run is cut off from the
// database for longer than the lease while its tool answers — with a result (issue_refund) or by
// suspending (ask_customer: a suspension is an answer). The run is recovered, by another
// instance or by the instance itself, and its call reported interrupted. The answer the cut-off
// execution holds is on the call when TOOL_CALL_INTERRUPTED is emitted (the instance's own
// recovery finds it at once), or recorded within a second or so of it (another instance's: the
// holder learns its write is doomed at its next try once it reaches the database, and records
// the answer then, not two leases after its first failure). The tool ran once.
//
// Not parallel: what it checks turns on leases of a few seconds.
func TestALateAnswerIsOnTheInterruptedCall(t *testing.T) {
	for _, tool := range []string{"issue_refund", "ask_customer"} {
		for _, by := range []string{"another-instance", "own-recovery"} {
			t.Run(tool+"/"+by, func(t *testing.T) { lateAnswer(t, tool, by == "own-recovery") })
		}
	}
}

func lateAnswer(t *testing.T, tool string, own bool) {
	direct, proxied, proxy := cutOffPair(t)
	tl := newTimeline()
	be := newToolBackend(tl)
	ttl := 3 * time.Second
	agents := func(name string) []*agent.Agent {
		return []*agent.Agent{{ID: "late-agent", Name: "Late", Model: &llm.Demo{}, Tools: []*agent.Tool{be.tool(tool, name, true)}}}
	}
	routed := &leaseRouted{cut: gormstore.New(proxied)}
	aDB, aOpts := proxied, setupOpts{agents: agents("a")}
	aRecovery := time.Hour
	if own {
		aDB, aRecovery = direct, 50*time.Millisecond
		aOpts.wrap = func(st runs.Store) runs.Store { routed.Store = st; return routed }
	}
	a := setupWith(t, aDB, runs.Config{LeaseTTL: ttl, InstanceID: "a", RecoveryInterval: aRecovery, Logger: slog.New(timelineLog{name: "a", tl: tl})}, aOpts)
	recoverer := a
	if !own {
		recoverer = setupWith(t, direct, runs.Config{LeaseTTL: ttl, InstanceID: "b", RecoveryInterval: 50 * time.Millisecond,
			Logger: slog.New(timelineLog{name: "b", tl: tl})}, setupOpts{agents: agents("b")})
	}
	t.Cleanup(proxy.Restore)

	prompt := "refund order 1"
	if tool == "ask_customer" {
		prompt = "ask the customer which card"
	}
	r := a.start(t, runs.StartParams{AgentID: "late-agent", Prompt: prompt})
	var lease string
	if err := direct.Model(&gormstore.Run{}).Where("id = ?", r.ID).Pluck("lease_owner", &lease).Error; err != nil || lease == "" {
		t.Fatalf("lease of the run: %q, %v", lease, err)
	}
	routed.lease.Store(&lease)
	tl.wait(t, "a: tool started", 10*time.Second)
	proxy.Cut(true)
	close(be.release) // the tool answers while a's execution cannot store it
	tl.wait(t, "a: run: storing a", 10*time.Second)

	evs := recoverer.until(t, r.ID, 0, runtype.StatusSuspended)
	interrupted := ofType(evs, runtype.EventToolCallInterrupted)
	if len(interrupted) != 1 {
		t.Fatalf("events %s, want one TOOL_CALL_INTERRUPTED", typesOf(evs))
	}
	at := interrupted[0].At
	proxy.Restore()

	var got *runtype.Run
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if got, err = recoverer.svc.Get(bg(), r.ID); err == nil && len(got.LateResults) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no late result within 15s of the database's return; log %q", tl.list())
		}
	}
	l := got.LateResults[0]
	after := l.RecordedAt.Sub(at)
	t.Logf("the late answer was recorded %s after TOOL_CALL_INTERRUPTED", after)
	want, answer := `{"refunded":true}`, l.Result
	if tool == "ask_customer" {
		want, answer = `{"question":"Which card should the refund go to?"}`, l.SuspendPayload
		if l.Result != nil {
			t.Errorf("a suspension recorded with a result %s", l.Result)
		}
	}
	if l.ToolCallID != "tc_1" || l.InstanceID != "a" || string(answer) != want {
		t.Fatalf("late result %+v (answer %s); want tc_1's answer %s, recorded by a", l, answer, want)
	}
	if own {
		// The instance that held the answer recovered the run: it said what the tool answered.
		if why := interrupted[0].Reason; !strings.Contains(why, "it recorded the answer later (") {
			t.Errorf("own recovery's reason %q does not say what the tool answered", why)
		}
		if after > 0 {
			t.Errorf("the late answer was recorded %s after the call was reported interrupted; want before", after)
		}
	} else if after > 1500*time.Millisecond {
		t.Errorf("the late answer was recorded %s after the call was reported interrupted; want within a second or so", after)
	}
	if n := be.execs(); n != 1 {
		t.Errorf("the tool ran %d times; want once", n)
	}
}

// TestAKilledConnectionDoesNotLoseAnOutcome: the connection that carries the write of a run's
// outcome is killed — a suspension (a tool that asked for input), a completion, a failure — on a
// database that is otherwise healthy (MariaDB through a proxy that kills the connection carrying
// that statement: the driver interpolates arguments, so the statement's text names its columns). The write is tried again under the lease: the run settles as it would have,
// at once rather than after its lease (30 s) expires, no call is reported interrupted, and the
// tool ran once.
func TestAKilledConnectionDoesNotLoseAnOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, prompt, statement string
		model                   llm.Model
		want                    runtype.Status
	}{
		{"suspension", "ask the customer which card", "`suspended_at`=", &llm.Demo{}, runtype.StatusSuspended},
		{"completion", "refund order 7", "`error_code`=", &llm.Demo{}, runtype.StatusCompleted},
		{"failure", "refund order 7", "`error_code`=", brokenModel{}, runtype.StatusFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			direct, proxied, proxy := cutOffPair(t)
			tl := newTimeline()
			be := newToolBackend(tl)
			a := setupWith(t, proxied, runs.Config{InstanceID: "a", RecoveryInterval: 50 * time.Millisecond, Logger: slog.New(timelineLog{name: "a", tl: tl})},
				setupOpts{agents: []*agent.Agent{{ID: "asker", Name: "Asker", Model: c.model,
					Tools: []*agent.Tool{be.tool("ask_customer", "a", false), be.tool("issue_refund", "a", false)}}}})
			killed := proxy.KillOn(c.statement)
			began := time.Now()
			r := a.start(t, runs.StartParams{AgentID: "asker", Prompt: c.prompt})
			select {
			case <-killed:
			case <-time.After(20 * time.Second):
				t.Fatalf("no %s statement went through the proxy; log %q", c.statement, tl.list())
			}
			_, by := waitSettled(t, direct, []string{r.ID}, 10*time.Second) // the lease is 30 s
			if by[string(c.want)] != 1 {
				t.Fatalf("run settled as %v; want %s. Log %q", by, c.want, tl.list())
			}
			t.Logf("settled %s after the start", time.Since(began).Round(time.Millisecond))
			got, err := a.svc.Get(bg(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range got.ToolCalls {
				if tc.Interrupted {
					t.Errorf("call %s reported interrupted (late results %+v)", tc.ToolCallID, got.LateResults)
				}
			}
			wantRuns := 1
			if c.name == "failure" {
				wantRuns = 0 // the model fails before asking for any tool
			}
			if n := be.execs(); n != wantRuns {
				t.Errorf("the tools ran %d times; want %d", n, wantRuns)
			}
			if c.name == "suspension" && (len(got.ToolCalls) != 1 || string(got.ToolCalls[0].SuspendPayload) != `{"question":"Which card should the refund go to?"}`) {
				t.Errorf("the run waits on %+v; want ask_customer's question", got.ToolCalls)
			}
			if i := tl.index("stored after retrying"); i < 0 {
				t.Errorf("no outcome stored after retrying: %q", tl.list())
			}
		})
	}
}

// TestACallNeverSentIsNotSaidToHaveBeenSent: an instance stores that it is starting a tool, but
// the answer of that write is lost (the proxy lets the COMMIT through and drops what the server
// answers), and then the database is out of its reach for longer than the lease: the instance
// never calls the tool. When it recovers the run itself, the interrupted call's reason says the
// call was not sent — not that it was, nor that it may have been — and the tool never ran.
// A blip instead of an outage: the start is stored again and the tool runs once, without asking
// anyone.
//
// Not parallel: what it checks turns on leases of a few seconds.
func TestACallNeverSentIsNotSaidToHaveBeenSent(t *testing.T) {
	for _, outage := range []bool{true, false} {
		name := "blip"
		if outage {
			name = "outage"
		}
		t.Run(name, func(t *testing.T) {
			direct, proxied, proxy := cutOffPair(t)
			tl := newTimeline()
			be := newToolBackend(tl)
			a := setupWith(t, proxied, runs.Config{LeaseTTL: 2 * time.Second, InstanceID: "a", RecoveryInterval: 50 * time.Millisecond,
				Logger: slog.New(timelineLog{name: "a", tl: tl})},
				setupOpts{agents: []*agent.Agent{{ID: "refunder", Name: "Refunder", Model: &llm.Demo{}, Tools: []*agent.Tool{be.tool("issue_refund", "a", false)}}}})
			t.Cleanup(proxy.Restore)
			committed := proxy.LoseCommitAnswer(`\"state\":\"executing\"`) // arguments are interpolated, quotes escaped
			r := a.start(t, runs.StartParams{AgentID: "refunder", Prompt: "refund order 9"})
			select {
			case <-committed:
			case <-time.After(20 * time.Second):
				t.Fatalf("the start of the call never went through the proxy; log %q", tl.list())
			}
			// The start is stored: the database says the call is executing.
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var snap string
				direct.Model(&gormstore.Run{}).Where("id = ?", r.ID).Pluck("snapshot", &snap)
				if strings.Contains(snap, `"state":"executing"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the start of the call was not committed")
				}
			}
			proxy.Cut(outage) // the connection waiting for its answer is closed: the write failed, for all a knows
			if outage {
				tl.wait(t, "a: run: the tool call's start could not be stored", 20*time.Second)
				proxy.Restore()
				evs := a.until(t, r.ID, 0, runtype.StatusSuspended)
				interrupted := ofType(evs, runtype.EventToolCallInterrupted)
				if len(interrupted) != 1 {
					t.Fatalf("events %s, want one TOOL_CALL_INTERRUPTED", typesOf(evs))
				}
				if why := interrupted[0].Reason; !strings.Contains(why, "issue_refund was not sent to the tool") {
					t.Errorf("reason %q does not say the call was not sent", why)
				}
			} else {
				got := a.finished(t, r.ID)
				if got.Status != runtype.StatusCompleted || len(ofType(a.until(t, r.ID, 0, runtype.StatusCompleted), runtype.EventToolCallInterrupted)) != 0 {
					t.Errorf("after a blip the run is %s; want COMPLETED with no call interrupted", got.Status)
				}
			}
			want := 0
			if !outage {
				want = 1
			}
			if n := be.execs(); n != want {
				t.Errorf("the tool ran %d times; want %d", n, want)
			}
		})
	}
}

// TestAStopKeepsAnAnswerItHolds: a tool answers while its instance cannot store the answer;
// then the instance is stopped and its graceful stop's deadline passes at once. The log says the
// answer is held — not that a tool is still running and cut — and the answer is kept: stored
// with the run, or recorded as the call's late result as the instance stops.
func TestAStopKeepsAnAnswerItHolds(t *testing.T) {
	t.Parallel()
	direct, proxied, proxy := cutOffPair(t)
	tl := newTimeline()
	var c counted
	release := make(chan struct{})
	a := setupWith(t, proxied, runs.Config{InstanceID: "a", Logger: slog.New(timelineLog{name: "a", tl: tl})},
		setupOpts{agents: []*agent.Agent{blockingAgent("a", tl, &c, release)}})
	t.Cleanup(proxy.Restore)
	r := a.start(t, runs.StartParams{AgentID: "fence-agent", Prompt: "refund order 1"})
	tl.wait(t, "a: tool started", 10*time.Second)
	proxy.Cut(true)
	close(release)
	tl.wait(t, "a: run: storing a tool result failed", 10*time.Second)
	proxy.Restore()
	stop, cancel := context.WithCancel(bg())
	cancel() // the deadline has passed
	a.svc.Shutdown(stop)

	if i := tl.index("a: shutdown: timeout ends an execution whose tool has answered but whose answer is not stored yet; the answer is held"); i < 0 ||
		tl.index("cuts a tool call still running") >= 0 {
		t.Errorf("the stop's log does not say the answer is held: %q", tl.list())
	}
	var results, late int64
	direct.Model(&gormstore.Event{}).Where("run_id = ? AND type = ?", r.ID, runtype.EventToolResult).Count(&results)
	direct.Model(&gormstore.LateToolResult{}).Where("run_id = ? AND tool_call_id = ?", r.ID, "tc_1").Count(&late)
	if results+late != 1 {
		t.Errorf("%d results stored with the run and %d late results; want the answer kept once. Log %q", results, late, tl.list())
	}
	if n := c.executed.Load(); n != 1 {
		t.Errorf("the tool ran %d times; want once", n)
	}
}
