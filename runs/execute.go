package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"interlock/agent"
	"interlock/llm"
	"interlock/notify"
	"interlock/runtype"
)

// execution is one stretch of a run's loop on this instance, from a start, a decision or a
// recovery until the run suspends or finishes. It is the agent.Host: every event it reports is
// stored, with the snapshot it goes with, in one lease-checked write.
type execution struct {
	s     *Service
	agent *agent.Agent
	run   runtype.Run // id, agent, thread, resource and prompt; other fields are not kept current
	owner string      // the lease token of this execution: every write checks it
	// recoveredFrom is the lease a recovery took the run over from (origin.recoveredFrom), "" for
	// other executions.
	recoveredFrom string

	mu        sync.Mutex // serialises writes: the loop's and the text flush timer's
	seq       int64      // last seq written; only the lease holder writes, so this is the truth
	text      strings.Builder
	flush     *time.Timer // pending flush of text, nil when none
	flushErr  error       // a failed timed flush, returned by the next write
	ctx       context.Context
	retryText bool // the previous owner streamed text of a model call that is made again
	ended     bool // the run suspended or finished: the lease is gone by design

	tool    atomic.Pointer[agent.PendingCall]  // the call whose tool is executing, nil when none
	holding atomic.Pointer[runtype.LateResult] // a tool's answer waiting to be stored, nil when none
	sent    sentCall                           // the last call sent to its tool, and the seq then

	fenceMu sync.Mutex
	fence   *time.Timer // cancels the execution when the lease may be about to expire (renewLease)
	fenceAt time.Time   // send time of the last write seen to renew the lease
}

// sentCall is a call this execution sent to its tool (its start stored), with the run's last
// seq then: only an answer stored after that seq answers this execution of the call.
type sentCall struct {
	callID string
	seq    int64
}

// inFlight is the log attributes of the tool call executing, none when none is.
func (e *execution) inFlight() []any {
	if c := e.tool.Load(); c != nil {
		return []any{"tool", c.Name, "tool_call", c.CallID()}
	}
	if l := e.holding.Load(); l != nil {
		return []any{"tool", l.ToolName, "tool_call", l.ToolCallID, "answer", "held"}
	}
	return nil
}

var _ agent.Host = (*execution)(nil)

// Failure codes classify why a run FAILED (Run.ErrorCode, RUN_FAILED's errorCode). The message
// beside them is short and safe to show; the full cause is in the log.
const (
	FailureModel         = "MODEL_ERROR"
	FailureSteps         = "MAX_STEPS"
	FailureUnrecoverable = "UNRECOVERABLE"
	FailureInternal      = "INTERNAL"
)

// execute continues a run this instance has just leased (r.LastSeq is its last event, and
// lease the lease, taken by a write sent at `taken` at the latest), in the background,
// renewing the lease while it runs; why is what started it, for tracing. A snapshot with a call
// that was executing when its previous owner died is not run: the call goes back to a person
// (see recover.go). A panic anywhere in the execution fails the run, never the server.
func (s *Service) execute(a *agent.Agent, r *runtype.Run, lease string, snap *agent.Snapshot, taken time.Time, why origin) {
	e := &execution{s: s, agent: a, run: *r, seq: r.LastSeq, owner: lease, recoveredFrom: why.recoveredFrom}
	e.retryText = snap.Seq > 0 && r.LastSeq > snap.Seq && snap.Executing() == nil
	if !s.started() {
		// This instance is stopping: hand the run to another instance at once.
		e.release()
		return
	}
	go func() {
		defer s.done()
		s.execs.Store(e, struct{}{})
		defer s.execs.Delete(e)
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		ctx, endTrace := s.traceExecution(ctx, e, snap, why) // tracing (trace.go): this stretch's span
		defer endTrace()
		e.ctx = ctx
		renewed := make(chan struct{})
		go func() { defer close(renewed); e.renewLease(ctx, cancel, taken) }()
		defer func() { <-renewed }()
		defer cancel()
		defer e.stopFlush()
		defer e.recoverPanic()
		unsent, _ := s.notSent.LoadAndDelete(e.run.ID) // whatever this instance knew of the run is told now
		if c := snap.Executing(); c != nil {
			late := s.recordedLate(ctx, e.run.ID, c.CallID())
			e.interrupted(ctx, snap, c, interruptedReason(c.Name, c.CallID(), e.recoveredFrom, late, unsent == c.CallID() && late == nil))
			return
		}
		e.loop(ctx, snap)
	}()
}

