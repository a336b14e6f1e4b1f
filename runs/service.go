// Package runs is the run service: it starts runs, lists the suspended ones, takes decisions as
// compare-and-set transactions, and executes the agent loop under a lease. It owns the rules of
// the API and knows nothing of GraphQL.
package runs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"interlock/agent"
	"interlock/fanout"
	"interlock/llm"
	"interlock/notify"
	"interlock/outage"
	"interlock/runtype"
)

// Config configures a Service. Zero fields take the defaults given.
type Config struct {
	// MaxPerPage is the largest perPage suspendedRuns accepts. Default 500.
	MaxPerPage int
	// MaxUnpaginated is the most runs suspendedRuns returns without pagination; above it the
	// client is told to paginate (never silently truncated). Default 10000.
	MaxUnpaginated int
	// LeaseTTL is how long a run's lease lasts without renewal. Default 30s.
	LeaseTTL time.Duration
	// LeaseMargin is how long before its lease may expire an instance that could not renew it
	// cancels the run's execution (its tool in flight included), so that it has stopped before
	// another instance may take the run over; see renewLease. Default LeaseTTL/10.
	LeaseMargin time.Duration
	// InstanceID names this server instance in leases. Default: a new random id.
	InstanceID string
	// HistoryMessages is how many earlier messages of a thread a new run is given. Default 50.
	HistoryMessages int
	// PollInterval is how often this instance looks in storage for events and suspended-set
	// changes written by other instances (one query for all its subscribers). Default 50ms.
	PollInterval time.Duration
	// RecoveryInterval is how often this instance looks for runs whose lease expired, to recover
	// them. Default 1s.
	RecoveryInterval time.Duration
	// ExpiryInterval is how often this instance looks for waiting calls whose approvalTimeout
	// has passed, to resolve them as EXPIRED, and for follow-up steps that are due (reminders,
	// escalations, expiry warnings), to send them. Default 1s.
	ExpiryInterval time.Duration
	// Retention is how long finished runs and their events are kept. Default 7 days.
	Retention time.Duration
	// RetentionInterval is how often the retention job runs. Default 10 minutes.
	RetentionInterval time.Duration
	// MaxRecoveryAttempts is how many times recovery tries a run that makes no progress (its
	// agent is not served here, or every instance that takes it dies) before it fails the run.
	// Default 5.
	MaxRecoveryAttempts int
	// TextFlushInterval and TextFlushBytes batch the text a model streams: deltas are stored
	// as one TEXT_DELTA event at most this often, or sooner once this much text waits.
	// Defaults 50ms and 1024.
	TextFlushInterval time.Duration
	TextFlushBytes    int
	// RecoveryBackoff is how long recovery waits before trying again a run it could not start
	// (its agent is not served here), doubled per attempt up to 5 minutes. Default 1s.
	RecoveryBackoff time.Duration
	// NowFunc is the clock of the times runs and events show (lease times are the database's).
	// Default time.Now.
	NowFunc func() time.Time
	// SeparationOfDuties forbids the principal who started a run to approve its tool calls.
	SeparationOfDuties bool
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
	// Tracer, when set, is told of every execution, to trace it. Default nil: no tracing.
	Tracer Tracer
	// Metrics is told of decisions, for the server's metrics. Default: none.
	Metrics Metrics
	// Receipts signs the receipt of every decision that lets a call run (receipt.go). Default
	// nil: decisions have no receipt (tests of other things; the server always sets it).
	Receipts Signer
	// Webhooks are the webhooks every write of a top-level run's events announces them to, in
	// its transaction (announce.go): one outbox row per event it announces and per webhook
	// taking the event's kind, delivered by notify's dispatcher. Default none: nothing is
	// announced.
	Webhooks []notify.Target
	// PrincipalOf returns the principal the server would establish now for a subject, when it
	// knows it without a request (a static token's), or nil when it cannot tell (a JWT's
	// subject, whose roles only its next token says). A grant lets calls through only while
	// its creator may approve them: with the creator's roles from here when known, else as
	// they were when the grant was created (runs/grant.go). Default nil: always the latter.
	PrincipalOf func(subject string) *runtype.Principal
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxPerPage == 0 {
		c.MaxPerPage = DefaultMaxPerPage
	}
	if c.MaxUnpaginated == 0 {
		c.MaxUnpaginated = 10000
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseMargin == 0 {
		c.LeaseMargin = c.LeaseTTL / 10
	}
	if c.InstanceID == "" {
		c.InstanceID = uuid.NewString()
	}
	if c.HistoryMessages == 0 {
		c.HistoryMessages = 50
	}
	if c.PollInterval == 0 {
		c.PollInterval = 50 * time.Millisecond
	}
	if c.RecoveryInterval == 0 {
		c.RecoveryInterval = time.Second
	}
	if c.ExpiryInterval == 0 {
		c.ExpiryInterval = time.Second
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = 10 * time.Minute
	}
	if c.RecoveryBackoff == 0 {
		c.RecoveryBackoff = time.Second
	}
	if c.MaxRecoveryAttempts == 0 {
		c.MaxRecoveryAttempts = 5
	}
	if c.TextFlushInterval == 0 {
		c.TextFlushInterval = DefaultTextFlushInterval
	}
	if c.TextFlushBytes == 0 {
		c.TextFlushBytes = DefaultTextFlushBytes
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	return c
}

func (c Config) validate() error {
	if c.MaxPerPage < 1 {
		return fmt.Errorf("MaxPerPage must be at least 1, not %d", c.MaxPerPage)
	}
	if c.MaxUnpaginated < 1 {
		return fmt.Errorf("MaxUnpaginated must be at least 1, not %d", c.MaxUnpaginated)
	}
	if c.LeaseTTL < time.Second {
		return fmt.Errorf("LeaseTTL must be at least 1s, not %s", c.LeaseTTL)
	}
	if c.LeaseMargin <= 0 || c.LeaseMargin > c.LeaseTTL/2 {
		return fmt.Errorf("LeaseMargin must be positive and at most half of LeaseTTL (%s), not %s", c.LeaseTTL, c.LeaseMargin)
	}
	if c.Retention < time.Minute {
		return fmt.Errorf("Retention must be at least 1m, not %s", c.Retention)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"PollInterval", c.PollInterval}, {"RecoveryInterval", c.RecoveryInterval}, {"ExpiryInterval", c.ExpiryInterval}, {"RetentionInterval", c.RetentionInterval}, {"TextFlushInterval", c.TextFlushInterval}, {"RecoveryBackoff", c.RecoveryBackoff}} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be positive, not %s", d.name, d.v)
		}
	}
	if c.MaxRecoveryAttempts < 1 || c.TextFlushBytes < 1 || c.HistoryMessages < 1 {
		return fmt.Errorf("MaxRecoveryAttempts, TextFlushBytes and HistoryMessages must be at least 1")
	}
	return nil
}

