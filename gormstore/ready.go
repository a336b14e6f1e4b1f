package gormstore

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// PendingMigrations names the embedded migrations of the database's dialect that
// schema_migrations does not record (all of them when the table is missing), for a readiness
// check: an instance whose schema is behind its code must not take traffic.
func PendingMigrations(ctx context.Context, db *gorm.DB) ([]string, error) {
	db = db.WithContext(ctx)
	list, err := migrationsFor(db.Dialector.Name())
	if err != nil {
		return nil, err
	}
	var versions []int
	if db.Migrator().HasTable(&schemaMigration{}) {
		if err := db.Model(&schemaMigration{}).Pluck("version", &versions).Error; err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
	}
	done := map[int]bool{}
	for _, v := range versions {
		done[v] = true
	}
	var pending []string
	for _, m := range list {
		if !done[m.version] {
			pending = append(pending, fmt.Sprintf("%04d_%s", m.version, m.name))
		}
	}
	return pending, nil
}