// logCut names, in the log, each execution a graceful stop cuts because its deadline passed: a
// tool call still running is cancelled and its outcome unknown, so recovery will ask a person
// whether to run it again; a tool's answer still waiting to be stored is kept, as the call's late
// result (ToolResult's last try); an execution between tools (a model call) just hands its run
// over.
func (s *Service) logCut() {
	s.execs.Range(func(k, _ any) bool {
		e := k.(*execution)
		if l := e.holding.Load(); l != nil {
			s.cfg.Logger.Warn("shutdown: timeout ends an execution whose tool has answered but whose answer is not stored yet; the answer is held and recorded as the call's late result",
				"run", e.run.ID, "tool", l.ToolName, "tool_call", l.ToolCallID)
		} else if c := e.inFlight(); c != nil {
			s.cfg.Logger.Warn("shutdown: timeout cuts a tool call still running; a person will be asked whether to run it again",
				append([]any{"run", e.run.ID}, c...)...)
		} else {
			s.cfg.Logger.Info("shutdown: timeout cuts an execution between tool calls; another instance continues it", "run", e.run.ID)
		}
		return true
	})
}

// recoverPanic turns a panic of the execution (in the loop, a model, the storage code) into a
// FAILED run with a generic message; the value and stack go to the log.
func (e *execution) recoverPanic() {
	v := recover()
	if v == nil {
		return
	}
	e.s.cfg.Logger.Error("run: panic in execution", "run", e.run.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), 5*time.Second)
	defer cancel()
	if err := e.failWith(ctx, FailureInternal, "the run stopped on an internal error"); err != nil && !errors.Is(err, ErrLeaseLost) {
		e.s.cfg.Logger.Error("run: cannot store failure after panic", "run", e.run.ID, "err", err)
	}
}

func (e *execution) loop(ctx context.Context, snap *agent.Snapshot) {
	var err error
	if e.retryText {
		// Text streamed before the previous owner stopped is stale: the model call is repeated.
		err = e.emit(ctx, nil, runtype.Event{Type: runtype.EventModelCallRetried})
	}
	var out agent.Outcome
	if err == nil {
		out, err = e.agent.Run(ctx, snap, e)
	}
	for err == nil && out.Held != nil && out.Held.State == agent.CallAwaitingApproval {
		// Before asking a person: calls a live grant matches are let through (grant_use.go).
		var still *agent.PendingCall
		if still, err = e.letThrough(ctx, snap, out.Held); err != nil || still != nil {
			if still != nil {
				out.Held = still
			}
			break
		}
		out, err = e.agent.Run(ctx, snap, e)
	}
	var unknown *agent.OutcomeUnknown
	switch {
	case errors.As(err, &unknown) && snap.Executing() != nil:
		// A tool's request may have reached its server: a person decides, as after a crash.
		e.interrupted(ctx, snap, snap.Executing(), unknown.Reason)
	case err == nil && out.Held != nil && out.Held.State == agent.CallDelegated:
		e.outcome(ctx, "delegation", nil, func(ctx context.Context) error { return e.delegate(ctx, snap, out.Held) })
	case err == nil && out.Held != nil:
		e.outcome(ctx, "suspension", e.answered(out.Held), func(ctx context.Context) error { return e.suspend(ctx, snap, out.Held) })
	case err == nil:
		e.outcome(ctx, "completion", nil, func(ctx context.Context) error { return e.complete(ctx, out.Text, !snap.Request) })
	case errors.Is(err, ErrLeaseLost):
		// Another instance owns the run now.
	case errors.As(err, new(*storageError)):
		// Storage failed (a deadlock, a lost connection): not the run's fault. Give the lease up;
		// recovery continues the run from its last stored checkpoint.
		e.s.cfg.Logger.Error("run: storage error; handing the run over", "run", e.run.ID, "err", err)
		e.release()
	case errors.Is(err, errHandover), ctx.Err() != nil:
		// This instance is stopping: let another take the run over at once.
		e.release()
	default:
		e.s.cfg.Logger.Warn("run failed", "run", e.run.ID, "err", err)
		e.outcome(ctx, "failure", nil, func(ctx context.Context) error { return e.fail(ctx, err) })
	}
}

// answered is the late result a suspension on held would be, when held is a call whose tool
// this execution ran and which answered by suspending (asking for input): that answer is known,
// and kept if it cannot be stored with the run. Nil for a call held for approval or a
// sub-agent, whose tool has not run.
func (e *execution) answered(held *agent.PendingCall) *runtype.LateResult {
	if held.State != agent.CallSuspended || e.sent.callID != held.CallID() {
		return nil
	}
	return &runtype.LateResult{RunID: e.run.ID, ToolCallID: held.CallID(), ToolName: held.Name, SuspendPayload: held.SuspendPayload,
		InstanceID: e.s.cfg.InstanceID, FinishedAt: e.s.now(), After: e.sent.seq}
}

