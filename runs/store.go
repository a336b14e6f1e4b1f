package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"interlock/llm"
	"interlock/runtype"
)

// Store is the run service's storage room: every read and write of runs, their tool calls,
// events, memory messages and suspended-set changes goes through it, and nothing else in the
// service touches the database. Each method owns its transaction, and a method that writes
// events writes them in the transaction of the state they describe, so a reader never sees one
// without the other; and with them, the webhooks' outbox rows it is given (each write's Outbox:
// the service decides what is announced, Announce), so that what a webhook is sent is exactly
// what was committed. A write that fails writes none of them.
//
// Lease times are the database's: implementations compute "ttl from now" and "expired" with the
// database's clock, so instances whose clocks disagree still agree on who holds a run. Every
// other time (created, updated, decided, event times, and a waiting call's ExpiresAt and the
// "now" it is compared with) is given by the caller.
//
// gormstore implements it for SQLite and MySQL; runs/storetest is the conformance suite every
// implementation must pass unchanged.
type Store interface {
	// InsertRun stores a new RUNNING run, leased, with its first events — or, with External,
	// an external agent's approval request: SUSPENDED (no lease) on its call, with the call's
	// pending row and a suspended-set change (and its Outbox rows), or
	// COMPLETED (no lease, no snapshot) with the call decided by the policy. A run with a thread
	// claims it in the same transaction: the thread's first run records its resource (nil
	// too) as the thread's owner, and a run whose resource is not the owner's is
	// ErrThreadOwned, with nothing stored. Of runs racing to be a new thread's first, exactly
	// one claims it. A run with an idempotency key claims the key the same way: a key claimed
	// before (by a run stored, or racing and then committed) is a *DuplicateRequest naming
	// that run, with nothing stored; of runs racing with one key, exactly one is stored. A
	// key claimed WhilePending names its run only while that run is SUSPENDED: a key whose run
	// is not (decided, or purged) is taken over by the new run in the same claim — one lookup,
	// however many runs held the key before — and of runs racing to take it over exactly one
	// does, the others naming it.
	InsertRun(ctx context.Context, r NewRun) error
	// GetRun returns the run as clients see it, with its pending calls and its decisions, or
	// nil when there is none: the API's read, which does not read what only the service's
	// rules need (the snapshot, the lease, the version; see GetRecord). Every read that gives
	// a run's decisions (GetRun, GetRecord, ListSuspended, ListRecent) gives its late results
	// too (LateResult), oldest first, for each run that had a call reported interrupted or
	// that failed as unrecoverable — the only runs that can have one shown (a late result of a
	// run still RUNNING waits for its recovery, which reports the call interrupted); other
	// runs get none, without a query.
	GetRun(ctx context.Context, id string) (*runtype.Run, error)
	// GetRecord returns the run as GetRun does, with what the service's rules need beside it
	// (its version, snapshot, lease owner and recovery attempts), or nil when there is none.
	GetRecord(ctx context.Context, id string) (*Record, error)
	// Progress returns the last seq and status of those of the runs that exist.
	Progress(ctx context.Context, ids []string) (map[string]Progress, error)
	// Events returns up to limit events of a run with seq > after, in seq order.
	Events(ctx context.Context, runID string, after int64, limit int) ([]runtype.Event, error)
	// ThreadHistory returns the last limit messages of a memory thread of a resource (nil:
	// messages without one), oldest first. Only messages of that resource are given, so even
	// a thread used by several resources before threads had owners (see Thread) never hands
	// one resource's memory to another's run.
	ThreadHistory(ctx context.Context, resourceID *string, threadID string, limit int) ([]llm.Message, error)
	// Thread returns a thread with its owner resource and its last `last` messages of that
	// resource (all when 0), oldest first, or nil when no run ever claimed it, or when
	// resources is not nil and the owner is not among them (nil owner included). Messages
	// other resources wrote in the thread before it had an owner are not the thread's.
	Thread(ctx context.Context, id string, resources []string, last int) (*Thread, error)
	// Threads returns a page of threads with messages of their owner, most recently active
	// first (without their messages), and the number of all matches; ResourceID and
	// Resources select by owner.
	Threads(ctx context.Context, p ThreadsParams) ([]*Thread, int64, error)

	// Checkpoint appends events of a running run, with its snapshot when not nil, and renews
	// its lease. ErrLeaseLost when the run is not RUNNING under that lease.
	Checkpoint(ctx context.Context, c Checkpoint) error
	// Suspend stores a running run as SUSPENDED on its waiting calls: status, snapshot, a
	// pending row per call, the events, a suspended-set change; the lease is released — or,
	// with KeepLease, kept and renewed (a question asked in the middle of a call, whose
	// instance holds the call open while a person answers). ErrLeaseLost as Checkpoint.
	Suspend(ctx context.Context, s Suspension) error
	// Finish stores a running run as COMPLETED or FAILED: outcome, final event, memory
	// messages; the snapshot is removed and the lease released. ErrLeaseLost as Checkpoint.
	Finish(ctx context.Context, f Finish) error
	// Delegate stores a running run as WAITING on a delegate call (snapshot, events; the lease
	// is released) and inserts the sub-agent's run, RUNNING and leased, with its first events,
	// in one transaction. ErrLeaseLost as Checkpoint.
	Delegate(ctx context.Context, d Delegation) error
	// RenewLease extends the lease to ttl from now: of a RUNNING run, or of a SUSPENDED one
	// whose lease was kept (Suspension.KeepLease). ErrLeaseLost when the run is neither under
	// that lease.
	RenewLease(ctx context.Context, runID, lease string, ttl time.Duration) error
	// ReleaseLease ends the lease at once, so any instance may recover the run. ErrLeaseLost
	// as Checkpoint.
	ReleaseLease(ctx context.Context, runID, lease string) error

	// Decide is the compare-and-set of a decision: the run moves from SUSPENDED at d.Version
	// to RUNNING under a new lease (with d.KeepLease, under the lease it kept, which must not
	// have expired; or, with d.Hold, stays SUSPENDED at the next version; with
	// d.Finish, to COMPLETED without lease or snapshot), the
	// call's row from PENDING to decided, with the new snapshot, the events and a
	// suspended-set change. ErrStale when the run or the call moved
	// since it was read, and when the call's deadline decides against it: a person's decision
	// on a call whose ExpiresAt is at or before d.At, or a DecisionExpired before its ExpiresAt
	// (or on a call without one) unless it is d.Abandoned.
	Decide(ctx context.Context, d DecisionWrite) error
	// RecordApproval is the compare-and-set of an approval that does not yet meet its call's
	// quorum (agent.Tool.RequiredApprovals): the run stays SUSPENDED at the next version with
	// the call still pending, the approval is inserted in the call's approvals (read back on
	// the call, runtype.ToolCall.Approvals), the new snapshot and events are written (with
	// their Outbox rows) and a suspended-set change recorded. ErrStale when the run moved since
	// it was read, or the call no longer waits or its deadline is at or before a.At;
	// ErrDuplicateApproval when a.Approval's subject already approved the call in that round
	// (the database's unique key decides), with nothing stored either way.
	RecordApproval(ctx context.Context, a ApprovalWrite) error
	// DueExpiries returns up to limit pending calls of SUSPENDED runs whose ExpiresAt is at or
	// before now, earliest first (then in the order they were stored). A supervisor run's
	// delegate call that shows a sub-agent's call is listed too, with the same ExpiresAt.
	DueExpiries(ctx context.Context, now time.Time, limit int) ([]DueCall, error)
	// DueNotices returns up to limit follow-up steps (NoticeKind) that are due at now and not
	// sent, of pending calls of SUSPENDED top-level runs (a sub-agent's call is followed up on
	// the supervisor's run that shows it), earliest due first (then by kind). An expiry warning
	// is listed only while the call's ExpiresAt is after now: past it, the call expires.
	DueNotices(ctx context.Context, now time.Time, limit int) ([]DueNotice, error)
	// SendNotice is the compare-and-set that sends one follow-up step, exactly once across
	// instances: in one transaction the run, SUSPENDED at last seq n.After, gets n.Events
	// (seq after n.After) with their Outbox rows and a suspended-set change (CHANGED, so that
	// watchers read it again), and the call's row, PENDING with the step due at or before n.At
	// and not sent, records it as sent at n.At. ErrStale, with nothing stored, when the run
	// moved since it was read (another step or a decision first); false, with nothing
	// stored, when the step was sent already or the call no longer waits.
	SendNotice(ctx context.Context, n NoticeWrite) (bool, error)

	// ExpiredRuns returns up to limit RUNNING runs whose lease has expired — and SUSPENDED
	// runs that kept their lease (Suspension.KeepLease) past its expiry — whose recovery is
	// not deferred, oldest lease first, as records with their snapshots (without their
	// decisions and late results, which recovery does not read).
	ExpiredRuns(ctx context.Context, limit int) ([]*Record, error)
	// ClaimExpired leases an expired run to a new owner if nothing moved since it was read
	// (same version and last seq, still expired), counting the attempt. It reports whether
	// the claim held. A SUSPENDED run that kept its lease is claimed only with c.Suspended: it
	// moves to RUNNING, its pending calls' rows are closed as EXPIRED by nobody with c.Reason at
	// c.At, and it leaves the suspended set (a change recorded for c.InstanceID).
	ClaimExpired(ctx context.Context, c Claim) (bool, error)
	// DeferRecovery counts a recovery attempt that could not start and keeps the run out of
	// ExpiredRuns for the given time.
	DeferRecovery(ctx context.Context, runID string, version int64, backoff time.Duration) error

	// RecordLateResult stores the outcome of a tool call whose instance could not store it
	// with its run (LateResult), beside the run: the run's row, events, seq and lease are not
	// touched, since another instance may hold it. It reports whether it stored it: false, with
	// nothing stored, when the call has a late result already (the first one stays: a call has
	// one at most) or when the run stored the call's result after all (a TOOL_RESULT event of
	// that call: the write whose answer was lost had committed). ErrNoSuchCall, with nothing
	// stored, when the run is not stored or has no call of that id and tool (no TOOL_CALL
	// event naming both).
	RecordLateResult(ctx context.Context, l runtype.LateResult) (bool, error)
	// LateResults returns the late results of a run, oldest first (by RecordedAt, then
	// ToolCallID); none for a run that has none or is not stored.
	LateResults(ctx context.Context, runID string) ([]runtype.LateResult, error)

	// CountSuspended counts the suspended runs matching p (its Page and PerPage are ignored).
	CountSuspended(ctx context.Context, p ListSuspendedParams) (int64, error)
	// ListSuspended returns limit suspended runs matching p from offset on, newest createdAt
	// first (then id descending), each with its pending calls and decisions, as GetRun reads
	// a run.
	ListSuspended(ctx context.Context, p ListSuspendedParams, limit, offset int) ([]*runtype.Run, error)
	// ListRecent returns a page of runs in p.Statuses, most recently updated first, with
	// their decisions, as GetRun reads a run, and the number of all matches.
	ListRecent(ctx context.Context, p RecentParams) ([]*runtype.Run, int64, error)

	// Changes returns the suspended-set changes recorded at or after since by instances other
	// than notInstance, in id order.
	Changes(ctx context.Context, since time.Time, notInstance string) ([]ChangeRecord, error)
	// PurgeFinished deletes up to limit runs that finished before cutoff, with their events,
	// tool-call rows, late results and idempotency keys, and returns how many it deleted. A run whose
	// idempotency key was claimed at or after keysBefore is kept: a retry must find it.
	PurgeFinished(ctx context.Context, cutoff, keysBefore time.Time, limit int) (int, error)
	// ReleaseKey deletes the idempotency key keyHash while it names run runID (a key that
	// names another run by now is left alone): the key's next claim makes a new run.
	ReleaseKey(ctx context.Context, keyHash, runID string) error
	// PurgeChanges deletes suspended-set changes recorded before cutoff.
	PurgeChanges(ctx context.Context, cutoff time.Time) error

	// CountByStatus counts the runs in each status (statuses without runs may be missing).
	CountByStatus(ctx context.Context) (map[runtype.Status]int64, error)

	// Grants: remembered approvals (runtype.Grant, runs/grant.go). A use of a grant is
	// consumed only in the transaction that records the decision it lets through (UseGrant,
	// and InsertRun of a request whose ExternalRequest.Decision names a GrantID), by one
	// conditional update: of writes racing for a grant's last use exactly one is stored, and
	// the others store nothing (ErrGrantSpent).

	// CreateGrant stores a new grant (Uses 0, not revoked).
	CreateGrant(ctx context.Context, g runtype.Grant) error
	// Grant returns the grant of that id, or nil when there is none.
	Grant(ctx context.Context, id string) (*runtype.Grant, error)
	// Grants returns the grants matching p, newest first (then id descending).
	Grants(ctx context.Context, p GrantsParams) ([]runtype.Grant, error)
	// UseGrant lets a call of a running run through on a grant: under the run's lease (at
	// u.After, the run's last seq as its execution knows it), one use of the grant is
	// consumed — only while it is not revoked, not expired at u.At and has uses left — and the
	// call's decision row (u.Decision, AUTO_APPROVED), the events and the snapshot are stored,
	// in one transaction. ErrGrantSpent, with nothing stored, when the grant may no longer be
	// used; ErrLeaseLost as Checkpoint (and when the run's last seq is not u.After).
	UseGrant(ctx context.Context, u GrantUse) error
	// RevokeGrant ends a grant at once: revoked_at and revoked_by are set, unless it was
	// revoked before (ErrStale) or does not exist (ErrNoSuchGrant).
	RevokeGrant(ctx context.Context, id string, by *string, at time.Time) error
	// Decisions returns up to q.Limit decisions (decided tool calls: approved, declined,
	// resumed or expired) of top-level runs, decided in [q.From, q.To), after q.After when
	// not nil, in (DecidedAt, ID) order: a page of the audit trail (audit.go). A supervisor's
	// row stands for the decision of a sub-agent's call (the sub-agent run's own row is not
	// listed). Read by keyset on the decided_at index, so a page costs the same at any depth.
	Decisions(ctx context.Context, q DecisionQuery) ([]DecisionRecord, error)

	// Claims and saved views (claims.go, savedviews.go).
	TeamStore
}

