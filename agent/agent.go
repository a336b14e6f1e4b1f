// Package agent holds the agent loop: an agent's model is called with the conversation and the
// tools, the tool calls it asks for are executed, or held for a person when they need approval or
// call Suspend, and the loop goes on until the model answers with text. All state lives in a
// Snapshot, so a held run can be continued by any process from storage.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"interlock/llm"
	"interlock/policy"
)

// Agent is an agent definition: who it is, which model it calls and which tools it may use.
type Agent struct {
	ID          string
	Name        string
	Description string
	// Instructions is the system message given to the model before the conversation.
	Instructions string
	Model        llm.Model
	Tools        []*Tool
	// SubAgents are agents this agent can delegate to (shown by the API).
	SubAgents []*Agent
	// RequireToolApproval holds every tool call of this agent for a person, whatever the tool.
	RequireToolApproval bool
	// HistoryMessages is how many earlier messages of its thread a run is given: 0 means the
	// server's default, negative none (the run still adds its own messages to the thread).
	HistoryMessages int
	// MaxSteps bounds the model calls of one run; 0 means 10.
	MaxSteps int
	// External marks an agent that runs elsewhere (`external: true`): it has no Model, no
	// loop runs for it, and its runs are approval requests (runs.Service.RequestApproval), one
	// tool call each, which a decision ends. The server never executes its tools: the caller
	// does, once a person approved. Its tools' InputSchema, RequireApproval, ApproverRoles and
	// ApprovalTimeout apply as they do for any agent.
	External bool
	// Forwards, on an external agent, makes Interlock itself run each request's call once it
	// may (the policy let it through, or a person approved it) with the tool's ExecuteFunc, as
	// a run whose loop executes that one call and ends: the MCP gateway's agent, whose callers
	// wait for the result rather than run the tool. Leases, recovery and the rule that a call
	// whose outcome is unknown is never run again without a person apply as to any run.
	Forwards bool
	// AnyTool, on an external agent, accepts calls of any tool name (`tools: ["*"]`): a name
	// that is not one of Tools is a call of a copy of AnyTool under that name (see Tool). nil:
	// only the names of Tools.
	AnyTool *Tool

	// delegates are the tools through which the model hands tasks to SubAgents, built by
	// NewRegistry on its own copy of the agent.
	delegates []*Tool
	// model is what the loop calls: Model through the registry's middleware (middleware.go),
	// set on the registry's copy.
	model llm.Model
}

// Tool is something a model can call.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments; calls whose arguments do not match are
	// answered with an error result, not executed.
	InputSchema json.RawMessage
	// SuspendSchema and ResumeSchema describe, for a tool that can call Suspend, the payload it
	// suspends with and the resumeData a person must send back.
	SuspendSchema json.RawMessage
	ResumeSchema  json.RawMessage
	// RequireApproval holds every call of this tool for a person's approval before it runs.
	// Policy, when set, decides instead, call by call.
	RequireApproval bool
	// Policy is the tool's requireApproval when the config gives an expression: evaluated
	// over each call (runs/policy.go), true asks a person, false lets the call run, and an
	// error asks a person. Nil: RequireApproval decides.
	Policy *policy.Policy
	// ApprovalTimeout is how long a call of this tool waits for a person: held for approval
	// (RequireApproval, or the agent's or the run's requireToolApproval) or suspended for
	// resume data — a person who never answers is the same problem either way. When it passes
	// the call is resolved as expired: the tool does not run and the model is told the request
	// timed out (ExpiredMessage). 0: it waits for as long as it takes.
	ApprovalTimeout time.Duration
	// FollowUp is what the server does while a call of this tool waits for a person, before
	// it expires: remind, escalate, warn (none when zero).
	FollowUp
	// ExecuteFunc runs the tool. It may return call.Suspend(payload) to wait for a person.
	ExecuteFunc ToolFunc
	// ApproverRoles, when set, are the only roles (besides admin) whose holders may approve or
	// decline this tool's calls: a refund tool decided only by the refunds team.
	ApproverRoles []string
	// RequiredApprovals is how many people must approve a call of this tool before it runs (a
	// quorum; config approvals.required): each approval from a distinct eligible principal is
	// recorded, and the tool runs once, when the last required one arrives. 0 and 1: one
	// approval, as for any tool. The run's starter never counts.
	RequiredApprovals int
	// ApprovalRoles, when set, narrow who may approve or decline a call of this tool with a
	// quorum (config approvals.roles): a holder of one of them (or admin), besides the check of
	// ApproverRoles.
	ApprovalRoles []string
	// SubAgent is set on the tools NewRegistry adds for an agent's SubAgents: a call starts a
	// run of this agent with the call's task, and its outcome is the call's result.
	SubAgent *Agent

	// input and resume are the compiled schemas, set on the registry's copy of the tool.
	input, resume *Schema
	// exec is what the loop executes the tool with: ExecuteFunc through the registry's
	// middleware (middleware.go), set on the registry's copy.
	exec ToolFunc
}

// Quorum is how many approvals a call of the tool needs: RequiredApprovals, at least 1.
func (t *Tool) Quorum() int {
	if t == nil || t.RequiredApprovals < 1 {
		return 1
	}
	return t.RequiredApprovals
}