// outcome stores how the execution ends — a suspension, a completion, a failure, a delegation —
// with write, tried again as a tool's result is (persist): the run's outcome is not given up on
// a killed connection. A tool's answer the outcome holds (late: a tool that suspended) is kept
// as the call's late result when the write cannot be stored; a run whose outcome could not be
// stored is handed over at once (its lease released) rather than left to a lease expiry.
func (e *execution) outcome(ctx context.Context, what string, late *runtype.LateResult, write func(context.Context) error) {
	var attrs []any
	if late != nil {
		e.hold(*late)
		attrs = []any{"tool", late.ToolName, "tool_call", late.ToolCallID}
	}
	err := e.persist(ctx, what, attrs, write)
	switch {
	case err == nil:
		if late != nil {
			e.unhold(*late)
		}
		return
	case late != nil:
		e.keep(*late, err)
	case !errors.Is(err, ErrLeaseLost):
		e.s.cfg.Logger.Error("run: cannot store outcome; handing the run over", "run", e.run.ID, "outcome", what, "err", err)
	}
	if !errors.Is(err, ErrLeaseLost) {
		e.release()
	}
}

// persist makes write, a write under the execution's lease, until it is stored, trying again
// with backoff (from resultBackoff, doubling up to resultBackoffMax) after a failure of storage
// for as long as the write may still be stored under the lease: until it is stored, the lease is
// known lost (ErrLeaseLost: another instance holds the run, or it moved on), the write fails for
// a reason that trying again does not cure, the service closes, or twice LeaseTTL has passed
// since the first failure (by then the lease is long past). Each try has LeaseTTL/3. The
// execution's cancellation (its fence, --shutdown-timeout) does not stop it: the lease token
// decides whether a write may still be stored, and no other instance may have taken the run
// before the lease expires. It returns nil once stored, else the last error (a *storageError
// when storage failed throughout).
func (e *execution) persist(ctx context.Context, what string, attrs []any, write func(context.Context) error) error {
	return e.persistUntil(context.WithoutCancel(ctx), what, attrs, write)
}

// persistUntil is persist, given up when wctx ends too.
func (e *execution) persistUntil(wctx context.Context, what string, attrs []any, write func(context.Context) error) error {
	wait, first := resultBackoff, time.Now()
	for try := 1; ; try++ {
		actx, cancel := context.WithTimeout(wctx, e.s.cfg.LeaseTTL/3)
		err := write(actx)
		timedOut := actx.Err() != nil // read before cancel, which sets it
		cancel()
		if err == nil {
			if try > 1 {
				e.s.cfg.Logger.Info("run: "+what+" stored after retrying", append([]any{"run", e.run.ID}, append(attrs, "tries", try)...)...)
			}
			return nil
		}
		if !errors.As(err, new(*storageError)) && !timedOut {
			return err // the lease is lost, the run moved on, or the write cannot succeed
		}
		if !errors.As(err, new(*storageError)) {
			err = &storageError{err}
		}
		if try == 1 {
			e.s.cfg.Logger.Warn("run: storing a "+what+" failed; trying again while the run is held", append([]any{"run", e.run.ID}, append(attrs, "err", err)...)...)
		}
		if time.Since(first) > 2*e.s.cfg.LeaseTTL {
			return err // past the lease by far: another instance may have it
		}
		select {
		case <-time.After(wait):
		case <-e.s.ctx.Done():
			return err
		case <-wctx.Done():
			return err
		}
		wait = min(2*wait, resultBackoffMax)
	}
}

// errHandover stops an execution at a checkpoint while the instance shuts down.
var errHandover = errors.New("instance is shutting down: run handed over")

