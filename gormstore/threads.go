package gormstore

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/llm"
	"interlock/runs"
)

// threadRow is a thread summarised from its messages.
type threadRow struct {
	ThreadID   string
	ResourceID *string
	N          int64
	First      int64
	Last       int64
}

// Thread implements runs.Store.
func (s *Store) Thread(ctx context.Context, id string, resources []string, last int) (*runs.Thread, error) {
	var sum []threadRow
	err := s.in(s.eq(s.db.WithContext(ctx).Model(&Message{}), "thread_id", id), "resource_id", resources).
		Select("thread_id, MAX(resource_id) AS resource_id, COUNT(*) AS n, MIN(id) AS first, MAX(id) AS last").
		Group("thread_id").Scan(&sum).Error
	if err != nil {
		return nil, fmt.Errorf("load thread %s: %w", id, err)
	}
	if len(sum) == 0 {
		return nil, nil
	}
	q := s.in(s.eq(s.db.WithContext(ctx), "thread_id", id), "resource_id", resources).Order("id DESC")
	if last > 0 {
		q = q.Limit(last)
	}
	var rows []Message
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load thread %s: %w", id, err)
	}
	th := &runs.Thread{ID: id, ResourceID: sum[0].ResourceID, MessageCount: sum[0].N, Messages: make([]runs.ThreadMessage, len(rows))}
	for i, m := range rows {
		th.Messages[len(rows)-1-i] = runs.ThreadMessage{ID: m.ID, RunID: m.RunID, Role: llm.Role(m.Role), Content: m.Content, CreatedAt: m.CreatedAt.UTC()}
	}
	if err := s.threadTimes(ctx, []*runs.Thread{th}, []threadRow{sum[0]}); err != nil {
		return nil, err
	}
	return th, nil
}

// Threads implements runs.Store.
func (s *Store) Threads(ctx context.Context, p runs.ThreadsParams) ([]*runs.Thread, int64, error) {
	q := s.db.WithContext(ctx).Model(&Message{})
	if p.ResourceID != nil {
		q = s.eq(q, "resource_id", *p.ResourceID)
	}
	q = s.in(q, "resource_id", p.Resources)
	var total int64
	if err := q.Session(&gorm.Session{}).Distinct("thread_id").Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("count threads: %w", err)
	}
	var sum []threadRow
	err := q.Select("thread_id, MAX(resource_id) AS resource_id, COUNT(*) AS n, MIN(id) AS first, MAX(id) AS last").
		Group("thread_id").Order("MAX(id) DESC").Limit(p.PerPage).Offset(p.Page * p.PerPage).Scan(&sum).Error
	if err != nil {
		return nil, 0, fmt.Errorf("list threads: %w", err)
	}
	out := make([]*runs.Thread, len(sum))
	for i, r := range sum {
		out[i] = &runs.Thread{ID: r.ThreadID, ResourceID: r.ResourceID, MessageCount: r.N, Messages: []runs.ThreadMessage{}}
	}
	return out, total, s.threadTimes(ctx, out, sum)
}

// threadTimes sets each thread's first and last message times, read by primary key.
func (s *Store) threadTimes(ctx context.Context, ths []*runs.Thread, sum []threadRow) error {
	ids := make([]int64, 0, 2*len(sum))
	for _, r := range sum {
		ids = append(ids, r.First, r.Last)
	}
	if len(ids) == 0 {
		return nil
	}
	var rows []Message
	if err := s.db.WithContext(ctx).Select("id", "created_at").Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return fmt.Errorf("load thread times: %w", err)
	}
	at := map[int64]time.Time{}
	for _, m := range rows {
		at[m.ID] = m.CreatedAt.UTC()
	}
	for i, r := range sum {
		ths[i].CreatedAt, ths[i].UpdatedAt = at[r.First], at[r.Last]
	}
	return nil
}