// Change is an entry or exit of the set of suspended runs, or a change of a run in it.
type Change struct {
	Kind  ChangeKind
	RunID string
}

// ChangeKind says whether a run entered or left the suspended set, or changed in it.
type ChangeKind string

// The kinds of change.
const (
	ChangeSuspended ChangeKind = "SUSPENDED"
	ChangeLeft      ChangeKind = "LEFT"
	// ChangeChanged: a run stays in the set with fewer calls waiting (one of its calls was
	// decided while others wait).
	ChangeChanged ChangeKind = "CHANGED"
)

// Service is the run service.
//
// Its life has three parts. New builds it and starts nothing. Start starts its background
// loops: the poll that tells this instance what other instances stored (events of runs followed
// here, changes of the suspended set), the fan-out of those changes to WatchSuspended, the
// recovery of runs whose lease expired, the expiry of calls nobody decided in time, and
// retention. Shutdown (gracefully) or Close (at once) stops it, the loops and the executions in
// flight alike, and waits for them; as with http.Server, Shutdown ends with a Close.
//
//	New ──Start──▶ started ──Shutdown / Close──▶ stopped
//	 └─────────────Shutdown / Close─────────────────▶ stopped
//
// Requests are served from New on, and a run that is started or decided executes at once; but
// until Start, this instance neither hears of other instances' work nor recovers, expires or
// purges anything, so a server starts the service before it serves. Start returns
// ErrAlreadyStarted when the service was started before and ErrStopped once it is stopping;
// Shutdown and Close may be called in any state, and again.
type Service struct {
	cfg     Config
	store   Store
	agents  *agent.Registry
	runHub  *fanout.Hub[struct{}]
	changes *fanout.Hub[Change]    // suspended-set changes, from this instance and the poll
	watched *fanout.Hub[RunChange] // the same, each read once, for WatchSuspended

	ctx      context.Context // parent of every execution and loop; cancelled by Close
	cancel   context.CancelFunc
	loops    sync.WaitGroup // the loops Start starts: notify, watch, recovery, expiry, retention
	draining atomic.Bool    // set by Shutdown: executions hand their runs over at the next checkpoint
	// mu guards begun, unbind, closing and running. Executions are counted under it rather
	// than by a WaitGroup: an execution may start (the expiry or recovery loop) while a test's
	// Wait waits, which a WaitGroup forbids when its count is zero.
	mu      sync.Mutex
	begun   bool         // set by Start
	unbind  func() bool  // stops the tie of Start's ctx to the service (nil before Start)
	closing bool         // set by Shutdown and Close (and Start's ctx ending): no new execution starts here
	running int          // executions in flight
	idle    *sync.Cond   // on mu: broadcast when running drops to zero
	execs   sync.Map     // *execution → struct{}: executions in flight, named when Shutdown cuts them
	leases  atomic.Int64 // numbers this instance's lease tokens
	held    sync.Map     // lateKey → LateResult: tools' answers not stored with their run, nor recorded as late results yet
	notSent sync.Map     // run id → call id: a call whose start may be stored but that this instance never sent to its tool
}

