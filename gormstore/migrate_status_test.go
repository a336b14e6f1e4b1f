package gormstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
)

// TestMigrationStatusOfAMigratedDatabase: after Migrate every embedded migration is applied, in
// version order; one whose record is removed is pending again, and one recorded by a newer
// binary is listed as applied but unknown.
func TestMigrationStatusOfAMigratedDatabase(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		list, err := gormstore.MigrationStatus(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) < 7 {
			t.Fatalf("%d migrations listed, want at least the 7 embedded", len(list))
		}
		prev := 0 // versions rise; a gap is allowed (branches take their numbers in parallel)
		for i, m := range list {
			if m.Pending() || !m.Known || m.Name == "" || m.Version <= prev {
				t.Errorf("migration %d: %+v, want a version above %d, known and applied", i, m, prev)
			}
			prev = m.Version
		}
		if err := db.Exec("DELETE FROM schema_migrations WHERE version = ?", 2).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", 9999, "from_the_future", time.Now().UTC()).Error; err != nil {
			t.Fatal(err)
		}
		list, err = gormstore.MigrationStatus(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if !list[1].Pending() || !list[1].Known {
			t.Errorf("migration 2 after its record was deleted: %+v, want pending", list[1])
		}
		last := list[len(list)-1]
		if last.Version != 9999 || last.Name != "from_the_future" || last.Known || last.Pending() {
			t.Errorf("last: %+v, want 9999 from_the_future applied and unknown", last)
		}
	})
}

// TestMigrationStatusOnlyReads: a database never migrated has every migration pending, and
// asking does not create schema_migrations.
func TestMigrationStatusOnlyReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	check := func(t *testing.T, db *gorm.DB) {
		list, err := gormstore.MigrationStatus(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) < 7 {
			t.Fatalf("%d migrations listed, want every embedded one", len(list))
		}
		for _, m := range list {
			if !m.Pending() || !m.Known {
				t.Errorf("%+v: want pending", m)
			}
		}
		if db.Migrator().HasTable("schema_migrations") {
			t.Error("MigrationStatus created schema_migrations")
		}
	}
	t.Run(gormstore.DialectSQLite, func(t *testing.T) {
		db, err := gormstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "fresh.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sqlDB, _ := db.DB(); sqlDB.Close() })
		check(t, db)
	})
	t.Run(gormstore.DialectMySQL, func(t *testing.T) {
		db, err := gormstore.OpenMySQL(ctx, dbtest.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sqlDB, _ := db.DB(); sqlDB.Close() })
		check(t, db)
	})
}