// renewLease keeps the lease while the execution runs, and fences the execution: it cancels it
// (the context its tools were given, and every write after) once the lease may be about to
// expire, LeaseMargin before any other instance may take the run over. It renews every sixth of
// LeaseTTL, each attempt with a deadline of two intervals, so a renewal stuck on a dead
// connection is abandoned and the next one tried on another; it stops at once when the lease is
// lost. Checkpoints renew the lease too, and move the fence the same way (renewed).
//
// Why a fenced execution cannot overlap another instance's. A write that sets the lease
// (StartRun's, a decision's, a claim's, a renewal) sets lease_until to the database's now plus
// LeaseTTL at the moment the database executes it, which is after this instance sent it; and
// another instance claims the run only once the database's now is past lease_until (see Store:
// lease times are the database's). So the earliest claim comes more than LeaseTTL after the
// send of the last renewal that took effect. This instance counts from the send (not the
// answer) of the last renewal or checkpoint it saw succeed, on its monotonic clock, and cancels at
// LeaseTTL-LeaseMargin after it. The two clocks' offsets do not matter, only their rates, which
// differ by parts per million: far below LeaseMargin over one LeaseTTL. A renewal that failed,
// timed out or whose answer was lost is not counted; if it did take effect it only postpones
// the claim. The fence is a timer, so it fires even while a renewal or a write hangs.
//
// Cancelling stops what honours its context: the tool in flight is asked to stop, no further
// tool starts (ToolStarted checks), no model call continues. A tool that ignores its context
// runs on, but nothing it returns is stored once another instance holds the run: every write
// checks the lease token (ErrLeaseLost).
func (e *execution) renewLease(ctx context.Context, cancel context.CancelFunc, taken time.Time) {
	cfg := e.s.cfg
	every := cfg.LeaseTTL / 6
	if taken.IsZero() {
		taken = time.Now()
	}
	var fenced atomic.Bool
	e.fenceMu.Lock()
	e.fenceAt = taken
	e.fence = time.AfterFunc(cfg.LeaseTTL-cfg.LeaseMargin-time.Since(taken), func() { fenced.Store(true); cancel() })
	e.fenceMu.Unlock()
	defer func() {
		e.fenceMu.Lock()
		e.fence.Stop()
		e.fenceMu.Unlock()
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			if fenced.Load() {
				e.s.cfg.Logger.Error("run: cannot renew the lease; stopping the execution before the lease may expire",
					append(e.inFlight(), "run", e.run.ID, "lease_ttl", cfg.LeaseTTL.String(), "err", lastErr)...)
			}
			return
		case <-t.C:
		}
		sent := time.Now()
		// A renewal stuck on a dead connection is abandoned after two intervals, so the next one
		// goes out on another; the fence does not wait for it either way.
		rctx, rcancel := context.WithTimeout(ctx, 2*every)
		err := e.s.store.RenewLease(rctx, e.run.ID, e.owner, cfg.LeaseTTL)
		rcancel()
		switch {
		case err == nil:
			lastErr = nil
			e.renewed(sent)
		case errors.Is(err, ErrLeaseLost):
			e.mu.Lock()
			ended := e.ended // the renewal raced the run's last write, which released the lease
			e.mu.Unlock()
			if !ended {
				e.s.cfg.Logger.Warn("run: lease lost; stopping", "run", e.run.ID)
			}
			cancel()
			return
		case ctx.Err() == nil:
			if lastErr == nil {
				e.s.cfg.Logger.Warn("run: cannot renew the lease; trying again", "run", e.run.ID, "err", err)
			}
			lastErr = err
		}
	}
}

// renewed moves the fence: a write that renewed the lease (a renewal, a checkpoint) was sent at
// sent. A fence that has fired stays fired.
func (e *execution) renewed(sent time.Time) {
	e.fenceMu.Lock()
	defer e.fenceMu.Unlock()
	if e.fence == nil || !sent.After(e.fenceAt) {
		return
	}
	e.fenceAt = sent
	if !e.fence.Reset(e.s.cfg.LeaseTTL - e.s.cfg.LeaseMargin - time.Since(sent)) {
		e.fence.Stop() // it fired: the execution is cancelled, and stays so
	}
}

// release gives the lease up (expired now) so that any instance recovers the run at once.
func (e *execution) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := e.s.store.ReleaseLease(ctx, e.run.ID, e.owner)
	if err != nil && !errors.Is(err, ErrLeaseLost) {
		e.s.cfg.Logger.Warn("run: release lease", "run", e.run.ID, "err", err)
	}
}

// checkpoint is emit at a point where no tool is executing; while the instance shuts down it
// stops the execution there, after storing, so the run is handed over cleanly.
func (e *execution) checkpoint(ctx context.Context, snap *agent.Snapshot, evs ...runtype.Event) error {
	return e.checkpointWith(ctx, snap, nil, evs...)
}

// checkpointWith is checkpoint, storing the decisions auto of calls a policy let through with
// the events (Checkpoint.AutoApproved).
func (e *execution) checkpointWith(ctx context.Context, snap *agent.Snapshot, auto []runtype.Decision, evs ...runtype.Event) error {
	e.mu.Lock()
	err := e.writeLocked(ctx, snap, evs, auto...)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if e.s.draining.Load() {
		return errHandover
	}
	return nil
}

// emit stores evs, after any text still waiting, and snap when not nil, renewing the lease;
// then wakes followers.
func (e *execution) emit(ctx context.Context, snap *agent.Snapshot, evs ...runtype.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.writeLocked(ctx, snap, evs)
}

