package runs

import (
	"context"
	"fmt"
	"time"
)

const purgeBatch = 500

// PurgeFinished deletes runs that finished (COMPLETED or FAILED) longer than Retention ago, with
// their events and tool-call rows, in batches; suspended and running runs are never touched. It
// also drops suspended-set change rows older than an hour. It returns the number of runs
// deleted. Any number of instances may run it at once: deleting twice deletes nothing.
func (s *Service) PurgeFinished(ctx context.Context) (int, error) {
	now := s.now()
	cutoff := now.Add(-s.cfg.Retention)
	total := 0
	for {
		n, err := s.store.PurgeFinished(ctx, cutoff, purgeBatch)
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
