package gormstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
)

//go:embed migrations
var migrationFiles embed.FS

// migration is one versioned file of migrations/<dialect>/NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// schemaMigration records an applied migration.
type schemaMigration struct {
	Version   int       `gorm:"column:version;primaryKey;autoIncrement:false"`
	Name      string    `gorm:"column:name"`
	AppliedAt time.Time `gorm:"column:applied_at"`
}

func (schemaMigration) TableName() string { return "schema_migrations" }

// Migrate applies, in order, every embedded migration of the database's dialect that is not yet
// recorded in schema_migrations. On MySQL it holds a named lock meanwhile, so several instances
// starting at once over one database migrate it exactly once.
func Migrate(ctx context.Context, db *gorm.DB) error { return migrateUpTo(ctx, db, 0) }

// migrateUpTo is Migrate applying no migration after version last (0: every one), so that tests
// can write rows as an older version did and check what a later migration makes of them.
func migrateUpTo(ctx context.Context, db *gorm.DB, last int) error {
	dialect := db.Dialector.Name()
	list, err := migrationsFor(dialect)
	if err != nil {
		return err
	}
	db = db.WithContext(ctx)
	return db.Connection(func(pinned *gorm.DB) error {
		// Every statement starts a fresh chain on the one pinned connection (the lock is per connection).
		conn := pinned.Session(&gorm.Session{NewDB: true})
		if dialect == DialectMySQL {
			var got *int
			if err := conn.Raw("SELECT GET_LOCK('interlock_migrate', 60)").Scan(&got).Error; err != nil {
				return fmt.Errorf("migrate: take lock: %w", err)
			}
			if got == nil || *got != 1 {
				return fmt.Errorf("migrate: another instance held the migration lock for 60s")
			}
			defer conn.Exec("SELECT RELEASE_LOCK('interlock_migrate')")
		}
		if err := conn.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name VARCHAR(191) NOT NULL, applied_at ` + timeType(dialect) + ` NOT NULL)`).Error; err != nil {
			return fmt.Errorf("migrate: create schema_migrations: %w", err)
		}
		var applied []schemaMigration
		if err := conn.Find(&applied).Error; err != nil {
			return fmt.Errorf("migrate: read schema_migrations: %w", err)
		}
		done := map[int]bool{}
		for _, m := range applied {
			done[m.Version] = true
		}
		for _, m := range list {
			if done[m.version] || (last > 0 && m.version > last) {
				continue
			}
			if err := apply(conn.Session(&gorm.Session{NewDB: true}), dialect, m); err != nil {
				return err
			}
		}
		return nil
	})
}

// apply runs one migration. SQLite runs it in a transaction; MySQL commits DDL statement by
// statement, so there a failed migration is reported with the statement that failed.
func apply(conn *gorm.DB, dialect string, m migration) error {
	run := func(tx *gorm.DB) error {
		for _, stmt := range strings.Split(m.sql, ";\n") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if err := tx.Exec(stmt).Error; err != nil {
				return fmt.Errorf("migrate %04d_%s: %w", m.version, m.name, err)
			}
		}
		rec := schemaMigration{Version: m.version, Name: m.name, AppliedAt: time.Now().UTC().Truncate(time.Millisecond)}
		if err := tx.Create(&rec).Error; err != nil {
			return fmt.Errorf("migrate %04d_%s: record: %w", m.version, m.name, err)
		}
		return nil
	}
	if dialect == DialectSQLite {
		return conn.Transaction(run)
	}
	return run(conn)
}

func timeType(dialect string) string {
	if dialect == DialectMySQL {
		return "DATETIME(3)"
	}
	return "DATETIME"
}

func migrationsFor(dialect string) ([]migration, error) {
	dir := "migrations/" + dialect
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("migrate: no migrations for dialect %q", dialect)
	}
	var list []migration
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".sql")
		if !ok {
			continue
		}
		num, name, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migrate: bad migration file name %s", e.Name())
		}
		body, err := fs.ReadFile(migrationFiles, dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		list = append(list, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].version < list[j].version })
	return list, nil
}
