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

// ownMessages narrows a query of messages (aliased m) to those of their thread's owner (threads,
// aliased t): the messages other resources wrote in a thread before threads had owners stay
// stored, but are not the thread's. The resources are compared as bytes on MySQL (see eq).
func (s *Store) ownMessages(q *gorm.DB) *gorm.DB {
	on := "JOIN threads t ON t.id = m.thread_id AND m.resource_id IS t.resource_id"
	if s.mysql {
		on = "JOIN threads t ON t.id = CAST(m.thread_id AS BINARY) AND CAST(m.resource_id AS BINARY) <=> CAST(t.resource_id AS BINARY)"
	}
	return q.Table("messages m").Joins(on)
}

// Thread implements runs.Store.
func (s *Store) Thread(ctx context.Context, id string, resources []string, last int) (*runs.Thread, error) {
	var owner []Thread
	if err := s.in(s.db.WithContext(ctx).Where("id = ?", id), "resource_id", resources).Limit(1).Find(&owner).Error; err != nil {
		return nil, fmt.Errorf("load thread %s: %w", id, err)
	}
	if len(owner) == 0 {
		return nil, nil
	}
	th := &runs.Thread{ID: id, ResourceID: owner[0].ResourceID, Messages: []runs.ThreadMessage{}}
	var sum []threadRow
	err := s.ownMessages(s.db.WithContext(ctx)).Where("t.id = ?", id).
		Select("t.id AS thread_id, COUNT(*) AS n, MIN(m.id) AS first, MAX(m.id) AS last").
		Group("t.id").Scan(&sum).Error
	if err != nil {
		return nil, fmt.Errorf("load thread %s: %w", id, err)
	}
	if len(sum) == 0 {
		return th, nil // its first run has not finished yet
	}
	q := s.ownMessages(s.db.WithContext(ctx)).Where("t.id = ?", id).Select("m.*").Order("m.id DESC")
	if last > 0 {
		q = q.Limit(last)
	}
	var rows []Message
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load thread %s: %w", id, err)
	}
	th.MessageCount, th.Messages = sum[0].N, make([]runs.ThreadMessage, len(rows))
	for i, m := range rows {
		th.Messages[len(rows)-1-i] = runs.ThreadMessage{ID: m.ID, RunID: m.RunID, Role: llm.Role(m.Role), Content: m.Content, CreatedAt: m.CreatedAt.UTC()}
	}
	if err := s.threadTimes(ctx, []*runs.Thread{th}, []threadRow{sum[0]}); err != nil {
		return nil, err
	}
	return th, nil
}

// Threads implements runs.Store. The owner filters apply to the messages' resource, equal to the
// owner's by the join, so that idx_messages_resource serves them; threads are grouped by the
// owner row's id, which on MySQL is bytes, so ids that differ by trailing spaces stay apart.
func (s *Store) Threads(ctx context.Context, p runs.ThreadsParams) ([]*runs.Thread, int64, error) {
	q := s.ownMessages(s.db.WithContext(ctx))
	if p.ResourceID != nil {
		q = s.eq(q, "m.resource_id", *p.ResourceID)
	}
	q = s.in(q, "m.resource_id", p.Resources)
	var total int64
	if err := q.Session(&gorm.Session{}).Distinct("t.id").Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("count threads: %w", err)
	}
	var sum []threadRow
	err := q.Select("t.id AS thread_id, MAX(t.resource_id) AS resource_id, COUNT(*) AS n, MIN(m.id) AS first, MAX(m.id) AS last").
		Group("t.id").Order("MAX(m.id) DESC").Limit(p.PerPage).Offset(p.Page * p.PerPage).Scan(&sum).Error
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