// ErrGrantSpent means a grant could not let a call through: it was revoked, expired or used
// up by the time the write that would consume it ran.
var ErrGrantSpent = errors.New("grant revoked, expired or used up")

// ErrNoSuchGrant means no grant has the id given.
var ErrNoSuchGrant = errors.New("no such grant")

// GrantsParams select grants. Nil fields do not narrow.
type GrantsParams struct {
	AgentID  *string
	ToolName *string
	Scope    *runtype.GrantScope
	// Active, when set, keeps the grants live at At (true: not revoked, not expired, uses
	// left) or those that are not (false).
	Active *bool
	At     time.Time
	// Resources, when not nil, keeps grants whose ResourceID is among them.
	Resources []string
	// Limit bounds the answer (0: no bound); Offset skips that many first.
	Limit, Offset int
}

// GrantUse is UseGrant's write: the checkpoint of the running run (its events and snapshot
// after the call is let through) and the decision it records.
type GrantUse struct {
	Checkpoint
	GrantID  string
	Decision runtype.Decision
}

// ErrDuplicateApproval means a person's approval of a call was already recorded in its round:
// the same person approving twice counts once.
var ErrDuplicateApproval = errors.New("approval already recorded")

// ErrLeaseLost means a write that must be made by the run's lease holder found another owner
// (or another status): the writer must stop executing the run.
var ErrLeaseLost = errors.New("run lease lost")

