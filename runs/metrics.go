package runs

import (
	"context"
	"fmt"
	"interlock/runtype"
	"time"
)

// Metrics is told what the run service does that cannot be read back from storage, for an
// operator's dashboards. runs knows nothing of how it is exported (the observe package
// implements it over Prometheus); Config.Metrics is never nil after WithDefaults.
type Metrics interface {
	// Decided is told of each stored decision (a person's, or an expiry): its kind, the tool
	// of its call, and how long the call had waited since the run suspended on it (negative:
	// not known).
	Decided(kind runtype.DecisionKind, tool string, waited time.Duration)
}

// noMetrics is the Metrics of a service configured without any.
type noMetrics struct{}

func (noMetrics) Decided(runtype.DecisionKind, string, time.Duration) {}

// decided tells the metrics of a decision on a call of tool taken at now on a run that
// suspended at suspendedAt (nil: the wait is not known).
func (s *Service) decided(kind runtype.DecisionKind, tool string, suspendedAt *time.Time, now time.Time) {
	waited := time.Duration(-1)
	if suspendedAt != nil {
		waited = max(0, now.Sub(*suspendedAt))
	}
	s.cfg.Metrics.Decided(kind, tool, waited)
}

// RunStats are the numbers of runs in storage, for metrics.
type RunStats struct {
	// ByStatus counts the runs in each status; every status of AllStatuses is present.
	ByStatus map[runtype.Status]int64
	// Suspended counts the top-level suspended runs: what an approval inbox (suspendedRuns
	// without agentId) lists.
	Suspended int64
}

// Stats counts the stored runs by status, across all instances. It is for the server's own
// metrics and checks no principal: it tells numbers, never runs.
func (s *Service) Stats(ctx context.Context) (RunStats, error) {
	counts, err := s.store.CountByStatus(ctx)
	if err != nil {
		return RunStats{}, fmt.Errorf("count runs by status: %w", err)
	}
	out := RunStats{ByStatus: map[runtype.Status]int64{}}
	for _, st := range runtype.AllStatuses {
		out.ByStatus[st] = counts[st]
	}
	if out.Suspended, err = s.store.CountSuspended(ctx, ListSuspendedParams{}); err != nil {
		return RunStats{}, fmt.Errorf("count suspended runs: %w", err)
	}
	return out, nil
}
