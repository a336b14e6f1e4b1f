package gormstore

import (
	"context"

	"gorm.io/gorm"
)

// MigrateUpTo applies the migrations up to version last only, as an older Interlock did.
func MigrateUpTo(ctx context.Context, db *gorm.DB, last int) error {
	return migrateUpTo(ctx, db, last)
}