// newLease returns a fresh lease token: the instance id and a number, so that even two claims by
// one instance of one run are told apart and only the latest may write.
func (s *Service) newLease() string {
	return fmt.Sprintf("%s/%d", s.cfg.InstanceID, s.leases.Add(1))
}

func (s *Service) stopStarting() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
}

// ErrAlreadyStarted is Start's answer when the service was started before: its loops run
// already, and are not started twice.
var ErrAlreadyStarted = errors.New("runs: the service is started already")

// ErrStopped is Start's answer once Shutdown or Close was called (or the ctx of an earlier Start
// ended): a stopped service does not start again; build a new one.
var ErrStopped = errors.New("runs: the service is stopped")

// New returns a service over a store, with cfg taken WithDefaults, or an error naming the field
// of cfg that is out of range. It starts nothing: no goroutine runs until Start (see Service).
func New(st Store, agents *agent.Registry, cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("runs config: %w", err)
	}
	// The server's own work (executions, recovery, expiry, retention, sub-agents' runs) acts
	// for System: a context of the service never acts for nobody.
	ctx, cancel := context.WithCancel(runtype.WithSystem(context.Background()))
	s := &Service{
		cfg: cfg, store: st, agents: agents,
		runHub: fanout.NewWakeHub(), changes: fanout.NewHub[Change](1024), watched: fanout.NewHub[RunChange](256),
		ctx: ctx, cancel: cancel,
	}
	s.idle = sync.NewCond(&s.mu)
	return s, nil
}

