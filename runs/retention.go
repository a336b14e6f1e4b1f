package runs

import (
	"context"
	"fmt"
	"time"
)

const purgeBatch = 500

// IdempotencyWindow is how long an idempotency key names its run at least, whatever the
// retention: a client retrying a day later still finds the run its first request made.
const IdempotencyWindow = 24 * time.Hour

// PurgeFinished deletes runs that finished (COMPLETED or FAILED) longer than Retention ago, with
// their events and tool-call rows, in batches; suspended and running runs are never touched, nor
// runs whose idempotency key is younger than IdempotencyWindow (a retry must find them). It
// also drops suspended-set change rows older than an hour. It returns the number of runs
// deleted. Any number of instances may run it at once: deleting twice deletes nothing.
func (s *Service) PurgeFinished(ctx context.Context) (int, error) {
	now := s.now()
	cutoff := now.Add(-s.cfg.Retention)
	total := 0
	for {
		n, err := s.store.PurgeFinished(ctx, cutoff, now.Add(-IdempotencyWindow), purgeBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("retention: %w", err)
		}
		if n < purgeBatch {
			break
		}
	}
	if err := s.store.PurgeChanges(ctx, now.Add(-time.Hour)); err != nil {
		return total, fmt.Errorf("retention: %w", err)
	}
	return total, nil
}
