package runs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// deadRun stores a RUNNING run whose owner died a minute ago, with the given snapshot.
func deadRun(t *testing.T, db *gorm.DB, id, snapshot string) {
	t.Helper()
	past := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	owner := "dead-instance"
	row := gormstore.Run{
		ID: id, AgentID: "support-agent", Prompt: "refund order 5", Status: string(runtype.StatusRunning),
		Snapshot: &snapshot, CreatedAt: past, UpdatedAt: past, LastSeq: 3, LeaseOwner: &owner, LeaseUntil: &past,
	}
	if err := db.Create(&row).Error; err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 3; seq++ {
		db.Create(&gormstore.Event{RunID: id, Seq: seq, Type: string(runtype.EventTextDelta), Data: `{"text":"x"}`, CreatedAt: past})
	}
}

func TestRecoveryNeverRerunsAnExecutingTool(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{RecoveryInterval: time.Hour})
		ctx := bg()
		// Died while issue_refund was executing: outcome unknown.
		deadRun(t, db, "run-executing", `{"messages":[{"role":"user","content":"refund order 5"},{"role":"assistant","toolCalls":[{"id":"call_1","name":"issue_refund","args":{"orderId":"5","amount":10}}]}],"pending":[{"id":"call_1","name":"issue_refund","args":{"orderId":"5","amount":10},"state":"executing"}],"steps":0}`)
		// Died before its model call returned: the call is simply repeated.
		deadRun(t, db, "run-model", `{"messages":[{"role":"user","content":"hello"}],"steps":0}`)

		n, err := f.svc.RecoverExpired(ctx)
		if err != nil || n != 2 {
			t.Fatalf("recovered %d runs, err %v", n, err)
		}
		evs := f.until(t, "run-executing", 3, runtype.StatusSuspended)
		if evs[0].Type != runtype.EventToolCallInterrupted || evs[0].Seq != 4 || !strings.Contains(evs[0].Reason, "issue_refund") {
			t.Fatalf("first event after recovery: %+v", evs[0])
		}
		f.svc.Wait()
		r, _ := f.svc.Get(ctx, "run-executing")
		if r.Status != runtype.StatusSuspended || len(r.ToolCalls) != 1 || !r.ToolCalls[0].Interrupted || !r.ToolCalls[0].RequiresApproval {
			t.Fatalf("recovered run: %s %+v", r.Status, r.ToolCalls)
		}
		list, _ := f.svc.ListSuspended(ctx, runs.ListSuspendedParams{})
		if list.Total != 1 || !list.Runs[0].ToolCalls[0].Interrupted {
			t.Fatalf("suspendedRuns after recovery: %+v", list)
		}
		if m := f.finished(t, "run-model"); m.Status != runtype.StatusCompleted {
			t.Fatalf("run recovered before its model call: %s", m.Status)
		}
		// A second recovery pass finds nothing: the leases are fresh or released.
		if n, _ := f.svc.RecoverExpired(ctx); n != 0 {
			t.Fatalf("second pass recovered %d", n)
		}
		// Approving the interrupted call runs it (once) and finishes the run.
		if _, err := f.svc.Approve(ctx, runs.DecideParams{RunID: "run-executing"}); err != nil {
			t.Fatal(err)
		}
		if done := f.finished(t, "run-executing"); done.Status != runtype.StatusCompleted || strings.Count(*done.Output, "rf_5") != 1 {
			t.Fatalf("after re-approval: %s %v", done.Status, done.Output)
		}
	})
}

func TestOnlyOneInstanceRecoversARun(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := setup(t, db, runs.Config{RecoveryInterval: time.Hour, InstanceID: "a"})
		b := setup(t, db, runs.Config{RecoveryInterval: time.Hour, InstanceID: "b"})
		for i := 0; i < 10; i++ {
			deadRun(t, db, "run-"+string(rune('a'+i)), `{"messages":[{"role":"user","content":"hello"}],"steps":0}`)
		}
		var wg sync.WaitGroup
		counts := make([]int, 2)
		for i, s := range []*runs.Service{a.svc, b.svc} {
			wg.Add(1)
			go func() { defer wg.Done(); counts[i], _ = s.RecoverExpired(bg()) }()
		}
		wg.Wait()
		a.svc.Wait()
		b.svc.Wait()
		if counts[0]+counts[1] != 10 {
			t.Fatalf("recovered %v, want 10 in all", counts)
		}
		var completed int64
		db.Model(&gormstore.Run{}).Where("status = ?", runtype.StatusCompleted).Count(&completed)
		if completed != 10 {
			t.Fatalf("%d runs completed", completed)
		}
	})
}

func TestRetentionDeletesOnlyOldFinishedRuns(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		now := base.Add(30 * 24 * time.Hour)
		f := setup(t, db, runs.Config{Retention: 7 * 24 * time.Hour, RetentionInterval: time.Hour, NowFunc: func() time.Time { return now }})
		seed(t, db,
			seedOpts{id: "old-done", agent: "A", status: runtype.StatusCompleted},
			seedOpts{id: "old-failed", agent: "A", status: runtype.StatusFailed},
			seedOpts{id: "old-suspended", agent: "A"},
			seedOpts{id: "new-done", agent: "A", status: runtype.StatusCompleted, at: 29 * 24 * time.Hour},
		)
		for _, id := range []string{"old-done", "old-suspended", "new-done"} {
			db.Create(&gormstore.Event{RunID: id, Seq: 1, Type: "RUN_STARTED", Data: "{}", CreatedAt: base})
		}
		n, err := f.svc.PurgeFinished(bg())
		if err != nil || n != 2 {
			t.Fatalf("purged %d, err %v", n, err)
		}
		var ids []string
		db.Model(&gormstore.Run{}).Order("id").Pluck("id", &ids)
		if strings.Join(ids, ",") != "new-done,old-suspended" {
			t.Fatalf("runs left: %v", ids)
		}
		var evs, calls int64
		db.Model(&gormstore.Event{}).Count(&evs)
		db.Model(&gormstore.ToolCall{}).Where("run_id = ?", "old-suspended").Count(&calls)
		if evs != 2 || calls != 1 {
			t.Fatalf("%d events, %d calls of the suspended run left", evs, calls)
		}
		if n, _ := f.svc.PurgeFinished(bg()); n != 0 {
			t.Fatalf("second purge deleted %d", n)
		}
	})
}

