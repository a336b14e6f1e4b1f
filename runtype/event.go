package runtype

import (
	"encoding/json"
	"time"
)

// EventType is the kind of a run event, as RunEventType in the API.
type EventType string

// The event types. A run's stream starts with EventRunStarted and ends with EventRunFinished or
// EventRunFailed.
const (
	EventRunStarted EventType = "RUN_STARTED"
	EventTextDelta  EventType = "TEXT_DELTA"
	// EventModelCallRetried: the model call of the current step was cut off and is made again;
	// followers drop the TEXT_DELTA text of the step so far.
	EventModelCallRetried  EventType = "MODEL_CALL_RETRIED"
	EventToolCallRequested EventType = "TOOL_CALL"
	EventToolCallApproval  EventType = "TOOL_CALL_APPROVAL"
	EventToolCallSuspended EventType = "TOOL_CALL_SUSPENDED"
	// EventToolCallInterrupted: the instance executing the call died, or the tool said its request
	// may have reached its server without an answer (agent.OutcomeUnknown); its outcome is
	// unknown, so it waits for a new approval (Reason says why).
	EventToolCallInterrupted EventType = "TOOL_CALL_INTERRUPTED"
	EventRunSuspended        EventType = "RUN_SUSPENDED"
	// EventToolCallApprovalRecorded: a person approved a call whose tool needs several approvals
	// (a quorum); the approval is recorded and counted (ToolCall.Approvals, DecidedBy says who).
	// While the quorum is not met the run stays SUSPENDED on the call; the approval that meets
	// it is followed by EventToolCallApproved.
	EventToolCallApprovalRecorded EventType = "TOOL_CALL_APPROVAL_RECORDED"
	EventToolCallApproved         EventType = "TOOL_CALL_APPROVED"
	EventToolCallDeclined         EventType = "TOOL_CALL_DECLINED"
	// EventToolCallExpired: nobody decided on the call before its tool's approvalTimeout passed;
	// the tool did not run, and the model is told the request timed out (Reason says what it is
	// told).
	EventToolCallExpired EventType = "TOOL_CALL_EXPIRED"
	EventRunResumed      EventType = "RUN_RESUMED"
	// EventToolCallReminder: the call has waited its tool's remindAfter without a decision;
	// the people who may decide it are reminded (the approval.reminder webhook). Once per call.
	EventToolCallReminder EventType = "TOOL_CALL_REMINDER"
	// EventToolCallEscalated: the call has waited its tool's escalateAfter; from then on the
	// roles of ToolCall.EscalateTo may decide it as well (the approval.escalated webhook).
	EventToolCallEscalated EventType = "TOOL_CALL_ESCALATED"
	// EventToolCallExpiring: the call expires within its tool's expiringBefore (at
	// ToolCall.ExpiresAt) unless someone decides it (the approval.expiring webhook).
	EventToolCallExpiring EventType = "TOOL_CALL_EXPIRING"
	EventToolResult       EventType = "TOOL_RESULT"
	EventStepFinished     EventType = "STEP_FINISHED"
	EventRunFinished      EventType = "RUN_FINISHED"
	EventRunFailed        EventType = "RUN_FAILED"
)

// Terminal reports whether t ends a run's stream.
func (t EventType) Terminal() bool { return t == EventRunFinished || t == EventRunFailed }

