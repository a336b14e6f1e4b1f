package apptest

import (
	"context"
	"database/sql"
	"testing"
)

// LockRunEvents locks run_events (LOCK TABLES … WRITE) from a session of its own, stores a
// TEXT_DELTA with data as event seq of runID from that session, and moves the run's last_seq to
// it: the server's poll sees a new event that it cannot read until unlock is called.
func LockRunEvents(t *testing.T, dsn, runID string, seq int64, data string) (unlock func()) {
	t.Helper()
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	ctx := context.Background()
	lock, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	if _, err := lock.ExecContext(ctx, "LOCK TABLES run_events WRITE"); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, `INSERT INTO run_events (run_id, seq, type, data, created_at)
		VALUES (?, ?, 'TEXT_DELTA', ?, UTC_TIMESTAMP(3))`, runID, seq, data); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, "UPDATE agent_runs SET last_seq = ? WHERE id = ?", seq, runID); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			t.Fatal(err)
		}
	}
}
