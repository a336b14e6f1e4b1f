// Package gormstore is the run service's storage over GORM: the rows of Interlock's tables, the
// versioned migrations that create them, and the one implementation of runs.Store, where every
// difference between SQLite and MySQL lives. The rules about what may change when live in runs/.
package gormstore

import "time"

// Run is one row of agent_runs: one run of an agent, in any status. While the run is not finished
// Snapshot holds the agent loop's state as JSON, so that any instance can continue it; once it is
// COMPLETED or FAILED the snapshot is removed and the row stays as history.
type Run struct {
	ID                  string     `gorm:"column:id;primaryKey"`
	AgentID             string     `gorm:"column:agent_id"`
	ParentRunID         *string    `gorm:"column:parent_run_id"`
	ThreadID            *string    `gorm:"column:thread_id"`
	ResourceID          *string    `gorm:"column:resource_id"`
	StartedBy           *string    `gorm:"column:started_by"`
	Prompt              string     `gorm:"column:prompt"`
	RequireToolApproval bool       `gorm:"column:require_tool_approval"`
	Status              string     `gorm:"column:status"`
	Snapshot            *string    `gorm:"column:snapshot"`
	CreatedAt           time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	UpdatedAt           time.Time  `gorm:"column:updated_at;autoUpdateTime:false"`
	SuspendedAt         *time.Time `gorm:"column:suspended_at"`
	LastSeq             int64      `gorm:"column:last_seq"`
	LeaseOwner          *string    `gorm:"column:lease_owner"`
	LeaseUntil          *time.Time `gorm:"column:lease_until"`
	Version             int64      `gorm:"column:version"`
	Output              *string    `gorm:"column:output"`
	Error               *string    `gorm:"column:error"`
	ErrorCode           *string    `gorm:"column:error_code"`
	RecoveryAttempts    int        `gorm:"column:recovery_attempts"`
	RecoverAfter        *time.Time `gorm:"column:recover_after"`
	// Context is the Markdown an external agent's approval request showed the person beside
	// its call (migration 0013); nil for other runs.
	Context *string `gorm:"column:context"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (Run) TableName() string { return "agent_runs" }

// ToolCall is one row of run_tool_calls: a tool call a run suspended on, and what was decided
// about it (or that it expired). Rows are never rewritten except to record the decision, so the table doubles as the
// audit trail of who approved, declined or resumed what.
type ToolCall struct {
	ID               int64   `gorm:"column:id;primaryKey;autoIncrement"`
	RunID            string  `gorm:"column:run_id"`
	ToolCallID       string  `gorm:"column:tool_call_id"`
	ToolName         string  `gorm:"column:tool_name"`
	Args             *string `gorm:"column:args"`
	RequiresApproval bool    `gorm:"column:requires_approval"`
	SuspendPayload   *string `gorm:"column:suspend_payload"`
	Interrupted      bool    `gorm:"column:interrupted"`
	// InterruptedToolCallID is, on an interrupted call's row, the id the call was executing
	// under when its outcome became unknown (runtype.LateResult).
	InterruptedToolCallID *string    `gorm:"column:interrupted_tool_call_id"`
	State                 string     `gorm:"column:state"`
	CreatedAt             time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	DecidedBy             *string    `gorm:"column:decided_by"`
	DecidedAt             *time.Time `gorm:"column:decided_at"`
	Reason                *string    `gorm:"column:reason"`
	ResumeData            *string    `gorm:"column:resume_data"`
	EditedArgs            *string    `gorm:"column:edited_args"`
	// ExpiresAt is when a pending call expires without a decision (nil: never); the expiry
	// loop finds due calls on (state, expires_at).
	ExpiresAt *time.Time `gorm:"column:expires_at"`
	// Receipt is the signed receipt of a decision that let the call run (receipt.Sign),
	// written with the decision (migration 0015), so that the API, the long-poll and the
	// execution all give the same one; nil for other decisions and undecided calls.
	Receipt *string `gorm:"column:receipt"`
	// ResumeSchema is the schema of a call's resume data when the call names its own (an
	// upstream MCP server's request for input, migration 0016); nil: its tool's.
	ResumeSchema *string `gorm:"column:resume_schema"`
	// AskedMidCall marks a question a tool asked in the middle of its call (migration 0025).
	AskedMidCall bool `gorm:"column:asked_mid_call"`
	// RemindAt, EscalateAt and ExpiringAt are when a pending call's reminder, escalation and
	// expiry warning are due (nil: never; migration 0020), with the roles it is escalated to
	// (EscalateTo, a JSON array); RemindedAt, EscalatedAt and ExpiringWarnedAt when each was
	// sent — set once, by the compare-and-set that appends its event (SendNotice). The
	// notice loop finds due ones on (state, remind_at), (state, escalate_at) and
	// (state, expiring_at).
	RemindAt         *time.Time `gorm:"column:remind_at"`
	RemindedAt       *time.Time `gorm:"column:reminded_at"`
	EscalateAt       *time.Time `gorm:"column:escalate_at"`
	EscalatedAt      *time.Time `gorm:"column:escalated_at"`
	EscalateTo       *string    `gorm:"column:escalate_to"`
	ExpiringAt       *time.Time `gorm:"column:expiring_at"`
	ExpiringWarnedAt *time.Time `gorm:"column:expiring_warned_at"`
	// GrantID names the grant that let an AUTO_APPROVED call through (migration 0018).
	GrantID *string `gorm:"column:grant_id"`
	// ApprovalReason is why a pending call waits for approval, as it was judged (a policy's
	// rule, or the error evaluating it; migration 0017): kept once it is decided.
	ApprovalReason *string `gorm:"column:approval_reason"`
	// PolicyRevision is the revision of the policy that judged the call (migration 0017): on
	// an AUTO_APPROVED row, the one that let it through.
	PolicyRevision *string `gorm:"column:policy_revision"`
	// Approvals counts the approvals recorded on the call (ToolCallApproval, every round;
	// migration 0019), so that reads look for them only where there are some.
	Approvals int `gorm:"column:approvals"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (ToolCall) TableName() string { return "run_tool_calls" }

// Tool call states stored in run_tool_calls.state.
const (
	ToolCallPending  = "PENDING"
	ToolCallApproved = "APPROVED"
	ToolCallDeclined = "DECLINED"
	ToolCallResumed  = "RESUMED"
	ToolCallExpired  = "EXPIRED"
	// ToolCallAutoApproved is a call a policy let through (runtype.DecisionAutoApproved): its
	// row is stored decided, never pending.
	ToolCallAutoApproved = "AUTO_APPROVED"
)

// Event is one row of run_events, the source of truth of a run's stream: (run_id, seq) is the
// primary key, so a seq can never be written twice.
type Event struct {
	RunID     string    `gorm:"column:run_id;primaryKey"`
	Seq       int64     `gorm:"column:seq;primaryKey;autoIncrement:false"`
	Type      string    `gorm:"column:type"`
	Data      string    `gorm:"column:data"`
	CreatedAt time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (Event) TableName() string { return "run_events" }

// Message is one message of a memory thread, written when a run of that thread finishes and read
// back as the earlier conversation when a new run starts on the same thread.
type Message struct {
	ID         int64     `gorm:"column:id;primaryKey;autoIncrement"`
	ThreadID   string    `gorm:"column:thread_id"`
	ResourceID *string   `gorm:"column:resource_id"`
	RunID      string    `gorm:"column:run_id"`
	Role       string    `gorm:"column:role"`
	Content    string    `gorm:"column:content"`
	CreatedAt  time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (Message) TableName() string { return "messages" }

// Thread is one row of threads: who a memory thread belongs to. Thread ids are global (the
// client names them), so the first run of a thread claims it for its resource (nil: for runs
// without one) in the transaction that inserts the run, and a run of any other resource that
// names it is refused. Rows are never updated or deleted: an owner that lapsed would let
// another resource take over the thread id and label its messages. On MySQL id is bytes
// (VARBINARY), so that ids differing only by trailing spaces are two threads there too.
type Thread struct {
	ID         string    `gorm:"column:id;primaryKey"`
	ResourceID *string   `gorm:"column:resource_id"`
	CreatedAt  time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (Thread) TableName() string { return "threads" }

// IdempotencyKey is one row of idempotency_keys: the run a request with an idempotency key
// created, so that the same request again (a client's retry after a timeout, on any instance)
// gets that run instead of a second one. KeyHash is the SHA-256 of who sent the key and the key
// (hex), so that neither a long subject nor a collation that folds case can make two keys one;
// RequestHash tells the same request from another one reusing the key. The row is inserted in
// the run's transaction and removed with the run by retention.
type IdempotencyKey struct {
	KeyHash     string    `gorm:"column:key_hash;primaryKey"`
	RunID       string    `gorm:"column:run_id"`
	RequestHash string    `gorm:"column:request_hash"`
	CreatedAt   time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (IdempotencyKey) TableName() string { return "idempotency_keys" }

// LateToolResult is one row of late_tool_results: the outcome of a tool call that ran on an
// instance which could not store it with its run, recorded afterwards by that instance
// (runtype.LateResult). The run's own rows are not written (another instance may hold the run);
// the primary key keeps one per call. Retention removes it with its run.
type LateToolResult struct {
	RunID      string  `gorm:"column:run_id;primaryKey"`
	ToolCallID string  `gorm:"column:tool_call_id;primaryKey"`
	ToolName   string  `gorm:"column:tool_name"`
	Result     *string `gorm:"column:result"`
	Error      *string `gorm:"column:error"`
	// SuspendPayload is what a tool that answered by suspending suspended with (migration 0014).
	SuspendPayload *string   `gorm:"column:suspend_payload"`
	InstanceID     string    `gorm:"column:instance_id"`
	FinishedAt     time.Time `gorm:"column:finished_at;autoCreateTime:false"`
	RecordedAt     time.Time `gorm:"column:recorded_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (LateToolResult) TableName() string { return "late_tool_results" }

// ReceiptKey is one row of receipt_keys: a key that signs the receipts of decisions
// (receipt.StoredKey), shared by every instance. Generation is the primary key, so of instances
// racing to make the next key (or the first) exactly one stores it. PrivateKey is the Ed25519
// seed, base64url: the database is trusted with it as it is with every run.
type ReceiptKey struct {
	Generation int64     `gorm:"column:generation;primaryKey;autoIncrement:false"`
	KeyID      string    `gorm:"column:kid"`
	PrivateKey string    `gorm:"column:private_key"`
	CreatedAt  time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (ReceiptKey) TableName() string { return "receipt_keys" }

// RunChange is one row of run_changes: a run entering (SUSPENDED) or leaving (LEFT) the set of
// suspended runs, written in the transaction that made the change, so that every instance can
// tell its suspendedRunsChanged subscribers. Rows are short-lived; retention removes them.
type RunChange struct {
	ID         int64     `gorm:"column:id;primaryKey;autoIncrement"`
	RunID      string    `gorm:"column:run_id"`
	Kind       string    `gorm:"column:kind"`
	InstanceID string    `gorm:"column:instance_id"`
	CreatedAt  time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (RunChange) TableName() string { return "run_changes" }

// ToolCallApproval is one person's approval of a call whose tool needs several (a quorum):
// the audit of who approved which arguments, and when. The primary key (run, call, round,
// subject) makes the same person approving twice in a round a duplicate the database refuses.
// Retention removes it with its run.
type ToolCallApproval struct {
	RunID      string    `gorm:"column:run_id;primaryKey"`
	ToolCallID string    `gorm:"column:tool_call_id;primaryKey"`
	Round      int       `gorm:"column:round;primaryKey;autoIncrement:false"`
	Subject    string    `gorm:"column:subject;primaryKey"`
	ArgsDigest string    `gorm:"column:args_digest"`
	EditedArgs *string   `gorm:"column:edited_args"`
	ApprovedAt time.Time `gorm:"column:approved_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (ToolCallApproval) TableName() string { return "tool_call_approvals" }

// All lists every model, for the test that compares the migrated schema with the models.
func All() []any {
	return []any{&Run{}, &ToolCall{}, &Event{}, &Message{}, &Thread{}, &IdempotencyKey{}, &RunChange{}, &Notification{}, &SuspendedCount{}, &LateToolResult{}, &ReceiptKey{}, &Grant{}, &ToolCallApproval{}, &SlackMessage{}, &RunClaimRow{}, &SavedViewRow{}}
}
