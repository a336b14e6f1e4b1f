package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"interlock/agent"
	"interlock/graph/model"
	"interlock/hidden"
	"interlock/policy"
	"interlock/runs"
	"interlock/runtype"
)

func toRun(r *runtype.Run) *model.AgentRun {
	out := &model.AgentRun{
		ID: r.ID, RunID: r.ID, AgentID: r.AgentID, Status: model.RunStatus(r.Status.Public()),
		ThreadID: r.ThreadID, ResourceID: r.ResourceID, ParentRunID: r.ParentRunID, StartedBy: r.StartedBy,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, SuspendedAt: r.SuspendedAt,
		LastEventSeq: int(r.LastSeq), Output: r.Output, Error: r.Error, ErrorCode: r.ErrorCode,
		ToolCalls: make([]*model.AgentRunToolCall, len(r.ToolCalls)),
		Prompt:    r.Prompt, Decisions: make([]*model.Decision, len(r.Decisions)), Context: r.Context,
	}
	for i, d := range r.Decisions {
		out.Decisions[i] = &model.Decision{
			ID: fmt.Sprintf("%s:%s:%d", d.RunID, d.ToolCallID, d.ID), ToolCallID: d.ToolCallID, ToolName: d.ToolName,
			Kind: model.DecisionKind(d.Kind), DecidedBy: d.DecidedBy, DecidedAt: d.DecidedAt, Reason: d.Reason,
			ResumeData: d.ResumeData, Args: d.Args, EditedArgs: d.EditedArgs, Receipt: d.Receipt, GrantID: d.GrantID, PolicyRevision: d.PolicyRevision,
		}
		if d.Approvals != nil {
			out.Decisions[i].Approvals = toApprovals(r.AgentID, d.ToolName, d.Args, d.Approvals)
		}
	}
	out.LateResults = make([]*model.LateToolResult, len(r.LateResults))
	late := make(map[string]*model.LateToolResult, len(r.LateResults))
	for i, l := range r.LateResults {
		out.LateResults[i] = &model.LateToolResult{
			ToolCallID: l.ToolCallID, ToolName: l.ToolName, Result: l.Result, Error: l.Error, SuspendPayload: l.SuspendPayload,
			InstanceID: l.InstanceID, FinishedAt: l.FinishedAt, RecordedAt: l.RecordedAt,
		}
		late[l.ToolCallID] = out.LateResults[i]
	}
	for i := range r.ToolCalls {
		c := r.ToolCalls[i]
		if !c.RequiresApproval {
			c.Args = nil // the contract shows a suspended run's arguments for approvals only
		}
		out.ToolCalls[i] = toToolCall(r.ID, &c)
		if c.RequiresApproval && (!strings.Contains(c.ToolCallID, "/") || c.Approvals != nil) {
			// Not on a supervisor's call that shows a sub-agent's, unless the service gave it the
			// sub-agent's quorum (runs.showInnerApprovals, which sets how many are required): its
			// approvals are recorded on the sub-agent's run.
			out.ToolCalls[i].Approvals = toApprovals(r.AgentID, c.ToolName, c.Args, c.Approvals)
		}
		if c.Interrupted && c.InterruptedToolCallID != "" {
			out.ToolCalls[i].LateResult = late[c.InterruptedToolCallID]
		}
	}
	return out
}

func toRuns(list []*runtype.Run) []*model.AgentRun {
	out := make([]*model.AgentRun, len(list))
	for i, r := range list {
		out[i] = toRun(r)
	}
	return out
}

