package gormstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// GetRun implements runs.Store. It reads the columns a client sees (viewColumns), never the
// snapshot, which is often the largest value of the row.
func (s *Store) GetRun(ctx context.Context, id string) (*runtype.Run, error) {
	db := s.db.WithContext(ctx)
	rows, err := scanViewRuns(db.Model(&Run{}).Where("id = ?", id).Limit(1), 1)
	if err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	list, err := withCalls(db, rows)
	if err != nil {
		return nil, err
	}
	return list[0], nil
}

// GetRecord implements runs.Store.
func (s *Store) GetRecord(ctx context.Context, id string) (*runs.Record, error) {
	db := s.db.WithContext(ctx)
	var rows []Run
	if err := db.Where("id = ?", id).Limit(1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load run %s: %w", id, err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	list, err := withCalls(db, rows)
	if err != nil {
		return nil, err
	}
	return recordOf(&rows[0], list[0]), nil
}

// Progress implements runs.Store.
func (s *Store) Progress(ctx context.Context, ids []string) (map[string]runs.Progress, error) {
	out := make(map[string]runs.Progress, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	// Scanned into the four columns read, not the whole model: the notify loop reads the
	// progress of every followed run each poll interval (20 times a second), so a row's
	// size is paid a thousand times a second per thousand held MCP calls.
	rows := make([]progressRow, 0, len(ids))
	if err := s.db.WithContext(ctx).Model(&Run{}).Select("id", "last_seq", "status", "resource_id").Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read run progress: %w", err)
	}
	for _, r := range rows {
		out[r.ID] = runs.Progress{LastSeq: r.LastSeq, Status: runtype.Status(r.Status), ResourceID: r.ResourceID}
	}
	return out, nil
}

// progressRow is what Progress reads of a run.
type progressRow struct {
	ID         string  `gorm:"column:id"`
	LastSeq    int64   `gorm:"column:last_seq"`
	Status     string  `gorm:"column:status"`
	ResourceID *string `gorm:"column:resource_id"`
}

// withCalls turns rows into runs with their pending calls and their decisions, reading the
// tool-call rows of all of them in one query.
func withCalls(db *gorm.DB, rows []Run) ([]*runtype.Run, error) {
	out := make([]*runtype.Run, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	calls, err := scanCalls(db.Model(&ToolCall{}).Where("run_id IN ?", ids).Order("id"), len(rows)) // most runs have one call
	if err != nil {
		return nil, fmt.Errorf("load tool calls: %w", err)
	}
	byRun := make(map[string][]ToolCall, len(rows))
	var late []string     // the runs that may show late results (runs.Store.GetRun)
	var approved []string // the runs with calls a quorum's approvals were recorded on
	for _, c := range calls {
		byRun[c.RunID] = append(byRun[c.RunID], c)
		if c.Approvals > 0 && (len(approved) == 0 || approved[len(approved)-1] != c.RunID) {
			approved = append(approved, c.RunID)
		}
		if c.Interrupted && (len(late) == 0 || late[len(late)-1] != c.RunID) {
			late = append(late, c.RunID)
		}
	}
	for i := range rows {
		if rows[i].Status == string(runtype.StatusFailed) && deref(rows[i].ErrorCode) == runs.FailureUnrecoverable {
			late = append(late, rows[i].ID)
		}
	}
	results, err := lateResults(db.Where("run_id IN ?", late), len(late))
	if err != nil {
		return nil, err
	}
	approvals, err := approvalsOf(db, approved, byRun)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		out[i] = runFromRow(&rows[i], byRun[rows[i].ID])
		out[i].LateResults = results[rows[i].ID]
		if byCall := approvals[rows[i].ID]; byCall != nil {
			for j := range out[i].ToolCalls {
				out[i].ToolCalls[j].Approvals = byCall[out[i].ToolCalls[j].ToolCallID]
			}
			for j := range out[i].Decisions {
				out[i].Decisions[j].Approvals = byCall[out[i].Decisions[j].ToolCallID]
			}
		}
	}
	return out, nil
}

// eq narrows q to rows whose column col is exactly v. MySQL's utf8mb4_bin collation pads with
// spaces when it compares, so 'user-1' = 'user-1 ' there: comparing the lengths as well keeps
// threads and resources that differ by trailing spaces apart, as SQLite does, while the index
// still serves the equality.
// likeEscape escapes v for a LIKE pattern with ESCAPE '!' (the same on SQLite and MySQL,
// where a backslash would also be a string escape): its %, _ and ! match themselves.
func likeEscape(v string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(v)
}

func (s *Store) eq(q *gorm.DB, col, v string) *gorm.DB {
	q = q.Where(col+" = ?", v)
	if s.mysql {
		q = q.Where("LENGTH("+col+") = LENGTH(?)", v)
	}
	return q
}

// in narrows q, when values is not nil, to rows whose column col is exactly one of them (none
// when it is empty). On MySQL the comparison is repeated on the bytes, which do not pad, for
// the reason given at eq; the plain IN keeps the index usable.
func (s *Store) in(q *gorm.DB, col string, values []string) *gorm.DB {
	switch {
	case values == nil:
		return q
	case len(values) == 0:
		return q.Where("1 = 0")
	case s.mysql:
		return q.Where(col+" IN ? AND CAST("+col+" AS BINARY) IN ?", values, values)
	default:
		return q.Where(col+" IN ?", values)
	}
}

// agents narrows q to runs of the agents in, when not nil (none when empty), and leaves out
// runs of the agents in not: the listings' external filter (runs.ListSuspendedParams).
func (s *Store) agents(q *gorm.DB, in, not []string) *gorm.DB {
	q = s.in(q, "agent_id", in)
	if len(not) > 0 {
		q = q.Where("agent_id NOT IN ?", not)
	}
	return q
}

// suspendedQuery builds the discovery filter of suspendedRuns.
func (s *Store) suspendedQuery(ctx context.Context, p runs.ListSuspendedParams) *gorm.DB {
	q := s.db.WithContext(ctx).Model(&Run{}).Where("status = ?", runtype.StatusSuspended)
	if p.AgentID != nil {
		q = s.eq(q, "agent_id", *p.AgentID)
	} else {
		q = q.Where("parent_run_id IS NULL")
	}
	if p.ThreadID != nil {
		q = s.eq(q, "thread_id", *p.ThreadID)
	}
	if p.ResourceID != nil {
		q = s.eq(q, "resource_id", *p.ResourceID)
	}
	q = s.in(q, "resource_id", p.Resources)
	q = s.agents(q, p.Agents, p.NotAgents)
	if p.FromDate != nil {
		q = q.Where("created_at >= ?", runtype.StoredTime(*p.FromDate))
	}
	if p.ToDate != nil {
		q = q.Where("created_at <= ?", runtype.StoredTime(*p.ToDate))
	}
	return s.search(q, p.Search)
}

// CountSuspended implements runs.Store. The inbox and one agent's runs are counted by
// suspended_counts (counts.go); narrower filters by their index.
func (s *Store) CountSuspended(ctx context.Context, p runs.ListSuspendedParams) (int64, error) {
	if countable(p) {
		return s.maintainedCount(ctx, p)
	}
	var total int64
	if err := s.suspendedQuery(ctx, p).Count(&total).Error; err != nil {
		return 0, fmt.Errorf("count suspended runs: %w", err)
	}
	return total, nil
}

// ListSuspended implements runs.Store.
//
// The page is found first, as ids only, by a deferred join: the inner query walks an index
// whose columns are the filter and the order (idx_runs_status_parent, _agent, _thread,
// _resource, and the agent + thread / agent + resource ones of migration 0009 end in
// created_at, id), skipping offset entries without reading a single row, and only the limit
// rows of the page are then read in full. A plain OFFSET would read every skipped row (page
// 1,000 of 50 reads 50,050).
//
// For the inbox and one agent's runs, a deep page also starts in the right day: the maintained
// counts by day (counts.go) say how many runs the newer days hold, and the walk starts at the
// end of the day holding the page's first run.
func (s *Store) ListSuspended(ctx context.Context, p runs.ListSuspendedParams, limit, offset int) ([]*runtype.Run, error) {
	q := s.suspendedQuery(ctx, p)
	if offset > 0 && countable(p) {
		before, skipped, ok, err := s.seek(ctx, p, offset)
		if err != nil {
			return nil, err
		}
		if ok {
			q, offset = q.Where("created_at < ?", before), offset-skipped
		}
	}
	page := q.Select("id").Order("created_at DESC, id DESC").Limit(limit).Offset(offset)
	rows, err := scanViewRuns(s.db.WithContext(ctx).Model(&Run{}).
		Joins("JOIN (?) AS page ON page.id = agent_runs.id", page).
		Order("agent_runs.created_at DESC, agent_runs.id DESC"), limit)
	if err != nil {
		return nil, fmt.Errorf("list suspended runs: %w", err)
	}
	return withCalls(s.db.WithContext(ctx), rows)
}

// ListRecent implements runs.Store.
func (s *Store) ListRecent(ctx context.Context, p runs.RecentParams) ([]*runtype.Run, int64, error) {
	q := s.db.WithContext(ctx).Model(&Run{}).Where("status IN ?", p.Statuses)
	if p.AgentID != nil {
		q = s.eq(q, "agent_id", *p.AgentID)
	}
	if p.ThreadID != nil {
		q = s.eq(q, "thread_id", *p.ThreadID)
	}
	if p.ResourceID != nil {
		q = s.eq(q, "resource_id", *p.ResourceID)
	}
	if p.WithoutResource {
		q = q.Where("resource_id IS NULL")
	}
	q = s.in(q, "resource_id", p.Resources)
	q = s.agents(q, p.Agents, p.NotAgents)
	q = s.search(q, p.Search)
	if p.Decision != nil || p.DecidedBy != nil {
		sub := s.db.Model(&ToolCall{}).Select("1").Where("run_tool_calls.run_id = agent_runs.id AND run_tool_calls.state <> ?", ToolCallPending)
		if p.Decision != nil {
			sub = sub.Where("run_tool_calls.state = ?", string(*p.Decision))
		}
		if p.DecidedBy != nil {
			sub = sub.Where("LOWER(run_tool_calls.decided_by) LIKE ? ESCAPE '!'", "%"+likeEscape(strings.ToLower(*p.DecidedBy))+"%")
		}
		q = q.Where("EXISTS (?)", sub)
	}
	var total int64
	if err := q.Session(&gorm.Session{}).Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("count runs: %w", err)
	}
	rows, err := scanViewRuns(q.Order("updated_at DESC, id DESC").Limit(p.PerPage).Offset(p.Page*p.PerPage), p.PerPage)
	if err != nil {
		return nil, 0, fmt.Errorf("list runs: %w", err)
	}
	out, err := withCalls(s.db.WithContext(ctx), rows)
	return out, total, err
}

