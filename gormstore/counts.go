package gormstore

import (
	"context"
	"fmt"
	"hash/fnv"

	"gorm.io/gorm"

	"interlock/runs"
)

// SuspendedCount is one row of suspended_counts: how many runs of an agent, top-level or
// sub-agent runs, are SUSPENDED, kept in the transaction of every suspension and decision.
// It makes the `total` of the broad suspendedRuns queries (the inbox, one agent) one read of a
// few rows instead of a count over every suspended run's index entry, which at 100,000
// suspended runs costs tens of milliseconds. Each agent's count is spread over countSlots
// rows, so that concurrent suspensions and decisions of one agent rarely wait for the same
// row lock; the count is their sum.
type SuspendedCount struct {
	AgentID  string `gorm:"column:agent_id;primaryKey"`
	TopLevel bool   `gorm:"column:top_level;primaryKey"`
	Slot     int    `gorm:"column:slot;primaryKey;autoIncrement:false"`
	N        int64  `gorm:"column:n"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (SuspendedCount) TableName() string { return "suspended_counts" }

// countSlots is how many rows an agent's count is spread over.
const countSlots = 8

// countChange adds one to the count of the run's agent when the run entered the suspended
// set, takes one away when it left it, in the caller's transaction. It is called wherever a
// suspended-set change is recorded, which is exactly where a run becomes or stops being
// SUSPENDED.
func countChange(tx *gorm.DB, runID string, kind runs.ChangeKind) error {
	delta := 1
	if kind != runs.ChangeSuspended {
		delta = -1
	}
	h := fnv.New32a()
	h.Write([]byte(runID))
	slot := int(h.Sum32() % countSlots)
	sql := `INSERT INTO suspended_counts (agent_id, top_level, slot, n)
SELECT agent_id, parent_run_id IS NULL, ?, ? FROM agent_runs WHERE id = ?
ON CONFLICT (agent_id, top_level, slot) DO UPDATE SET n = n + excluded.n`
	args := []any{slot, delta, runID}
	if tx.Dialector.Name() == DialectMySQL {
		sql = `INSERT INTO suspended_counts (agent_id, top_level, slot, n)
SELECT agent_id, parent_run_id IS NULL, ?, ? FROM agent_runs WHERE id = ?
ON DUPLICATE KEY UPDATE n = n + ?`
		args = append(args, delta)
	}
	if err := tx.Exec(sql, args...).Error; err != nil {
		return fmt.Errorf("count suspended runs of run %s: %w", runID, err)
	}
	return nil
}

// countable reports whether suspended_counts answers CountSuspended for p: no filter but the
// agent.
func countable(p runs.ListSuspendedParams) bool {
	return p.ThreadID == nil && p.ResourceID == nil && p.Resources == nil && p.FromDate == nil && p.ToDate == nil
}

// maintainedCount reads the count of p's runs from suspended_counts (see countable).
func (s *Store) maintainedCount(ctx context.Context, p runs.ListSuspendedParams) (int64, error) {
	q := s.db.WithContext(ctx).Model(&SuspendedCount{}).Select("COALESCE(SUM(n), 0)")
	if p.AgentID != nil {
		q = s.eq(q, "agent_id", *p.AgentID)
	} else {
		q = q.Where("top_level = ?", true)
	}
	var total int64
	if err := q.Scan(&total).Error; err != nil {
		return 0, fmt.Errorf("read the count of suspended runs: %w", err)
	}
	return total, nil
}

// RecountSuspended rebuilds suspended_counts from agent_runs, in one transaction. The store
// keeps the counts itself; this is for rows written around it (a bulk load such as
// interlock-bench's seed) and for repair.
func RecountSuspended(ctx context.Context, db *gorm.DB) error {
	agent := "agent_id"
	if db.Dialector.Name() == DialectMySQL {
		agent = "CAST(agent_id AS BINARY)"
	}
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("DELETE FROM suspended_counts").Error; err != nil {
			return fmt.Errorf("recount suspended runs: %w", err)
		}
		err := tx.Exec(`INSERT INTO suspended_counts (agent_id, top_level, slot, n)
SELECT `+agent+`, parent_run_id IS NULL, 0, COUNT(*) FROM agent_runs WHERE status = ?
GROUP BY `+agent+`, parent_run_id IS NULL`, runs.StatusSuspended).Error
		if err != nil {
			return fmt.Errorf("recount suspended runs: %w", err)
		}
		return nil
	})
}
