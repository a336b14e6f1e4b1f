package runtype

import "time"

// StoredTime is t as storage keeps it and gives it back: in UTC, truncated to the millisecond
// (MySQL's DATETIME(3), and SQLite's text, hold no more). Every instant is made so before it is
// stored or compared with a stored one, so that what a client reads back equals what was
// written.
func StoredTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
