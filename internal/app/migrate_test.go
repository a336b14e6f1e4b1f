package app_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"interlock/gormstore"
	"interlock/internal/app"
)

// TestMigrateOnlyMigrates: `interlock migrate` creates the tables and exits without building
// the application: a run left RUNNING with an expired lease stays exactly as it was (the run
// service would recover it), and no receipt signing key is made (the application makes one
// when it starts over a database that has none, before it starts the run service).
func TestMigrateOnlyMigrates(t *testing.T) {
	db := "sqlite:" + t.TempDir() + "/migrate.db"
	if err := app.RunCommand([]string{"migrate", "--db", db}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gdb, err := gormstore.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if sqlDB, err := gdb.DB(); err == nil {
			sqlDB.Close()
		}
	}()
	owner, expired := "gone-instance/1", time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	snapshot := "{}"
	stuck := gormstore.Run{
		ID: "stuck", AgentID: "support-agent", Prompt: "refund order 1", Status: "RUNNING", Snapshot: &snapshot,
		CreatedAt: expired, UpdatedAt: expired, LastSeq: 1, LeaseOwner: &owner, LeaseUntil: &expired, Version: 1,
	}
	if err := gdb.Create(&stuck).Error; err != nil { // the tables exist
		t.Fatal(err)
	}
	if err := app.RunCommand([]string{"migrate", "--db", db}, slog.New(slog.DiscardHandler)); err != nil { // again: nothing to do
		t.Fatal(err)
	}
	var keys int64
	if err := gdb.Model(&gormstore.ReceiptKey{}).Count(&keys).Error; err != nil {
		t.Fatal(err)
	}
	if keys != 0 {
		t.Fatalf("migrate made %d receipt signing keys: it built the application", keys)
	}
	var after gormstore.Run
	if err := gdb.First(&after, "id = ?", "stuck").Error; err != nil {
		t.Fatal(err)
	}
	if after.Status != "RUNNING" || after.LeaseOwner == nil || *after.LeaseOwner != owner || after.Version != 1 || after.RecoveryAttempts != 0 {
		t.Fatalf("migrate changed the run: %+v", after)
	}
	if err := app.RunCommand([]string{"migrate", "--db", "postgres://x"}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "INTERLOCK_DB") {
		t.Fatalf("migrate with a bad --db: %v", err)
	}
}
