package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
	"interlock/tools"
)

// lockLength is how long another connection holds SQLite's write lock: longer than the busy
// timeout of Interlock's connection (10 s), so its writes fail (SQLITE_BUSY) rather than wait
// it out, and well within the default lease less its margin.
const lockLength = 15 * time.Second

// TestSQLiteWriteLockHeldByAnotherConnection is the SQLite counterpart of
// TestDatabaseFaultsAtScale: while refunds are in flight, another connection to the database
// file takes the write lock (BEGIN IMMEDIATE, as a backup tool, a migration or an operator's
// sqlite3 shell does) and holds it for 15 s, longer than the busy timeout, so that Interlock's
// writes fail with SQLITE_BUSY. Half of the tools finish while it is held, half after. Once the
// lock is released every result is stored: no call is reported interrupted, none needed a late
// result, each ran once, and every run completes.
func TestSQLiteWriteLockHeldByAnotherConnection(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "interlock.db")
	db, err := gormstore.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	if err := gormstore.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	other, err := gormstore.OpenSQLite(context.Background(), path) // another process's connection
	if err != nil {
		t.Fatal(err)
	}
	otherDB, err := other.DB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otherDB.Close() })

	be := newRefundBackend(t)
	logs := newTimeline()
	a := &agent.Agent{ID: "refunds", Name: "Refunds", Model: &llm.Demo{}, Tools: []*agent.Tool{{
		Name: "issue_refund", InputSchema: json.RawMessage(`{"type":"object"}`),
		ExecuteFunc: tools.HTTPExecute(tools.HTTPConfig{URL: be.url, Timeout: 2 * time.Minute}),
	}}}
	f := setupWith(t, db, runs.Config{InstanceID: "a", Logger: slog.New(timelineLog{name: "a", tl: logs})}, setupOpts{agents: []*agent.Agent{a}})
	t.Cleanup(func() { be.open(0); be.open(1) })

	var ids []string
	for n := range 10 {
		ids = append(ids, f.start(t, runs.StartParams{AgentID: "refunds", Prompt: fmt.Sprintf("refund order %d", n+1)}).ID)
	}
	be.waitArrived(t, len(ids), time.Minute)

	conn, err := otherDB.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	locked := time.Now()
	be.open(0) // the odd orders' refunds finish while the lock is held
	logs.wait(t, "a: run: storing a tool result failed", lockLength)
	time.Sleep(lockLength - time.Since(locked))
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatalf("release the write lock: %v", err)
	}
	released := time.Now()
	be.open(1)

	settled, by := waitSettled(t, db, ids, 3*time.Minute)
	if by[string(runtype.StatusCompleted)] != len(ids) {
		t.Errorf("runs by status: %v; want all %d COMPLETED", by, len(ids))
	}
	t.Logf("%d runs; the write lock held for %s; all runs settled %s after its release; results stored after retrying: %d; runs taken over: %d",
		len(ids), released.Sub(locked).Round(time.Millisecond), settled.Sub(released).Round(time.Millisecond),
		count(logs, "run: tool result stored after retrying"), count(logs, "recovering run"))
	if n := count(logs, "run: tool result stored after retrying"); n == 0 {
		t.Errorf("no result failed to store and then was stored: the lock was not felt, or nothing retried")
	}
	var interrupted, late int64
	if err := db.Model(&gormstore.Event{}).Where("type = ?", runtype.EventToolCallInterrupted).Count(&interrupted).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Model(&gormstore.LateToolResult{}).Count(&late).Error; err != nil {
		t.Fatal(err)
	}
	if interrupted != 0 || late != 0 {
		t.Errorf("%d calls reported interrupted, %d late results; want none", interrupted, late)
	}
	executed := be.executions()
	if len(executed) != len(ids) {
		t.Errorf("%d calls executed, want %d", len(executed), len(ids))
	}
	for call, n := range executed {
		if n != 1 {
			t.Errorf("call %s executed %d times, want once", call, n)
		}
	}
}
