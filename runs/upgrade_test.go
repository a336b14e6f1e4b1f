package runs_test

import (
	"encoding/json"
	"strings"
	"testing"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// asBeforeServerIDs rewrites a suspended run as a server that named tool calls by the model's
// ids stored it: its snapshot without the server's ids, and its call rows renamed (from → to).
func asBeforeServerIDs(t *testing.T, db *gorm.DB, runID string, rename map[string]string) {
	t.Helper()
	var row gormstore.Run
	if err := db.Where("id = ?", runID).First(&row).Error; err != nil {
		t.Fatal(err)
	}
	var snap map[string]any
	if err := json.Unmarshal([]byte(*row.Snapshot), &snap); err != nil {
		t.Fatal(err)
	}
	if _, ok := snap["callIds"]; !ok {
		t.Fatalf("run %s's snapshot has no callIds: %s", runID, *row.Snapshot)
	}
	delete(snap, "callIds")
	for _, p := range snap["pending"].([]any) {
		delete(p.(map[string]any), "serverId")
	}
	old, _ := json.Marshal(snap)
	if strings.Contains(string(old), "tc_") {
		t.Fatalf("snapshot still names a server id: %s", old)
	}
	if err := db.Model(&gormstore.Run{}).Where("id = ?", runID).Update("snapshot", string(old)).Error; err != nil {
		t.Fatal(err)
	}
	for from, to := range rename {
		res := db.Model(&gormstore.ToolCall{}).Where("run_id = ? AND tool_call_id = ?", runID, from).Update("tool_call_id", to)
		if res.Error != nil || res.RowsAffected != 1 {
			t.Fatalf("rename call %s of run %s: %v (%d rows)", from, runID, res.Error, res.RowsAffected)
		}
	}
}

// TestRunsSuspendedBeforeServerIDsStayDecidable: runs stored by a server that showed the model's
// call ids (snapshots without serverId, rows keyed by the model's id) are decided after the
// upgrade by the ids they showed: a run waiting on two calls, and a supervisor chain whose
// supervisor shows the inner call under its delegate call's id.
func TestRunsSuspendedBeforeServerIDsStayDecidable(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setupChain(t, db)
		ctx := as("alice", nil, runtype.RoleAdmin)

		two := f.suspended(t, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 1 and order 2"})
		if len(two.ToolCalls) != 2 || two.ToolCalls[0].ToolCallID != "tc_1" || two.ToolCalls[1].ToolCallID != "tc_2" {
			t.Fatalf("run waits on %+v", two.ToolCalls)
		}
		asBeforeServerIDs(t, db, two.ID, map[string]string{"tc_1": "call_1", "tc_2": "call_2"})
		if _, err := f.svc.Approve(ctx, runs.DecideParams{RunID: two.ID, ToolCallID: ptr("call_2")}); err != nil {
			t.Fatalf("approve call_2 of an upgraded run: %v", err)
		}
		_, err := f.svc.Approve(as("bob", nil, runtype.RoleAdmin), runs.DecideParams{RunID: two.ID, ToolCallID: ptr("call_2")})
		wantCode(t, err, runtype.CodeConflict)
		if _, err := f.svc.Decline(ctx, runs.DecideParams{RunID: two.ID, ToolCallID: ptr("call_1")}, "no"); err != nil {
			t.Fatalf("decline call_1 of an upgraded run: %v", err)
		}
		done := f.finished(t, two.ID)
		if done.Status != runtype.StatusCompleted || !strings.Contains(*done.Output, "rf_2") || strings.Contains(*done.Output, "rf_1") {
			t.Fatalf("upgraded run: %s, output %v", done.Status, done.Output)
		}

		c := suspendedChain(t, f, "refund order 42 for 30")
		asBeforeServerIDs(t, db, c.support.ID, map[string]string{"tc_1": "call_1"})
		asBeforeServerIDs(t, db, c.supervisor.ID, map[string]string{"tc_1/tc_1": "call_1"})
		asBeforeServerIDs(t, db, c.chief.ID, map[string]string{"tc_1/tc_1/tc_1": "call_1"})
		if _, err := f.svc.Approve(ctx, runs.DecideParams{RunID: c.chief.ID, ToolCallID: ptr("call_1")}); err != nil {
			t.Fatalf("approve an upgraded supervisor chain: %v", err)
		}
		chief := f.finished(t, c.chief.ID)
		if chief.Status != runtype.StatusCompleted || !strings.Contains(*chief.Output, "rf_42") {
			t.Fatalf("upgraded chief run: %s, output %v", chief.Status, chief.Output)
		}
		for _, r := range []*runtype.Run{c.chief, c.supervisor, c.support} {
			got, err := f.svc.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Decisions) != 1 || got.Decisions[0].ToolCallID != "call_1" || got.Decisions[0].Kind != runtype.DecisionApproved {
				t.Fatalf("run %s (%s) decisions %+v", r.ID, r.AgentID, got.Decisions)
			}
		}
	})
}
