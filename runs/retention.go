package runs

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
)

const purgeBatch = 500

// PurgeFinished deletes runs that finished (COMPLETED or FAILED) longer than Retention ago, with
// their events and tool-call rows, in batches; suspended and running runs are never touched. It
// also drops suspended-set change rows older than an hour. It returns the number of runs deleted.
func (s *Service) PurgeFinished(ctx context.Context) (int, error) {
	now := s.now()
	cutoff := now.Add(-s.cfg.Retention)
	total := 0
	for {
		var ids []string
		err := s.store.db.WithContext(ctx).Model(&gormstore.Run{}).
			Where("status IN ? AND updated_at < ?", []Status{StatusCompleted, StatusFailed}, cutoff).
			Limit(purgeBatch).Pluck("id", &ids).Error
		if err != nil {
			return total, fmt.Errorf("retention: find finished runs: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		err = s.store.tx(ctx, func(tx *gorm.DB) error {
			if err := tx.Where("run_id IN ?", ids).Delete(&gormstore.Event{}).Error; err != nil {
				return err
			}
			if err := tx.Where("run_id IN ?", ids).Delete(&gormstore.ToolCall{}).Error; err != nil {
				return err
			}
			return tx.Where("id IN ? AND status IN ?", ids, []Status{StatusCompleted, StatusFailed}).Delete(&gormstore.Run{}).Error
		})
		if err != nil {
			return total, fmt.Errorf("retention: delete runs: %w", err)
		}
		total += len(ids)
		if len(ids) < purgeBatch {
			break
		}
	}
	if err := s.store.db.WithContext(ctx).Where("created_at < ?", now.Add(-time.Hour)).Delete(&gormstore.RunChange{}).Error; err != nil {
		return total, fmt.Errorf("retention: delete old changes: %w", err)
	}
	return total, nil
}
