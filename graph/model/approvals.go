package model

import "encoding/json"

// ToolCallApprovals is a call's quorum as the API shows it (schema: ToolCallApprovals). It is
// written by hand, not generated, for the fields the schema does not show: what the required
// field's resolver needs to find the call's tool when the call did not carry the number.
type ToolCallApprovals struct {
	Count      int                 `json:"count"`
	Args       json.RawMessage     `json:"args,omitempty"`
	Edited     bool                `json:"edited"`
	By         []*RecordedApproval `json:"by"`
	Superseded []*RecordedApproval `json:"superseded"`

	// Known is the required number when the call carried it (a run event's call); 0: the
	// configuration of AgentID's tool ToolName says it.
	Known    int    `json:"-"`
	AgentID  string `json:"-"`
	ToolName string `json:"-"`
}
