package runs

import (
	"encoding/json"
	"time"

	"interlock/gormstore"
)

// Run is a run as the service shows it.
type Run struct {
	ID          string
	AgentID     string
	ParentRunID *string
	ThreadID    *string
	ResourceID  *string
	Status      Status
	CreatedAt   time.Time
	UpdatedAt   time.Time
	SuspendedAt *time.Time
	// ToolCalls are the calls the run waits on; empty unless SUSPENDED.
	ToolCalls []ToolCall
	LastSeq   int64
	Output    *string
	Error     *string
	// Prompt is the user message the run started with.
	Prompt string
	// Decisions are the decisions taken on the run's tool calls, oldest first.
	Decisions []Decision
}

// Decision is a decision taken on one tool call: the audit trail of a run.
type Decision struct {
	// ID is unique across runs and decisions.
	ID         int64
	RunID      string
	ToolCallID string
	ToolName   string
	// Kind is APPROVED, DECLINED or RESUMED.
	Kind       string
	DecidedBy  *string
	DecidedAt  time.Time
	Reason     *string
	ResumeData json.RawMessage
	Args       json.RawMessage
}

// ToolCall is a tool call a suspended run waits on.
type ToolCall struct {
	RunID      string
	ToolCallID string
	ToolName   string
	Args       json.RawMessage
	// RequiresApproval is true for an approval, false when the tool waits for resume data.
	RequiresApproval bool
	SuspendPayload   json.RawMessage
	// Interrupted marks a call whose execution was cut off by a crash; it waits for approval again.
	Interrupted bool
}

func runFromModel(m *gormstore.Run, calls []gormstore.ToolCall) *Run {
	r := &Run{
		ID: m.ID, AgentID: m.AgentID, ParentRunID: m.ParentRunID, ThreadID: m.ThreadID, ResourceID: m.ResourceID,
		Status: Status(m.Status), CreatedAt: m.CreatedAt.UTC(), UpdatedAt: m.UpdatedAt.UTC(),
		LastSeq: m.LastSeq, Output: m.Output, Error: m.Error, ToolCalls: []ToolCall{},
		Prompt: m.Prompt, Decisions: []Decision{},
	}
	if r.Status == StatusSuspended && m.SuspendedAt != nil {
		t := m.SuspendedAt.UTC()
		r.SuspendedAt = &t
		for _, c := range calls {
			r.ToolCalls = append(r.ToolCalls, toolCallFromModel(c))
		}
	}
	return r
}

func toolCallFromModel(c gormstore.ToolCall) ToolCall {
	return ToolCall{
		RunID: c.RunID, ToolCallID: c.ToolCallID, ToolName: c.ToolName,
		Args: rawOrNil(c.Args), RequiresApproval: c.RequiresApproval,
		SuspendPayload: rawOrNil(c.SuspendPayload), Interrupted: c.Interrupted,
	}
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
