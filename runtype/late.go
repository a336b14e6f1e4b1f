package runtype

import (
	"encoding/json"
	"time"
)

// LateResult is the outcome of a tool call that ran on an instance which could not store it with
// its run: the database was out of reach for longer than the instance could hold the run (twice
// runs.Config.LeaseTTL), or another instance took the run over first (see runs/late.go). The call
// was then found executing by recovery and reported interrupted, its outcome unknown to
// whoever looked at the run: this is what was known after all. The instance keeps such an
// outcome and records it, as soon as the database answers, in storage of its own, never with
// the run (whose events, seq and lease belong to whichever instance holds it now).
//
// A late result belongs to the call as it ran: ToolCallID is the id the call executed under,
// which the interrupted call that waits in its place names (ToolCall.InterruptedToolCallID;
// it waits under a new id, see agent.Snapshot.Reissue). A call has one at most.
type LateResult struct {
	RunID      string
	ToolCallID string
	ToolName   string
	// Result is what the tool returned; nil when it failed (Error) or suspended (SuspendPayload).
	Result json.RawMessage
	// Error is the tool's error message, nil when it returned a result or suspended.
	Error *string
	// SuspendPayload is what the tool suspended with (it asked for input), nil when it returned
	// a result or failed.
	SuspendPayload json.RawMessage
	// InstanceID is the instance that ran the call and held its outcome.
	InstanceID string
	// FinishedAt is when the tool answered, on that instance's clock; RecordedAt when the
	// outcome was recorded.
	FinishedAt time.Time
	RecordedAt time.Time
	// After is the run's last seq when the call was sent to its tool: an answer of the call the
	// run stored after it (a TOOL_RESULT, or a TOOL_CALL_SUSPENDED of a tool that suspended) is
	// this execution's, stored after all, and no late result is needed. Not stored.
	After int64
}
