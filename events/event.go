// Package events holds a run's event log — every event stored with a per-run seq, the source of
// truth of streams — and the hubs that wake subscribers when something new is stored.
package events

import (
	"encoding/json"
	"time"
)

// Type is the kind of a run event, as RunEventType in the API.
type Type string

// The event types. A run's stream starts with RunStarted and ends with RunFinished or RunFailed.
const (
	RunStarted Type = "RUN_STARTED"
	TextDelta  Type = "TEXT_DELTA"
	// ModelCallRetried: the model call of the current step was cut off and is made again; followers
	// drop the TEXT_DELTA text of the step so far.
	ModelCallRetried  Type = "MODEL_CALL_RETRIED"
	ToolCallRequested Type = "TOOL_CALL"
	ToolCallApproval  Type = "TOOL_CALL_APPROVAL"
	ToolCallSuspended Type = "TOOL_CALL_SUSPENDED"
	// ToolCallInterrupted: the instance executing the call died, or the tool said its request
	// may have reached its server without an answer (agent.OutcomeUnknown); its outcome is
	// unknown, so it waits for a new approval (Reason says why).
	ToolCallInterrupted Type = "TOOL_CALL_INTERRUPTED"
	RunSuspended        Type = "RUN_SUSPENDED"
	ToolCallApproved    Type = "TOOL_CALL_APPROVED"
	ToolCallDeclined    Type = "TOOL_CALL_DECLINED"
	// ToolCallExpired: nobody decided on the call before its tool's approvalTimeout passed; the
	// tool did not run, and the model is told the request timed out (Reason says what it is told).
	ToolCallExpired Type = "TOOL_CALL_EXPIRED"
	RunResumed      Type = "RUN_RESUMED"
	ToolResult      Type = "TOOL_RESULT"
	StepFinished    Type = "STEP_FINISHED"
	RunFinished     Type = "RUN_FINISHED"
	RunFailed       Type = "RUN_FAILED"
)

// Terminal reports whether t ends a run's stream.
func (t Type) Terminal() bool { return t == RunFinished || t == RunFailed }

// Event is one event of a run. RunID, Seq, Type and At are columns; the rest is stored as JSON.
type Event struct {
	RunID string    `json:"-"`
	Seq   int64     `json:"-"`
	Type  Type      `json:"-"`
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
}

// ToolCall is a tool call as the run service shows it: the call an event concerns, and a call a
// suspended run waits on. It is the one tool-call type of runs, storage and the API mapping.
type ToolCall struct {
	ToolCallID       string          `json:"toolCallId"`
	ToolName         string          `json:"toolName"`
	Args             json.RawMessage `json:"args,omitempty"`
	RequiresApproval bool            `json:"requiresApproval"`
	SuspendPayload   json.RawMessage `json:"suspendPayload,omitempty"`
	Interrupted      bool            `json:"interrupted,omitempty"`
	// InterruptedToolCallID is, on an interrupted call, the id it was executing under when its
	// outcome became unknown: it waits under a new id (agent.Snapshot.Reissue), and the
	// decisions taken before, and a late result of that execution, name the old one.
	InterruptedToolCallID string `json:"interruptedToolCallId,omitempty"`
	// ExpiresAt is when a waiting call expires without a decision (its tool's approvalTimeout
	// after it began to wait); nil when it waits for as long as it takes.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}