// writeLocked is emit with e.mu held. The waiting text goes first, in the same transaction; it
// is dropped from the buffer only once stored, so a failed write can be made again.
func (e *execution) writeLocked(ctx context.Context, snap *agent.Snapshot, evs []runtype.Event, auto ...runtype.Decision) error {
	if err := e.flushErr; err != nil {
		e.flushErr = nil
		return err
	}
	if e.text.Len() > 0 {
		evs = append([]runtype.Event{{Type: runtype.EventTextDelta, Text: e.text.String()}}, evs...)
	}
	seq := e.seq + int64(len(evs))
	c := Checkpoint{RunID: e.run.ID, Lease: e.owner, TTL: e.s.cfg.LeaseTTL, After: e.seq, At: e.s.now(), Events: evs, AutoApproved: auto}
	if snap != nil {
		snap.Seq = seq
		encoded, err := snap.Encode()
		if err != nil {
			return err
		}
		c.Snapshot = &encoded
	}
	sent := time.Now()
	if err := stored(ctx, e.s.store.Checkpoint(ctx, c)); err != nil {
		return err
	}
	e.renewed(sent) // a checkpoint renews the lease
	e.seq = seq
	e.text.Reset()
	if e.flush != nil {
		e.flush.Stop()
		e.flush = nil
	}
	e.s.runHub.Publish(e.run.ID, struct{}{})
	return nil
}

// TextDelta buffers a piece of text; it is stored as one TEXT_DELTA with the pieces after it,
// once TextFlushBytes wait or TextFlushInterval after the first, or with the next other event.
// This makes one write per batch of tokens, not one per token, and seq stays gapless because
// only this execution writes.
func (e *execution) TextDelta(ctx context.Context, text string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.flushErr; err != nil {
		e.flushErr = nil
		return err
	}
	e.text.WriteString(text)
	if e.text.Len() >= e.s.cfg.TextFlushBytes {
		return e.writeLocked(ctx, nil, nil)
	}
	if e.flush == nil {
		e.flush = time.AfterFunc(e.s.cfg.TextFlushInterval, e.flushText)
	}
	return nil
}

// flushText stores the waiting text when its time is up.
func (e *execution) flushText() {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			e.s.cfg.Logger.Error("run: panic storing text", "run", e.run.ID, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			e.flushErr = errors.New("panic storing text")
		}
	}()
	e.flush = nil
	if e.text.Len() == 0 || e.ctx.Err() != nil {
		return
	}
	e.flushErr = e.writeLocked(e.ctx, nil, nil)
}

func (e *execution) stopFlush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.flush != nil {
		e.flush.Stop()
		e.flush = nil
	}
}

// ToolCalls judges the calls of the step (judge: whether each waits for a person, and why),
// then appends one TOOL_CALL event per call, with the snapshot holding them and their
// judgements and the AUTO_APPROVED decisions of those a policy let through (with their
// receipts), in one write: a call that runs without a person has its decision on record before
// it can run.
func (e *execution) ToolCalls(ctx context.Context, snap *agent.Snapshot, calls []agent.PendingCall) error {
	now := e.s.now()
	var auto []runtype.Decision
	for i := range snap.Pending {
		c := &snap.Pending[i]
		t := e.agent.Tool(c.Name)
		if c.State != agent.CallNew || c.ArgsError != "" || t == nil || c.Gate != nil {
			continue // not run (its arguments or its tool are unusable), or judged already
		}
		gate := e.s.judge(ctx, judgeCall{agent: e.agent, tool: t, args: c.Args, runAsks: snap.RequireToolApproval,
			threadID: e.run.ThreadID, resourceID: e.run.ResourceID, startedBy: e.run.StartedBy})
		c.Gate = &gate
		if gate.Ask || t.SubAgent != nil {
			// A delegation runs nothing itself: the sub-agent's calls are judged, and recorded,
			// each in its own run.
			continue
		}
		receipt, err := e.s.receiptFor(ctx, e.run.ID, c.CallID(), e.agent.ID, c.Name, c.Args, nil, now)
		if err != nil {
			return err
		}
		c.Receipt = deref(receipt)
		auto = append(auto, autoApproved(e.run.ID, runtype.ToolCall{ToolCallID: c.CallID(), ToolName: c.Name, Args: c.Args}, gate, receipt, now))
	}
	evs := make([]runtype.Event, len(snap.Pending))
	for i, c := range snap.Pending {
		evs[i] = runtype.Event{Type: runtype.EventToolCallRequested, ToolCall: e.eventCall(snap, c)}
	}
	return e.checkpointWith(ctx, snap, auto, evs...)
}