// Start starts the service's background loops (see Service) and returns at once. They run until
// Shutdown or Close, or until ctx ends, which stops the service at once as Close does (executions
// in flight are cancelled; their leases expire and another instance recovers them) without
// waiting: Close still waits. Only ctx's end matters, not its values: the loops and executions
// act for System. Errors: ErrAlreadyStarted when called before, ErrStopped once stopping.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return ErrStopped
	case s.begun:
		return ErrAlreadyStarted
	}
	s.begun = true
	s.unbind = context.AfterFunc(ctx, func() {
		s.stopStarting()
		s.cancel()
	})
	s.loops.Add(2)
	go s.notifyLoop()
	// Subscribed before it starts, so that no change published from now on is missed.
	go s.watchLoop(s.changes.Subscribe(changesTopic))
	// Recovery: RUNNING runs whose lease expired (their instance died, or released them while
	// shutting down) are taken over.
	s.every(s.cfg.RecoveryInterval, "recovery", func(ctx context.Context) error {
		if s.draining.Load() {
			return nil
		}
		_, err := s.RecoverExpired(ctx)
		return err
	})
	// Expiry: waiting calls whose approvalTimeout passed are resolved as EXPIRED, each with the
	// decision's compare-and-set, so of several instances exactly one expires a call. Then the
	// follow-up steps that are due (reminders, escalations, expiry warnings: followup.go), each
	// sent by a compare-and-set too.
	s.every(s.cfg.ExpiryInterval, "expiry", func(ctx context.Context) error {
		if s.draining.Load() {
			return nil
		}
		_, err := s.ExpireDue(ctx)
		_, nerr := s.SendDueNotices(ctx)
		return errors.Join(err, nerr)
	})
	// Retention: any number of instances may run it at once; each batch deletes by id, and
	// deleting twice deletes nothing.
	s.every(s.cfg.RetentionInterval, "retention", func(ctx context.Context) error {
		_, err := s.PurgeFinished(ctx)
		return err
	})
	return nil
}

// every runs job every interval in the background until the service stops, logging its errors
// as changes of state (failing, still failing every 30s, working again): while storage is down
// every run fails, and a line each would flood the log.
func (s *Service) every(interval time.Duration, name string, job func(context.Context) error) {
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		failures := &outage.Log{Logger: s.cfg.Logger, Name: name}
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
			}
			err := job(s.ctx)
			switch {
			case s.ctx.Err() != nil:
			case err != nil:
				failures.Fail(err)
			default:
				failures.OK()
			}
		}
	}()
}

// Close stops everything at once: executions in flight are cancelled (their leases expire and
// another instance recovers them) and the background loops end; it returns once they have.
// Use Shutdown to stop gracefully. Safe before Start (there are no loops to stop) and again.
func (s *Service) Close() {
	s.stopStarting()
	s.cancel()
	s.mu.Lock()
	if s.unbind != nil {
		s.unbind()
	}
	s.mu.Unlock()
	s.Wait()
	s.loops.Wait()
}

// Shutdown stops gracefully: executions hand their runs over at their next checkpoint (the step
// in flight finishes first) by releasing the lease, so another instance takes them over at once.
// When ctx ends first, what still executes is cancelled and released, each logged with its run
// and the tool call it cuts (see logCut). Then Close. Safe before Start and again.
func (s *Service) Shutdown(ctx context.Context) {
	s.draining.Store(true)
	s.stopStarting()
	done := make(chan struct{})
	go func() { s.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.logCut()
	}
	s.Close()
}

// Wait blocks until no run executes on this instance; tests use it to settle.
func (s *Service) Wait() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.running > 0 {
		s.idle.Wait()
	}
}

// started counts an execution in, unless the service is stopping; done counts it out.
func (s *Service) started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.running++
	return true
}

func (s *Service) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running--; s.running == 0 {
		s.idle.Broadcast()
	}
}

// Agents is the registry of agents the service runs.
func (s *Service) Agents() *agent.Registry { return s.agents }

func (s *Service) now() time.Time { return runtype.StoredTime(s.cfg.NowFunc()) }

