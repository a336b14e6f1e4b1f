// Package health answers the probes of a load balancer or an orchestrator: /healthz (the
// process is up) and /readyz (this instance can serve: the database answers, its schema is
// the code's, and the instance is not shutting down).
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Checker answers the probes. Create it with New.
type Checker struct {
	ping     func(context.Context) error
	pending  func(context.Context) ([]string, error)
	timeout  time.Duration
	log      *slog.Logger
	stopping atomic.Bool

	mu       sync.Mutex
	lastFail string // the failure last logged, so a long outage logs once, not at every probe
}

// Options configure a Checker.
type Options struct {
	// Ping checks that the database answers.
	Ping func(context.Context) error
	// Pending names the migrations the database lacks.
	Pending func(context.Context) ([]string, error)
	// Timeout bounds the database checks of one probe. Default 2s.
	Timeout time.Duration
	// Logger receives changes of readiness. Default slog.Default().
	Logger *slog.Logger
}

// New returns a Checker over the database checks of opt.
func New(opt Options) *Checker {
	if opt.Timeout == 0 {
		opt.Timeout = 2 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Checker{ping: opt.Ping, pending: opt.Pending, timeout: opt.Timeout, log: opt.Logger}
}

// ShuttingDown makes /readyz answer 503 from now on, so that load balancers stop sending
// traffic before the listener closes.
func (c *Checker) ShuttingDown() { c.stopping.Store(true) }

// Report is the body of both probes: "ok" or "unavailable", and each check's "ok" or what is
// wrong with it.
type Report struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// Healthz answers 200 while the process serves HTTP. It touches no database, so that an
// orchestrator does not restart instances for an outage a restart cannot cure.
func (c *Checker) Healthz(w http.ResponseWriter, _ *http.Request) {
	write(w, http.StatusOK, Report{Status: "ok"})
}

// Readyz answers 200 when every check passes, 503 otherwise, with the checks in the body.
func (c *Checker) Readyz(w http.ResponseWriter, r *http.Request) {
	rep := c.Check(r.Context())
	status := http.StatusOK
	if rep.Status != "ok" {
		status = http.StatusServiceUnavailable
	}
	write(w, status, rep)
}

// Check runs the readiness checks: the database answers a ping within the timeout, every
// migration the code knows is recorded, and the instance is not shutting down.
func (c *Checker) Check(ctx context.Context) Report {
	rep := Report{Status: "ok", Checks: map[string]string{"database": "ok", "migrations": "ok", "shutdown": "ok"}}
	fail := func(check, msg string) {
		rep.Status = "unavailable"
		rep.Checks[check] = msg
	}
	if c.stopping.Load() {
		fail("shutdown", "shutting down")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var detail error
	if err := c.ping(ctx); err != nil {
		detail = err
		fail("database", fmt.Sprintf("not reachable within %s", c.timeout))
		fail("migrations", "not checked: the database is not reachable")
	} else if pending, err := c.pending(ctx); err != nil {
		detail = err
		fail("migrations", "cannot read the applied migrations")
	} else if len(pending) > 0 {
		fail("migrations", fmt.Sprintf("%d not applied: %s (run `interlock migrate`)", len(pending), strings.Join(pending, ", ")))
	}
	c.logChange(rep, detail)
	return rep
}

// logChange logs when readiness is lost (with the error, which the unauthenticated body does
// not show) and when it comes back.
func (c *Checker) logChange(rep Report, detail error) {
	now := ""
	if rep.Status != "ok" {
		b, _ := json.Marshal(rep.Checks)
		now = string(b)
	}
	c.mu.Lock()
	before := c.lastFail
	c.lastFail = now
	c.mu.Unlock()
	switch {
	case now == before:
	case now == "":
		c.log.Info("ready again")
	default:
		attrs := []any{"checks", rep.Checks}
		if detail != nil {
			attrs = append(attrs, "err", detail)
		}
		c.log.Warn("not ready", attrs...)
	}
}

func write(w http.ResponseWriter, status int, rep Report) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(rep)
}
