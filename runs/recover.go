package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"interlock/agent"
	"interlock/runtype"
)

// recoveryBatch is how many expired runs one pass reads at a time; a pass reads a few batches.
const (
	recoveryBatch   = 50
	recoveryBatches = 4
	maxBackoff      = 5 * time.Minute
)

// RecoverExpired takes over runs whose lease has expired, oldest lease first, each with a
// compare-and-set (so of several instances exactly one recovers a run), and continues them
// here: a model call in progress is repeated; a tool that was executing is not run again, the
// run suspends with that call awaiting approval, marked interrupted.
//
// A run this instance cannot continue does not block the others: one whose agent is not served
// here is tried again later with backoff (another instance may serve it), and fails after
// MaxRecoveryAttempts; one whose stored state is missing or unreadable, or that was taken over
// MaxRecoveryAttempts times without progress, fails at once with a reason. It returns how
// many runs it took over.
func (s *Service) RecoverExpired(ctx context.Context) (int, error) {
	n := 0
	var errs []error
	for range recoveryBatches {
		list, err := s.store.ExpiredRuns(ctx, recoveryBatch)
		if err != nil {
			return n, err
		}
		for _, r := range list {
			claimed, err := s.recoverRun(ctx, r)
			if err != nil {
				errs = append(errs, err)
			}
			if claimed {
				n++
			}
		}
		if len(list) < recoveryBatch || len(errs) > 0 {
			break
		}
	}
	return n, errors.Join(errs...)
}

// recoverRun takes over one expired run, or defers or fails it. It reports whether it
// continues the run here.
func (s *Service) recoverRun(ctx context.Context, r *Record) (bool, error) {
	a := s.agents.Get(r.AgentID)
	if a == nil {
		why := fmt.Sprintf("its agent %q is not served by the instances that tried to recover it", r.AgentID)
		if r.RecoveryAttempts+1 >= s.cfg.MaxRecoveryAttempts {
			return false, s.failUnrecoverable(ctx, r, why)
		}
		s.cfg.Logger.Warn("recovery: agent not served here; trying again later", "run", r.ID, "agent", r.AgentID, "attempt", r.RecoveryAttempts+1)
		return false, s.store.DeferRecovery(ctx, r.ID, r.Version, s.backoff(r.RecoveryAttempts))
	}
	if r.RecoveryAttempts >= s.cfg.MaxRecoveryAttempts {
		return false, s.failUnrecoverable(ctx, r, fmt.Sprintf("it was taken over %d times without progress", r.RecoveryAttempts))
	}
	if r.Snapshot == nil {
		return false, s.failUnrecoverable(ctx, r, "its stored state is missing")
	}
	snap, err := agent.DecodeSnapshot(*r.Snapshot)
	if err != nil {
		s.cfg.Logger.Error("recovery: bad snapshot", "run", r.ID, "err", err)
		return false, s.failUnrecoverable(ctx, r, "its stored state cannot be read")
	}
	lease, taken := s.newLease(), time.Now()
	claimed, err := s.store.ClaimExpired(ctx, s.claim(r, lease))
	if err != nil || !claimed {
		return false, err // not claimed: another instance was first, or the owner came back
	}
	if r.Status == runtype.StatusSuspended {
		// Its holder died while its call's question waited (midcall.go): the call was
		// executing, with an outcome nobody knows.
		executingAgain(snap)
		r.Status, r.SuspendedAt = runtype.StatusRunning, nil
	}
	s.cfg.Logger.Info("recovering run", "run", r.ID, "previous_owner", deref(r.LeaseOwner), "attempt", r.RecoveryAttempts+1)
	why := causedBy(ctx, CauseRecovery)
	why.recoveredFrom = deref(r.LeaseOwner)
	r.LeaseOwner, r.Version = &lease, r.Version+1
	s.execute(a, &r.Run, lease, snap, taken, why)
	return true, nil
}

// claim is the claim of expired run r for lease. A SUSPENDED run is one whose holder kept its
// lease while a question asked in the middle of a call waited, and died (midcall.go): the
// question's row is closed, saying so.
func (s *Service) claim(r *Record, lease string) Claim {
	c := Claim{RunID: r.ID, Version: r.Version, LastSeq: r.LastSeq, Lease: lease, TTL: s.cfg.LeaseTTL}
	if r.Status == runtype.StatusSuspended {
		c.Suspended, c.At, c.InstanceID = true, s.now(), s.cfg.InstanceID
		c.Reason = "the instance executing the call, which held it open while its server's question waited, stopped: the question cannot be answered any more, and the call's outcome is unknown"
	}
	return c
}

// backoff is how long recovery of a run waits after attempt n (0-based) could not start.
func (s *Service) backoff(n int) time.Duration {
	d := s.cfg.RecoveryBackoff << min(n, 16)
	return min(d, maxBackoff)
}