// ValidateInput checks arguments against the tool's input schema (any value passes when the
// tool has none).
func (t *Tool) ValidateInput(args json.RawMessage) error { return t.input.Validate(args) }

// ValidateResume checks resumeData against the tool's resume schema (any value passes when the
// tool has none).
func (t *Tool) ValidateResume(data json.RawMessage) error { return t.resume.Validate(data) }

// Call is what a tool's ExecuteFunc gets: the call's id and arguments and, when the run is being
// resumed after the tool suspended, the payload it suspended with and the data the person sent.
type Call struct {
	llm.ToolCall
	// Run is the run the call belongs to, for tools that tell their backend who is asking.
	Run RunInfo
	// SuspendPayload and ResumeData are set when the tool runs again after a resumeRun.
	SuspendPayload json.RawMessage
	ResumeData     json.RawMessage
	// Receipt is the signed receipt of the call's approval (package receipt), for tools whose
	// service verifies that a person approved exactly these arguments: HTTP tools send it as
	// the Interlock-Approval header, MCP tools in _meta. Empty when the call needed no approval.
	Receipt string
	// Ask, when not nil, puts a question to a person in the middle of the call and waits for
	// the answer, the call still executing (see Asker): an MCP server of the protocols before
	// 2026-07-28 asks its client while its tools/call is in flight. Nil when the host cannot
	// hold a question (the tool then refuses it).
	Ask func(ctx context.Context, q Question) (Answer, error)
}

// Question is what a tool asks a person in the middle of a call: Payload is shown (the
// suspendPayload), Schema is what the answer must match (the call's resumeSchema).
type Question struct {
	Payload json.RawMessage
	Schema  json.RawMessage
}

// Answer is how a question asked in the middle of a call was settled: Kind is CallResumed with
// the person's Data, CallDeclined, or CallExpired (nobody answered in time, or the question was
// taken back: Reason says why).
type Answer struct {
	Kind   CallState
	Data   json.RawMessage
	Reason string
}

// Asker is a Host that can hold a question asked in the middle of a call (Call.Ask): it stores
// the run as waiting on the call, the call still executing, and returns once a person answered,
// the question expired, or ctx ended (then it takes the question back, and the error says so).
type Asker interface {
	AskMidCall(ctx context.Context, snap *Snapshot, call PendingCall, q Question) (Answer, error)
}

// RunInfo identifies a run to the tools it calls.
type RunInfo struct {
	RunID      string
	AgentID    string
	ThreadID   string
	ResourceID string
}

// Resumed reports whether this execution follows a resumeRun.
func (c *Call) Resumed() bool { return c.ResumeData != nil }

// Tool returns the agent's tool of that name, or nil. An agent with AnyTool has a tool of every
// other name too: a copy of AnyTool under that name.
func (a *Agent) Tool(name string) *Tool {
	for _, t := range a.Tools {
		if t.Name == name {
			return t
		}
	}
	for _, t := range a.delegates {
		if t.Name == name {
			return t
		}
	}
	if a.AnyTool != nil && name != "" {
		t := *a.AnyTool
		t.Name = name
		return &t
	}
	return nil
}

// AllTools returns the agent's tools followed by the tools that delegate to its sub-agents.
func (a *Agent) AllTools() []*Tool {
	return append(append([]*Tool{}, a.Tools...), a.delegates...)
}

// NeedsApproval reports whether a call of that tool may wait for a person before it runs: the
// tool asks for it (or has a policy, which may), the agent does for all its tools, or the run
// was started asking for it. A call judged when it was stored (PendingCall.Gate) follows its
// judgement instead (Waits).
func (a *Agent) NeedsApproval(snap *Snapshot, tool string) bool {
	t := a.Tool(tool)
	return t != nil && (t.RequireApproval || t.Policy != nil || a.RequireToolApproval || snap.RequireToolApproval)
}

// Waits reports whether call c waits for a person's approval before it runs: as its Gate says,
// or, for a call stored before calls were judged, as NeedsApproval says.
func (a *Agent) Waits(snap *Snapshot, c *PendingCall) bool {
	if c.Gate != nil {
		return c.Gate.Ask
	}
	return a.NeedsApproval(snap, c.Name)
}

func (a *Agent) maxSteps() int {
	if a.MaxSteps > 0 {
		return a.MaxSteps
	}
	return 10
}

// ErrUnknownCall is returned by Snapshot.Decide for a call that is not the one the run waits on.
var ErrUnknownCall = errors.New("no such pending tool call")

// FollowUp is what the server does while a call waits for a person, so that a call is not
// forgotten until it expires: each step is sent once per call (a run event and its webhook,
// and a marker in the console), by one of the instances. Zero durations: none.
type FollowUp struct {
	// RemindAfter: after this long without a decision, the people who may decide the call are
	// reminded (TOOL_CALL_REMINDER, webhook approval.reminder).
	RemindAfter time.Duration
	// EscalateAfter: after this long without a decision, the call is escalated
	// (TOOL_CALL_ESCALATED, webhook approval.escalated) and the roles of EscalateTo may decide
	// it from then on, besides those who could before.
	EscalateAfter time.Duration
	EscalateTo    []string
	// ExpiringBefore: this long before the call expires (ApprovalTimeout after it began to
	// wait), a warning that it is about to (TOOL_CALL_EXPIRING, webhook approval.expiring).
	ExpiringBefore time.Duration
}
