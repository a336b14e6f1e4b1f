package gormstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// countsByDay reads suspended_counts summed over slots.
func countsByDay(t *testing.T, db *gorm.DB) map[string]int64 {
	t.Helper()
	var rows []gormstore.SuspendedCount
	if err := db.Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		if r.N != 0 {
			out[fmt.Sprintf("%s/%v/%d", r.AgentID, r.TopLevel, r.Day)] += r.N
		}
	}
	for k, n := range out {
		if n == 0 {
			delete(out, k)
		}
	}
	return out
}

// TestRecountSuspendedAgreesWithTheStore suspends runs created on either side of UTC
// midnights (given in another zone) through the store, decides some, and checks that
// RecountSuspended — the SQL the migration also runs — puts every run in the day the store
// counted it in; retention drops the counts that came back to zero and changes no sum.
func TestRecountSuspendedAgreesWithTheStore(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		st := gormstore.New(db)
		zone := time.FixedZone("UTC-5", -5*3600)
		midnight := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
		var suspended []runtype.Run
		for i, off := range []time.Duration{-time.Millisecond, 0, time.Millisecond, 24*time.Hour - time.Millisecond, 24 * time.Hour, 47 * time.Hour, -19 * time.Hour, 14 * 365 * 24 * time.Hour} { // the last in 2040: past 2038
			created := midnight.Add(off).In(zone)
			r := runtype.Run{ID: fmt.Sprintf("01900000-0000-7000-8000-%012d", i+1), AgentID: []string{"a", "b"}[i%2], Prompt: "p", Status: runtype.StatusRunning, CreatedAt: created, UpdatedAt: created}
			lease := "lease"
			if err := st.InsertRun(ctx, runs.NewRun{Run: r, Snapshot: "{}", Lease: lease, TTL: time.Hour, Events: []runtype.Event{{Type: runtype.EventRunStarted}}}); err != nil {
				t.Fatal(err)
			}
			call := runtype.ToolCall{ToolCallID: "call-1", ToolName: "tool", Args: json.RawMessage(`{}`), RequiresApproval: true}
			err := st.Suspend(ctx, runs.Suspension{Checkpoint: runs.Checkpoint{RunID: r.ID, Lease: lease, TTL: time.Hour, After: 1, At: created,
				Events: []runtype.Event{{Type: runtype.EventRunSuspended}}}, Calls: []runtype.ToolCall{call}, InstanceID: "i"})
			if err != nil {
				t.Fatal(err)
			}
			suspended = append(suspended, r)
		}
		for _, r := range suspended[:2] {
			got, err := st.GetRecord(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			err = st.Decide(ctx, runs.DecisionWrite{RunID: r.ID, Version: got.Version, After: got.LastSeq, ToolCallID: "call-1", Kind: runtype.DecisionApproved,
				At: midnight.Add(time.Hour), Snapshot: "{}", Lease: "lease-2", TTL: time.Hour, InstanceID: "i"})
			if err != nil {
				t.Fatal(err)
			}
		}
		kept := countsByDay(t, db)
		// The store computes a run's day in SQL: it must be the UTC day Go computes, which the
		// readers (the deep page's day seek, retention) use.
		want := map[string]int64{}
		for _, r := range suspended[2:] {
			want[fmt.Sprintf("%s/true/%d", r.AgentID, r.CreatedAt.UTC().Unix()/86400)]++
		}
		if !reflect.DeepEqual(kept, want) {
			t.Fatalf("the store counted %v, want the UTC days %v", kept, want)
		}
		// Counts that came back to zero are dropped by retention; the others stay.
		var zeros int64
		db.Model(&gormstore.SuspendedCount{}).Where("n = 0").Count(&zeros)
		if zeros == 0 {
			t.Fatal("no count came back to zero; the retention check tests nothing")
		}
		if err := st.PurgeChanges(ctx, midnight.Add(72*time.Hour)); err != nil {
			t.Fatal(err)
		}
		db.Model(&gormstore.SuspendedCount{}).Where("n = 0").Count(&zeros)
		if zeros != 0 {
			t.Errorf("%d zero counts left after PurgeChanges", zeros)
		}
		if got := countsByDay(t, db); !reflect.DeepEqual(got, kept) {
			t.Fatalf("after PurgeChanges the counts are %v, want %v", got, kept)
		}
		if len(kept) < 4 {
			t.Fatalf("the store's counts fall on %d agent-days (%v), want at least 4", len(kept), kept)
		}
		if err := gormstore.RecountSuspended(ctx, db); err != nil {
			t.Fatal(err)
		}
		if got := countsByDay(t, db); !reflect.DeepEqual(got, kept) {
			t.Fatalf("recounted %v, the store kept %v", got, kept)
		}

		n, err := st.CountSuspended(ctx, runs.ListSuspendedParams{})
		if err != nil || n != int64(len(suspended)-2) {
			t.Fatalf("CountSuspended = %d, %v; want %d", n, err, len(suspended)-2)
		}
	})
}
