package gormstore

import (
	"time"

	"gorm.io/gorm"

	"interlock/runtype"
)

// Lease times are the database's: with many instances over one MySQL, each instance's clock may
// be off, but they all read one database clock, so "expired" means the same to all of them.
// An embedded SQLite database lives in this process, whose clock is the database's.

// dbNowPlus is the SQL value of the database's now plus d, at millisecond precision.
func (s *Store) dbNowPlus(d time.Duration) any {
	if s.mysql {
		return gorm.Expr("TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3))", d.Microseconds())
	}
	return runtype.StoredTime(time.Now().Add(d))
}

// dbNow is the SQL value of the database's now.
func (s *Store) dbNow() any { return s.dbNowPlus(0) }