// StartParams are the arguments of StartRun.
type StartParams struct {
	AgentID             string
	Prompt              string
	ThreadID            *string
	ResourceID          *string
	RequireToolApproval bool
	// IdempotencyKey, when given, makes the request safe to repeat: the same key from the same
	// principal with the same request returns the run the first one made, across instances,
	// for IdempotencyWindow at least (retention keeps the run that long); the key with another
	// request is BAD_USER_INPUT.
	IdempotencyKey *string
}

// maxIDLength is the longest threadId and resourceId a run may have (their columns hold 191
// characters, the most an indexed utf8mb4 column holds on MySQL).
const maxIDLength = 191

// StartRun stores a new RUNNING run leased by this instance, with its RUN_STARTED event, and
// starts executing it in the background. It returns the run as stored. A run with a threadId
// claims the thread for its resource when it is the thread's first (see Thread).
// Errors: NOT_FOUND for an unknown agent; BAD_USER_INPUT for an empty prompt, a threadId or
// resourceId longer than 191 characters, a threadId that belongs to another resource
// (threadOwned; nothing is stored), or an idempotencyKey used before for another request.
func (s *Service) StartRun(ctx context.Context, p StartParams) (*runtype.Run, error) {
	if err := require(ctx, runtype.RoleOperator, "starting a run"); err != nil {
		return nil, err
	}
	a := s.agents.Get(p.AgentID)
	if a == nil {
		return nil, runtype.Errorf(runtype.CodeNotFound, "no agent with id %q", p.AgentID)
	}
	if a.External {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "agent %q is external: it runs elsewhere and asks for approvals with requestApproval; it cannot be started here", a.ID)
	}
	if strings.TrimSpace(p.Prompt) == "" {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "prompt must not be empty")
	}
	p.ThreadID, p.ResourceID = emptyToNil(p.ThreadID), emptyToNil(p.ResourceID)
	if err := authorizeStart(ctx, p.ResourceID); err != nil {
		return nil, err
	}
	for name, v := range map[string]*string{"threadId": p.ThreadID, "resourceId": p.ResourceID} {
		if v != nil && utf8.RuneCountInString(*v) > maxIDLength {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "%s is %d characters long; at most %d are allowed", name, utf8.RuneCountInString(*v), maxIDLength)
		}
	}
	key, err := idempotency(ctx, p.IdempotencyKey, struct {
		Agent, Prompt    string
		Thread, Resource *string
		RequireApproval  bool
	}{a.ID, p.Prompt, p.ThreadID, p.ResourceID, p.RequireToolApproval})
	if err != nil {
		return nil, err
	}
	var history []llm.Message
	limit := s.cfg.HistoryMessages
	if a.HistoryMessages != 0 {
		limit = a.HistoryMessages
	}
	if p.ThreadID != nil && limit > 0 {
		var err error
		if history, err = s.store.ThreadHistory(ctx, p.ResourceID, *p.ThreadID, limit); err != nil {
			return nil, err
		}
	}
	snap := agent.NewSnapshot(history, p.Prompt, p.RequireToolApproval)
	snap.Seq = 1
	encoded, err := snap.Encode()
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new run id: %w", err)
	}
	now := s.now()
	lease, taken := s.newLease(), time.Now()
	r := runtype.Run{
		ID: id.String(), AgentID: a.ID, ThreadID: p.ThreadID, ResourceID: p.ResourceID, StartedBy: startedBy(ctx),
		Prompt: p.Prompt, RequireToolApproval: p.RequireToolApproval, Status: runtype.StatusRunning,
		CreatedAt: now, UpdatedAt: now, LastSeq: 1,
		ToolCalls: []runtype.ToolCall{}, Decisions: []runtype.Decision{},
	}
	err = s.store.InsertRun(ctx, NewRun{
		Run: r, Snapshot: encoded, Lease: lease, TTL: s.cfg.LeaseTTL,
		Events:      []runtype.Event{{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)}},
		Idempotency: key,
	})
	if again, ok, rerr := s.repeated(ctx, deref(p.IdempotencyKey), err); ok {
		return again, rerr
	}
	if errors.Is(err, ErrThreadOwned) {
		return nil, threadOwned(*p.ThreadID)
	}
	if err != nil {
		return nil, err
	}
	s.execute(a, &r, lease, snap, taken, causedBy(ctx, CauseStart))
	return &r, nil
}