// ThreadHistory implements runs.Store.
func (s *Store) ThreadHistory(ctx context.Context, resourceID *string, threadID string, limit int) ([]llm.Message, error) {
	var rows []Message
	q := s.eq(s.db.WithContext(ctx), "thread_id", threadID)
	if resourceID != nil {
		q = s.eq(q, "resource_id", *resourceID)
	} else {
		q = q.Where("resource_id IS NULL")
	}
	err := q.Order("id DESC").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("load thread %s: %w", threadID, err)
	}
	out := make([]llm.Message, len(rows))
	for i, m := range rows {
		out[len(rows)-1-i] = llm.Message{Role: llm.Role(m.Role), Content: m.Content}
	}
	return out, nil
}

// Changes implements runs.Store.
func (s *Store) Changes(ctx context.Context, since time.Time, notInstance string) ([]runs.ChangeRecord, error) {
	var rows []RunChange
	err := s.db.WithContext(ctx).Where("created_at >= ? AND instance_id <> ?", runtype.StoredTime(since), notInstance).Order("id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read suspended-set changes: %w", err)
	}
	out := make([]runs.ChangeRecord, len(rows))
	for i, r := range rows {
		out[i] = runs.ChangeRecord{ID: r.ID, RunID: r.RunID, Kind: runs.ChangeKind(r.Kind), At: r.CreatedAt.UTC()}
	}
	return out, nil
}

