package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"interlock/agent"
	"interlock/runtype"
)

// Questions asked in the middle of a call. A tool may ask a person something while its call is
// in flight (agent.Call.Ask: an MCP server of the protocols before 2026-07-28 sends
// elicitation/create during tools/call, tools/mcp_midcall.go). The call cannot be made again
// with the answer, as a suspended call is: it is running. So the run suspends while the
// execution goes on:
//
//	RUNNING (the call executing) ──ask──▶ SUSPENDED, lease kept ──resume / expiry / taken back──▶ RUNNING, same lease
//	                                           └──(the holder's lease expires)──▶ recovery: the call interrupted
//
// The run is SUSPENDED — in suspendedRuns, the console, the webhooks — on the call, with the
// question as its suspendPayload and the question's schema as its resumeSchema, while the
// instance executing the call keeps the run's lease (Suspension.KeepLease) and renews it as
// always (renewLease). A decision on the call (resumeRun; the expiry at the tool's
// approvalTimeout) is the usual compare-and-set, except that it moves the run back to RUNNING
// under that same lease (DecisionWrite.KeepLease) and nothing executes on the deciding
// instance: the holder, waiting on the run's stream (which another instance's decision reaches
// through the notify poll), reads the decision and answers the tool with it. When the call
// ends first (the server stopped waiting) or the execution is cut (its fence, the shutdown
// timeout), the holder takes the question back with the same compare-and-set (EXPIRED by
// nobody, saying why), and the call's outcome is handled as any call's: of a person's decision
// and the take-back, exactly one wins. Should the holder die, its lease expires with the run
// SUSPENDED: recovery claims it (Claim.Suspended) and finds the call executing, whose outcome
// nobody knows — it is interrupted and waits for a person's approval, never sent again.
//
// A graceful shutdown holds a question until its --shutdown-timeout (a person may still answer
// it, and the call then goes on as usual); then the execution is cut as any is at that timeout:
// the call is cancelled (the server is told so), the question taken back, and the run handed
// over — another instance recovers it with the call interrupted, waiting for a person's
// approval, as a call cut by a shutdown always is (a result the server still sent in time is
// stored and the run goes on with it).

// AskMidCall implements agent.Asker: it stores the run SUSPENDED on call c, keeping the lease,
// and waits for the question to be settled. It returns the decision as the answer — or, when
// ctx ends first, takes the question back and returns the take-back's expiry with an error.
// Any answer settles the question: the run is RUNNING under this execution's lease again when
// it returns without error.
func (e *execution) AskMidCall(ctx context.Context, snap *agent.Snapshot, c agent.PendingCall, q agent.Question) (agent.Answer, error) {
	asked := *snap
	asked.Pending = slices.Clone(snap.Pending)
	var held *agent.PendingCall
	for i := range asked.Pending {
		if asked.Pending[i].CallID() == c.CallID() {
			held = &asked.Pending[i]
		}
	}
	if held == nil || held.State != agent.CallExecuting {
		return agent.Answer{}, fmt.Errorf("run %s: call %s is not executing", e.run.ID, c.CallID())
	}
	held.State, held.AskedMidCall = agent.CallSuspended, true
	held.SuspendPayload, held.ResumeSchema, held.ResumeData = q.Payload, q.Schema, nil
	attrs := []any{"tool", c.Name, "tool_call", c.CallID()}
	err := e.persistUntil(ctx, "question asked in the middle of a call", attrs, func(ctx context.Context) error {
		return e.storeSuspension(ctx, &asked, held, true)
	})
	if err != nil {
		return agent.Answer{}, fmt.Errorf("the question could not be stored for a person: %w", err)
	}
	e.s.cfg.Logger.Info("run: a tool asked a question in the middle of its call; the run waits for a person, the call held open",
		append([]any{"run", e.run.ID}, attrs...)...)
	return e.awaitAnswer(ctx, c)
}

