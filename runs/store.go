package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/events"
	"interlock/gormstore"
)

// store is the run service's storage: every query of agent_runs, run_tool_calls and messages is
// here. Methods that change state own their transaction; helpers that take a tx do not commit.
type store struct {
	db *gorm.DB
}

// errLeaseLost means a write that must be made by the run's lease holder found another owner (or
// another status): this instance must stop executing the run.
var errLeaseLost = errors.New("run lease lost")

func (st *store) tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	err := st.db.WithContext(ctx).Transaction(fn)
	var app *Error
	if err == nil || errors.Is(err, errLeaseLost) || errors.As(err, &app) || ctx.Err() != nil {
		return err
	}
	return &storageError{err}
}

// storageError marks a failure of the database (not of the request or the run), so an execution
// can tell it from a model error and hand the run over instead of failing it.
type storageError struct{ err error }

func (e *storageError) Error() string { return e.err.Error() }
func (e *storageError) Unwrap() error { return e.err }

// getRun returns the run row, or nil when there is none.
func getRun(tx *gorm.DB, id string) (*gormstore.Run, error) {
	var r gormstore.Run
	err := tx.Where("id = ?", id).Limit(1).Find(&r).Error
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	if r.ID == "" {
		return nil, nil
	}
	return &r, nil
}

// pendingCalls returns the pending tool calls of the given runs, keyed by run id.
func pendingCalls(tx *gorm.DB, runIDs []string) (map[string][]gormstore.ToolCall, error) {
	out := map[string][]gormstore.ToolCall{}
	if len(runIDs) == 0 {
		return out, nil
	}
	var rows []gormstore.ToolCall
	err := tx.Where("run_id IN ? AND state = ?", runIDs, gormstore.ToolCallPending).Order("id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("load pending tool calls: %w", err)
	}
	for _, r := range rows {
		out[r.RunID] = append(out[r.RunID], r)
	}
	return out, nil
}

// findRun returns the run with its pending calls, or nil.
func (st *store) findRun(ctx context.Context, id string) (*Run, error) {
	db := st.db.WithContext(ctx)
	m, err := getRun(db, id)
	if err != nil || m == nil {
		return nil, err
	}
	list, err := withCalls(db, []gormstore.Run{*m})
	if err != nil {
		return nil, err
	}
	return list[0], nil
}

// withCalls turns rows into runs with their pending calls and their decisions, reading the
// tool-call rows of all of them in one query.
func withCalls(db *gorm.DB, rows []gormstore.Run) ([]*Run, error) {
	out := make([]*Run, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	var calls []gormstore.ToolCall
	if err := db.Where("run_id IN ?", ids).Order("id").Find(&calls).Error; err != nil {
		return nil, fmt.Errorf("load tool calls: %w", err)
	}
	pending := map[string][]gormstore.ToolCall{}
	for _, c := range calls {
		if c.State == gormstore.ToolCallPending {
			pending[c.RunID] = append(pending[c.RunID], c)
		}
	}
	for i := range rows {
		out[i] = runFromModel(&rows[i], pending[rows[i].ID])
	}
	addDecisions(out, calls)
	return out, nil
}

// attachDecisions loads the decisions of the runs in one query.
func attachDecisions(db *gorm.DB, list []*Run) error {
	if len(list) == 0 {
		return nil
	}
	ids := make([]string, len(list))
	for i, r := range list {
		ids[i] = r.ID
	}
	var rows []gormstore.ToolCall
	if err := db.Where("run_id IN ? AND state <> ?", ids, gormstore.ToolCallPending).Order("id").Find(&rows).Error; err != nil {
		return fmt.Errorf("load decisions: %w", err)
	}
	addDecisions(list, rows)
	return nil
}

// addDecisions appends the decided calls among rows to their runs' Decisions.
func addDecisions(list []*Run, rows []gormstore.ToolCall) {
	byID := make(map[string]*Run, len(list))
	for _, r := range list {
		byID[r.ID] = r
	}
	for _, c := range rows {
		r := byID[c.RunID]
		if r == nil || c.State == gormstore.ToolCallPending {
			continue
		}
		d := Decision{
			ID: c.ID, RunID: c.RunID, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Kind: c.State,
			DecidedBy: c.DecidedBy, Reason: c.Reason, ResumeData: rawOrNil(c.ResumeData), Args: rawOrNil(c.Args),
		}
		if c.DecidedAt != nil {
			d.DecidedAt = c.DecidedAt.UTC()
		}
		r.Decisions = append(r.Decisions, d)
	}
}

// RecentParams filter and page recentRuns.
type RecentParams struct {
	Statuses   []Status
	AgentID    *string
	ThreadID   *string
	ResourceID *string
	Page       int
	PerPage    int
}

// recentRuns returns runs of the given statuses, most recently updated first, and their count.
func (st *store) recentRuns(ctx context.Context, p RecentParams) ([]*Run, int64, error) {
	q := st.db.WithContext(ctx).Model(&gormstore.Run{}).Where("status IN ?", p.Statuses)
	if p.AgentID != nil {
		q = q.Where("agent_id = ?", *p.AgentID)
	}
	if p.ThreadID != nil {
		q = q.Where("thread_id = ?", *p.ThreadID)
	}
	if p.ResourceID != nil {
		q = q.Where("resource_id = ?", *p.ResourceID)
	}
	var total int64
	if err := q.Session(&gorm.Session{}).Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("count runs: %w", err)
	}
	var rows []gormstore.Run
	if err := q.Omit("snapshot").Order("updated_at DESC, id DESC").Limit(p.PerPage).Offset(p.Page * p.PerPage).Find(&rows).Error; err != nil {
		return nil, 0, fmt.Errorf("list runs: %w", err)
	}
	out, err := withCalls(st.db.WithContext(ctx), rows)
	return out, total, err
}

