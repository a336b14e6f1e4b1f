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
	// Decided is told of each stored decision (a person's, or an expiry): its kind and how
	// long the call had waited since the run suspended on it.
	Decided(kind runtype.DecisionKind, waited time.Duration)
}

// noMetrics is the Metrics of a service configured without any.
type noMetrics struct{}

func (noMetrics) Decided(runtype.DecisionKind, time.Duration) {}

// decided tells the metrics of a decision taken at now on a run that suspended at suspendedAt
// (unknown: nothing is told).
func (s *Service) decided(kind runtype.DecisionKind, suspendedAt *time.Time, now time.Time) {
	if suspendedAt != nil {
		s.cfg.Metrics.Decided(kind, max(0, now.Sub(*suspendedAt)))
	}
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
