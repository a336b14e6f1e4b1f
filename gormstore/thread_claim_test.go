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
