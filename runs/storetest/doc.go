// Package storetest is the conformance suite of runs.Store: one set of tests, written against
// the interface alone, that every storage implementation runs unchanged. It checks each method's
// contract as runs/store.go states it — lease checks and ErrLeaseLost, the decision's
// compare-and-set and ErrStale, exclusive claims of expired runs, deferred recovery, discovery
// filters, ordering and pagination, changes, retention — including the races (concurrent
// decisions and claims: exactly one wins) and the failure cases (a rejected write leaves no
// trace). It is modelled on River's riverdrivertest.
//
// A new database is one package that passes it. Implement runs.Store, then add a test that opens
// a new, empty, migrated database per call:
//
//	func TestStorePostgres(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) runs.Store {
//			db := freshPostgresDatabase(t) // created for t, dropped by t.Cleanup
//			return pgstore.New(db)
//		})
//	}
//
// The opener is called once per subtest, and the subtests run in parallel, so a store must not
// see another subtest's rows: give each its own database, schema or file, or one of a few made
// for the whole run and emptied when handed out (gormstore's tests do that on MySQL, where
// creating and migrating a database per subtest is a thousand DDL statements).
//
// What the suite needs beyond the interface: nothing. Lease times are the database's, so it
// never sets them: it renews a lease for a millisecond and polls ExpiredRuns until the lease
// has run out (a few milliseconds), and it gives DeferRecovery short backoffs the same way. It
// never asserts how long anything takes; a wait only fails after 30 seconds, to stop a broken
// store from hanging the run. Times it passes are off a millisecond and outside UTC, and it
// expects them back in UTC at millisecond precision.
//
// Rules the suite holds beyond the doc comments' words, because the run service relies on them:
// a lease that ran out still holds until another instance claims the run (the claim compares
// version, last seq and expiry, so a late write by the holder and a claim never both succeed); a
// DeferRecovery whose version moved, or whose run is held again, changes nothing; a write that
// fails leaves the run, its events, calls, changes and memory as they were; InsertRun of an
// existing id fails; agent, thread and resource ids match exactly (no case folding, no
// trailing-space padding as MySQL's collations do); concurrent PurgeFinished calls count each
// deleted run once.
package storetest
