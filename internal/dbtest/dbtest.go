// Package dbtest gives tests real, freshly migrated databases: an SQLite file in a temporary
// directory always, and a new MySQL/MariaDB database when INTERLOCK_TEST_MYSQL_DSN is set. With
// CI=true a missing MySQL DSN fails the test rather than skipping it.
package dbtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"interlock/gormstore"
)

// EnvMySQL names the variable holding a go-sql-driver DSN of a MySQL server tests may use.
const EnvMySQL = "INTERLOCK_TEST_MYSQL_DSN"

// Each runs fn once per available dialect, as a subtest named for the dialect, each with a fresh
// migrated database.
func Each(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	t.Run(gormstore.DialectSQLite, func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run(gormstore.DialectMySQL, func(t *testing.T) { fn(t, MySQL(t)) })
}

// SQLite returns a migrated database in a new file under t.TempDir().
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := gormstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "test.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { closeDB(db) })
	if err := gormstore.Migrate(context.Background(), db); err != nil {
		t.Fatalf("migrate sqlite: %v", err)
	}
	return db
}

// MySQLDSN returns a DSN of a new, empty database on the test server (dropped when the test ends),
// or skips the test when no server is configured (fails instead under CI=true).
func MySQLDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvMySQL)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the MySQL tests", EnvMySQL)
		}
		t.Skipf("%s not set: skipping MySQL", EnvMySQL)
	}
	cfg, err := gomysql.ParseDSN(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvMySQL, err)
	}
	admin, err := gormstore.OpenMySQL(context.Background(), base)
	if err != nil {
		t.Fatalf("connect to test MySQL: %v", err)
	}
	defer closeDB(admin)
	name := "il_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
	if err := admin.Exec("CREATE DATABASE " + name).Error; err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		admin, err := gormstore.OpenMySQL(context.Background(), base)
		if err != nil {
			return
		}
		defer closeDB(admin)
		admin.Exec("DROP DATABASE IF EXISTS " + name)
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// MySQL returns a migrated database, new for this test, on the test MySQL server.
func MySQL(t testing.TB) *gorm.DB {
	t.Helper()
	dsn := MySQLDSN(t)
	db, err := gormstore.OpenMySQL(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	t.Cleanup(func() { closeDB(db) })
	if err := gormstore.Migrate(context.Background(), db); err != nil {
		t.Fatalf("migrate mysql: %v", err)
	}
	return db
}

// MySQLURL turns a go-sql-driver DSN into the mysql:// setting the server accepts.
func MySQLURL(dsn string) string {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		panic(err)
	}
	auth := cfg.User
	if cfg.Passwd != "" {
		auth += ":" + cfg.Passwd
	}
	return fmt.Sprintf("mysql://%s@%s/%s", auth, cfg.Addr, cfg.DBName)
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.Close()
	}
}

// CountStatements counts every statement db sends from now on (creates, queries, updates,
// deletes, rows and raw statements; BEGIN and COMMIT are not GORM statements and are not
// counted): the cost of an operation that does not depend on how busy the machine is.
func CountStatements(tb testing.TB, db *gorm.DB) *atomic.Int64 {
	tb.Helper()
	var n atomic.Int64
	count := func(*gorm.DB) { n.Add(1) }
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().After("gorm:create").Register("dbtest:count", count),
		cb.Query().After("gorm:query").Register("dbtest:count", count),
		cb.Update().After("gorm:update").Register("dbtest:count", count),
		cb.Delete().After("gorm:delete").Register("dbtest:count", count),
		cb.Row().After("gorm:row").Register("dbtest:count", count),
		cb.Raw().After("gorm:raw").Register("dbtest:count", count),
	} {
		if err != nil {
			tb.Fatalf("count statements: %v", err)
		}
	}
	return &n
}