// PurgeFinished implements runs.Store.
func (s *Store) PurgeFinished(ctx context.Context, cutoff, keysBefore time.Time, limit int) (int, error) {
	finished := []runtype.Status{runtype.StatusCompleted, runtype.StatusFailed}
	var ids []string
	err := s.db.WithContext(ctx).Model(&Run{}).Where("status IN ? AND updated_at < ?", finished, runtype.StoredTime(cutoff)).
		Where("NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.run_id = agent_runs.id AND k.created_at >= ?)", runtype.StoredTime(keysBefore)).
		Limit(limit).Pluck("id", &ids).Error
	if err != nil {
		return 0, fmt.Errorf("find finished runs: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	// Another instance may purge the same runs at once: count the rows this one deleted, not
	// the ids it found.
	var deleted int64
	err = s.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("run_id IN ?", ids).Delete(&Event{}).Error; err != nil {
			return err
		}
		if err := tx.Where("run_id IN ?", ids).Delete(&ToolCall{}).Error; err != nil {
			return err
		}
		if err := tx.Where("run_id IN ?", ids).Delete(&IdempotencyKey{}).Error; err != nil {
			return err
		}
		if err := tx.Where("run_id IN ?", ids).Delete(&ToolCallApproval{}).Error; err != nil {
			return fmt.Errorf("purge approvals: %w", err)
		}
		if err := tx.Where("run_id IN ?", ids).Delete(&LateToolResult{}).Error; err != nil {
			return err
		}
		if err := tx.Where("run_id IN ?", ids).Delete(&RunClaimRow{}).Error; err != nil {
			return fmt.Errorf("purge claims: %w", err)
		}
		if err := tx.Where("run_id IN ?", ids).Delete(&SlackMessage{}).Error; err != nil {
			return fmt.Errorf("purge slack messages: %w", err)
		}
		res := tx.Where("id IN ? AND status IN ?", ids, finished).Delete(&Run{})
		deleted = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return 0, fmt.Errorf("delete finished runs: %w", err)
	}
	return int(deleted), nil
}

// PurgeChanges implements runs.Store.
// It also drops the suspended counts of past days that have come back to zero (every run
// of that agent and day decided), which would otherwise pile up, one set per day, under every
// sum: a zero row counts nothing, and a suspension on it later makes it anew.
func (s *Store) PurgeChanges(ctx context.Context, cutoff time.Time) error {
	if err := s.db.WithContext(ctx).Where("created_at < ?", runtype.StoredTime(cutoff)).Delete(&RunChange{}).Error; err != nil {
		return fmt.Errorf("delete old changes: %w", err)
	}
	if err := s.db.WithContext(ctx).Where("n = 0 AND day < ?", dayOf(cutoff)).Delete(&SuspendedCount{}).Error; err != nil {
		return fmt.Errorf("delete spent suspended counts: %w", err)
	}
	return nil
}

// recordOf is the record of row m, whose run r was mapped from it (runFromRow).
func recordOf(m *Run, r *runtype.Run) *runs.Record {
	return &runs.Record{Run: *r, Version: m.Version, Snapshot: m.Snapshot, LeaseOwner: m.LeaseOwner, RecoveryAttempts: m.RecoveryAttempts}
}

// runFromRow maps a row and its tool-call rows to the run clients see: pending calls while it
// is suspended, decided calls as its decisions.
func runFromRow(m *Run, calls []ToolCall) *runtype.Run {
	r := &runtype.Run{
		ID: m.ID, AgentID: m.AgentID, ParentRunID: m.ParentRunID, ThreadID: m.ThreadID, ResourceID: m.ResourceID,
		StartedBy: m.StartedBy, Prompt: m.Prompt, RequireToolApproval: m.RequireToolApproval, Status: runtype.Status(m.Status),
		CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC(), LastSeq: m.LastSeq,
		Output: m.Output, Error: m.Error, ErrorCode: m.ErrorCode, ToolCalls: []runtype.ToolCall{}, Decisions: []runtype.Decision{},
		Context: m.Context,
	}
	suspended := r.Status == runtype.StatusSuspended && m.SuspendedAt != nil
	if suspended {
		t := m.SuspendedAt.UTC()
		r.SuspendedAt = &t
	}
	for _, c := range calls {
		if c.State == ToolCallPending {
			if suspended {
				call := runtype.ToolCall{
					ToolCallID: c.ToolCallID, ToolName: c.ToolName, Args: rawOrNil(c.Args),
					RequiresApproval: c.RequiresApproval, SuspendPayload: rawOrNil(c.SuspendPayload), ResumeSchema: rawOrNil(c.ResumeSchema), AskedMidCall: c.AskedMidCall, Interrupted: c.Interrupted,
					InterruptedToolCallID: deref(c.InterruptedToolCallID), ExpiresAt: msOrNil(c.ExpiresAt),
					ApprovalReason: deref(c.ApprovalReason), PolicyRevision: deref(c.PolicyRevision),
				}
				withFollowUp(&call, &c)
				r.ToolCalls = append(r.ToolCalls, call)
			}
			continue
		}
		d := runtype.Decision{
			ID: c.ID, RunID: c.RunID, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Kind: runtype.DecisionKind(c.State),
			DecidedBy: c.DecidedBy, Reason: c.Reason, ResumeData: rawOrNil(c.ResumeData), Args: rawOrNil(c.Args),
			EditedArgs: rawOrNil(c.EditedArgs), Receipt: c.Receipt, GrantID: c.GrantID, PolicyRevision: c.PolicyRevision,
		}
		if c.DecidedAt != nil {
			d.DecidedAt = c.DecidedAt.UTC()
		}
		r.Decisions = append(r.Decisions, d)
	}
	return r
}

func rawOrNil(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

func strOrNil(b json.RawMessage) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
