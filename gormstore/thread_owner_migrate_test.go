package gormstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// TestMigrationGivesOldThreadsTheOwnerOfTheirFirstRun writes threads as Interlock stored them
// before threads had owners (migrations up to 0009), some used under several resources, then
// migrates: each thread belongs to the resource of its earliest run (or, when its runs were
// purged, of its earliest message), nil included; thread and threads show a thread under that
// resource only, with that resource's messages; and from then on only the owner may add runs.
func TestMigrationGivesOldThreadsTheOwnerOfTheirFirstRun(t *testing.T) {
	t.Parallel()
	t.Run(gormstore.DialectSQLite, func(t *testing.T) {
		db, err := gormstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "old.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeDB(db) })
		testThreadOwnerMigration(t, db)
	})
	t.Run(gormstore.DialectMySQL, func(t *testing.T) {
		db, err := gormstore.OpenMySQL(context.Background(), dbtest.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeDB(db) })
		testThreadOwnerMigration(t, db)
	})
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.Close()
	}
}

func testThreadOwnerMigration(t *testing.T, db *gorm.DB) {
	ctx := context.Background()
	if err := gormstore.MigrateUpTo(ctx, db, 9); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	str := func(s string) *string { return &s }
	rn := func(id, thread string, resource *string, created int) {
		t.Helper()
		r := gormstore.Run{ID: id, AgentID: "agent", ThreadID: &thread, ResourceID: resource, Prompt: "p", Status: string(runtype.StatusCompleted), CreatedAt: at(created), UpdatedAt: at(created)}
		// context came with migration 13, after the one under test.
		if err := db.Omit("context").Create(&r).Error; err != nil {
			t.Fatal(err)
		}
	}
	message := func(thread string, resource *string, runID, content string, created int) {
		t.Helper()
		m := gormstore.Message{ThreadID: thread, ResourceID: resource, RunID: runID, Role: "user", Content: content, CreatedAt: at(created)}
		if err := db.Create(&m).Error; err != nil {
			t.Fatal(err)
		}
	}
	// shared: user-2's run was stored first but user-1's was created first.
	rn("run-shared-2", "shared", str("user-2"), 10)
	message("shared", str("user-2"), "run-shared-2", "user-2's secret", 11)
	rn("run-shared-1", "shared", str("user-1"), 5)
	message("shared", str("user-1"), "run-shared-1", "user-1's question", 6)
	rn("run-shared-0", "shared", nil, 20)
	message("shared", nil, "run-shared-0", "nobody's question", 21)
	// tie: created at the same instant; the smaller run id decides, so the answer is one.
	rn("run-tie-b", "tie", str("user-1"), 7)
	rn("run-tie-a", "tie", str("user-2"), 7)
	// nobody-first: a run without resource came first, so it stays without one.
	rn("run-nobody-0", "nobody-first", nil, 1)
	rn("run-nobody-1", "nobody-first", str("user-1"), 2)
	// purged: retention removed the runs, the messages stayed.
	message("purged", str("user-3"), "gone-1", "user-3's question", 30)
	message("purged", str("user-1"), "gone-2", "user-1's question", 31)
	// "shared " is another thread than "shared", on MySQL too.
	rn("run-padded", "shared ", str("user-9"), 3)
	// only a run, still running when the server stopped.
	rn("run-single", "single", str("user-1"), 40)

	if err := gormstore.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	var rows []gormstore.Thread
	if err := db.Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	owners := map[string]*string{}
	for _, r := range rows {
		owners[r.ID] = r.ResourceID
	}
	want := map[string]*string{"shared": str("user-1"), "tie": str("user-2"), "nobody-first": nil, "purged": str("user-3"), "shared ": str("user-9"), "single": str("user-1")}
	if len(owners) != len(want) {
		t.Errorf("threads %v, want %d", owners, len(want))
	}
	for id, w := range want {
		got, ok := owners[id]
		if !ok || (got == nil) != (w == nil) || (got != nil && *got != *w) {
			t.Errorf("owner of %q = %v (present %v), want %v", id, deref(got), ok, deref(w))
		}
	}

	st := gormstore.New(db)
	th, err := st.Thread(ctx, "shared", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if th == nil || deref(th.ResourceID) != "user-1" || th.MessageCount != 1 || len(th.Messages) != 1 || th.Messages[0].Content != "user-1's question" {
		t.Fatalf("shared, unscoped: %+v; want user-1's thread with user-1's message only", th)
	}
	if th, err := st.Thread(ctx, "shared", []string{"user-2"}, 0); err != nil || th != nil {
		t.Errorf("shared in user-2's scope: %+v, %v; want nil (it is user-1's)", th, err)
	}
	list, total, err := st.Threads(ctx, runs.ThreadsParams{PerPage: 10})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, th := range list {
		if _, dup := seen[th.ID]; dup {
			t.Errorf("thread %q listed twice", th.ID)
		}
		seen[th.ID] = deref(th.ResourceID)
	}
	if total != 2 || len(list) != 2 || seen["shared"] != "user-1" || seen["purged"] != "user-3" {
		t.Errorf("threads = %v (total %d); want shared of user-1 and purged of user-3", seen, total)
	}
	for _, r := range []string{"user-2", "user-9"} {
		if list, total, err := st.Threads(ctx, runs.ThreadsParams{ResourceID: &r, PerPage: 10}); err != nil || total != 0 || len(list) != 0 {
			t.Errorf("threads of %s: %d (total %d), %v; want none", r, len(list), total, err)
		}
	}

	insert := func(id, thread string, resource *string) error {
		return st.InsertRun(ctx, runs.NewRun{
			Run:      runtype.Run{ID: id, AgentID: "agent", ThreadID: &thread, ResourceID: resource, Prompt: "p", CreatedAt: at(100), UpdatedAt: at(100)},
			Snapshot: "{}", Lease: "lease", TTL: time.Minute,
		})
	}
	for _, c := range []struct {
		thread   string
		resource *string
		refused  bool
	}{
		{"shared", str("user-2"), true}, {"shared", nil, true}, {"shared", str("user-1"), false},
		{"nobody-first", str("user-1"), true}, {"nobody-first", nil, false},
		{"purged", str("user-1"), true}, {"purged", str("user-3"), false},
	} {
		err := insert("new-"+c.thread+"-"+deref(c.resource), c.thread, c.resource)
		if c.refused != errors.Is(err, runs.ErrThreadOwned) || (!c.refused && err != nil) {
			t.Errorf("a new run of %s in %q: %v; refused: %v", deref(c.resource), c.thread, err, c.refused)
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
