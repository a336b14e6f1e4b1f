package gormstore_test

import (
	"context"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/runs"
	"interlock/runtype"
)

// oldSQLiteFile is a database written by the embedded engine Interlock shipped before
// (github.com/glebarez/sqlite v1.11.0 over modernc.org/sqlite v1.23.1, SQLite 3.41.2): migrated
// by gormstore.Migrate, then six runs inserted with Store.InsertRun at the instants of oldRuns.
// Existing installations have files like it; whatever engine we embed must keep reading them and
// keep writing times the same way, or ORDER BY created_at and the date filters, which compare the
// stored text, would mix up old and new rows.
const oldSQLiteFile = "testdata/glebarez-sqlite-3.41.2.db"

var fixtureBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// oldRuns are the rows of oldSQLiteFile and the text the old engine stored for their created_at.
var oldRuns = []struct {
	id   string
	at   time.Time
	text string
}{
	{"old-5", fixtureBase.Add(-time.Hour), "2026-01-02 02:04:05+00:00"},
	{"old-1", fixtureBase, "2026-01-02 03:04:05+00:00"},
	{"old-3", fixtureBase.Add(123 * time.Millisecond), "2026-01-02 03:04:05.123+00:00"},
	{"old-2", fixtureBase.Add(500 * time.Millisecond), "2026-01-02 03:04:05.5+00:00"},
	{"old-4", fixtureBase.Add(time.Second + 10*time.Millisecond), "2026-01-02 03:04:06.01+00:00"},
	{"old-6", fixtureBase.Add(24*time.Hour + 7*time.Millisecond), "2026-01-03 03:04:05.007+00:00"},
}

// openOldSQLiteFile opens a copy of oldSQLiteFile (the original stays untouched) and migrates it,
// as a server starting on an existing file does.
func openOldSQLiteFile(t *testing.T) *gorm.DB {
	t.Helper()
	src, err := os.Open(oldSQLiteFile)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(t.TempDir(), "old.db")
	dst, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := gormstore.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatalf("open the old file: %v", err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	if err := gormstore.Migrate(context.Background(), db); err != nil {
		t.Fatalf("migrate the old file: %v", err)
	}
	return db
}

// storedText is the text SQLite holds in agent_runs.created_at of run id, read through hex() so
// that no driver conversion to time.Time gets in the way.
func storedText(t *testing.T, db *gorm.DB, id string) string {
	t.Helper()
	var h string
	if err := db.Raw("SELECT hex(created_at) FROM agent_runs WHERE id = ?", id).Scan(&h).Error; err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatalf("hex of %s: %v", id, err)
	}
	return string(b)
}

func TestSQLiteReadsTheOldEnginesFile(t *testing.T) {
	t.Parallel()
	db := openOldSQLiteFile(t)

	var n int64
	if err := db.Table("schema_migrations").Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	files, err := os.ReadDir("migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(files)) {
		t.Fatalf("schema_migrations has %d rows after migrating the old file (it had 3), want all %d", n, len(files))
	}

	var rows []gormstore.Run
	if err := db.Order("created_at, id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(oldRuns) {
		t.Fatalf("read %d runs, want %d", len(rows), len(oldRuns))
	}
	for i, want := range oldRuns {
		got := rows[i]
		if got.ID != want.id {
			t.Errorf("row %d is %s, want %s (ORDER BY created_at)", i, got.ID, want.id)
		}
		if !got.CreatedAt.Equal(want.at) || got.CreatedAt.Location() != time.UTC {
			t.Errorf("%s: created_at read back as %v (%v), want %v in UTC", want.id, got.CreatedAt, got.CreatedAt.Location(), want.at)
		}
	}
}

// TestSQLiteWritesTimesAsTheOldEngineDid inserts runs with the current engine into the old file
// and checks that a time is stored as the very text the old engine wrote, and that ORDER BY and a
// range filter on created_at treat old and new rows as the instants they are.
func TestSQLiteWritesTimesAsTheOldEngineDid(t *testing.T) {
	t.Parallel()
	db := openOldSQLiteFile(t)
	st := gormstore.New(db)
	ctx := context.Background()
	insert := func(id string, at time.Time) {
		t.Helper()
		err := st.InsertRun(ctx, runs.NewRun{
			Run:      runtype.Run{ID: id, AgentID: "support-agent", Prompt: "p", CreatedAt: at, UpdatedAt: at},
			Snapshot: "{}", Lease: "lease", TTL: time.Minute,
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// The same instants as the old rows: the text must be identical.
	for _, o := range oldRuns {
		id := "new" + o.id[len("old"):]
		insert(id, o.at)
		if got := storedText(t, db, id); got != o.text {
			t.Errorf("%v is stored as %q; the old engine wrote %q", o.at, got, o.text)
		}
	}

	// Instants between the old ones, with and without fractions of a second, in other zones too.
	insert("mid-a", fixtureBase.Add(250*time.Millisecond).In(time.FixedZone("UTC+2", 2*3600)))
	insert("mid-b", fixtureBase.Add(999*time.Millisecond))
	insert("mid-c", fixtureBase.Add(time.Second))
	insert("mid-d", fixtureBase.Add(-time.Hour-time.Millisecond).In(time.FixedZone("UTC-5", -5*3600)))

	var order []string
	if err := db.Model(&gormstore.Run{}).Order("created_at, id").Pluck("id", &order).Error; err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mid-d", "new-5", "old-5", "new-1", "old-1", "new-3", "old-3", "mid-a", "new-2", "old-2",
		"mid-b", "mid-c", "new-4", "old-4", "new-6", "old-6",
	}
	if !slices.Equal(order, want) {
		t.Errorf("ORDER BY created_at, id:\n got %v\nwant %v", order, want)
	}

	var inRange []string
	err := db.Model(&gormstore.Run{}).
		Where("created_at >= ? AND created_at <= ?", fixtureBase.Add(123*time.Millisecond), fixtureBase.Add(time.Second)).
		Order("created_at, id").Pluck("id", &inRange).Error
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"new-3", "old-3", "mid-a", "new-2", "old-2", "mid-b", "mid-c"}; !slices.Equal(inRange, want) {
		t.Errorf("created_at in [05.123, 06.000]:\n got %v\nwant %v", inRange, want)
	}
}

// minSQLite is the oldest embedded SQLite engine accepted. The driver shipped before carried 3.41.2
// (2023); this keeps a dependency change from quietly bringing back a years-old engine.
const minSQLite = "3.50.0"

func TestSQLiteEngineIsCurrent(t *testing.T) {
	t.Parallel()
	db, err := gormstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	var version string
	if err := db.Raw("SELECT sqlite_version()").Scan(&version).Error; err != nil {
		t.Fatal(err)
	}
	t.Logf("embedded SQLite %s", version)
	if versionLess(version, minSQLite) {
		t.Errorf("embedded SQLite is %s, want at least %s", version, minSQLite)
	}
}

// versionLess compares dotted version numbers such as 3.41.2 numerically.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
