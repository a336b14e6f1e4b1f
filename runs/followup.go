package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"interlock/agent"
	"interlock/notify"
	"interlock/runtype"
)

// Follow-up: while a call waits for a person, its tool may ask the server to remind the people
// who may decide it (remindAfter), to escalate it to more roles (escalateAfter, escalateTo) and
// to warn that it is about to expire (expiringBefore). The due times are fixed when the call
// begins to wait, stored with its row (followUp), and the expiry loop sends each step once it
// is due by this instance's clock (SendDueNotices): a run event on the top-level run that shows
// the call, with the webhooks' outbox rows, in the compare-and-set that records the step as
// sent (Store.SendNotice) — so of any number of instances exactly one sends it.

// noticeBatch is how many due steps one pass of the loop reads.
const noticeBatch = 100

// noticeEvents are the run events of the follow-up steps.
var noticeEvents = map[NoticeKind]runtype.EventType{
	NoticeReminder:   runtype.EventToolCallReminder,
	NoticeEscalation: runtype.EventToolCallEscalated,
	NoticeExpiring:   runtype.EventToolCallExpiring,
}

// followUp sets on call, which begins to wait at now on tool t, when each step of the tool's
// follow-up is due: remindAfter and escalateAfter from now, expiringBefore before the call's
// ExpiresAt (which must be set first; no warning without one).
func followUp(call *runtype.ToolCall, t *agent.Tool, now time.Time) {
	if t == nil {
		return
	}
	fu := t.FollowUp
	if fu.RemindAfter > 0 {
		at := runtype.StoredTime(now.Add(fu.RemindAfter))
		call.RemindAt = &at
	}
	if fu.EscalateAfter > 0 && len(fu.EscalateTo) > 0 {
		at := runtype.StoredTime(now.Add(fu.EscalateAfter))
		call.EscalateAt, call.EscalateTo = &at, append([]string(nil), fu.EscalateTo...)
	}
	if fu.ExpiringBefore > 0 && call.ExpiresAt != nil && call.ExpiresAt.Sub(now) > fu.ExpiringBefore {
		at := runtype.StoredTime(call.ExpiresAt.Add(-fu.ExpiringBefore))
		call.ExpiringAt = &at
	}
}

// escalatedTo returns the roles that may decide call at now because it is escalated to them
// (from its EscalateAt on); none before.
func escalatedTo(call *runtype.ToolCall, now time.Time) []runtype.Role {
	if call == nil || call.EscalateAt == nil || now.Before(*call.EscalateAt) {
		return nil
	}
	roles := make([]runtype.Role, len(call.EscalateTo))
	for i, r := range call.EscalateTo {
		roles[i] = runtype.Role(r)
	}
	return roles
}

// escalationNote tells a principal refused a decision on call when the call is escalated, and
// to whom ("" when it is not to be).
func escalationNote(call *runtype.ToolCall) string {
	if call == nil || call.EscalateAt == nil {
		return ""
	}
	return fmt.Sprintf(" (from %s on, %s may decide it too: it is escalated then)", call.EscalateAt.UTC().Format("2006-01-02T15:04:05Z"), strings.Join(call.EscalateTo, ", "))
}