func toToolCall(runID string, c *runtype.ToolCall) *model.AgentRunToolCall {
	out := &model.AgentRunToolCall{
		ID: runID + ":" + c.ToolCallID, ToolCallID: &c.ToolCallID, ToolName: &c.ToolName,
		RequiresApproval: c.RequiresApproval, SuspendPayload: c.SuspendPayload, ResumeSchema: c.ResumeSchema, AskedMidCall: c.AskedMidCall, Interrupted: c.Interrupted,
		Args: c.Args, ExpiresAt: c.ExpiresAt, InterruptedToolCallID: nonEmpty(c.InterruptedToolCallID),
		RemindAt: c.RemindAt, RemindedAt: c.RemindedAt, EscalateAt: c.EscalateAt, EscalatedTo: append([]string{}, c.EscalateTo...),
		EscalatedAt: c.EscalatedAt, ExpiringAt: c.ExpiringAt, ExpiringWarnedAt: c.ExpiringWarnedAt, FollowUpsSent: followUpsSent(c),
		ApprovalReason: nonEmpty(c.ApprovalReason), PolicyRevision: nonEmpty(c.PolicyRevision),
	}
	return out
}

// followUpsSent are the follow-up steps sent for c, in the order they were sent.
func followUpsSent(c *runtype.ToolCall) []model.ToolCallFollowUp {
	type step struct {
		at   *time.Time
		kind model.ToolCallFollowUp
	}
	var sent []step
	for _, s := range []step{{c.RemindedAt, model.ToolCallFollowUpReminder}, {c.EscalatedAt, model.ToolCallFollowUpEscalation}, {c.ExpiringWarnedAt, model.ToolCallFollowUpExpiring}} {
		if s.at != nil {
			sent = append(sent, s)
		}
	}
	slices.SortStableFunc(sent, func(a, b step) int { return a.at.Compare(*b.at) })
	out := make([]model.ToolCallFollowUp, len(sent))
	for i, s := range sent {
		out[i] = s.kind
	}
	return out
}

// seconds is d in whole seconds, nil when d is 0 (none).
func seconds(d time.Duration) *int {
	if d <= 0 {
		return nil
	}
	secs := int(d.Round(time.Second) / time.Second)
	return &secs
}

// hiddenCharacters lists the code points of the characters that change how text reads in c's
// tool name, arguments and payload (package hidden), never nil.
func hiddenCharacters(c *model.AgentRunToolCall) []string {
	var name []rune
	if c.ToolName != nil {
		name = hidden.In(*c.ToolName)
	}
	return hidden.Codes(hidden.Merge(name, hidden.InJSON(c.Args), hidden.InJSON(c.SuspendPayload)))
}

func toEvent(ev runtype.Event) *model.RunEvent {
	out := &model.RunEvent{
		RunID: ev.RunID, Seq: int(ev.Seq), Type: model.RunEventType(ev.Type), At: ev.At,
		Text: nonEmpty(ev.Text), Result: ev.Result, Error: nonEmpty(ev.Error), ErrorCode: nonEmpty(ev.ErrorCode),
		Reason: nonEmpty(ev.Reason), DecidedBy: nonEmpty(ev.DecidedBy), GrantID: nonEmpty(ev.GrantID),
	}
	if ev.ToolCall != nil {
		out.ToolCall = toToolCall(ev.RunID, ev.ToolCall)
		if a := ev.ToolCall.Approvals; a != nil && a.Required > 0 {
			// An event's call carries its approvals' count only when the event is about them:
			// the events do not name the run's agent, whose tool the number would come from.
			out.ToolCall.Approvals = toApprovals("", ev.ToolCall.ToolName, ev.ToolCall.Args, a)
		}
	}
	if ev.Status != "" {
		s := model.RunStatus(ev.Status)
		out.Status = &s
	}
	return out
}

