package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/events"
	"interlock/gormstore"
)

// DecideParams name the call a decision is about and who takes it.
type DecideParams struct {
	RunID string
	// ToolCallID may be nil when exactly one call is pending.
	ToolCallID *string
	// DecidedBy is recorded with the decision when known.
	DecidedBy string
}

// Approve lets the held tool call run; the run continues on this instance. It returns the run as
// stored right after the decision (RUNNING).
// Errors: NOT_FOUND for an unknown run; CONFLICT when the run is not suspended or the call was
// already decided (of racing decisions exactly one wins); BAD_USER_INPUT when the call waits for
// resume data, or the toolCallId is ambiguous or unknown.
func (s *Service) Approve(ctx context.Context, p DecideParams) (*Run, error) {
	return s.decide(ctx, p, agent.Decision{Kind: agent.CallApproved})
}

// Decline answers the held call with the reason instead of running it (or with
// agent.DeclinedMessage when reason is empty); the run continues. Errors as Approve.
func (s *Service) Decline(ctx context.Context, p DecideParams, reason string) (*Run, error) {
	return s.decide(ctx, p, agent.Decision{Kind: agent.CallDeclined, Reason: reason})
}

// Resume runs a suspended tool again with resumeData. resumeData is checked against the tool's
// resumeSchema first: when it does not match, the error is BAD_USER_INPUT and the run stays
// suspended. Other errors as Approve, with BAD_USER_INPUT for a call that waits for approval.
func (s *Service) Resume(ctx context.Context, p DecideParams, resumeData json.RawMessage) (*Run, error) {
	if len(resumeData) == 0 {
		resumeData = json.RawMessage("null")
	}
	return s.decide(ctx, p, agent.Decision{Kind: agent.CallResumed, ResumeData: resumeData})
}