// ErrThreadOwned means a run named a thread that belongs to another resource (or to none,
// when the run has one; or to one, when the run has none): a thread stays with the resource of
// its first run.
var ErrThreadOwned = errors.New("thread belongs to another resource")

// ErrStale means a compare-and-set found the row changed since it was read: someone else
// decided, claimed or wrote first.
var ErrStale = errors.New("run changed since it was read")

// NewRun is a run to insert.
type NewRun struct {
	Run      runtype.Run
	Snapshot string
	Lease    string
	TTL      time.Duration
	Events   []runtype.Event
	// Idempotency, when not nil, is claimed in the run's transaction: a key already claimed is
	// ErrDuplicateRequest (*DuplicateRequest), with nothing stored.
	Idempotency *Idempotency
	// External, when not nil, makes the run an external agent's approval request (Lease and
	// TTL are used only by a forwarded call the policy approved): see InsertRun.
	External *ExternalRequest
	// Outbox are the webhooks' outbox rows announcing Events (Announce), written with them.
	Outbox []Announcement
}

// ExternalRequest is how an external agent's approval request is stored (NewRun.External).
type ExternalRequest struct {
	// Call is the one call the request is about. Without Decision the run (Run.Status
	// SUSPENDED, Run.SuspendedAt set) waits on it: its pending row (with its ExpiresAt) and a
	// suspended-set change recorded for InstanceID are written with the run.
	Call runtype.ToolCall
	// Decision, when not nil, is the policy's approval of Call (a tool that needs no approval):
	// the run (Run.Status COMPLETED) is stored without a snapshot, the call's row decided, and
	// it never enters the suspended set. A forwarded call's (agent.Agent.Forwards, NewRun.Lease
	// set) is stored RUNNING instead, with its snapshot, leased by NewRun.Lease for NewRun.TTL.
	Decision   *runtype.Decision
	InstanceID string
}