func toAgent(a *agent.Agent) *model.Agent {
	out := &model.Agent{
		ID: a.ID, Name: a.Name, Description: nonEmpty(a.Description), External: a.External,
		SubAgents: make([]*model.Agent, len(a.SubAgents)),
	}
	if a.External {
		out.Model = "external"
	} else {
		out.Model = a.Model.Name()
	}
	tools := a.Tools
	if a.AnyTool != nil {
		tools = append(tools[:len(tools):len(tools)], a.AnyTool) // "*": the policy of any other name
	}
	out.Tools = make([]*model.Tool, len(tools))
	for i, t := range tools {
		out.Tools[i] = &model.Tool{
			ID: toolID(a.ID, t.Name), Name: t.Name, Description: nonEmpty(t.Description), RequiresApproval: t.RequireApproval,
			InputSchema: t.InputSchema, SuspendSchema: t.SuspendSchema, ResumeSchema: t.ResumeSchema,
			ApproverRoles: append([]string{}, t.ApproverRoles...),
			Approvals:     &model.ToolApprovalPolicy{Required: t.Quorum(), Roles: append([]string{}, t.ApprovalRoles...)},
		}
		if t.Policy != nil {
			src, rev := t.Policy.Source(), t.Policy.Revision()
			out.Tools[i].RequiresApproval, out.Tools[i].ApprovalPolicy, out.Tools[i].PolicyRevision = false, &src, &rev
		} else {
			rev := policy.Revision(strconv.FormatBool(t.RequireApproval))
			out.Tools[i].PolicyRevision = &rev
		}
		out.Tools[i].ApprovalTimeoutSeconds = seconds(t.ApprovalTimeout)
		out.Tools[i].RemindAfterSeconds = seconds(t.RemindAfter)
		out.Tools[i].EscalateAfterSeconds = seconds(t.EscalateAfter)
		out.Tools[i].EscalateTo = append([]string{}, t.EscalateTo...)
		out.Tools[i].ExpiringBeforeSeconds = seconds(t.ExpiringBefore)
	}
	for i, s := range a.SubAgents {
		out.SubAgents[i] = toAgent(s)
	}
	return out
}

// toolID is Tool.id: the agent's id and the tool's name, unique across agents (ids and tool
// names are unique within theirs) so a client cache keeps each agent's tools apart.
func toolID(agentID, name string) string { return agentID + "/" + name }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// toThread maps a thread without its messages, which the messages field reads.
func toThread(th *runs.Thread) *model.Thread {
	out := &model.Thread{ID: th.ID, ResourceID: th.ResourceID, MessageCount: int(th.MessageCount)}
	if !th.CreatedAt.IsZero() {
		out.CreatedAt, out.UpdatedAt = &th.CreatedAt, &th.UpdatedAt
	}
	return out
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// toApprovals is the quorum of a call of agentID's tool, whose model's arguments are args, with
// the approvals a recorded on it (nil: none yet).
func toApprovals(agentID, toolName string, args json.RawMessage, a *runtype.Approvals) *model.ToolCallApprovals {
	out := &model.ToolCallApprovals{Args: args, By: []*model.RecordedApproval{}, Superseded: []*model.RecordedApproval{}, AgentID: agentID, ToolName: toolName}
	if a == nil {
		return out
	}
	out.Known, out.Count = a.Required, len(a.By)
	if a.Args != nil {
		out.Args = a.Args
	}
	out.Edited = !sameJSON(out.Args, args)
	for _, x := range a.By {
		out.By = append(out.By, toRecordedApproval(x))
	}
	for _, x := range a.Superseded {
		out.Superseded = append(out.Superseded, toRecordedApproval(x))
	}
	return out
}

func toRecordedApproval(a runtype.Approval) *model.RecordedApproval {
	return &model.RecordedApproval{Subject: a.Subject, At: a.At, ArgsDigest: a.ArgsDigest, EditedArgs: a.EditedArgs}
}

// requiredApprovals is how many approvals a call needs: as the call carried it, or as its
// tool's configuration says (1 when this server no longer serves the agent or the tool).
func requiredApprovals(agents *agent.Registry, a *model.ToolCallApprovals) int {
	if a.Known > 0 {
		return a.Known
	}
	if ag := agents.Get(a.AgentID); ag != nil {
		return ag.Tool(a.ToolName).Quorum()
	}
	return 1
}

// sameJSON reports whether a and b hold the same JSON value, whatever their spacing or key order.
func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
