package gormstore

import (
	"context"

	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// RunClaimRow is one row of run_claims: a person's "I'm on it" on a suspended run
// (runs/claims.go). The primary key (run, subject) gives each person one claim per run.
type RunClaimRow struct {
	RunID     string    `gorm:"column:run_id;primaryKey"`
	Subject   string    `gorm:"column:subject;primaryKey"`
	ClaimedAt time.Time `gorm:"column:claimed_at"`
	ExpiresAt time.Time `gorm:"column:expires_at"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (RunClaimRow) TableName() string { return "run_claims" }

// SavedViewRow is one row of saved_views (runs/savedviews.go); (subject, name) is unique.
type SavedViewRow struct {
	ID        string    `gorm:"column:id;primaryKey"`
	Subject   string    `gorm:"column:subject"`
	Name      string    `gorm:"column:name"`
	Query     string    `gorm:"column:query"`
	CreatedAt time.Time `gorm:"column:created_at;autoCreateTime:false"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (SavedViewRow) TableName() string { return "saved_views" }

// Claim implements runs.TeamStore.
func (s *Store) Claim(ctx context.Context, w runs.ClaimWrite) (bool, error) {
	at, until := runtype.StoredTime(w.At), runtype.StoredTime(w.ExpiresAt)
	var fresh bool
	err := s.tx(ctx, func(tx *gorm.DB) error {
		fresh = false
		// A decision racing the claim may commit just after it: readers show claims only with
		// a SUSPENDED run (runs.Service.RunClaims), so such a claim is never seen.
		var n int64
		if err := tx.Model(&Run{}).Where("id = ? AND status = ?", w.RunID, runtype.StatusSuspended).Count(&n).Error; err != nil {
			return fmt.Errorf("read run: %w", err)
		}
		if n == 0 {
			return runs.ErrStale
		}
		if err := tx.Where("expires_at <= ?", at).Delete(&RunClaimRow{}).Error; err != nil {
			return fmt.Errorf("delete lapsed claims: %w", err)
		}
		res := tx.Model(&RunClaimRow{}).Where("run_id = ? AND subject = ?", w.RunID, w.Subject).Update("expires_at", until)
		if res.Error != nil {
			return fmt.Errorf("renew claim: %w", res.Error)
		}
		if res.RowsAffected > 0 {
			return nil
		}
		if err := tx.Create(&RunClaimRow{RunID: w.RunID, Subject: w.Subject, ClaimedAt: at, ExpiresAt: until}).Error; err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		fresh = true
		return recordChange(tx, w.RunID, runs.ChangeChanged, w.InstanceID, at)
	})
	if err != nil && duplicateKey(err) {
		// The same person's claim raced in first (two clicks): it stands; renew it.
		err = s.db.WithContext(ctx).Model(&RunClaimRow{}).Where("run_id = ? AND subject = ?", w.RunID, w.Subject).Update("expires_at", until).Error
		return false, err
	}
	return fresh, err
}

// ReleaseClaim implements runs.TeamStore.
func (s *Store) ReleaseClaim(ctx context.Context, runID, subject, instanceID string, at time.Time) (bool, error) {
	at = runtype.StoredTime(at)
	var released bool
	err := s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Where("run_id = ? AND subject = ? AND expires_at > ?", runID, subject, at).Delete(&RunClaimRow{})
		if res.Error != nil {
			return fmt.Errorf("delete claim: %w", res.Error)
		}
		if released = res.RowsAffected > 0; !released {
			return nil
		}
		return recordChange(tx, runID, runs.ChangeChanged, instanceID, at)
	})
	return released, err
}

// Claims implements runs.TeamStore.
func (s *Store) Claims(ctx context.Context, ids []string, now time.Time, limit int) (map[string][]runtype.RunClaim, error) {
	out := map[string][]runtype.RunClaim{}
	if ids != nil && len(ids) == 0 {
		return out, nil
	}
	q := s.db.WithContext(ctx).Where("expires_at > ?", runtype.StoredTime(now))
	if ids != nil {
		q = q.Where("run_id IN ?", ids)
	}
	if limit > 0 {
		q = q.Limit(limit)
	}
	var rows []RunClaimRow
	if err := q.Order("run_id, claimed_at, subject").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read claims: %w", err)
	}
	for _, r := range rows {
		out[r.RunID] = append(out[r.RunID], runtype.RunClaim{RunID: r.RunID, Subject: r.Subject, Since: r.ClaimedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()})
	}
	return out, nil
}

// SavedViews implements runs.TeamStore.
func (s *Store) SavedViews(ctx context.Context, subject string) ([]runtype.SavedView, error) {
	var rows []SavedViewRow
	if err := s.eq(s.db.WithContext(ctx), "subject", subject).Order("name, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read saved views: %w", err)
	}
	out := make([]runtype.SavedView, len(rows))
	for i, r := range rows {
		out[i] = runtype.SavedView{ID: r.ID, Subject: r.Subject, Name: r.Name, Query: r.Query, CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}

// CountSavedViews implements runs.TeamStore.
func (s *Store) CountSavedViews(ctx context.Context, subject string) (int64, error) {
	var n int64
	if err := s.eq(s.db.WithContext(ctx).Model(&SavedViewRow{}), "subject", subject).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count saved views: %w", err)
	}
	return n, nil
}

// SaveView implements runs.TeamStore.
func (s *Store) SaveView(ctx context.Context, v runtype.SavedView) error {
	row := SavedViewRow{ID: v.ID, Subject: v.Subject, Name: v.Name, Query: v.Query, CreatedAt: runtype.StoredTime(v.CreatedAt)}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		if duplicateKey(err) {
			return runs.ErrDuplicateView
		}
		return fmt.Errorf("save view: %w", err)
	}
	return nil
}

// DeleteSavedView implements runs.TeamStore.
func (s *Store) DeleteSavedView(ctx context.Context, subject, id string) (bool, error) {
	res := s.eq(s.db.WithContext(ctx).Where("id = ?", id), "subject", subject).Delete(&SavedViewRow{})
	if res.Error != nil {
		return false, fmt.Errorf("delete saved view: %w", res.Error)
	}
	return res.RowsAffected > 0, nil
}

// search narrows q (over agent_runs) to the runs matching text (runs/search.go): a prefix of
// the id, or a substring of the thread, resource or requester, or of a tool call's name or
// arguments, case folded, with LIKE's wildcards escaped.
func (s *Store) search(q *gorm.DB, text string) *gorm.DB {
	if text == "" {
		return q
	}
	lower := strings.ToLower(text)
	sub := "%" + likeEscape(lower) + "%"
	// Not correlated: the database reads the call rows once and looks each run up in what it
	// found, instead of running a subquery per run (an EXISTS cost 1 s over 90,000 runs).
	calls := s.db.Model(&ToolCall{}).Select("run_tool_calls.run_id").
		Where("LOWER(run_tool_calls.tool_name) LIKE ? ESCAPE '!' OR LOWER(run_tool_calls.args) LIKE ? ESCAPE '!'", sub, sub)
	return q.Where(s.db.Where("LOWER(agent_runs.id) LIKE ? ESCAPE '!'", likeEscape(lower)+"%").
		Or("LOWER(agent_runs.thread_id) LIKE ? ESCAPE '!'", sub).
		Or("LOWER(agent_runs.resource_id) LIKE ? ESCAPE '!'", sub).
		Or("LOWER(agent_runs.started_by) LIKE ? ESCAPE '!'", sub).
		Or("agent_runs.id IN (?)", calls))
}