// ToolStarted stores the snapshot with the call marked executing (no event), trying again as an
// outcome is (persist) while the execution may go on: a killed connection does not stop the
// run. Unlike a result, the start is not tried once the execution is cancelled (its fence, a
// shutdown): the tool would not be called anyway. The tool runs only if the execution still
// holds its lease afterwards (see renewLease). When the start cannot be stored, or the lease may
// be gone, the tool is not called, and this instance knows it: the start may have been stored
// all the same (a write whose answer was lost), so its own recovery says the call was not sent
// (notSent) rather than that it may have been.
func (e *execution) ToolStarted(ctx context.Context, snap *agent.Snapshot, c agent.PendingCall) error {
	attrs := []any{"tool", c.Name, "tool_call", c.CallID()}
	err := e.persistUntil(ctx, "tool call's start", attrs, func(ctx context.Context) error { return e.emit(ctx, snap) })
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		e.s.notSent.Store(e.run.ID, c.CallID())
		e.s.cfg.Logger.Warn("run: the tool call's start could not be stored, or the execution stopped first (its lease may be gone); the tool was not called",
			append([]any{"run", e.run.ID}, append(attrs, "err", err)...)...)
		return err
	}
	e.sent = sentCall{callID: c.CallID(), seq: e.seq}
	e.tool.Store(&c)
	return nil
}

// Result storage backs off from resultBackoff, doubling up to resultBackoffMax, between tries.
var (
	resultBackoff    = 100 * time.Millisecond
	resultBackoffMax = time.Second
)

// ToolResult appends TOOL_RESULT with the snapshot that holds the result. The tool has run: if
// its result were not stored, recovery would find the call executing and ask a person whether
// to run it again. So the write is tried again (persist) for as long as the result may still be
// stored under this execution's lease. Once stored, a fenced execution stops there and hands the
// run over with its result.
//
// Until it is stored, the result is where this instance's recovery looks first (Service.held),
// so that, should this instance take the run over itself, it says what the tool answered. A result that cannot be stored with the run — the lease is lost, the run moved on,
// storage failed for twice LeaseTTL — is not thrown away: the service keeps it and records it
// as the call's late result (keepLate) at once, beside the run, where whoever decides on the
// interrupted call sees it. When the service closes first, it is tried once more as a late
// result (lastTry); only if that fails too is the log the one place that holds it (unstored).
//
// A tool that failed after its context was cancelled (the fence, or --shutdown-timeout) may
// have failed because of it, having done part of its work or all of it: that outcome is not a
// result, and the call is left executing, for recovery to mark interrupted.
func (e *execution) ToolResult(ctx context.Context, snap *agent.Snapshot, c agent.PendingCall, result json.RawMessage, errMsg string) error {
	e.tool.Store(nil)
	if errMsg != "" && ctx.Err() != nil {
		e.s.cfg.Logger.Warn("run: a tool cut off by the execution's end failed; its outcome is unknown", "run", e.run.ID, "tool", c.Name, "tool_call", c.CallID(), "tool_error", errMsg)
		return ctx.Err()
	}
	late := runtype.LateResult{RunID: e.run.ID, ToolCallID: c.CallID(), ToolName: c.Name, Result: result, InstanceID: e.s.cfg.InstanceID,
		FinishedAt: e.s.now(), After: e.sent.seq}
	if errMsg != "" {
		late.Result, late.Error = nil, &errMsg
	}
	ev := runtype.Event{Type: runtype.EventToolResult, ToolCall: e.eventCall(snap, c), Result: result, Error: errMsg}
	e.hold(late)
	attrs := []any{"tool", c.Name, "tool_call", c.CallID()}
	if err := e.persist(ctx, "tool result", attrs, func(ctx context.Context) error { return e.emit(ctx, snap, ev) }); err != nil {
		e.keep(late, err)
		return err
	}
	e.unhold(late)
	if err := ctx.Err(); err != nil {
		return err // fenced or closing: the result is stored, another instance continues
	}
	if e.s.draining.Load() {
		return errHandover
	}
	return nil
}

// hold marks l, a tool's answer, as waiting to be stored with the run: the graceful stop's log
// names it, and this instance's recovery finds it first (Service.held).
func (e *execution) hold(l runtype.LateResult) {
	e.holding.Store(&l)
	e.s.held.Store(lateKey{l.RunID, l.ToolCallID}, l)
}

// unhold forgets l: it is stored with the run.
func (e *execution) unhold(l runtype.LateResult) {
	e.holding.Store(nil)
	e.s.held.Delete(lateKey{l.RunID, l.ToolCallID})
}

// keep hands l, a tool's answer that could not be stored with the run (why), to the service,
// which records it as the call's late result: in the background (keepLate), or at once when the
// service is closing (lastTry).
func (e *execution) keep(l runtype.LateResult, why error) {
	e.holding.Store(nil)
	if e.s.ctx.Err() != nil {
		e.s.lastTry(l, why)
		return
	}
	e.s.keepLate(l, why)
}