// decide is the compare-and-set of every decision. In one transaction it checks the run and the
// call, moves the run from SUSPENDED (at the version it read) to RUNNING leased by this instance,
// marks the call row decided, stores the snapshot with the decision, and appends the events; zero
// rows updated means someone else decided first: CONFLICT. Only after the commit does it tell
// subscribers and continue the run.
func (s *Service) decide(ctx context.Context, p DecideParams, d agent.Decision) (*Run, error) {
	var (
		row  *gormstore.Run
		a    *agent.Agent
		snap *agent.Snapshot
	)
	now := s.now()
	err := s.store.tx(ctx, func(tx *gorm.DB) error {
		var err error
		if row, err = getRun(tx, p.RunID); err != nil {
			return err
		}
		if row == nil {
			return Errorf(CodeNotFound, "no run with id %q", p.RunID)
		}
		if Status(row.Status) != StatusSuspended {
			return Errorf(CodeConflict, "run %s is %s, not SUSPENDED: it was already decided or has not suspended", row.ID, row.Status)
		}
		call, err := pickCall(tx, row.ID, p.ToolCallID)
		if err != nil {
			return err
		}
		if err := checkKind(call, d.Kind); err != nil {
			return err
		}
		if a = s.agents.Get(row.AgentID); a == nil {
			return fmt.Errorf("run %s: agent %q is not served by this instance", row.ID, row.AgentID)
		}
		if d.Kind == agent.CallResumed {
			tool := a.Tool(call.ToolName)
			if tool == nil {
				return fmt.Errorf("run %s: agent %q has no tool %q", row.ID, row.AgentID, call.ToolName)
			}
			if err := tool.ValidateResume(d.ResumeData); err != nil {
				return Errorf(CodeBadUserInput, "resumeData does not match the resumeSchema of %s: %v", call.ToolName, err)
			}
		}
		if row.Snapshot == nil {
			return fmt.Errorf("run %s is suspended without a snapshot", row.ID)
		}
		if snap, err = agent.DecodeSnapshot(*row.Snapshot); err != nil {
			return err
		}
		if err := snap.Decide(call.ToolCallID, d); err != nil {
			return fmt.Errorf("run %s: snapshot does not wait on %s: %w", row.ID, call.ToolCallID, err)
		}
		evs := decisionEvents(call, d, p.DecidedBy)
		seq := row.LastSeq + int64(len(evs))
		until := now.Add(s.cfg.LeaseTTL)
		owner := s.newLease()
		res := tx.Model(&gormstore.Run{}).
			Where("id = ? AND status = ? AND version = ?", row.ID, StatusSuspended, row.Version).
			Updates(map[string]any{
				"status": StatusRunning, "lease_owner": owner, "lease_until": until,
				"version": row.Version + 1, "snapshot": snap.Encode(), "suspended_at": nil,
				"updated_at": now, "last_seq": seq,
			})
		if res.Error != nil {
			return fmt.Errorf("decide run %s: %w", row.ID, res.Error)
		}
		if res.RowsAffected == 0 {
			return Errorf(CodeConflict, "run %s was decided by someone else first", row.ID)
		}
		if err := markDecided(tx, call, d, p.DecidedBy, now); err != nil {
			return err
		}
		if _, err := events.Append(tx, row.ID, row.LastSeq, now, evs...); err != nil {
			return err
		}
		if err := s.recordChange(tx, row.ID, ChangeLeft, now); err != nil {
			return fmt.Errorf("record change: %w", err)
		}
		row.Status, row.LeaseOwner, row.LeaseUntil = string(StatusRunning), &owner, &until
		row.Version, row.SuspendedAt, row.UpdatedAt, row.LastSeq = row.Version+1, nil, now, seq
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.runHub.Publish(row.ID, struct{}{})
	s.changes.Publish(changesTopic, Change{Kind: ChangeLeft, RunID: row.ID})
	s.execute(a, row, snap)
	out := runFromModel(row, nil)
	// The decision is committed: a failure to read the audit trail must not turn it into an error.
	if err := attachDecisions(s.store.db.WithContext(context.WithoutCancel(ctx)), []*Run{out}); err != nil {
		s.cfg.Logger.Warn("decide: load decisions", "run", out.ID, "err", err)
	}
	return out, nil
}

// pickCall finds the pending call a decision is about.
func pickCall(tx *gorm.DB, runID string, toolCallID *string) (*gormstore.ToolCall, error) {
	byRun, err := pendingCalls(tx, []string{runID})
	if err != nil {
		return nil, err
	}
	pending := byRun[runID]
	if toolCallID == nil || *toolCallID == "" {
		switch len(pending) {
		case 0:
			return nil, Errorf(CodeConflict, "run %s has no pending tool call", runID)
		case 1:
			return &pending[0], nil
		default:
			return nil, Errorf(CodeBadUserInput, "run %s has %d pending tool calls: pass toolCallId", runID, len(pending))
		}
	}
	for i := range pending {
		if pending[i].ToolCallID == *toolCallID {
			return &pending[i], nil
		}
	}
	var decided int64
	if err := tx.Model(&gormstore.ToolCall{}).Where("run_id = ? AND tool_call_id = ?", runID, *toolCallID).Count(&decided).Error; err != nil {
		return nil, fmt.Errorf("look up tool call: %w", err)
	}
	if decided > 0 {
		return nil, Errorf(CodeConflict, "tool call %s of run %s was already decided", *toolCallID, runID)
	}
	return nil, Errorf(CodeBadUserInput, "run %s has no tool call %q waiting", runID, *toolCallID)
}

func checkKind(call *gormstore.ToolCall, kind agent.CallState) error {
	if kind == agent.CallResumed && call.RequiresApproval {
		return Errorf(CodeBadUserInput, "tool call %s (%s) waits for approval, not resume data: use approveToolCall or declineToolCall", call.ToolCallID, call.ToolName)
	}
	if kind != agent.CallResumed && !call.RequiresApproval {
		return Errorf(CodeBadUserInput, "tool call %s (%s) waits for resume data, not approval: use resumeRun", call.ToolCallID, call.ToolName)
	}
	return nil
}

func markDecided(tx *gorm.DB, call *gormstore.ToolCall, d agent.Decision, by string, now time.Time) error {
	state := map[agent.CallState]string{agent.CallApproved: gormstore.ToolCallApproved, agent.CallDeclined: gormstore.ToolCallDeclined, agent.CallResumed: gormstore.ToolCallResumed}[d.Kind]
	set := map[string]any{"state": state, "decided_at": now}
	if by != "" {
		set["decided_by"] = by
	}
	if d.Reason != "" {
		set["reason"] = d.Reason
	}
	if d.ResumeData != nil {
		set["resume_data"] = string(d.ResumeData)
	}
	res := tx.Model(&gormstore.ToolCall{}).Where("id = ? AND state = ?", call.ID, gormstore.ToolCallPending).Updates(set)
	if res.Error != nil {
		return fmt.Errorf("record decision: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return Errorf(CodeConflict, "tool call %s was decided by someone else first", call.ToolCallID)
	}
	return nil
}

func decisionEvents(call *gormstore.ToolCall, d agent.Decision, by string) []events.Event {
	tc := toolCallFromModel(*call)
	ev := &events.ToolCall{ToolCallID: tc.ToolCallID, ToolName: tc.ToolName, Args: tc.Args, RequiresApproval: tc.RequiresApproval, SuspendPayload: tc.SuspendPayload, Interrupted: tc.Interrupted}
	resumed := events.Event{Type: events.RunResumed, Status: string(StatusRunning), DecidedBy: by}
	switch d.Kind {
	case agent.CallApproved:
		return []events.Event{{Type: events.ToolCallApproved, ToolCall: ev, DecidedBy: by}, resumed}
	case agent.CallDeclined:
		return []events.Event{{Type: events.ToolCallDeclined, ToolCall: ev, Reason: d.Reason, DecidedBy: by}, resumed}
	default:
		return []events.Event{resumed}
	}
}