// failUnrecoverable claims an expired run and stores it as FAILED, with the reason in the log
// and in its message.
func (s *Service) failUnrecoverable(ctx context.Context, r *Record, why string) error {
	lease := s.newLease()
	claimed, err := s.store.ClaimExpired(ctx, s.claim(r, lease))
	if err != nil || !claimed {
		return err
	}
	s.cfg.Logger.Error("recovery: run cannot be recovered; failing it", "run", r.ID, "reason", why)
	msg, code := "the run could not be recovered: "+why, FailureUnrecoverable
	parent, start, err := s.handoff(ctx, &r.Run, nil, &msg)
	if err != nil {
		return fmt.Errorf("fail unrecoverable run %s: %w", r.ID, err)
	}
	err = s.store.Finish(ctx, Finish{
		Checkpoint: Checkpoint{RunID: r.ID, Lease: lease, TTL: s.cfg.LeaseTTL, After: r.LastSeq, At: s.now(),
			Events: []runtype.Event{{Type: runtype.EventRunFailed, Status: string(runtype.StatusFailed), Error: msg, ErrorCode: code}}},
		Status: runtype.StatusFailed, Error: &msg, ErrorCode: &code, Parent: parent,
	})
	if err != nil {
		return fmt.Errorf("fail unrecoverable run %s: %w", r.ID, err)
	}
	s.runHub.Publish(r.ID, struct{}{})
	if start != nil {
		start()
	}
	return nil
}

// interrupted suspends a run on a call whose outcome is unknown — it was executing when the
// run's owner died (crashed), or its tool said so (agent.OutcomeUnknown) — so a person decides
// whether it runs again; reason says what is known.
//
// The call waits under a new id (agent.Snapshot.Reissue): the decision that ran it stays on its
// old id, so a retry of that decision is told it was taken, and only a decision naming the new id
// runs the tool again. The old id goes with it (InterruptedToolCallID): a late result of the
// execution that was cut off names it.
func (e *execution) interrupted(ctx context.Context, snap *agent.Snapshot, c *agent.PendingCall, reason string) {
	c.InterruptedToolCallID = snap.Reissue(c)
	c.State, c.Interrupted = agent.CallAwaitingApproval, true
	why := runtype.Event{
		Type: runtype.EventToolCallInterrupted,
		ToolCall: &runtype.ToolCall{ToolCallID: c.CallID(), ToolName: c.Name, Args: c.Args, RequiresApproval: true, Interrupted: true,
			InterruptedToolCallID: c.InterruptedToolCallID},
		Reason: reason,
	}
	e.outcome(ctx, "suspension", nil, func(ctx context.Context) error { return e.suspend(ctx, snap, c, why) })
}

// interruptedReason says what is known of a call (callID, before it is reissued) found
// executing by recovery: its start was stored by the instance that held the lease (lease), and
// no answer was stored with the run.
//
//   - notSent: this instance is the one that stored the start, and it never called the tool (its
//     start could not be confirmed, or its lease could not be: ToolStarted). The call was not
//     sent; approving it sends it for the first time.
//   - late: the instance that ran it recorded the tool's answer beside the run (LateResult): the
//     call was sent, and the reason says what it answered.
//   - otherwise the call may have been sent: the instance may have stopped before calling the
//     tool, or after, or lost the database (a partition, an outage longer than it could hold the
//     run) before it could store the answer; nothing in the run tells these apart, so the reason
//     does not pretend to, and says where an answer will appear if the instance holds one.
func interruptedReason(tool, callID, lease string, late *runtype.LateResult, notSent bool) string {
	who := "the instance executing it"
	switch i := strings.LastIndex(lease, "/"); {
	case late != nil:
		// It names the instance that ran the call, even when that one released the run (a lease
		// given up for a handover names nobody).
		who = fmt.Sprintf("instance %s, which was executing it,", late.InstanceID)
	case i > 0:
		who = fmt.Sprintf("instance %s, which was executing it,", lease[:i])
	}
	if notSent {
		return fmt.Sprintf("%s was not sent to the tool: this instance stored that it was starting %s, then could not confirm "+
			"that start (or that it still held the run) and did not call the tool. Approving sends it for the first time; "+
			"declining tells the model it was not run", tool, callID)
	}
	if late == nil {
		return fmt.Sprintf("%s may have been sent to the tool: %s stored that it was starting it, then lost the run before "+
			"any answer of the tool was stored: the instance stopped, or could not reach the database. If it holds the answer, "+
			"it records it once it reaches the database, as the late result of %s shown with this call; until then whether "+
			"the call took effect is unknown: check before you approve it to run again, or decline", tool, who, callID)
	}
	outcome := "the tool finished"
	switch {
	case late.Error != nil:
		outcome = "the tool failed: " + clip(*late.Error, 300)
	case late.SuspendPayload != nil:
		outcome = "the tool asked for input (it suspended with " + clip(string(late.SuspendPayload), 300) + ")"
	}
	return fmt.Sprintf("%s was sent to the tool, and %s lost the run before it could store the tool's answer; "+
		"it recorded the answer later (%s), as the late result of %s shown with this call: %s. "+
		"Approving runs the tool again; to go on without running it, decline, with the outcome in your reason (the model is told it)",
		tool, who, late.RecordedAt.UTC().Format("2006-01-02 15:04:05.000 UTC"), callID, outcome)
}

// clip shortens s to at most n bytes (at a rune boundary), marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