// awaitAnswer waits until the question on call c is settled, and returns how. It reads the run
// at each change of its stream (and every LeaseTTL/3 in any case); once ctx ends it takes the
// question back.
func (e *execution) awaitAnswer(ctx context.Context, c agent.PendingCall) (agent.Answer, error) {
	woke := make(chan struct{}, 1)
	sub := e.s.runHub.SubscribeFunc(e.run.ID, func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	})
	defer sub.Close()
	// Reads and the take-back go on after ctx ends: the run must be RUNNING again before the
	// call's outcome can be stored. They are bounded by twice the lease, as persist is.
	rctx := context.WithoutCancel(ctx)
	var giveUp <-chan time.Time
	var tookBack error
	for {
		r, err := e.read(rctx)
		switch {
		case err != nil:
			e.s.cfg.Logger.Warn("run: cannot read the run whose question waits; trying again", "run", e.run.ID, "err", err)
		case r.Status == runtype.StatusRunning && deref(r.LeaseOwner) == e.owner:
			e.mu.Lock()
			e.seq = r.LastSeq
			e.mu.Unlock()
			ans := answerOf(&r.Run, c.CallID())
			if tookBack != nil && ans.Kind == agent.CallExpired {
				return ans, tookBack
			}
			return ans, nil
		case r.Status != runtype.StatusSuspended || deref(r.LeaseOwner) != e.owner:
			return agent.Answer{}, ErrLeaseLost // recovered by another instance: its call is interrupted
		case ctx.Err() != nil:
			if tookBack == nil {
				tookBack = e.whyTakenBack(ctx)
				giveUp = time.After(2 * e.s.cfg.LeaseTTL)
			}
			if err := e.takeBack(rctx, r, c.CallID(), tookBack.Error()); err == nil || errors.Is(err, ErrStale) {
				continue // read what was stored: the take-back, or a decision that came first
			} else {
				e.s.cfg.Logger.Warn("run: cannot take back a question whose call ended; trying again", "run", e.run.ID, "err", err)
			}
		}
		done := ctx.Done()
		if tookBack != nil {
			done = nil // taking it back: tried again on the next wake-up
		}
		select {
		case <-woke:
		case <-done:
		case <-time.After(e.s.cfg.LeaseTTL / 3):
		case <-giveUp:
			return agent.Answer{}, fmt.Errorf("the question could not be taken back: %w", tookBack)
		}
	}
}

// read reads the run's record, with a deadline.
func (e *execution) read(ctx context.Context) (*Record, error) {
	ctx, cancel := context.WithTimeout(ctx, e.s.cfg.LeaseTTL/3)
	defer cancel()
	r, err := e.s.store.GetRecord(ctx, e.run.ID)
	if err == nil && r == nil {
		err = fmt.Errorf("run %s is gone", e.run.ID)
	}
	return r, err
}

// whyTakenBack says why a question is taken back: its call ended (the tool's server stopped
// waiting for the answer), or this execution was cut (a shutdown, the lease's fence).
func (e *execution) whyTakenBack(ctx context.Context) error {
	if e.ctx != nil && e.ctx.Err() != nil {
		return errors.New("the instance executing the call stopped before anyone answered the question (a shutdown, or it could not renew its lease): the call was cancelled, with an outcome nobody knows")
	}
	return errors.New("the tool stopped waiting for the answer: its call ended (the server gave up, failed or timed out) before anyone answered the question")
}

// takeBack settles the question on call callID of run r (as read: SUSPENDED under this
// execution's lease) as EXPIRED by nobody, with why: the decision's compare-and-set, which a
// person's decision racing it either wins (ErrStale here) or loses (CONFLICT there).
func (e *execution) takeBack(ctx context.Context, r *Record, callID, why string) error {
	call := waitingCall(&r.Run, callID)
	if call == nil {
		return ErrStale
	}
	snap, err := snapshotOf(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(runtype.WithSystem(ctx), e.s.cfg.LeaseTTL/3)
	defer cancel()
	dec := &decision{top: r, run: r, call: call, snap: snap, agent: e.agent, abandoned: true,
		d: agent.Decision{Kind: agent.CallExpired, Reason: why}, cause: CauseExpiry}
	_, err = e.s.commitDecision(ctx, dec)
	return err
}

// answerOf is the answer the last decision on call callID of r gives its question.
func answerOf(r *runtype.Run, callID string) agent.Answer {
	for i := len(r.Decisions) - 1; i >= 0; i-- {
		d := r.Decisions[i]
		if d.ToolCallID != callID {
			continue
		}
		switch d.Kind {
		case runtype.DecisionResumed:
			return agent.Answer{Kind: agent.CallResumed, Data: d.ResumeData}
		case runtype.DecisionDeclined:
			return agent.Answer{Kind: agent.CallDeclined, Reason: deref(d.Reason)}
		case runtype.DecisionExpired:
			return agent.Answer{Kind: agent.CallExpired, Reason: deref(d.Reason)}
		}
		break
	}
	return agent.Answer{Kind: agent.CallExpired, Reason: "the question was settled without an answer"}
}

// askedMidCall reports whether call callID of snap is a question asked in the middle of its call.
func askedMidCall(snap *agent.Snapshot, callID string) bool {
	for _, c := range snap.Pending {
		if c.CallID() == callID {
			return c.AskedMidCall
		}
	}
	return false
}

// executingAgain puts a question asked in the middle of a call back as what it is, a call
// executing: after a decision (its holder goes on with the call, and a recovery must find it
// executing, never run it again with the answer), and when recovery claims the run of a holder
// that died.
func executingAgain(snap *agent.Snapshot) {
	for i := range snap.Pending {
		if c := &snap.Pending[i]; c.AskedMidCall {
			c.State, c.AskedMidCall = agent.CallExecuting, false
		}
	}
}