// SendDueNotices sends the follow-up steps that are due by this instance's clock and not sent:
// for each, a TOOL_CALL_REMINDER, TOOL_CALL_ESCALATED or TOOL_CALL_EXPIRING event on the run
// with the webhooks it announces (approval.reminder, approval.escalated, approval.expiring),
// stored by the compare-and-set that records the step as sent, so of several instances exactly
// one sends it; subscribers and the watchers of the suspended set are told after the commit. It
// returns how many steps it sent.
func (s *Service) SendDueNotices(ctx context.Context) (int, error) {
	list, err := s.store.DueNotices(ctx, s.now(), noticeBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, due := range list {
		ok, err := s.sendNotice(ctx, due)
		if err != nil {
			errs = append(errs, fmt.Errorf("send %s of tool call %s of run %s: %w", due.Kind, due.ToolCallID, due.RunID, err))
		}
		if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// sendNotice sends one due step, unless it was sent or its call decided since it was listed.
// The run is read again when another write moved it between the read and the write (another
// step of it, on this instance or another).
func (s *Service) sendNotice(ctx context.Context, due DueNotice) (bool, error) {
	for range 3 {
		r, err := s.store.GetRecord(ctx, due.RunID)
		if err != nil || r == nil || r.Status != runtype.StatusSuspended {
			return false, err
		}
		call := waitingCall(&r.Run, due.ToolCallID)
		if call == nil || sentAt(call, due.Kind) != nil {
			return false, nil
		}
		now := s.now()
		shown := *call // the call as the event shows it: with this step sent
		*sentField(&shown, due.Kind) = &now
		ev := runtype.Event{Type: noticeEvents[due.Kind], ToolCall: &shown, Reason: noticeReason(call, due.Kind, now)}
		evs := []runtype.Event{ev}
		outbox, err := s.announce(&r.Run, r.LastSeq, now, evs, notify.Call{})
		if err != nil {
			return false, err
		}
		sent, err := s.store.SendNotice(ctx, NoticeWrite{RunID: r.ID, ToolCallID: call.ToolCallID, Kind: due.Kind, After: r.LastSeq,
			At: now, Events: evs, InstanceID: s.cfg.InstanceID, Outbox: outbox})
		if errors.Is(err, ErrStale) {
			continue
		}
		if err != nil || !sent {
			return false, err
		}
		s.runHub.Publish(r.ID, struct{}{})
		s.changes.Publish(changesTopic, Change{Kind: ChangeChanged, RunID: r.ID})
		s.cfg.Logger.Info("tool call "+string(due.Kind)+" sent", "run", r.ID, "tool_call", call.ToolCallID, "tool", call.ToolName, "due_at", due.DueAt)
		return true, nil
	}
	return false, nil // still moving: the next pass tries again
}

// sentAt is when step kind of call was sent (nil: not yet).
func sentAt(call *runtype.ToolCall, kind NoticeKind) *time.Time { return *sentField(call, kind) }

// sentField is the field of call that records when step kind was sent.
func sentField(call *runtype.ToolCall, kind NoticeKind) **time.Time {
	switch kind {
	case NoticeReminder:
		return &call.RemindedAt
	case NoticeEscalation:
		return &call.EscalatedAt
	default:
		return &call.ExpiringWarnedAt
	}
}

// noticeReason is what the event of step kind says, for people reading the run.
func noticeReason(call *runtype.ToolCall, kind NoticeKind, now time.Time) string {
	switch kind {
	case NoticeReminder:
		return fmt.Sprintf("%s still waits for a decision", call.ToolName)
	case NoticeEscalation:
		return fmt.Sprintf("%s still waits for a decision: escalated to %s, who may decide it from now on", call.ToolName, strings.Join(call.EscalateTo, ", "))
	default:
		if call.ExpiresAt == nil {
			return fmt.Sprintf("%s expires soon without a decision", call.ToolName)
		}
		return fmt.Sprintf("%s expires at %s (in %s) without a decision", call.ToolName,
			call.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"), call.ExpiresAt.Sub(now).Round(time.Second))
	}
}

// onlyNoticed reports whether the runs a decision was checked against moved since, between its
// read and its compare-and-set, only by follow-up steps (which append an event and change
// nothing else, so not the version): then the decision is checked and made again, rather than
// answered CONFLICT as if someone else had decided.
func (s *Service) onlyNoticed(ctx context.Context, dec *decision) bool {
	read := append([]*Record{dec.top}, dec.above...)
	if dec.run != dec.top {
		read = append(read, dec.run)
	}
	for _, was := range read {
		now, err := s.store.GetRecord(ctx, was.ID)
		if err != nil || now == nil || now.Status != runtype.StatusSuspended || now.Version != was.Version {
			return false
		}
	}
	return true
}
