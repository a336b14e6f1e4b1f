package gormstore

import (
	"context"
	"fmt"

	"interlock/runtype"
)

// CountByStatus counts the runs in each status with one GROUP BY over the status column (the
// leading column of the discovery indexes), for the metrics scraped from every instance.
func (s *Store) CountByStatus(ctx context.Context) (map[runtype.Status]int64, error) {
	var rows []struct {
		Status string
		N      int64
	}
	if err := s.db.WithContext(ctx).Model(&Run{}).Select("status, COUNT(*) AS n").Group("status").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("count runs by status: %w", err)
	}
	out := make(map[runtype.Status]int64, len(rows))
	for _, r := range rows {
		out[runtype.Status(r.Status)] = r.N
	}
	return out, nil
}
