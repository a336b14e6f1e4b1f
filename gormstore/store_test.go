package gormstore_test

import (
	"testing"

	"interlock/dbtest"
	"interlock/gormstore"
	"interlock/runs"
	"interlock/runs/storetest"
)

// TestStoreSQLite runs the runs.Store conformance suite on SQLite, a new file per subtest.
func TestStoreSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) runs.Store { return gormstore.New(dbtest.SQLite(t)) })
}

// TestStoreMySQL runs the same suite on MySQL/MariaDB, a new database per subtest. It skips
// without INTERLOCK_TEST_MYSQL_DSN, and fails instead under CI=true.
func TestStoreMySQL(t *testing.T) {
	dbtest.MySQLDSN(t) // skips or fails once, for the whole suite, when no server is configured
	storetest.Run(t, func(t *testing.T) runs.Store { return gormstore.New(dbtest.MySQL(t)) })
}