// Idempotency is a request's idempotency key as stored: KeyHash names who sent which key,
// RequestHash what was asked (both hex SHA-256).
type Idempotency struct {
	KeyHash     string
	RequestHash string
	// WhilePending makes the key name its run only while the run waits (SUSPENDED): a claim
	// that finds it naming a run that no longer waits moves it to the new run (see InsertRun).
	// For keys derived from what a request looks like rather than sent per request
	// (ApprovalParams.KeyWhilePending).
	WhilePending bool
}

// DuplicateRequest is the answer of InsertRun to an idempotency key claimed before: the run it
// made, and whether that request was the same as this one.
type DuplicateRequest struct {
	RunID       string
	SameRequest bool
}

func (e *DuplicateRequest) Error() string {
	return fmt.Sprintf("the idempotency key was used before, by run %s", e.RunID)
}

// Checkpoint is a write by the lease holder of a running run: the events after seq After, all
// at At, and the snapshot that goes with them (nil: unchanged).
type Checkpoint struct {
	RunID    string
	Lease    string
	TTL      time.Duration
	After    int64
	At       time.Time
	Events   []runtype.Event
	Snapshot *string
	// Outbox are the webhooks' outbox rows announcing Events (Announce), written with them.
	Outbox []Announcement
	// AutoApproved are the decisions on calls of the run that a policy let through
	// (runtype.DecisionAutoApproved, by nobody, with their reason, policy revision and
	// receipt), stored as decided calls in the same transaction, so that the calls Events
	// show and their decisions are committed together: every call that runs has a decision.
	AutoApproved []runtype.Decision
}