// Get returns a run in any status. Who may call: a viewer, and a requester for the approval
// requests it made (RequestApproval). Errors: NOT_FOUND when there is no such run, or the
// principal may not see it (a requester: a run it did not request); FORBIDDEN for a principal
// that is neither viewer nor requester; UNAVAILABLE when storage could not be reached (never a
// nil run: a failed read says nothing about whether the run exists).
func (s *Service) Get(ctx context.Context, runID string) (*runtype.Run, error) {
	if err := mayGet(ctx); err != nil {
		return nil, err
	}
	r, err := s.visible(ctx, runID)
	if err != nil {
		return nil, err
	}
	s.showInnerApprovals(ctx, r) // a sub-agent's quorum call shows its count here too
	return r, nil
}

// visible reads run runID as the principal of ctx may see it: NOT_FOUND when there is no such
// run or it may not see it (the two are not told apart), a storage error as it is.
func (s *Service) visible(ctx context.Context, runID string) (*runtype.Run, error) {
	r, err := s.store.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r == nil || !s.readable(ctx, r) {
		return nil, notFound(runID)
	}
	return r, nil
}

// getRecord is Get for a rule that needs the run's record (Abandon decides on it): the same
// checks and errors, the record instead of the view.
func (s *Service) getRecord(ctx context.Context, runID string) (*Record, error) {
	if err := mayGet(ctx); err != nil {
		return nil, err
	}
	r, err := s.store.GetRecord(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r == nil || !s.readable(ctx, &r.Run) {
		return nil, notFound(runID)
	}
	return r, nil
}

// mayGet refuses a principal that may read no run at all: neither a viewer nor a requester
// (which may read the requests it made).
func mayGet(ctx context.Context) error {
	if p := runtype.PrincipalFrom(ctx); p != nil && p.Has(runtype.RoleRequester) {
		return nil
	}
	return require(ctx, runtype.RoleViewer, "reading runs")
}

// readable reports whether the principal of ctx may read run r: it sees r's resource, and
// reads runs (a viewer) or made this request (a requester).
func (s *Service) readable(ctx context.Context, r *runtype.Run) bool {
	return visible(ctx, r.ResourceID) && s.mayRead(runtype.PrincipalFrom(ctx), r)
}

// threadOwned is the answer to a run naming a thread that belongs to another resource.
//
// It is BAD_USER_INPUT, not FORBIDDEN, and the same words whoever asks. FORBIDDEN would say the
// caller lacks a permission another principal has, but no principal may write into a thread
// under a resource other than its owner's, an unscoped admin included: the request itself is
// wrong, and the fix is the client's (another threadId), which BAD_USER_INPUT says, and also
// that retrying as it is cannot help. Nor is it CONFLICT, which in this API means "someone
// moved first, read again and retry".
//
// A refusal cannot help saying that the thread id is taken: accepting the run is the very
// leak this prevents, and ids are global by the API's contract, so clients should choose
// unguessable ones. Beyond that it says nothing: not the owner, not whether the owner is "no
// resource", not whether it is a resource the caller could see (one answer for all, whereas
// FORBIDDEN for the invisible and something else for the visible would tell them apart), and
// nothing of the thread's messages or runs.
func threadOwned(threadID string) error {
	return runtype.Errorf(runtype.CodeBadUserInput, "threadId %q is already used with another resourceId; a thread stays with the resource of its first run, so give this run a threadId of its own", threadID)
}

// startedBy is the subject of the principal of ctx to record, nil for the server's own
// principals (System, Anonymous).
func startedBy(ctx context.Context) *string { return runtype.PrincipalFrom(ctx).Recorded() }

func emptyToNil(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}
