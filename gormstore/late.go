package gormstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"interlock/runs"
	"interlock/runtype"
)

// RecordLateResult implements runs.Store. It checks, in one transaction, that the run has the
// call (a TOOL_CALL event naming its id and tool) and did not store its answer after all (no
// TOOL_RESULT or TOOL_CALL_SUSPENDED event of it after l.After), then inserts the row unless one is there: the primary key (run_id,
// tool_call_id) keeps one per call. On MySQL the existence check locks the key's range, so two
// racing recorders of one call queue (or one is a deadlock victim, run again by tx) and the
// second finds the first's row.
func (s *Store) RecordLateResult(ctx context.Context, l runtype.LateResult) (bool, error) {
	var stored bool
	err := s.tx(ctx, func(tx *gorm.DB) error {
		stored = false
		var runRows int64
		if err := tx.Model(&Run{}).Where("id = ?", l.RunID).Count(&runRows).Error; err != nil {
			return fmt.Errorf("read run %s: %w", l.RunID, err)
		}
		if runRows == 0 {
			return runs.ErrNoSuchCall
		}
		known, answered, err := callEvents(tx, l.RunID, l.ToolCallID, l.ToolName, l.After)
		if err != nil {
			return err
		}
		if !known {
			return runs.ErrNoSuchCall
		}
		if answered {
			return nil
		}
		q := tx.Model(&LateToolResult{}).Where("run_id = ? AND tool_call_id = ?", l.RunID, l.ToolCallID)
		if s.mysql {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		var have []LateToolResult
		if err := q.Limit(1).Find(&have).Error; err != nil {
			return fmt.Errorf("read late result of %s: %w", l.ToolCallID, err)
		}
		if len(have) > 0 {
			return nil
		}
		row := LateToolResult{
			RunID: l.RunID, ToolCallID: l.ToolCallID, ToolName: l.ToolName, Result: strOrNil(l.Result), Error: l.Error,
			SuspendPayload: strOrNil(l.SuspendPayload), InstanceID: l.InstanceID, FinishedAt: runtype.StoredTime(l.FinishedAt), RecordedAt: runtype.StoredTime(l.RecordedAt),
		}
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("insert late result of %s: %w", l.ToolCallID, err)
		}
		stored = true
		return nil
	})
	if err != nil && !errors.Is(err, runs.ErrNoSuchCall) {
		err = fmt.Errorf("record late result of run %s call %s: %w", l.RunID, l.ToolCallID, err)
	}
	return stored, err
}

// callEvents reads the run's TOOL_CALL, TOOL_RESULT and TOOL_CALL_SUSPENDED events and reports
// whether a TOOL_CALL names the call with that tool (known) and whether an answer of it — a
// TOOL_RESULT, or the TOOL_CALL_SUSPENDED of a tool that suspended — is stored after seq after
// (answered). A call that suspended, was resumed and runs again keeps its id: only an answer
// stored after its latest execution was sent answers it.
// A run has a few of them (one per call of each step), so reading them beats matching JSON in
// SQL, which the two dialects spell differently.
func callEvents(tx *gorm.DB, runID, callID, tool string, after int64) (known, answered bool, err error) {
	var rows []Event
	types := []runtype.EventType{runtype.EventToolCallRequested, runtype.EventToolResult, runtype.EventToolCallSuspended}
	err = tx.Select("seq", "type", "data").Where("run_id = ? AND type IN ?", runID, types).
		Find(&rows).Error
	if err != nil {
		return false, false, fmt.Errorf("read tool events of run %s: %w", runID, err)
	}
	for _, r := range rows {
		var ev runtype.Event
		if err := json.Unmarshal([]byte(r.Data), &ev); err != nil {
			return false, false, fmt.Errorf("decode event of run %s: %w", runID, err)
		}
		if ev.ToolCall == nil || ev.ToolCall.ToolCallID != callID {
			continue
		}
		switch runtype.EventType(r.Type) {
		case runtype.EventToolResult, runtype.EventToolCallSuspended:
			answered = answered || r.Seq > after
		case runtype.EventToolCallRequested:
			known = known || ev.ToolCall.ToolName == tool
		}
	}
	return known, answered, nil
}

// LateResults implements runs.Store.
func (s *Store) LateResults(ctx context.Context, runID string) ([]runtype.LateResult, error) {
	byRun, err := lateResults(s.db.WithContext(ctx).Where("run_id = ?", runID), 1)
	return byRun[runID], err
}

// lateResults reads the late results q selects, by run, each run's oldest first. A query for
// no runs (q narrowed to an empty list) is not sent.
func lateResults(q *gorm.DB, runsAsked int) (map[string][]runtype.LateResult, error) {
	out := map[string][]runtype.LateResult{}
	if runsAsked == 0 {
		return out, nil
	}
	var rows []LateToolResult
	if err := q.Order("recorded_at, tool_call_id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load late results: %w", err)
	}
	for _, r := range rows {
		out[r.RunID] = append(out[r.RunID], runtype.LateResult{
			RunID: r.RunID, ToolCallID: r.ToolCallID, ToolName: r.ToolName, Result: rawOrNil(r.Result), Error: r.Error,
			SuspendPayload: rawOrNil(r.SuspendPayload), InstanceID: r.InstanceID, FinishedAt: r.FinishedAt.UTC(), RecordedAt: r.RecordedAt.UTC(),
		})
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func strOrEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