// Event is one event of a run: stored with a per-run seq without gaps, it is the source of truth
// of streams. RunID, Seq, Type and At are columns; the rest is stored as JSON.
type Event struct {
	RunID string    `json:"-"`
	Seq   int64     `json:"-"`
	Type  EventType `json:"-"`
	At    time.Time `json:"-"`

	Text     string          `json:"text,omitempty"`
	ToolCall *ToolCall       `json:"toolCall,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Status   string          `json:"status,omitempty"`
	Error    string          `json:"error,omitempty"`
	// ErrorCode classifies the error of a RUN_FAILED event (see runs' failure codes).
	ErrorCode string `json:"errorCode,omitempty"`
	Reason    string `json:"reason,omitempty"`
	DecidedBy string `json:"decidedBy,omitempty"`
	// GrantID names the grant that let a TOOL_CALL_APPROVED through without asking anyone
	// (a remembered approval, Grant); empty for a person's approval.
	GrantID string `json:"grantId,omitempty"`
}

// ToolCall is a tool call as the run service shows it: the call an event concerns, and a call a
// suspended run waits on. It is the one tool-call type of runs, storage and the API mapping.
type ToolCall struct {
	ToolCallID       string          `json:"toolCallId"`
	ToolName         string          `json:"toolName"`
	Args             json.RawMessage `json:"args,omitempty"`
	RequiresApproval bool            `json:"requiresApproval"`
	SuspendPayload   json.RawMessage `json:"suspendPayload,omitempty"`
	// ResumeSchema is the schema of this call's resume data when the call names its own (an
	// upstream MCP server's request for input); nil: its tool's resumeSchema.
	ResumeSchema json.RawMessage `json:"resumeSchema,omitempty"`
	// AskedMidCall marks a question its tool asked in the middle of its call, still executing
	// (runs/midcall.go): a person answers it with resume data or declines it, never approves.
	AskedMidCall bool `json:"askedMidCall,omitempty"`
	Interrupted  bool `json:"interrupted,omitempty"`
	// InterruptedToolCallID is, on an interrupted call, the id it was executing under when its
	// outcome became unknown: it waits under a new id (agent.Snapshot.Reissue), and the
	// decisions taken before, and a late result of that execution, name the old one.
	InterruptedToolCallID string `json:"interruptedToolCallId,omitempty"`
	// ExpiresAt is when a waiting call expires without a decision (its tool's approvalTimeout
	// after it began to wait); nil when it waits for as long as it takes.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// RemindAt, EscalateAt and ExpiringAt are when the server reminds the deciders of a waiting
	// call, escalates it and warns that it is about to expire (its tool's remindAfter and
	// escalateAfter after it began to wait, and expiringBefore before ExpiresAt); nil when the
	// tool asks for none. They are fixed when the call begins to wait, as ExpiresAt is.
	RemindAt   *time.Time `json:"remindAt,omitempty"`
	EscalateAt *time.Time `json:"escalateAt,omitempty"`
	ExpiringAt *time.Time `json:"expiringAt,omitempty"`
	// EscalateTo are the roles that may decide the call from EscalateAt on, besides those
	// its tool's approverRoles (or the approver role) name, and admin.
	EscalateTo []string `json:"escalateTo,omitempty"`
	// RemindedAt, EscalatedAt and ExpiringWarnedAt are when the reminder, the escalation and
	// the warning were sent (TOOL_CALL_REMINDER, TOOL_CALL_ESCALATED, TOOL_CALL_EXPIRING):
	// nil until then. Each is sent at most once per call, by one instance.
	RemindedAt       *time.Time `json:"remindedAt,omitempty"`
	EscalatedAt      *time.Time `json:"escalatedAt,omitempty"`
	ExpiringWarnedAt *time.Time `json:"expiringWarnedAt,omitempty"`
	// ApprovalReason is why a call waits for approval, as it was judged when it was asked for
	// (runs/policy.go): the rule that asks (requireApproval true, an expression that was true,
	// requireToolApproval), or why a policy could not tell — an evaluation error, a missing
	// field, its cost limit — which asks a person, never lets the call through. "" on calls
	// that do not wait for approval, and on interrupted calls (the event's reason says why).
	ApprovalReason string `json:"approvalReason,omitempty"`
	// PolicyRevision is the revision of the policy that judged the call (Decision.PolicyRevision).
	PolicyRevision string `json:"policyRevision,omitempty"`
	// Approvals are the approvals recorded on a call whose tool needs several (Approvals); nil
	// when none was recorded.
	Approvals *Approvals `json:"approvals,omitempty"`
}
