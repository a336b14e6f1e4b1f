package gormstore

import (
	"fmt"

	"gorm.io/gorm"
)

// The hot reads of suspendedRuns — the page's runs and their tool calls — and the API's other
// reads of runs scan their rows themselves: GORM's Find scans by reflection, one value at a
// time, and for a page of 50 runs and their calls that was a third of the server's own work for
// the request (see docs/performance.md). The columns below are read into the same row types, in this order.

// viewColumns are the columns of agent_runs the run a client sees is made of (runFromRow): all
// but what only the run service's rules read (runs.Record: the snapshot, the lease, the version
// and the recovery bookkeeping). The API's reads (GetRun, ListSuspended, ListRecent) select
// these and no more.
const viewColumns = "agent_runs.id, agent_runs.agent_id, agent_runs.parent_run_id, agent_runs.thread_id, " +
	"agent_runs.resource_id, agent_runs.started_by, agent_runs.prompt, agent_runs.require_tool_approval, " +
	"agent_runs.status, agent_runs.created_at, agent_runs.updated_at, agent_runs.suspended_at, " +
	"agent_runs.last_seq, agent_runs.output, agent_runs.error, agent_runs.error_code, agent_runs.context"

// scanViewRuns runs q, which selects viewColumns, and reads its rows, at most limit.
func scanViewRuns(q *gorm.DB, limit int) ([]Run, error) {
	rows, err := q.Select(viewColumns).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]Run, 0, min(limit, 1000))
	for rows.Next() {
		var r Run
		err := rows.Scan(&r.ID, &r.AgentID, &r.ParentRunID, &r.ThreadID, &r.ResourceID, &r.StartedBy, &r.Prompt,
			&r.RequireToolApproval, &r.Status, &r.CreatedAt, &r.UpdatedAt, &r.SuspendedAt, &r.LastSeq,
			&r.Output, &r.Error, &r.ErrorCode, &r.Context)
		if err != nil {
			return nil, fmt.Errorf("read a run: %w", classify(err))
		}
		out = append(out, r)
	}
	return out, classify(rows.Err())
}

// callColumns are the columns of run_tool_calls, all of them.
const callColumns = "id, run_id, tool_call_id, tool_name, args, requires_approval, suspend_payload, interrupted, " +
	"state, created_at, decided_by, decided_at, reason, resume_data, edited_args, expires_at, interrupted_tool_call_id, receipt, resume_schema, asked_mid_call, " +
	"remind_at, reminded_at, escalate_at, escalated_at, escalate_to, expiring_at, expiring_warned_at, grant_id, approval_reason, policy_revision, approvals"

// scanCalls runs q, which selects callColumns, and reads its rows.
func scanCalls(q *gorm.DB, capacity int) ([]ToolCall, error) {
	rows, err := q.Select(callColumns).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]ToolCall, 0, capacity)
	for rows.Next() {
		var c ToolCall
		err := rows.Scan(&c.ID, &c.RunID, &c.ToolCallID, &c.ToolName, &c.Args, &c.RequiresApproval, &c.SuspendPayload,
			&c.Interrupted, &c.State, &c.CreatedAt, &c.DecidedBy, &c.DecidedAt, &c.Reason, &c.ResumeData, &c.EditedArgs,
			&c.ExpiresAt, &c.InterruptedToolCallID, &c.Receipt, &c.ResumeSchema, &c.AskedMidCall,
			&c.RemindAt, &c.RemindedAt, &c.EscalateAt, &c.EscalatedAt, &c.EscalateTo, &c.ExpiringAt, &c.ExpiringWarnedAt, &c.GrantID, &c.ApprovalReason, &c.PolicyRevision, &c.Approvals)
		if err != nil {
			return nil, fmt.Errorf("read a tool call: %w", classify(err))
		}
		out = append(out, c)
	}
	return out, classify(rows.Err())
}
