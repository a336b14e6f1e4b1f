package gormstore_test

import (
	"testing"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runs/storetest"
)

// TestStoreSQLite runs the runs.Store conformance suite on SQLite, a new file per subtest.
func TestStoreSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) runs.Store {
		return gormstore.New(dbtest.SQLite(t))
	})
}

// TestStoreMySQL runs the same suite on MySQL/MariaDB. It skips without
// INTERLOCK_TEST_MYSQL_DSN, and fails instead under CI=true.
//
// Creating and migrating a database per subtest is some fifteen DDL statements each, a thousand
// in all, that the MySQL tests of other packages running at the same time queue behind. So a few
// databases are made once, for this test, and each subtest takes one emptied of the rows the
// previous one left: subtests stay independent, and still run in parallel.
func TestStoreMySQL(t *testing.T) {
	t.Parallel()
	const databases = 4 // more than the subtests that run at once (GOMAXPROCS by default)
	pool := make(chan *gorm.DB, databases)
	for range databases {
		db := dbtest.MySQL(t) // skips or fails here, once, when no server is configured
		// These stay open for the whole test: hold few connections, so that the MySQL tests
		// of other packages (two server processes of 64 each) find the server's 151 free.
		// Eight is the most any subtest uses at once (its racing deciders or claimers).
		sqlDB, err := db.DB()
		if err != nil {
			t.Fatal(err)
		}
		sqlDB.SetMaxOpenConns(8)
		sqlDB.SetMaxIdleConns(1)
		pool <- db
	}
	storetest.Run(t, func(t *testing.T) runs.Store {
		db := <-pool
		t.Cleanup(func() { pool <- db })
		for _, m := range gormstore.All() {
			if err := db.Session(&gorm.Session{AllowGlobalUpdate: true}).Delete(m).Error; err != nil {
				t.Fatalf("empty %T: %v", m, err)
			}
		}
		return gormstore.New(db)
	})
}
