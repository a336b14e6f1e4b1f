package gormstore

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// Delegate implements runs.Store.
func (s *Store) Delegate(ctx context.Context, d runs.Delegation) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		set := s.checkpointSet(d.Checkpoint)
		set["status"], set["lease_owner"], set["lease_until"], set["version"] = runtype.StatusWaiting, nil, nil, gorm.Expr("version + 1")
		if err := leaseUpdate(tx, d.RunID, d.Lease, set); err != nil {
			return err
		}
		if err := s.appendEvents(tx, d.RunID, d.After, d.At, d.Events, d.Outbox); err != nil {
			return err
		}
		return s.insertRun(tx, d.Child)
	})
}

// ancestorSet is the compare-and-set of a supervisor run above a run that suspends or is
// decided: from status `from` at the version and last seq read, to `to`.
func (s *Store) ancestorSet(tx *gorm.DB, a runs.AncestorWrite, from, to runtype.Status, at time.Time) error {
	set := map[string]any{
		"status": to, "version": a.Version + 1, "last_seq": a.After + int64(len(a.Events)), "updated_at": runtype.StoredTime(at), "suspended_at": nil,
	}
	if to == runtype.StatusSuspended {
		set["suspended_at"] = runtype.StoredTime(at)
	}
	res := tx.Model(&Run{}).Where("id = ? AND status = ? AND version = ? AND last_seq = ?", a.RunID, from, a.Version, a.After).Updates(set)
	if res.Error != nil {
		return fmt.Errorf("update supervisor run %s: %w", a.RunID, res.Error)
	}
	if res.RowsAffected == 0 {
		return runs.ErrStale
	}
	return s.appendEvents(tx, a.RunID, a.After, at, a.Events, a.Outbox)
}

// suspendAncestors makes the WAITING supervisors above a suspending run SUSPENDED, each on its
// delegate call, shown as the inner call, in the suspension's transaction.
func (s *Store) suspendAncestors(tx *gorm.DB, p runs.Suspension) error {
	for _, a := range p.Ancestors {
		if err := s.ancestorSet(tx, a, runtype.StatusWaiting, runtype.StatusSuspended, p.At); err != nil {
			return err
		}
		row := pendingRow(a.RunID, a.ToolCallID, a.Call, p.At)
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("insert pending tool call of supervisor run %s: %w", a.RunID, err)
		}
		if err := recordChange(tx, a.RunID, runs.ChangeSuspended, p.InstanceID, p.At); err != nil {
			return err
		}
	}
	return nil
}

// decideAncestors sends the SUSPENDED supervisors above a decided run back to WAITING, their
// delegate call's row decided as the inner call, in the decision's transaction.
func (s *Store) decideAncestors(tx *gorm.DB, d runs.DecisionWrite, set map[string]any) error {
	for _, a := range d.Ancestors {
		if err := s.ancestorSet(tx, a, runtype.StatusSuspended, runtype.StatusWaiting, d.At); err != nil {
			return err
		}
		res := tx.Model(&ToolCall{}).Where("run_id = ? AND tool_call_id = ? AND state = ?", a.RunID, a.ToolCallID, ToolCallPending).Updates(set)
		if res.Error != nil {
			return fmt.Errorf("record decision of supervisor run %s: %w", a.RunID, res.Error)
		}
		if res.RowsAffected == 0 {
			return runs.ErrStale
		}
		if err := recordChange(tx, a.RunID, runs.ChangeLeft, d.InstanceID, d.At); err != nil {
			return err
		}
	}
	return nil
}

// continueParent hands a finished sub-agent run's outcome to its WAITING supervisor, which
// becomes RUNNING under the handoff's lease, in the finish's transaction.
func (s *Store) continueParent(tx *gorm.DB, h *runs.Handoff, at time.Time) error {
	if h == nil {
		return nil
	}
	res := tx.Model(&Run{}).Where("id = ? AND status = ? AND version = ? AND last_seq = ?", h.RunID, runtype.StatusWaiting, h.Version, h.After).
		Updates(map[string]any{
			"status": runtype.StatusRunning, "snapshot": h.Snapshot, "lease_owner": h.Lease, "lease_until": s.dbNowPlus(h.TTL),
			"version": h.Version + 1, "updated_at": runtype.StoredTime(at), "recovery_attempts": 0, "recover_after": nil,
		})
	if res.Error != nil {
		return fmt.Errorf("continue supervisor run %s: %w", h.RunID, res.Error)
	}
	if res.RowsAffected == 0 {
		return runs.ErrStale
	}
	return nil
}
