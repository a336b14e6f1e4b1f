// Package runs is the run service: it starts runs, lists the suspended ones, takes decisions as
// compare-and-set transactions, and executes the agent loop under a lease. It owns the rules of
// the API and knows nothing of GraphQL.
package runs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/events"
	"interlock/llm"
	"interlock/models"
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
	// InstanceID names this server instance in leases. Default: a new random id.
	InstanceID string
	// HistoryMessages is how many earlier messages of a thread a new run is given. Default 50.
	HistoryMessages int
	// PollInterval is how often followers re-read storage when not woken, so they also see events
	// written by other instances. Default 1s.
	PollInterval time.Duration
	// NowFunc is the clock. Default time.Now.
	NowFunc func() time.Time
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxPerPage == 0 {
		c.MaxPerPage = 500
	}
	if c.MaxUnpaginated == 0 {
		c.MaxUnpaginated = 10000
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.InstanceID == "" {
		c.InstanceID = uuid.NewString()
	}
	if c.HistoryMessages == 0 {
		c.HistoryMessages = 50
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
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
	return nil
}

// Change is an entry or exit of the set of suspended runs.
type Change struct {
	Kind  ChangeKind
	RunID string
}

// ChangeKind says whether a run entered or left the suspended set.
type ChangeKind string

// The kinds of change.
const (
	ChangeSuspended ChangeKind = "SUSPENDED"
	ChangeLeft      ChangeKind = "LEFT"
)

// Service is the run service. Create it with New; call Close to wait for executing runs.
type Service struct {
	cfg     Config
	store   *store
	agents  *agent.Registry
	runHub  *events.Hub[struct{}]
	changes *events.Hub[Change]

	ctx    context.Context // parent of every execution; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a service over a migrated database.
func New(db *gorm.DB, agents *agent.Registry, cfg Config) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("runs config: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{
		cfg: cfg, store: &store{db: db}, agents: agents,
		runHub: events.NewWakeHub(), changes: events.NewHub[Change](256),
		ctx: ctx, cancel: cancel,
	}, nil
}

// Close stops executions in flight and waits for their goroutines.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

// Wait blocks until no run executes on this instance; tests use it to settle.
func (s *Service) Wait() { s.wg.Wait() }

// Agents is the registry of agents the service runs.
func (s *Service) Agents() *agent.Registry { return s.agents }

func (s *Service) now() time.Time { return ms(s.cfg.NowFunc()) }

// StartParams are the arguments of StartRun.
type StartParams struct {
	AgentID             string
	Prompt              string
	ThreadID            *string
	ResourceID          *string
	RequireToolApproval bool
}

// StartRun stores a new RUNNING run leased by this instance, with its RUN_STARTED event, and
// starts executing it in the background. It returns the run as stored.
// Errors: NOT_FOUND for an unknown agent; BAD_USER_INPUT for an empty prompt.
func (s *Service) StartRun(ctx context.Context, p StartParams) (*Run, error) {
	a := s.agents.Get(p.AgentID)
	if a == nil {
		return nil, Errorf(CodeNotFound, "no agent with id %q", p.AgentID)
	}
	if strings.TrimSpace(p.Prompt) == "" {
		return nil, Errorf(CodeBadUserInput, "prompt must not be empty")
	}
	p.ThreadID, p.ResourceID = emptyToNil(p.ThreadID), emptyToNil(p.ResourceID)
	var history []llm.Message
	if p.ThreadID != nil {
		rows, err := s.store.threadHistory(ctx, *p.ThreadID, s.cfg.HistoryMessages)
		if err != nil {
			return nil, err
		}
		for _, m := range rows {
			history = append(history, llm.Message{Role: llm.Role(m.Role), Content: m.Content})
		}
	}
	snap := agent.NewSnapshot(history, p.Prompt, p.RequireToolApproval)
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new run id: %w", err)
	}
	now := s.now()
	until := now.Add(s.cfg.LeaseTTL)
	encoded := snap.Encode()
	row := models.Run{
		ID: id.String(), AgentID: a.ID, ThreadID: p.ThreadID, ResourceID: p.ResourceID,
		Prompt: p.Prompt, RequireToolApproval: p.RequireToolApproval, Status: string(StatusRunning),
		Snapshot: &encoded, CreatedAt: now, UpdatedAt: now, LastSeq: 1,
		LeaseOwner: &s.cfg.InstanceID, LeaseUntil: &until,
	}
	err = s.store.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("insert run: %w", err)
		}
		_, err := events.Append(tx, row.ID, 0, now, events.Event{Type: events.RunStarted, Status: string(StatusRunning)})
		return err
	})
	if err != nil {
		return nil, err
	}
	s.execute(a, &row, snap)
	return runFromModel(&row, nil), nil
}

// Get returns a run in any status. Errors: NOT_FOUND when there is no such run.
func (s *Service) Get(ctx context.Context, runID string) (*Run, error) {
	r, err := s.store.findRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, Errorf(CodeNotFound, "no run with id %q", runID)
	}
	return r, nil
}

func emptyToNil(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}
