// Package runtype is the vocabulary every layer of Interlock speaks about runs: a run and what it is
// made of (its Status, the ToolCalls it waits on, the Decisions taken on them, the Events of its
// stream), who acts on it (Principal, Role), and the one application error (Error, Code).
//
// It is a leaf: it imports nothing of the module, so that authentication, the GraphQL models,
// storage and observability can name these things without importing the run service (package
// runs), which holds the rules: who may do what, and how a run moves from one status to the next.
package runtype

import (
	"encoding/json"
	"time"
)

// Run is a run of an agent, in any status, as clients see it: the type every layer uses for it,
// from the store's reads to the API's mapping. What only the run service's rules need (its
// version, the agent loop's snapshot, the lease) is not here but in the store's record of it
// (runs.Record), which never leaves the service: a field that is not on this type cannot leak.
type Run struct {
	ID          string
	AgentID     string
	ParentRunID *string
	ThreadID    *string
	ResourceID  *string
	// StartedBy is the subject of the principal who started the run (a sub-agent's run: its
	// supervisor's), nil when authentication was off; separation of duties checks it.
	StartedBy *string
	// Prompt is the user message the run started with ("" for an external agent's run).
	Prompt string
	// Context is what an external agent's approval request told the person beside its call
	// (Markdown, shown as it is safe to); nil for other runs and requests without one.
	Context             *string
	RequireToolApproval bool
	Status              Status
	CreatedAt           time.Time
	UpdatedAt           time.Time
	// SuspendedAt is set while the run is SUSPENDED.
	SuspendedAt *time.Time
	// ToolCalls are the calls the run waits on; empty unless SUSPENDED.
	ToolCalls []ToolCall
	LastSeq   int64
	Output    *string
	// Error is the safe, short message of a FAILED run; ErrorCode classifies it (FailureCode).
	Error     *string
	ErrorCode *string
	// Decisions are the decisions taken on the run's tool calls, oldest first.
	Decisions []Decision
	// LateResults are the outcomes of the run's calls that were recorded after the calls were
	// reported interrupted (LateResult), oldest first; see runs.Store.GetRun for when they are read.
	LateResults []LateResult
}

// DecisionKind is what was decided about a tool call.
type DecisionKind string

// The kinds of decision.
const (
	DecisionApproved DecisionKind = "APPROVED"
	DecisionDeclined DecisionKind = "DECLINED"
	DecisionResumed  DecisionKind = "RESUMED"
	// DecisionExpired is taken by the server, not a person (DecidedBy is nil): nobody decided
	// before the call's ExpiresAt, so the tool did not run and the model was told the request
	// timed out.
	DecisionExpired DecisionKind = "EXPIRED"
	// DecisionAutoApproved is taken by a policy or a grant, not a person (DecidedBy is nil): the
	// tool's requireApproval — false, or an expression that was false for this call — or a live
	// grant (GrantID names it) let the call run without asking anyone. Reason names the rule and PolicyRevision its version, so the audit
	// has every call that ran and says which policy let it through. It has a receipt, as an
	// approval has.
	DecisionAutoApproved DecisionKind = "AUTO_APPROVED"
)

// LetsRun reports whether a decision of this kind lets its call run (an approval, by a person
// or by a policy): the decisions that carry a receipt.
func (k DecisionKind) LetsRun() bool { return k == DecisionApproved || k == DecisionAutoApproved }

// Decision is a decision taken on one tool call: the audit trail of a run.
type Decision struct {
	// ID is unique across runs and decisions.
	ID         int64
	RunID      string
	ToolCallID string
	ToolName   string
	Kind       DecisionKind
	DecidedBy  *string
	DecidedAt  time.Time
	Reason     *string
	ResumeData json.RawMessage
	// Args are the model's arguments; EditedArgs the ones a person approved in their place.
	Args       json.RawMessage
	EditedArgs json.RawMessage
	// Receipt is the signed receipt of an approval (package receipt): a compact JWS a tool's
	// service verifies. Nil for other kinds, and for approvals stored before receipts existed.
	Receipt *string
	// GrantID names the grant that let an AUTO_APPROVED call through (nil otherwise).
	GrantID *string
	// PolicyRevision is the revision of the policy that judged the call ("sha256:" and the hex
	// SHA-256 of its requireApproval as written, package policy): on AUTO_APPROVED, the policy
	// that let it through; on a person's decision, the policy that asked them. Nil when no
	// policy judged it (the agent's or the run's requireToolApproval asked), and on decisions
	// stored before policies existed.
	PolicyRevision *string
	// Approvals are the approvals recorded on the call when its tool needed several (a
	// quorum), the one that met it included; nil otherwise.
	Approvals *Approvals
}
