package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/runs"
)

// TestMigrateOnlyMigrates: `interlock migrate` creates the tables and exits without starting
// the run service, so a run left RUNNING with an expired lease stays exactly as it was (the
// service would recover it).
func TestMigrateOnlyMigrates(t *testing.T) {
	db := "sqlite:" + t.TempDir() + "/migrate.db"
	started := 0
	orig := newRunService
	newRunService = func(st runs.Store, a *agent.Registry, cfg runs.Config) (*runs.Service, error) {
		started++
		return orig(st, a, cfg)
	}
	t.Cleanup(func() { newRunService = orig })

	if err := runCommand([]string{"migrate", "--db", db}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	gdb, err := gormstore.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(gdb)
	owner, expired := "gone-instance/1", time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	snapshot := "{}"
	stuck := gormstore.Run{
		ID: "stuck", AgentID: "support-agent", Prompt: "refund order 1", Status: "RUNNING", Snapshot: &snapshot,
		CreatedAt: expired, UpdatedAt: expired, LastSeq: 1, LeaseOwner: &owner, LeaseUntil: &expired, Version: 1,
	}
	if err := gdb.Create(&stuck).Error; err != nil { // the tables exist
		t.Fatal(err)
	}
	if err := runCommand([]string{"migrate", "--db", db}, slog.New(slog.DiscardHandler)); err != nil { // again: nothing to do
		t.Fatal(err)
	}
	if started != 0 {
		t.Fatalf("migrate started the run service %d times", started)
	}
	var after gormstore.Run
	if err := gdb.First(&after, "id = ?", "stuck").Error; err != nil {
		t.Fatal(err)
	}
	if after.Status != "RUNNING" || after.LeaseOwner == nil || *after.LeaseOwner != owner || after.Version != 1 || after.RecoveryAttempts != 0 {
		t.Fatalf("migrate changed the run: %+v", after)
	}
	if err := runCommand([]string{"migrate", "--db", "postgres://x"}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "INTERLOCK_DB") {
		t.Fatalf("migrate with a bad --db: %v", err)
	}
}