// Suspension is Checkpoint plus the calls the run now waits on.
type Suspension struct {
	Checkpoint
	// Calls are stored with their ExpiresAt, when they have one (so are the Ancestors' calls).
	// A run with Ancestors (a sub-agent's) waits on one call at a time.
	Calls []runtype.ToolCall
	// InstanceID is recorded with the suspended-set change.
	InstanceID string
	// Ancestors are the WAITING supervisor runs above the run, innermost first: each becomes
	// SUSPENDED on its delegate call, which shows the call's tool, args and payload.
	Ancestors []AncestorWrite
	// KeepLease keeps the run's lease (renewed by TTL) while it is SUSPENDED: the instance
	// holding it is still executing the call it waits on (a question asked in the middle of
	// the call, agent.Call.Ask). It may renew the lease (RenewLease), and a decision moves the
	// run back to RUNNING under it (DecisionWrite.KeepLease); should the lease expire, the run
	// is recovered as one whose instance died (ExpiredRuns).
	KeepLease bool
}

// Finish is Checkpoint plus the outcome of a finished run.
type Finish struct {
	Checkpoint
	Status    runtype.Status
	Output    *string
	Error     *string
	ErrorCode *string
	// Memory is appended to the run's thread (ignored when the run has none).
	ThreadID   *string
	ResourceID *string
	Memory     []llm.Message
	// Parent, for a sub-agent's run, continues the supervisor's run that waits on it.
	Parent *Handoff
}

// DecisionWrite is the compare-and-set of a decision on one pending call.
type DecisionWrite struct {
	RunID string
	// Version and After are the run's version and last seq as read.
	Version    int64
	After      int64
	ToolCallID string
	Kind       runtype.DecisionKind
	DecidedBy  *string
	Reason     *string
	ResumeData []byte
	// EditedArgs are the arguments a person approved the call with, when they edited them.
	EditedArgs []byte
	// Receipt is the signed receipt of an approval (nil for other kinds), stored with it.
	Receipt *string
	// Grant, with an approval, is a grant its approver asked to remember, inserted in the
	// decision's transaction (nothing of it is stored when the decision is not).
	Grant *runtype.Grant
	// Hold keeps the run SUSPENDED, without a lease, because other calls of its step still
	// wait: the decision is recorded and the run continues once the last of them is decided.
	Hold bool
	// Finish ends the run with the decision (an external agent's request, whose caller runs
	// the tool): it moves to COMPLETED instead of RUNNING, without lease or snapshot.
	Finish bool
	// Abandoned makes a DecisionExpired the end of an external agent's request whose asker
	// stopped waiting (runs.Service.Abandon), or of a question asked in the middle of a call
	// whose call ended first: it stands whatever the call's deadline, which decides only
	// between a person and the expiry loop.
	Abandoned bool
	// KeepLease moves the run to RUNNING under the lease it kept while SUSPENDED
	// (Suspension.KeepLease), which must not have expired (else ErrStale): the instance holding
	// it goes on with the call, with the decision as the answer to its question. Lease and TTL
	// are not used.
	KeepLease  bool
	At         time.Time
	Snapshot   string
	Events     []runtype.Event
	Lease      string
	TTL        time.Duration
	InstanceID string
	// Ancestors are the SUSPENDED supervisor runs above the run, innermost first: each goes
	// back to WAITING, its delegate call's row decided as the run's call.
	Ancestors []AncestorWrite
	// Outbox are the webhooks' outbox rows announcing Events (Announce), written with them.
	Outbox []Announcement
	// Approval, when not nil, is the approval that met the call's quorum, recorded with the
	// decision among the call's approvals (as RecordApproval records the others).
	Approval *runtype.Approval
}

