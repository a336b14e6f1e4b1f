package gormstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// Store is runs.Store over GORM, on SQLite or MySQL. Every query of the run service is in this
// package, and so is every difference between the dialects: migrations (migrations/<dialect>),
// the clock of leases (clock.go) and the retry of MySQL deadlocks (tx).
type Store struct {
	db    *gorm.DB
	mysql bool
	group *groupCommit // shares transactions between concurrent run writes (groupcommit.go)
}

var _ runs.Store = (*Store)(nil)

// New returns the store over a database opened by Open and migrated by Migrate.
func New(db *gorm.DB) *Store {
	classifyErrors(db)
	s := &Store{db: db, mysql: db.Dialector.Name() == DialectMySQL}
	// SQLite has one writer connection: a second grouped transaction would only wait for it.
	inflight := 1
	if s.mysql {
		inflight = 4
	}
	s.group = newGroupCommit(s, inflight)
	return s
}

// DB is the database, for tests that craft rows the service would never write.
func (s *Store) DB() *gorm.DB { return s.db }

// deadlockRetries bounds how often a transaction that MySQL chose as a deadlock victim (or
// whose lock wait timed out) is run again. Such a transaction was rolled back whole, so running
// it again is safe.
const deadlockRetries = 4

// tx runs fn in a transaction, again when MySQL rolled it back for a deadlock.
func (s *Store) tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	for attempt := 0; ; attempt++ {
		err := s.db.WithContext(ctx).Transaction(fn)
		if err == nil || attempt == deadlockRetries || !retryable(err) || ctx.Err() != nil {
			return classify(err) // begin and commit fail outside any statement's callbacks
		}
		// Back off a little, with jitter, so that the two victims do not meet again.
		d := time.Duration(1+rand.IntN(5*(attempt+1))) * time.Millisecond
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return err
		}
	}
}

// retryable reports a MySQL deadlock (1213) or lock wait timeout (1205).
func retryable(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// leased narrows a query to the run while lease holds it RUNNING.
func leased(tx *gorm.DB, runID, lease string) *gorm.DB {
	return tx.Model(&Run{}).Where("id = ? AND status = ? AND lease_owner = ?", runID, runtype.StatusRunning, lease)
}

// leaseUpdate is the compare-and-set every write of an executing run goes through. It counts
// matched rows, not changed ones (MySQL connections are opened with clientFoundRows), so a
// write that happens to set what is already there still proves the lease.
func leaseUpdate(tx *gorm.DB, runID, lease string, set map[string]any) error {
	res := leased(tx, runID, lease).Updates(set)
	if res.Error != nil {
		return fmt.Errorf("update run %s: %w", runID, res.Error)
	}
	if res.RowsAffected == 0 {
		return runs.ErrLeaseLost
	}
	return nil
}

func msOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := runtype.StoredTime(*t)
	return &v
}