// ToolDeclined stores the snapshot with the declined call answered (no event: the decision's
// TOOL_CALL_DECLINED already carries the reason, and the tool did not run).
func (e *execution) ToolDeclined(ctx context.Context, snap *agent.Snapshot, c agent.PendingCall) error {
	return e.checkpoint(ctx, snap)
}

// StepFinished appends STEP_FINISHED with the snapshot of the finished step.
// Run tells tools which run calls them.
func (e *execution) Run() agent.RunInfo {
	return agent.RunInfo{RunID: e.run.ID, AgentID: e.run.AgentID, ThreadID: deref(e.run.ThreadID), ResourceID: deref(e.run.ResourceID)}
}

func (e *execution) StepFinished(ctx context.Context, snap *agent.Snapshot) error {
	return e.checkpoint(ctx, snap, runtype.Event{Type: runtype.EventStepFinished})
}

func (e *execution) eventCall(snap *agent.Snapshot, c agent.PendingCall) *runtype.ToolCall {
	var revision string
	if c.Gate != nil {
		revision = c.Gate.Revision
	}
	return &runtype.ToolCall{
		PolicyRevision: revision,
		ToolCallID:     c.CallID(), ToolName: c.Name, Args: c.Args,
		RequiresApproval: e.agent.Waits(snap, &c) && c.State != agent.CallSuspended && c.ArgsError == "",
		SuspendPayload:   c.SuspendPayload, ResumeSchema: c.ResumeSchema, AskedMidCall: c.AskedMidCall, Interrupted: c.Interrupted, InterruptedToolCallID: c.InterruptedToolCallID,
	}
}

// suspend stores the run as SUSPENDED on the held call (and the step's other calls that wait
// for approval), with their rows and the events that announce them, in one transaction, and
// only then tells anyone. The lease is released. A call of a
// tool with an ApprovalTimeout gets its deadline (ExpiresAt), counted from now.
func (e *execution) suspend(ctx context.Context, snap *agent.Snapshot, held *agent.PendingCall, prelude ...runtype.Event) error {
	return e.storeSuspension(ctx, snap, held, false, prelude...)
}