// ApprovalWrite is the compare-and-set of an approval that does not meet its call's quorum
// (Store.RecordApproval).
type ApprovalWrite struct {
	RunID string
	// Version and After are the run's version and last seq as read.
	Version    int64
	After      int64
	ToolCallID string
	Approval   runtype.Approval
	At         time.Time
	// Snapshot is the run's snapshot with its seq moved past Events.
	Snapshot   string
	Events     []runtype.Event
	Outbox     []Announcement
	InstanceID string
}

// DueCall is a waiting call whose deadline has passed.
type DueCall struct {
	RunID      string
	ToolCallID string
	ExpiresAt  time.Time
}

// NoticeKind is one step of a waiting call's follow-up (agent.FollowUp).
type NoticeKind string

// The follow-up steps, in the order they are listed when due together.
const (
	// NoticeReminder: the call waited its tool's remindAfter (TOOL_CALL_REMINDER).
	NoticeReminder NoticeKind = "reminder"
	// NoticeEscalation: the call waited its tool's escalateAfter (TOOL_CALL_ESCALATED).
	NoticeEscalation NoticeKind = "escalation"
	// NoticeExpiring: the call expires within its tool's expiringBefore (TOOL_CALL_EXPIRING).
	NoticeExpiring NoticeKind = "expiring"
)

// DueNotice is a follow-up step of a waiting call that is due and not sent.
type DueNotice struct {
	RunID      string
	ToolCallID string
	Kind       NoticeKind
	DueAt      time.Time
}

// NoticeWrite sends a follow-up step (SendNotice).
type NoticeWrite struct {
	RunID      string
	ToolCallID string
	Kind       NoticeKind
	// After is the run's last seq as read; Events are appended after it, all at At.
	After      int64
	At         time.Time
	Events     []runtype.Event
	InstanceID string
	// Outbox are the webhooks' outbox rows announcing Events (Announce), written with them.
	Outbox []Announcement
}

// Claim is the compare-and-set that takes over an expired run.
type Claim struct {
	RunID   string
	Version int64
	LastSeq int64
	Lease   string
	TTL     time.Duration
	// Suspended claims a SUSPENDED run whose holder kept its lease and died (see ClaimExpired):
	// its waiting calls' rows are closed with Reason at At, and InstanceID records the change.
	Suspended  bool
	Reason     string
	At         time.Time
	InstanceID string
}

// Progress is how far a run is.
type Progress struct {
	LastSeq int64
	Status  runtype.Status
	// ResourceID is the run's resource, which decides who may follow it.
	ResourceID *string
}

// ChangeRecord is a stored suspended-set change.
type ChangeRecord struct {
	ID    int64
	RunID string
	Kind  ChangeKind
	At    time.Time
}

// storageError marks a failure of the database (not of the request or the run), so that an
// execution tells it from a model error and hands the run over instead of failing it.
type storageError struct{ err error }

func (e *storageError) Error() string { return e.err.Error() }
func (e *storageError) Unwrap() error { return e.err }

// stored classifies an error of a Store write made by an execution: lease loss, staleness,
// application errors and cancellation stay as they are; anything else, storage being
// unavailable included, is a storage failure.
func stored(ctx context.Context, err error) error {
	var app *runtype.Error
	if err == nil || errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrStale) || ctx.Err() != nil ||
		errors.As(err, &app) && !errors.Is(err, runtype.ErrUnavailable) {
		return err
	}
	return &storageError{err}
}
