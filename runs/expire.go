package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"interlock/agent"
	"interlock/runtype"
)

// expiryBatch is how many due calls one pass of the expiry loop reads.
const expiryBatch = 100

// ExpireDue resolves as EXPIRED the waiting calls whose deadline (their tool's approvalTimeout
// after they began to wait) has passed by this instance's clock, and continues their runs here,
// as after a decline: the tool does not run, and the model is told the request timed out (not
// that a person declined). Each expiry is the decision's compare-and-set, so of several instances
// (or an expiry and a person's decision) exactly one wins; the others change nothing. A run whose
// agent this instance does not serve is left to an instance that does. It returns how many calls
// it expired.
func (s *Service) ExpireDue(ctx context.Context) (int, error) {
	list, err := s.store.DueExpiries(ctx, s.now(), expiryBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, due := range list {
		ok, err := s.expireDue(ctx, due)
		if err != nil {
			errs = append(errs, fmt.Errorf("expire tool call %s of run %s: %w", due.ToolCallID, due.RunID, err))
		}
		if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// expireDue expires one due call, unless it moved since it was listed.
func (s *Service) expireDue(ctx context.Context, due DueCall) (bool, error) {
	r, err := s.store.GetRecord(ctx, due.RunID)
	if err != nil || r == nil || r.Status != runtype.StatusSuspended || r.Snapshot == nil {
		return false, err
	}
	call := waitingCall(&r.Run, due.ToolCallID)
	if call == nil {
		return false, nil
	}
	snap, err := agent.DecodeSnapshot(*r.Snapshot)
	if err != nil {
		return false, err
	}
	if shows(snap.Delegated(), call.ToolCallID) {
		// A supervisor's delegate call showing its sub-agent's call: the sub-agent's run holds
		// the call (its row is due as well), and expiring it resolves this one with it.
		return false, nil
	}
	return s.expire(ctx, r, call, snap)
}

// expire stores the expiry of run's waiting call as a decision of kind EXPIRED, taken by nobody,
// with TOOL_CALL_EXPIRED and RUN_RESUMED (on the supervisors above too), and continues the run
// here (unless other calls of its step still wait). It reports false, without error, when the deadline has not passed, the agent is not
// served here, or someone else decided or expired the call first.
func (s *Service) expire(ctx context.Context, r *Record, call *runtype.ToolCall, snap *agent.Snapshot) (bool, error) {
	now := s.now()
	if call.ExpiresAt == nil || now.Before(*call.ExpiresAt) {
		return false, nil
	}
	a := s.agents.Get(r.AgentID)
	if a == nil {
		return false, nil
	}
	var after time.Duration
	if r.SuspendedAt != nil {
		after = call.ExpiresAt.Sub(*r.SuspendedAt) // the timeout it waited with
	}
	msg := agent.ExpiredMessage(call.ToolName, after, call.RequiresApproval)
	dec := &decision{top: r, run: r, call: call, snap: snap, agent: a, d: agent.Decision{Kind: agent.CallExpired, Reason: msg}, cause: CauseExpiry}
	if _, err := s.commitDecision(ctx, dec); err != nil {
		if errors.Is(err, ErrStale) || runtype.ErrorCode(err) == runtype.CodeConflict {
			// Another instance expired it, a person decided in time, or a supervisor moved.
			return false, nil
		}
		return false, err
	}
	s.cfg.Logger.Info("tool call expired", "run", r.ID, "tool_call", call.ToolCallID, "tool", call.ToolName, "expires_at", *call.ExpiresAt)
	return true, nil
}

// refuseExpired is decide's check of the call's deadline: once it has passed nobody may decide
// the call any more. The call is expired at once, when the loop has not done it yet, and the
// answer is CONFLICT saying it expired.
func (s *Service) refuseExpired(ctx context.Context, r *Record, call *runtype.ToolCall) error {
	err := pastDeadline(&r.Run, call, s.now())
	if err == nil || r.Snapshot == nil {
		return err
	}
	// The expiry is the server's own decision, whoever's request found the deadline passed.
	ctx = runtype.WithSystem(context.WithoutCancel(ctx))
	if snap, derr := agent.DecodeSnapshot(*r.Snapshot); derr == nil {
		if _, xerr := s.expire(ctx, r, call, snap); xerr != nil {
			s.cfg.Logger.Warn("decide: expire a call past its deadline", "run", r.ID, "tool_call", call.ToolCallID, "err", xerr)
		}
	}
	return err
}

// pastDeadline is the CONFLICT of a decision on a call whose deadline is at or before now.
func pastDeadline(r *runtype.Run, call *runtype.ToolCall, now time.Time) error {
	if call.ExpiresAt == nil || now.Before(*call.ExpiresAt) {
		return nil
	}
	return expiredAt(r.ID, call.ToolCallID, *call.ExpiresAt, nil)
}

// expiredConflict words the CONFLICT of a decision on a run that moved on because its call
// expired: the named call's decision, or without a name the run's last one, is EXPIRED.
func expiredConflict(r *runtype.Run, toolCallID *string) error {
	for i := len(r.Decisions) - 1; i >= 0; i-- {
		d := r.Decisions[i]
		if toolCallID != nil && *toolCallID != "" && d.ToolCallID != *toolCallID {
			continue
		}
		if d.Kind == runtype.DecisionExpired {
			return expiredAt(r.ID, d.ToolCallID, d.DecidedAt, d.Reason)
		}
		return nil
	}
	return nil
}

// expiredAt is the CONFLICT of a decision on a call that expired at at, why (when known) saying
// how: its deadline passed, or its asker stopped waiting (Abandon).
func expiredAt(runID, callID string, at time.Time, why *string) error {
	because := ""
	if why != nil && *why != "" {
		because = " (" + strings.TrimSuffix(*why, ".") + ")"
	}
	return runtype.Errorf(runtype.CodeConflict, "tool call %s of run %s expired at %s without a decision%s: it can no longer be approved, declined or resumed",
		callID, runID, at.UTC().Format("2006-01-02T15:04:05.000Z"), because)
}

// waitingCall is the run's pending call of that id, or nil.
func waitingCall(r *runtype.Run, callID string) *runtype.ToolCall {
	for i := range r.ToolCalls {
		if r.ToolCalls[i].ToolCallID == callID {
			return &r.ToolCalls[i]
		}
	}
	return nil
}
