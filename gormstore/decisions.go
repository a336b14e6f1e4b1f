package gormstore

import (
	"context"
	"fmt"

	"interlock/runs"
	"interlock/runtype"
)

// decisionColumns are what a page of the audit trail reads: the decided call's row and, from its
// run, the agent and the resource.
const decisionColumns = "run_tool_calls.id, run_tool_calls.run_id, run_tool_calls.tool_call_id, run_tool_calls.tool_name, " +
	"run_tool_calls.args, run_tool_calls.state, run_tool_calls.created_at, run_tool_calls.decided_by, run_tool_calls.decided_at, " +
	"run_tool_calls.reason, run_tool_calls.resume_data, run_tool_calls.edited_args, run_tool_calls.receipt, " +
	"run_tool_calls.grant_id, run_tool_calls.policy_revision, run_tool_calls.approvals, " +
	"agent_runs.agent_id, agent_runs.resource_id"

// Decisions implements runs.Store. The walk is by keyset on idx_tool_calls_decided
// (decided_at, id, migration 0021): each page starts where the last one ended, so a page deep
// in a long period reads no more rows than the first; each row's run is joined by its primary
// key for its resource (the scope) and to leave out sub-agent runs. The approvals of a quorum's
// calls on the page are read in one more query (approvalsOf), only when the page has some.
func (s *Store) Decisions(ctx context.Context, q runs.DecisionQuery) ([]runs.DecisionRecord, error) {
	from := runtype.StoredTime(q.From)
	if q.After != nil && q.After.At.After(from) {
		from = runtype.StoredTime(q.After.At) // the range starts at the cursor: the index is entered there
	}
	db := s.db.WithContext(ctx).Model(&ToolCall{}).
		Joins("JOIN agent_runs ON agent_runs.id = run_tool_calls.run_id").
		Where("run_tool_calls.decided_at >= ? AND run_tool_calls.decided_at < ?", from, runtype.StoredTime(q.To)).
		Where("run_tool_calls.state <> ?", ToolCallPending).
		// A person's decision on a sub-agent's call is also stored on its supervisor's delegate
		// call (listed there, once); an AUTO_APPROVED one only on the sub-agent's run.
		Where("(agent_runs.parent_run_id IS NULL OR run_tool_calls.state = ?)", string(runtype.DecisionAutoApproved))
	if q.After != nil {
		// After the cursor: a later time, or the same time and a higher id.
		db = db.Where("(run_tool_calls.decided_at > ? OR run_tool_calls.id > ?)", runtype.StoredTime(q.After.At), q.After.ID)
	}
	db = s.in(db, "agent_runs.resource_id", q.Resources)
	rows, err := db.Select(decisionColumns).Order("run_tool_calls.decided_at, run_tool_calls.id").Limit(q.Limit).Rows()
	if err != nil {
		return nil, fmt.Errorf("read decisions: %w", err)
	}
	defer rows.Close()
	out := make([]runs.DecisionRecord, 0, min(q.Limit, 1000))
	var quorum []ToolCall // the page's calls with approvals recorded (a quorum's)
	for rows.Next() {
		var c ToolCall
		var d runs.DecisionRecord
		err := rows.Scan(&c.ID, &c.RunID, &c.ToolCallID, &c.ToolName, &c.Args, &c.State, &c.CreatedAt, &c.DecidedBy, &c.DecidedAt,
			&c.Reason, &c.ResumeData, &c.EditedArgs, &c.Receipt, &c.GrantID, &c.PolicyRevision, &c.Approvals, &d.AgentID, &d.ResourceID)
		if err != nil {
			return nil, fmt.Errorf("read a decision: %w", classify(err))
		}
		d.Decision = runtype.Decision{
			ID: c.ID, RunID: c.RunID, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Kind: runtype.DecisionKind(c.State),
			DecidedBy: c.DecidedBy, Reason: c.Reason, ResumeData: rawOrNil(c.ResumeData), Args: rawOrNil(c.Args),
			EditedArgs: rawOrNil(c.EditedArgs), Receipt: c.Receipt, GrantID: c.GrantID, PolicyRevision: c.PolicyRevision,
		}
		if c.Approvals > 0 {
			quorum = append(quorum, c)
		}
		if c.DecidedAt != nil {
			d.DecidedAt = c.DecidedAt.UTC()
		}
		d.AskedAt = c.CreatedAt.UTC()
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read decisions: %w", classify(err))
	}
	rows.Close()
	if len(quorum) == 0 {
		return out, nil
	}
	byRun := map[string][]ToolCall{}
	var ids []string
	for _, c := range quorum {
		if byRun[c.RunID] == nil {
			ids = append(ids, c.RunID)
		}
		byRun[c.RunID] = append(byRun[c.RunID], c)
	}
	approvals, err := approvalsOf(s.db.WithContext(ctx), ids, byRun)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Approvals = approvals[out[i].RunID][out[i].ToolCallID]
	}
	return out, nil
}
