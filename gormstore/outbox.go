package gormstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"interlock/notify"
	"interlock/runtype"
)

// Notification is one row of notifications, the outbox: one event for one webhook, written in
// the transaction that stores what the event announces, and delivered by any instance that
// claims it (lease_owner, lease_until: a compare-and-set, like the run leases).
type Notification struct {
	ID            int64      `gorm:"column:id;primaryKey;autoIncrement"`
	EventID       string     `gorm:"column:event_id"`
	Target        string     `gorm:"column:target"`
	Kind          string     `gorm:"column:kind"`
	RunID         string     `gorm:"column:run_id"`
	Payload       string     `gorm:"column:payload"`
	State         string     `gorm:"column:state"`
	Attempts      int        `gorm:"column:attempts"`
	NextAttemptAt time.Time  `gorm:"column:next_attempt_at"`
	LeaseOwner    *string    `gorm:"column:lease_owner"`
	LeaseUntil    *time.Time `gorm:"column:lease_until"`
	LastError     *string    `gorm:"column:last_error"`
	CreatedAt     time.Time  `gorm:"column:created_at;autoCreateTime:false"`
	DeliveredAt   *time.Time `gorm:"column:delivered_at"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (Notification) TableName() string { return "notifications" }

var _ notify.Store = (*Store)(nil)

// claimable narrows a query to due PENDING rows no live lease holds, by the database's clock.
func (s *Store) claimable(q *gorm.DB) *gorm.DB {
	return q.Where("state = ? AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)",
		notify.StatePending, s.dbNow(), s.dbNow())
}

// ClaimDeliveries implements notify.Store. Candidates are read first, then each is taken by a
// compare-and-set on its lease, so that claimers racing for the same rows split them.
func (s *Store) ClaimDeliveries(ctx context.Context, owner string, ttl time.Duration, limit int) ([]notify.Delivery, error) {
	var ids []int64
	err := s.claimable(s.db.WithContext(ctx).Model(&Notification{})).Order("next_attempt_at").Order("id").Limit(limit).Pluck("id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("find due notifications: %w", err)
	}
	var claimed []int64
	for _, id := range ids {
		var ok bool
		err := s.tx(ctx, func(tx *gorm.DB) error {
			res := s.claimable(tx.Model(&Notification{})).Where("id = ?", id).
				Updates(map[string]any{"lease_owner": owner, "lease_until": s.dbNowPlus(ttl)})
			ok = res.RowsAffected == 1
			return res.Error
		})
		if err != nil {
			return nil, fmt.Errorf("claim notification %d: %w", id, err)
		}
		if ok {
			claimed = append(claimed, id)
		}
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	var rows []Notification
	if err := s.db.WithContext(ctx).Where("id IN ?", claimed).Order("next_attempt_at").Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read claimed notifications: %w", err)
	}
	return deliveries(rows), nil
}

// CompleteDelivery implements notify.Store.
func (s *Store) CompleteDelivery(ctx context.Context, id int64, owner string, o notify.Outcome) (bool, error) {
	set := map[string]any{"attempts": gorm.Expr("attempts + 1"), "lease_owner": nil, "lease_until": nil}
	switch {
	case o.Delivered:
		set["state"], set["delivered_at"], set["last_error"] = notify.StateDelivered, s.dbNow(), nil
	case o.RetryAfter > 0:
		set["next_attempt_at"], set["last_error"] = s.dbNowPlus(o.RetryAfter), truncate(o.Error)
	default:
		set["state"], set["last_error"] = notify.StateFailed, truncate(o.Error)
	}
	var held bool
	err := s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Notification{}).Where("id = ? AND state = ? AND lease_owner = ?", id, notify.StatePending, owner).Updates(set)
		held = res.RowsAffected == 1
		return res.Error
	})
	if err != nil {
		return false, fmt.Errorf("record delivery of notification %d: %w", id, err)
	}
	return held, nil
}

// Deliveries implements notify.Store.
func (s *Store) Deliveries(ctx context.Context, runID string) ([]notify.Delivery, error) {
	var rows []Notification
	if err := s.db.WithContext(ctx).Where("run_id = ?", runID).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list notifications of run %s: %w", runID, err)
	}
	return deliveries(rows), nil
}

// PurgeDeliveries implements notify.Store.
func (s *Store) PurgeDeliveries(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	var ids []int64
	err := s.db.WithContext(ctx).Model(&Notification{}).Where("state IN ? AND created_at < ?", []string{string(notify.StateDelivered), string(notify.StateFailed)}, runtype.StoredTime(cutoff)).
		Order("id").Limit(limit).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	res := s.db.WithContext(ctx).Where("id IN ?", ids).Delete(&Notification{})
	if res.Error != nil {
		return 0, fmt.Errorf("purge notifications: %w", res.Error)
	}
	return res.RowsAffected, nil
}

func deliveries(rows []Notification) []notify.Delivery {
	out := make([]notify.Delivery, len(rows))
	for i, r := range rows {
		out[i] = notify.Delivery{
			ID: r.ID, EventID: r.EventID, Target: r.Target, Kind: notify.Kind(r.Kind), RunID: r.RunID,
			Payload: []byte(r.Payload), State: notify.State(r.State), Attempts: r.Attempts,
			NextAttemptAt: r.NextAttemptAt.UTC(), CreatedAt: r.CreatedAt.UTC(),
		}
		if r.LastError != nil {
			out[i].LastError = *r.LastError
		}
		if r.DeliveredAt != nil {
			t := r.DeliveredAt.UTC()
			out[i].DeliveredAt = &t
		}
	}
	return out
}

// truncate keeps an error message within what a TEXT column and a log line should hold.
func truncate(s string) string {
	if len(s) > 1000 {
		return strings.ToValidUTF8(s[:1000], "")
	}
	return s
}
