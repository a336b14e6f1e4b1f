package gormstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// SuspendedCount is one row of suspended_counts: how many runs of an agent created on one UTC
// day, top-level or sub-agent runs, are SUSPENDED, kept in the transaction of every suspension
// and decision. It serves the broad suspendedRuns queries (the inbox, one agent) twice:
//
//   - their `total` is a sum over a few hundred rows, instead of a count over every suspended
//     run's index entry (tens of milliseconds at 100,000 suspended runs);
//   - a deep page starts in the right day: the days newer than the one holding the page's first
//     run are skipped by their counts, so the index is walked past at most one day's runs
//     instead of every run before the page.
//
// Each count is spread over countSlots rows, so that concurrent suspensions of one agent
// (all on today's rows) rarely wait for the same row lock; a count is the sum of its slots.
type SuspendedCount struct {
	AgentID  string `gorm:"column:agent_id;primaryKey"`
	TopLevel bool   `gorm:"column:top_level;primaryKey"`
	// Day is the run's created_at in whole days since 1970-01-01 UTC.
	Day  int64 `gorm:"column:day;primaryKey;autoIncrement:false"`
	Slot int   `gorm:"column:slot;primaryKey;autoIncrement:false"`
	N    int64 `gorm:"column:n"`
}

// TableName keeps the table name independent of GORM's pluralisation rules.
func (SuspendedCount) TableName() string { return "suspended_counts" }

// countSlots is how many rows each count is spread over.
const countSlots = 8

const day = 24 * time.Hour

func dayOf(t time.Time) int64 { return t.UTC().Unix() / 86400 }

// countChange adds one to the count of the run's agent and day when the run entered the
// suspended set, takes one away when it left it, in the caller's transaction. It is called
// wherever a suspended-set change is recorded, which is exactly where a run becomes or stops
// being SUSPENDED.
func countChange(tx *gorm.DB, runID string, kind runs.ChangeKind) error {
	if kind == runs.ChangeChanged {
		return nil // still in the set: one of its several calls was decided
	}
	delta := 1
	if kind != runs.ChangeSuspended {
		delta = -1
	}
	h := fnv.New32a()
	h.Write([]byte(runID))
	// One statement reads the run's key (its agent, whether it is top-level, its day, with the
	// day in SQL as the recount has it) and adds to the count: a round trip fewer in every
	// suspension and decision than reading the run first.
	sql := `INSERT INTO suspended_counts (agent_id, top_level, day, slot, n)
SELECT agent_id, parent_run_id IS NULL, ` + dayExpr(tx) + `, ?, ? FROM agent_runs WHERE id = ?
`
	args := []any{int(h.Sum32() % countSlots), delta, runID}
	if tx.Dialector.Name() == DialectMySQL {
		sql += "ON DUPLICATE KEY UPDATE n = n + ?"
		args = append(args, delta)
	} else {
		sql += "ON CONFLICT (agent_id, top_level, day, slot) DO UPDATE SET n = n + excluded.n"
	}
	res := tx.Exec(sql, args...)
	if res.Error != nil {
		return fmt.Errorf("count suspended runs of run %s: %w", runID, res.Error)
	}
	if res.RowsAffected == 0 { // n moves by one, so an update always counts as a row
		return fmt.Errorf("count suspended runs: no run %s", runID)
	}
	return nil
}

// dayExpr is SQL for a run's created_at (stored in UTC) in whole days since 1970-01-01, as
// dayOf computes it in Go. On MySQL it is DATEDIFF, not UNIX_TIMESTAMP, which depends on the
// session's time zone and is NULL after 2038 on MariaDB before 11.5.
func dayExpr(db *gorm.DB) string {
	if db.Dialector.Name() == DialectMySQL {
		return "DATEDIFF(created_at, '1970-01-01')"
	}
	return "CAST(strftime('%s', created_at) AS INTEGER) / 86400"
}

// countable reports whether suspended_counts answers for p: no filter but the agent.
func countable(p runs.ListSuspendedParams) bool {
	return p.ThreadID == nil && p.ResourceID == nil && p.Resources == nil && p.FromDate == nil && p.ToDate == nil &&
		p.Agents == nil && p.NotAgents == nil && p.Search == ""
}

// counts narrows suspended_counts to p's runs (see countable).
func (s *Store) counts(ctx context.Context, p runs.ListSuspendedParams) *gorm.DB {
	q := s.db.WithContext(ctx).Model(&SuspendedCount{})
	if p.AgentID != nil {
		return s.eq(q, "agent_id", *p.AgentID)
	}
	return q.Where("top_level = ?", true)
}

// maintainedCount reads the count of p's runs from suspended_counts.
func (s *Store) maintainedCount(ctx context.Context, p runs.ListSuspendedParams) (int64, error) {
	var total int64
	if err := s.counts(ctx, p).Select("COALESCE(SUM(n), 0)").Scan(&total).Error; err != nil {
		return 0, fmt.Errorf("read the count of suspended runs: %w", err)
	}
	return total, nil
}

// seek finds where the page at offset begins for p: the end of the UTC day holding its first
// run, and how many runs the newer days hold (so offset minus that is the offset within the
// runs created before the end). ok is false when the page begins in the newest day.
func (s *Store) seek(ctx context.Context, p runs.ListSuspendedParams, offset int) (before time.Time, skipped int, ok bool, err error) {
	var days []struct {
		Day int64
		N   int64
	}
	if err := s.counts(ctx, p).Select("day, SUM(n) AS n").Group("day").Having("SUM(n) > 0").Order("day DESC").Scan(&days).Error; err != nil {
		return time.Time{}, 0, false, fmt.Errorf("read the counts of suspended runs by day: %w", err)
	}
	for i, d := range days {
		if int64(skipped)+d.N > int64(offset) {
			if i == 0 {
				return time.Time{}, 0, false, nil
			}
			return time.Unix(0, 0).UTC().Add(time.Duration(d.Day+1) * day), skipped, true, nil
		}
		skipped += int(d.N)
	}
	return time.Time{}, 0, false, nil
}

// RecountSuspended rebuilds suspended_counts from agent_runs, in one transaction. The store
// keeps the counts itself; this is for rows written around it (a bulk load such as
// interlock-bench's seed) and for repair.
func RecountSuspended(ctx context.Context, db *gorm.DB) error {
	agent, days := "agent_id", dayExpr(db)
	if db.Dialector.Name() == DialectMySQL {
		agent = "CAST(agent_id AS BINARY)"
	}
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("DELETE FROM suspended_counts").Error; err != nil {
			return fmt.Errorf("recount suspended runs: %w", err)
		}
		err := tx.Exec(`INSERT INTO suspended_counts (agent_id, top_level, day, slot, n)
SELECT `+agent+`, parent_run_id IS NULL, `+days+`, 0, COUNT(*) FROM agent_runs WHERE status = ?
GROUP BY `+agent+`, parent_run_id IS NULL, `+days, runtype.StatusSuspended).Error
		if err != nil {
			return fmt.Errorf("recount suspended runs: %w", err)
		}
		return nil
	})
}
