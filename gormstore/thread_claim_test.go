package gormstore_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
)

// TestRefusedThreadClaimKeepsItsGroup: runs inserted together share one transaction (group
// commit); a run refused its thread writes nothing and fails only itself, so the others still
// commit together, in one INSERT, rather than each again alone.
func TestRefusedThreadClaimKeepsItsGroup(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s := gormstore.New(db)
		ctx := t.Context()
		var inserts atomic.Int64 // INSERT statements into agent_runs
		err := db.Callback().Create().After("gorm:create").Register("test:count-runs", func(tx *gorm.DB) {
			if tx.Statement.Table == "agent_runs" {
				inserts.Add(1)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		in := func(id, resource string) runs.NewRun {
			n := newRun(id)
			n.Run.ThreadID, n.Run.ResourceID = ptr("thread-1"), &resource
			return n
		}
		if err := s.InsertRun(ctx, in("first", "user-1")); err != nil {
			t.Fatal(err)
		}
		inserts.Store(0)
		hold := s.HoldGroup(t)
		news := []runs.NewRun{in("mine-1", "user-1"), in("theirs", "user-2"), in("mine-2", "user-1")}
		errs := make([]error, len(news))
		var wg sync.WaitGroup
		for i := range news {
			wg.Go(func() { errs[i] = s.InsertRun(ctx, news[i]) })
		}
		hold.WaitQueued(len(news))
		hold.Commit()
		wg.Wait()
		if errs[0] != nil || !errors.Is(errs[1], runs.ErrThreadOwned) || errs[2] != nil {
			t.Fatalf("grouped inserts: %v; want nil, ErrThreadOwned, nil", errs)
		}
		if n := inserts.Load(); n != 1 {
			t.Errorf("the group made %d INSERTs into agent_runs, want 1 (the two accepted runs together)", n)
		}
		var ids []string
		if err := db.Model(&gormstore.Run{}).Order("id").Pluck("id", &ids).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Join(ids, ",") != "first,mine-1,mine-2" {
			t.Errorf("runs stored: %v, want first, mine-1, mine-2", ids)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestGroupClaimsTogether: the runs inserted in one group claim their idempotency keys and
// threads together, one INSERT and one read of each table for the group rather than per run,
// and each still gets its own answer: a key used before names its run, a thread of another
// resource is refused (its key given back), a thread new to the database goes to the first run
// of the group that names it.
func TestGroupClaimsTogether(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s := gormstore.New(db)
		ctx := t.Context()
		var mu sync.Mutex
		statements := map[string]int{} // per table: INSERTs and reads
		count := func(tx *gorm.DB) {
			sql := tx.Statement.SQL.String()
			mu.Lock()
			defer mu.Unlock()
			for _, table := range []string{"`threads`", "idempotency_keys"} {
				if strings.Contains(sql, table) {
					statements[strings.Trim(table, "`")]++
				}
			}
		}
		cb := db.Callback()
		for _, err := range []error{
			cb.Create().After("gorm:create").Register("test:count-claims", count),
			cb.Query().After("gorm:query").Register("test:count-claims", count),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		in := func(id, thread, resource, key string) runs.NewRun {
			n := newRun(id)
			n.Run.ThreadID, n.Run.ResourceID = ptr(thread), &resource
			n.Idempotency = &runs.Idempotency{KeyHash: key, RequestHash: "request-" + id}
			return n
		}
		if err := s.InsertRun(ctx, in("first", "thread-old", "user-1", "key-old")); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		clear(statements)
		mu.Unlock()
		hold := s.HoldGroup(t)
		news := []runs.NewRun{
			in("a", "thread-new", "user-1", "key-a"),
			in("b", "thread-old", "user-2", "key-b"), // another resource's thread
			in("c", "thread-new", "user-2", "key-c"), // a's new thread, another resource
			in("d", "thread-old", "user-1", "key-old"),
			in("e", "thread-old", "user-1", "key-e"),
		}
		errs := make([]error, len(news))
		var wg sync.WaitGroup
		for i := range news {
			wg.Go(func() { errs[i] = s.InsertRun(ctx, news[i]) })
		}
		hold.WaitQueued(len(news))
		hold.Commit()
		wg.Wait()
		// The group's order is the order the writes queued in, which the goroutines choose: a
		// and c race for thread-new, and one of them is its first run.
		var dup *runs.DuplicateRequest
		if errs[4] != nil || !errors.Is(errs[1], runs.ErrThreadOwned) || !errors.As(errs[3], &dup) || dup.RunID != "first" {
			t.Fatalf("grouped inserts: %v; want e stored, b refused its thread, d the duplicate of first", errs)
		}
		if (errs[0] == nil) == (errs[2] == nil) || !errors.Is(errors.Join(errs[0], errs[2]), runs.ErrThreadOwned) {
			t.Fatalf("a and c, racing for a new thread of two resources: %v, %v; want one stored, the other refused", errs[0], errs[2])
		}
		for _, table := range []string{"threads", "idempotency_keys"} {
			if n := statements[table]; n != 2 {
				t.Errorf("the group made %d statements on %s, want 2 (one INSERT and one read for all its runs)", n, table)
			}
		}
		var keys []string
		if err := db.Model(&gormstore.IdempotencyKey{}).Order("key_hash").Pluck("key_hash", &keys).Error; err != nil {
			t.Fatal(err)
		}
		winner := "key-a"
		if errs[0] != nil {
			winner = "key-c"
		}
		if want := strings.Join([]string{winner, "key-e", "key-old"}, ","); strings.Join(keys, ",") != want {
			t.Errorf("keys stored: %v, want %s (those of the refused runs given back)", keys, want)
		}
	})
}

// TestGroupKeyOfARefusedRun: of two runs of one group with one idempotency key, the first
// claims the key and is then refused its thread (another resource's), which gives the key back:
// the second must not be refused as the duplicate of a run that was never stored. Claimed one
// after the other, the first is refused and the second takes the key; together, the same.
func TestGroupKeyOfARefusedRun(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		s := gormstore.New(db)
		ctx := t.Context()
		in := func(id, thread, resource string) runs.NewRun {
			n := newRun(id)
			n.Run.ThreadID, n.Run.ResourceID = ptr(thread), &resource
			n.Idempotency = &runs.Idempotency{KeyHash: "key-1", RequestHash: "request-" + id}
			return n
		}
		first := in("first", "thread-old", "user-1")
		first.Idempotency.KeyHash = "key-old"
		if err := s.InsertRun(ctx, first); err != nil {
			t.Fatal(err)
		}
		hold := s.HoldGroup(t)
		news := []runs.NewRun{
			in("theirs", "thread-old", "user-2"), // another resource's thread: refused
			in("mine", "thread-new", "user-1"),
		}
		errs := make([]error, len(news))
		var wg sync.WaitGroup
		for i := range news {
			wg.Go(func() { errs[i] = s.InsertRun(ctx, news[i]) })
			hold.WaitQueued(i + 1) // in this order
		}
		hold.Commit()
		wg.Wait()
		if !errors.Is(errs[0], runs.ErrThreadOwned) || errs[1] != nil {
			t.Fatalf("grouped inserts: %v; want ErrThreadOwned, then the second stored with the key given back", errs)
		}
		var key gormstore.IdempotencyKey
		if err := db.Where("key_hash = ?", "key-1").Take(&key).Error; err != nil {
			t.Fatal(err)
		}
		if key.RunID != "mine" {
			t.Errorf("key-1 names run %s, want mine", key.RunID)
		}
	})
}