// storeSuspension is suspend, keeping the lease when keepLease: the run waits on a question its
// call asked while this execution goes on with the call (midcall.go).
func (e *execution) storeSuspension(ctx context.Context, snap *agent.Snapshot, held *agent.PendingCall, keepLease bool, prelude ...runtype.Event) error {
	now := e.s.now()
	// A run waits on every call of the step that waits for a person; a sub-agent's run on one
	// at a time, because its supervisor's delegate call shows one.
	waiting := []agent.PendingCall{*held}
	if e.run.ParentRunID == nil && !keepLease {
		waiting = snap.WaitingCalls()
	}
	calls := make([]runtype.ToolCall, len(waiting))
	evs := prelude
	for i, w := range waiting {
		calls[i] = e.waitingCall(w, now)
		ev := runtype.Event{Type: runtype.EventToolCallApproval, ToolCall: &calls[i]}
		if !calls[i].RequiresApproval {
			ev.Type = runtype.EventToolCallSuspended
		}
		evs = append(evs, ev)
	}
	evs = append(evs, runtype.Event{Type: runtype.EventRunSuspended, Status: string(runtype.StatusSuspended)})
	// The supervisors above a sub-agent's run suspend with it, showing its call.
	ancestors, err := e.s.surfaceSuspension(ctx, &e.run, calls[0], evs[len(prelude)].Type, now)
	if err != nil {
		return stored(ctx, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.text.Len() > 0 {
		evs = append([]runtype.Event{{Type: runtype.EventTextDelta, Text: e.text.String()}}, evs...)
	}
	seq := e.seq + int64(len(evs))
	snap.Seq = seq
	encoded, err := snap.Encode()
	if err != nil {
		return err
	}
	outbox, err := e.s.announce(&e.run, e.seq, now, evs, notify.Call{})
	if err != nil {
		return err
	}
	err = e.s.store.Suspend(ctx, Suspension{
		Checkpoint: Checkpoint{RunID: e.run.ID, Lease: e.owner, TTL: e.s.cfg.LeaseTTL, After: e.seq, At: now, Events: evs, Snapshot: &encoded, Outbox: outbox},
		Calls:      calls, InstanceID: e.s.cfg.InstanceID, Ancestors: ancestors, KeepLease: keepLease,
	})
	if err != nil {
		return stored(ctx, err)
	}
	e.seq, e.ended = seq, !keepLease
	e.text.Reset()
	e.s.runHub.Publish(e.run.ID, struct{}{})
	e.s.changes.Publish(changesTopic, Change{Kind: ChangeSuspended, RunID: e.run.ID})
	for _, a := range ancestors {
		e.s.runHub.Publish(a.RunID, struct{}{})
		e.s.changes.Publish(changesTopic, Change{Kind: ChangeSuspended, RunID: a.RunID})
	}
	return nil
}

// waitingCall is how a call that waits for a person is stored and shown, with its deadline when
// its tool has an approval timeout, and when its tool's follow-up steps are due.
func (e *execution) waitingCall(c agent.PendingCall, now time.Time) runtype.ToolCall {
	call := runtype.ToolCall{ToolCallID: c.CallID(), ToolName: c.Name, Args: c.Args, RequiresApproval: c.State == agent.CallAwaitingApproval,
		SuspendPayload: c.SuspendPayload, ResumeSchema: c.ResumeSchema, AskedMidCall: c.AskedMidCall, Interrupted: c.Interrupted, InterruptedToolCallID: c.InterruptedToolCallID}
	if g := c.Gate; g != nil {
		call.PolicyRevision = g.Revision
		if g.Ask && call.RequiresApproval && !c.Interrupted {
			call.ApprovalReason = g.Reason
		}
	}
	t := e.agent.Tool(c.Name)
	if t != nil && t.ApprovalTimeout > 0 {
		deadline := runtype.StoredTime(now.Add(t.ApprovalTimeout))
		call.ExpiresAt = &deadline
	}
	followUp(&call, t, now) // its reminder, escalation and warning (followup.go)
	return call
}

// complete stores the final text, removes the snapshot, appends RUN_FINISHED and, when
// remember, records the exchange in the run's memory thread (a forwarded request has no
// exchange: its thread groups a caller's calls, it is no conversation).
func (e *execution) complete(ctx context.Context, text string, remember bool) error {
	if e.run.ParentRunID != nil || !remember {
		// A sub-agent's run hands its answer to its supervisor; the supervisor's exchange is
		// what the thread remembers.
		return e.finish(ctx, Finish{Status: runtype.StatusCompleted, Output: &text}, runtype.Event{Type: runtype.EventRunFinished, Status: string(runtype.StatusCompleted)})
	}
	return e.finish(ctx, Finish{
		Status: runtype.StatusCompleted, Output: &text,
		ThreadID: e.run.ThreadID, ResourceID: e.run.ResourceID,
		Memory: []llm.Message{{Role: llm.RoleUser, Content: e.run.Prompt}, {Role: llm.RoleAssistant, Content: text}},
	}, runtype.Event{Type: runtype.EventRunFinished, Status: string(runtype.StatusCompleted)})
}

// fail stores the run as FAILED. People reading the run get a short message and a code for what
// went wrong; the cause, which may hold a provider's or a driver's words, goes to the log only.
func (e *execution) fail(ctx context.Context, cause error) error {
	var steps *agent.StepsError
	var model *agent.ModelError
	switch {
	case errors.As(cause, &steps):
		return e.failWith(ctx, FailureSteps, steps.Error())
	case errors.As(cause, &model):
		var provider *llm.ProviderError
		if errors.As(cause, &provider) && provider.Status != 0 {
			return e.failWith(ctx, FailureModel, fmt.Sprintf("the model call failed (%s answered HTTP %d)", model.Model, provider.Status))
		}
		return e.failWith(ctx, FailureModel, fmt.Sprintf("the model call failed (%s)", model.Model))
	default:
		return e.failWith(ctx, FailureInternal, "the run stopped on an internal error")
	}
}

func (e *execution) failWith(ctx context.Context, code, msg string) error {
	return e.finish(ctx, Finish{Status: runtype.StatusFailed, Error: &msg, ErrorCode: &code},
		runtype.Event{Type: runtype.EventRunFailed, Status: string(runtype.StatusFailed), Error: msg, ErrorCode: code})
}

// finish stores the run's outcome with its last event (after any text still waiting).
func (e *execution) finish(ctx context.Context, f Finish, ev runtype.Event) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	evs := []runtype.Event{ev}
	if e.text.Len() > 0 {
		evs = append([]runtype.Event{{Type: runtype.EventTextDelta, Text: e.text.String()}}, evs...)
	}
	f.Checkpoint = Checkpoint{RunID: e.run.ID, Lease: e.owner, TTL: e.s.cfg.LeaseTTL, After: e.seq, At: e.s.now(), Events: evs}
	// A sub-agent's run continues its supervisor in the same transaction.
	parent, start, err := e.s.handoff(ctx, &e.run, f.Output, f.Error)
	if err != nil {
		return stored(ctx, err)
	}
	f.Parent = parent
	if err := e.s.store.Finish(ctx, f); err != nil {
		return stored(ctx, err)
	}
	if start != nil {
		defer start()
	}
	e.seq += int64(len(evs))
	e.ended = true
	e.text.Reset()
	e.s.runHub.Publish(e.run.ID, struct{}{})
	return nil
}

const changesTopic = "suspended"
