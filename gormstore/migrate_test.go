package gormstore_test

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
)

// TestMigratedSchemaMatchesModels checks that every column of every model exists after the
// migrations, and that the tables have no column the models do not know.
func TestMigratedSchemaMatchesModels(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		for _, m := range gormstore.All() {
			stmt := &gorm.Statement{DB: db}
			if err := stmt.Parse(m); err != nil {
				t.Fatal(err)
			}
			table := stmt.Schema.Table
			cols, err := db.Migrator().ColumnTypes(m)
			if err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			have := map[string]bool{}
			for _, c := range cols {
				have[c.Name()] = true
			}
			for _, f := range stmt.Schema.Fields {
				if f.DBName == "" {
					continue
				}
				if !have[f.DBName] {
					t.Errorf("%s: model column %s missing from the migrated table", table, f.DBName)
				}
				delete(have, f.DBName)
			}
			for c := range have {
				t.Errorf("%s: column %s is in the table but not in the model", table, c)
			}
		}
	})
}

// TestMigrateIsIdempotent runs the migrations a second time on a migrated database.
func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		if err := gormstore.Migrate(context.Background(), db); err != nil {
			t.Fatalf("second migrate: %v", err)
		}
		var n int64
		if err := db.Table("schema_migrations").Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n < 1 {
			t.Fatalf("schema_migrations has %d rows", n)
		}
	})
}

func TestOpenRejectsBadSettings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"postgres://x", "mysql://host-only", "sqlite:", "mysql://u:secret@127.0.0.1:1/db"} {
		_, err := gormstore.Open(context.Background(), s)
		if err == nil {
			t.Errorf("Open(%q): no error", s)
			continue
		}
		if got := err.Error(); contains(got, "secret") {
			t.Errorf("Open(%q) leaks the password: %s", s, got)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
