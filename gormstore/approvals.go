package gormstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// RecordApproval implements runs.Store: the run's compare-and-set at its version (it stays
// SUSPENDED), the call's row counted (still PENDING, before its deadline), the approval's row
// (its primary key refuses the same person twice in a round), the events and the change.
func (s *Store) RecordApproval(ctx context.Context, a runs.ApprovalWrite) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Run{}).
			Where("id = ? AND status = ? AND version = ? AND last_seq = ?", a.RunID, runtype.StatusSuspended, a.Version, a.After).
			Updates(map[string]any{"version": a.Version + 1, "snapshot": a.Snapshot, "updated_at": runtype.StoredTime(a.At), "last_seq": a.After + int64(len(a.Events))})
		if res.Error != nil {
			return fmt.Errorf("record approval on run %s: %w", a.RunID, res.Error)
		}
		if res.RowsAffected == 0 {
			return runs.ErrStale
		}
		if err := insertApproval(tx, a.RunID, a.ToolCallID, a.Approval); err != nil {
			return err
		}
		if err := s.appendEvents(tx, a.RunID, a.After, a.At, a.Events, a.Outbox); err != nil {
			return err
		}
		return recordChange(tx, a.RunID, runs.ChangeChanged, a.InstanceID, a.At)
	})
}

// insertApproval counts approval a on the call's row, which must still wait and not be past
// its deadline at a.At (ErrStale otherwise), and inserts its row: ErrDuplicateApproval when its
// subject approved in that round already.
func insertApproval(tx *gorm.DB, runID, toolCallID string, a runtype.Approval) error {
	res := tx.Model(&ToolCall{}).
		Where("run_id = ? AND tool_call_id = ? AND state = ? AND (expires_at IS NULL OR expires_at > ?)", runID, toolCallID, ToolCallPending, runtype.StoredTime(a.At)).
		Update("approvals", gorm.Expr("approvals + 1"))
	if res.Error != nil {
		return fmt.Errorf("count approval: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return runs.ErrStale
	}
	row := ToolCallApproval{RunID: runID, ToolCallID: toolCallID, Round: a.Round, Subject: a.Subject, ArgsDigest: a.ArgsDigest,
		EditedArgs: strOrNil(a.EditedArgs), ApprovedAt: runtype.StoredTime(a.At)}
	if err := tx.Create(&row).Error; err != nil {
		if duplicateKey(err) {
			return runs.ErrDuplicateApproval
		}
		return fmt.Errorf("record approval: %w", err)
	}
	return nil
}

// duplicateKey reports whether err is the database refusing a row whose primary key exists.
func duplicateKey(err error) bool {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed") // SQLite (SQLITE_CONSTRAINT_PRIMARYKEY)
}

// approvalsOf reads the approvals of the calls of runs ids that have some (ToolCall.Approvals),
// in one query, grouped by run and call: the current (highest) round's in By, the others in
// Superseded, oldest first; Args are the round's (its first approval's edited arguments, or
// the call's own).
func approvalsOf(db *gorm.DB, ids []string, calls map[string][]ToolCall) (map[string]map[string]*runtype.Approvals, error) {
	out := map[string]map[string]*runtype.Approvals{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []ToolCallApproval
	if err := db.Where("run_id IN ?", ids).Order("run_id, tool_call_id, round, approved_at, subject").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load approvals: %w", err)
	}
	args := map[string]json.RawMessage{}
	for _, r := range ids {
		for _, c := range calls[r] {
			args[r+"\x00"+c.ToolCallID] = rawOrNil(c.Args)
		}
	}
	for _, r := range rows {
		byCall := out[r.RunID]
		if byCall == nil {
			byCall = map[string]*runtype.Approvals{}
			out[r.RunID] = byCall
		}
		a := byCall[r.ToolCallID]
		if a == nil {
			a = &runtype.Approvals{Round: r.Round, Args: args[r.RunID+"\x00"+r.ToolCallID], By: []runtype.Approval{}}
			byCall[r.ToolCallID] = a
		}
		one := runtype.Approval{Subject: r.Subject, At: r.ApprovedAt.UTC(), Round: r.Round, ArgsDigest: r.ArgsDigest, EditedArgs: rawOrNil(r.EditedArgs)}
		if r.Round != a.Round { // a later round: the earlier approvals no longer count
			a.Superseded = append(a.Superseded, a.By...)
			a.Round, a.By, a.Args = r.Round, []runtype.Approval{}, args[r.RunID+"\x00"+r.ToolCallID]
		}
		if len(a.By) == 0 && one.EditedArgs != nil {
			a.Args = one.EditedArgs // the round's arguments are its first approval's
		}
		a.By = append(a.By, one)
	}
	return out, nil
}
