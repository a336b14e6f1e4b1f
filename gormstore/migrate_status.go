package gormstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
)

// MigrationState is one migration as a database has it: embedded in this binary, recorded as
// applied in schema_migrations, or both.
type MigrationState struct {
	Version int
	Name    string
	// AppliedAt is when it was applied (UTC); nil while it is pending.
	AppliedAt *time.Time
	// Known is false for a migration the database records but this binary does not embed: a
	// newer version of Interlock applied it, so this one may not understand the schema.
	Known bool
}

// Pending reports whether the migration is embedded but not yet applied.
func (m MigrationState) Pending() bool { return m.AppliedAt == nil }

// MigrationStatus lists every migration of the database's dialect that this binary embeds, and
// every one the database records, in version order. It only reads: a database never migrated
// (no schema_migrations table) has every migration pending and is left as it was, so
// `interlock migrate status` can be run against production without changing it.
func MigrationStatus(ctx context.Context, db *gorm.DB) ([]MigrationState, error) {
	dialect := db.Dialector.Name()
	list, err := migrationsFor(dialect)
	if err != nil {
		return nil, err
	}
	db = db.WithContext(ctx)
	var applied []schemaMigration
	if db.Migrator().HasTable(schemaMigration{}.TableName()) {
		if err := db.Find(&applied).Error; err != nil {
			return nil, fmt.Errorf("migrate status: read schema_migrations: %w", err)
		}
	}
	byVersion := map[int]*MigrationState{}
	var out []MigrationState
	for _, m := range list {
		out = append(out, MigrationState{Version: m.version, Name: m.name, Known: true})
	}
	for i := range out {
		byVersion[out[i].Version] = &out[i]
	}
	for _, a := range applied {
		at := a.AppliedAt.UTC()
		if s, ok := byVersion[a.Version]; ok {
			s.AppliedAt = &at
			continue
		}
		out = append(out, MigrationState{Version: a.Version, Name: a.Name, AppliedAt: &at})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