func TestWatchSuspendedAcrossInstances(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := setup(t, db, runs.Config{InstanceID: "a", PollInterval: 50 * time.Millisecond})
		var passes *loopPasses
		b := setupWith(t, db, runs.Config{InstanceID: "b", PollInterval: 50 * time.Millisecond},
			setupOpts{wrap: func(st runs.Store) runs.Store { passes = &loopPasses{Store: st}; return passes }})
		ctx, cancel := context.WithTimeout(bg(), 20*time.Second)
		defer cancel()
		watch, _ := b.svc.WatchSuspended(ctx, runs.WatchFilter{ThreadID: ptr("watched")})
		waitPasses(t, "b's notify loop", &passes.notify, 1) // b's notify loop primes what it has seen
		a.start(t, runs.StartParams{Prompt: "refund order 1", ThreadID: ptr("other")})
		r := a.suspended(t, runs.StartParams{Prompt: "refund order 2", ThreadID: ptr("watched")})
		got := <-watch
		if got.Kind != runs.ChangeSuspended || got.Run.ID != r.ID {
			t.Fatalf("first change: %s %s, want SUSPENDED %s", got.Kind, got.Run.ID, r.ID)
		}
		if _, err := a.svc.Approve(ctx, runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		got = <-watch
		if got.Kind != runs.ChangeLeft || got.Run.ID != r.ID {
			t.Fatalf("second change: %s %s, want LEFT %s", got.Kind, got.Run.ID, r.ID)
		}
		// And b's followers see a's events.
		evs := b.until(t, r.ID, 0, runtype.StatusCompleted)
		if evs[len(evs)-1].Type != runtype.EventRunFinished {
			t.Fatalf("b followed to %s", evs[len(evs)-1].Type)
		}
	})
}

// TestAnInterruptedCallWaitsUnderANewID: alice approved tc_1, and the instance died while it
// executed. Recovery asks for a new approval under a new id, so that alice's client retrying its
// first approval (tc_1) is told that decision was taken — and runs nothing — while her decision
// on the new id runs the tool once. (Under the old id, the retry was taken for a repeat of the
// first approval: the new approval was silently dropped, or a late retry could run it again.)
func TestAnInterruptedCallWaitsUnderANewID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{RecoveryInterval: time.Hour})
		alice := as("alice", nil, runtype.RoleAdmin)
		deadRun(t, db, "run-executing", `{"messages":[{"role":"user","content":"refund order 5"},{"role":"assistant","toolCalls":[{"id":"call_a","name":"issue_refund","args":{"orderId":"5","amount":10}}]}],"pending":[{"id":"call_a","serverId":"tc_1","name":"issue_refund","args":{"orderId":"5","amount":10},"state":"executing"}],"steps":0,"callIds":1}`)
		past := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
		args, by, approved := `{"orderId":"5","amount":10}`, "alice", string(runtype.DecisionApproved)
		if err := db.Create(&gormstore.ToolCall{RunID: "run-executing", ToolCallID: "tc_1", ToolName: "issue_refund", Args: &args,
			RequiresApproval: true, State: approved, CreatedAt: past, DecidedBy: &by, DecidedAt: &past}).Error; err != nil {
			t.Fatal(err)
		}
		if n, err := f.svc.RecoverExpired(bg()); err != nil || n != 1 {
			t.Fatalf("recovered %d runs, err %v", n, err)
		}
		f.until(t, "run-executing", 3, runtype.StatusSuspended)
		f.svc.Wait()
		r, err := f.svc.Get(bg(), "run-executing")
		if err != nil || len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolCallID == "tc_1" || !r.ToolCalls[0].Interrupted {
			t.Fatalf("recovered run waits on %+v (%v), want the interrupted call under a new id", r.ToolCalls, err)
		}
		again := r.ToolCalls[0].ToolCallID
		// The late retry of the first approval is that approval: nothing runs.
		got, err := f.svc.Approve(alice, runs.DecideParams{RunID: "run-executing", ToolCallID: ptr("tc_1")})
		if err != nil || got.Status != runtype.StatusSuspended {
			t.Fatalf("alice's retry of her approval of tc_1: %v, %v; want the run as stored, still SUSPENDED", got, err)
		}
		// Her approval of the call under its new id runs it, once.
		if _, err := f.svc.Approve(alice, runs.DecideParams{RunID: "run-executing", ToolCallID: &again}); err != nil {
			t.Fatal(err)
		}
		if done := f.finished(t, "run-executing"); done.Status != runtype.StatusCompleted || strings.Count(*done.Output, "rf_5") != 1 {
			t.Fatalf("after the approval of %s: %s %v", again, done.Status, done.Output)
		}
	})
}
