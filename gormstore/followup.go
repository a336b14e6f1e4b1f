package gormstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// noticeColumns are the columns of a follow-up step: when it is due, and when it was sent.
var noticeColumns = map[runs.NoticeKind]struct{ due, sent string }{
	runs.NoticeReminder:   {"remind_at", "reminded_at"},
	runs.NoticeEscalation: {"escalate_at", "escalated_at"},
	runs.NoticeExpiring:   {"expiring_at", "expiring_warned_at"},
}

// noticeOrder is the order of steps due at the same instant.
var noticeOrder = []runs.NoticeKind{runs.NoticeReminder, runs.NoticeEscalation, runs.NoticeExpiring}

// DueNotices implements runs.Store: one query per step, each on its (state, <due>) index.
func (s *Store) DueNotices(ctx context.Context, now time.Time, limit int) ([]runs.DueNotice, error) {
	at := runtype.StoredTime(now)
	var out []runs.DueNotice
	for _, kind := range noticeOrder {
		col := noticeColumns[kind]
		var rows []struct {
			RunID      string
			ToolCallID string
			Due        time.Time
		}
		q := s.db.WithContext(ctx).Table("run_tool_calls").
			Select("run_tool_calls.run_id AS run_id, run_tool_calls.tool_call_id AS tool_call_id, run_tool_calls."+col.due+" AS due").
			Joins("JOIN agent_runs ON agent_runs.id = run_tool_calls.run_id").
			Where("run_tool_calls.state = ? AND run_tool_calls."+col.due+" <= ? AND run_tool_calls."+col.sent+" IS NULL", ToolCallPending, at).
			Where("agent_runs.status = ? AND agent_runs.parent_run_id IS NULL", runtype.StatusSuspended)
		if kind == runs.NoticeExpiring {
			q = q.Where("run_tool_calls.expires_at > ?", at)
		}
		if err := q.Order("run_tool_calls." + col.due).Order("run_tool_calls.id").Limit(limit).Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("find due %s notices: %w", kind, err)
		}
		for _, r := range rows {
			out = append(out, runs.DueNotice{RunID: r.RunID, ToolCallID: r.ToolCallID, Kind: kind, DueAt: r.Due.UTC()})
		}
	}
	slices.SortStableFunc(out, func(a, b runs.DueNotice) int { return a.DueAt.Compare(b.DueAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SendNotice implements runs.Store. The run's row is updated first, as a decision updates it,
// so that both take the run's lock, then the call's, in one order.
func (s *Store) SendNotice(ctx context.Context, n runs.NoticeWrite) (bool, error) {
	col, ok := noticeColumns[n.Kind]
	if !ok {
		return false, fmt.Errorf("send notice: unknown kind %q", n.Kind)
	}
	sent := false
	err := s.tx(ctx, func(tx *gorm.DB) error {
		sent = false
		at := runtype.StoredTime(n.At)
		res := tx.Model(&Run{}).Where("id = ? AND status = ? AND last_seq = ?", n.RunID, runtype.StatusSuspended, n.After).
			Update("last_seq", n.After+int64(len(n.Events)))
		if res.Error != nil {
			return fmt.Errorf("send %s of run %s: %w", n.Kind, n.RunID, res.Error)
		}
		if res.RowsAffected == 0 {
			return runs.ErrStale
		}
		res = tx.Model(&ToolCall{}).
			Where("run_id = ? AND tool_call_id = ? AND state = ?", n.RunID, n.ToolCallID, ToolCallPending).
			Where(col.due+" <= ? AND "+col.sent+" IS NULL", at).
			Update(col.sent, at)
		if res.Error != nil {
			return fmt.Errorf("send %s of tool call %s: %w", n.Kind, n.ToolCallID, res.Error)
		}
		if res.RowsAffected == 0 {
			return errNotSent // roll the run's row back
		}
		if err := s.appendEvents(tx, n.RunID, n.After, n.At, n.Events, n.Outbox); err != nil {
			return err
		}
		if err := recordChange(tx, n.RunID, runs.ChangeChanged, n.InstanceID, n.At); err != nil {
			return err
		}
		sent = true
		return nil
	})
	if errors.Is(err, errNotSent) {
		return false, nil
	}
	return sent, err
}

// errNotSent rolls back a SendNotice whose step was sent already or whose call no longer waits.
var errNotSent = errors.New("notice not sent")

// rolesJSON is how a call's escalateTo is stored (nil: none).
func rolesJSON(roles []string) *string {
	if len(roles) == 0 {
		return nil
	}
	b, _ := json.Marshal(roles) // strings always encode
	s := string(b)
	return &s
}

// withFollowUp sets on call, read from row c, its follow-up's due times and sent markers.
func withFollowUp(call *runtype.ToolCall, c *ToolCall) {
	call.RemindAt, call.EscalateAt, call.ExpiringAt = msOrNil(c.RemindAt), msOrNil(c.EscalateAt), msOrNil(c.ExpiringAt)
	call.RemindedAt, call.EscalatedAt, call.ExpiringWarnedAt = msOrNil(c.RemindedAt), msOrNil(c.EscalatedAt), msOrNil(c.ExpiringWarnedAt)
	if c.EscalateTo != nil {
		var roles []string
		if json.Unmarshal([]byte(*c.EscalateTo), &roles) == nil {
			call.EscalateTo = roles
		}
	}
}