// leaseUpdate is the compare-and-set every write of an executing run goes through: it only
// touches the row while this instance holds the lease of a RUNNING run.
func leaseUpdate(tx *gorm.DB, runID, owner string, set map[string]any) error {
	res := tx.Model(&gormstore.Run{}).Where("id = ? AND status = ? AND lease_owner = ?", runID, StatusRunning, owner).Updates(set)
	if res.Error != nil {
		return fmt.Errorf("update run %s: %w", runID, res.Error)
	}
	if res.RowsAffected == 0 {
		return errLeaseLost
	}
	return nil
}

// suspendedQuery builds the discovery filter of suspendedRuns.
func (st *store) suspendedQuery(ctx context.Context, p ListSuspendedParams) *gorm.DB {
	q := st.db.WithContext(ctx).Model(&gormstore.Run{}).Where("status = ?", StatusSuspended)
	if p.AgentID != nil {
		q = q.Where("agent_id = ?", *p.AgentID)
	} else {
		q = q.Where("parent_run_id IS NULL")
	}
	if p.ThreadID != nil {
		q = q.Where("thread_id = ?", *p.ThreadID)
	}
	if p.ResourceID != nil {
		q = q.Where("resource_id = ?", *p.ResourceID)
	}
	if p.FromDate != nil {
		q = q.Where("created_at >= ?", *p.FromDate)
	}
	if p.ToDate != nil {
		q = q.Where("created_at <= ?", *p.ToDate)
	}
	return q
}

// countSuspended counts the runs matching p.
func (st *store) countSuspended(ctx context.Context, p ListSuspendedParams) (int64, error) {
	var total int64
	if err := st.suspendedQuery(ctx, p).Count(&total).Error; err != nil {
		return 0, fmt.Errorf("count suspended runs: %w", err)
	}
	return total, nil
}

// pageSuspended returns limit runs matching p from offset on, in discovery order, each with its
// pending calls (one query for all of them).
func (st *store) pageSuspended(ctx context.Context, p ListSuspendedParams, limit, offset int) ([]*Run, error) {
	var rows []gormstore.Run
	if err := st.suspendedQuery(ctx, p).Omit("snapshot").Order("created_at DESC, id DESC").Limit(limit).Offset(offset).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list suspended runs: %w", err)
	}
	return withCalls(st.db.WithContext(ctx), rows)
}

// threadHistory returns the last messages of a thread, oldest first.
func (st *store) threadHistory(ctx context.Context, threadID string, max int) ([]gormstore.Message, error) {
	var rows []gormstore.Message
	err := st.db.WithContext(ctx).Where("thread_id = ?", threadID).Order("id DESC").Limit(max).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("load thread %s: %w", threadID, err)
	}
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	return rows, nil
}

// events returns stored events of a run after seq.
func (st *store) events(ctx context.Context, runID string, after int64, limit int) ([]events.Event, error) {
	return events.List(st.db.WithContext(ctx), runID, after, limit)
}

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
