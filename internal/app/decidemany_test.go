package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
)

const decideMany = `mutation($d: [DecisionInput!]!) { decideToolCalls(decisions: $d) {
	runId toolCallId ok code message decidedBy decidedAt run { runId status } } }`

type decisionResult struct {
	RunID, ToolCallID string
	OK                bool
	Code, Message     string
	DecidedBy         *string
	DecidedAt         *time.Time
	Run               *struct{ RunID, Status string }
}

// suspendMany starts n runs of the support agent as token's principal, each waiting on one
// refund, and returns their ids once all wait. Over the starter's rate, it waits as told.
func suspendMany(t *testing.T, s *apptest.Server, token string, n int) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := 0; len(ids) < n; i++ {
		r := s.PostAs(t, token, `mutation($i: StartRunInput!) { startRun(input: $i) { runId } }`,
			map[string]any{"i": map[string]any{"agentId": "support-agent", "prompt": fmt.Sprintf("refund order %d for 5", i+1)}})
		if r.Code == "RATE_LIMITED" {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if r.Code != "" {
			t.Fatalf("startRun: %s %s", r.Code, r.Msg)
		}
		var out struct{ StartRun struct{ RunID string } }
		json.Unmarshal(r.Data, &out)
		ids = append(ids, out.StartRun.RunID)
	}
	for _, id := range ids {
		deadline := time.Now().Add(20 * time.Second)
		for batchStatus(t, s, id) != "SUSPENDED" {
			if time.Now().After(deadline) {
				t.Fatalf("run %s did not suspend", id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return ids
}

// batchStatus is the status of run id, read as root.
func batchStatus(t *testing.T, s *apptest.Server, id string) string {
	t.Helper()
	var out struct{ Run struct{ Status string } }
	s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { status } }`, map[string]any{"id": id}, &out)
	return out.Run.Status
}

// TestDecideToolCallsBatch: a batch of 200 approvals, 20 of whose calls bob decided first one
// by one, sent by alice at the default mutation rate: 200 results in input order, 180 ok with
// the run RUNNING or on, 20 CONFLICT naming bob and when, and no RATE_LIMITED (the batch costs
// 20 tokens, not 200). Then: a viewer's batch is FORBIDDEN item by item, an unknown run and a
// run outside a principal's resources are NOT_FOUND, a decline with args is BAD_USER_INPUT —
// each beside an item that goes through; 501 items are refused whole.
func TestDecideToolCallsBatch(t *testing.T) {
	t.Parallel()
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/batch.db", "")
	ids := suspendMany(t, s, apptest.TokenOf("root"), 200)
	elsewhere := map[string]bool{}
	for i := 5; i < 200; i += 10 {
		s.MustAs(t, apptest.TokenOf("bob"), `mutation($id: ID!) { approveToolCall(runId: $id, toolCallId: "tc_1") { status } }`, map[string]any{"id": ids[i]}, nil)
		elsewhere[ids[i]] = true
	}
	items := make([]map[string]any, len(ids))
	for i, id := range ids {
		items[i] = map[string]any{"runId": id, "toolCallId": "tc_1", "kind": "APPROVE"}
	}
	r := s.PostAs(t, apptest.TokenOf("alice"), decideMany, map[string]any{"d": items})
	if r.Code != "" {
		t.Fatalf("the batch of 200: %d %s %s", r.Status, r.Code, r.Msg)
	}
	var out struct{ DecideToolCalls []decisionResult }
	if err := json.Unmarshal(r.Data, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.DecideToolCalls) != 200 {
		t.Fatalf("%d results for 200 decisions", len(out.DecideToolCalls))
	}
	ok, conflicts := 0, 0
	for i, res := range out.DecideToolCalls {
		if res.RunID != ids[i] || res.ToolCallID != "tc_1" {
			t.Fatalf("result %d is of %s/%s, want %s/tc_1 (input order)", i, res.RunID, res.ToolCallID, ids[i])
		}
		switch {
		case res.Code == "RATE_LIMITED":
			t.Fatalf("item %d was rate limited: %s", i, res.Message)
		case elsewhere[res.RunID]:
			if res.OK || res.Code != "CONFLICT" || res.DecidedBy == nil || *res.DecidedBy != "bob" || res.DecidedAt == nil ||
				!strings.Contains(res.Message, "already approved by bob") || res.Run != nil {
				t.Fatalf("item %d, decided by bob first: %+v", i, res)
			}
			conflicts++
		default:
			if !res.OK || res.Code != "" || res.Run == nil || res.Run.Status == "SUSPENDED" {
				t.Fatalf("item %d: %+v", i, res)
			}
			ok++
		}
	}
	if ok != 180 || conflicts != 20 {
		t.Fatalf("%d ok and %d conflicts, want 180 and 20", ok, conflicts)
	}
	for _, id := range ids {
		if st := batchStatus(t, s, id); st == "SUSPENDED" {
			t.Fatalf("run %s still waits", id)
		}
	}

	more := suspendMany(t, s, apptest.TokenOf("root"), 3)
	t.Run("a viewer's items are FORBIDDEN and nothing is decided", func(t *testing.T) {
		var got struct{ DecideToolCalls []decisionResult }
		s.MustAs(t, apptest.TokenOf("vera"), decideMany, map[string]any{"d": []map[string]any{
			{"runId": more[0], "kind": "APPROVE"}, {"runId": more[1], "kind": "DECLINE", "reason": "no"}}}, &got)
		for i, res := range got.DecideToolCalls {
			if res.OK || res.Code != "FORBIDDEN" || !strings.Contains(res.Message, "approver role") {
				t.Fatalf("viewer's item %d: %+v", i, res)
			}
		}
		if len(got.DecideToolCalls) != 2 || batchStatus(t, s, more[0]) != "SUSPENDED" || batchStatus(t, s, more[1]) != "SUSPENDED" {
			t.Fatalf("viewer's batch: %+v", got.DecideToolCalls)
		}
	})
	t.Run("NOT_FOUND and BAD_USER_INPUT items beside one that goes through", func(t *testing.T) {
		var got struct{ DecideToolCalls []decisionResult }
		s.MustAs(t, apptest.TokenOf("portal"), decideMany, map[string]any{"d": []map[string]any{
			{"runId": "no-such-run", "kind": "APPROVE"}, {"runId": more[0], "kind": "APPROVE"}}}, &got)
		if res := got.DecideToolCalls; len(res) != 2 || res[0].Code != "NOT_FOUND" || res[1].Code != "NOT_FOUND" {
			t.Fatalf("unknown run, and a run outside portal's resources: %+v", res)
		}
		s.MustAs(t, apptest.TokenOf("alice"), decideMany, map[string]any{"d": []map[string]any{
			{"runId": "no-such-run", "kind": "APPROVE"},
			{"runId": more[0], "kind": "DECLINE", "args": map[string]any{"orderId": "1"}},
			{"runId": more[1], "kind": "DECLINE", "reason": "not today"}}}, &got)
		res := got.DecideToolCalls
		if len(res) != 3 || res[0].Code != "NOT_FOUND" || res[1].Code != "BAD_USER_INPUT" || !res[2].OK {
			t.Fatalf("mixed batch: %+v", res)
		}
		if st := batchStatus(t, s, more[0]); st != "SUSPENDED" {
			t.Fatalf("the refused decline left the run %s", st)
		}
	})
	t.Run("more than 500 items are refused whole", func(t *testing.T) {
		big := make([]map[string]any, 501)
		for i := range big {
			big[i] = map[string]any{"runId": more[2], "kind": "APPROVE"}
		}
		r := s.PostAs(t, apptest.TokenOf("alice"), decideMany, map[string]any{"d": big})
		if r.Code != "BAD_USER_INPUT" || !strings.Contains(r.Msg, "at most 500") {
			t.Fatalf("501 items: %s %s", r.Code, r.Msg)
		}
		if st := batchStatus(t, s, more[2]); st != "SUSPENDED" {
			t.Fatalf("the refused batch left the run %s", st)
		}
	})
}

// TestDecideToolCallsRate: decideToolCalls costs one token of the mutation rate per 10 items
// (rounded up), not one per request nor one per item. With a burst of 25 and no refill to speak
// of: 200 items (20 tokens) pass, 51 items (6 tokens) are then RATE_LIMITED, 50 (5) pass, and
// the bucket is empty.
func TestDecideToolCallsRate(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/rate.db", "--mutation-rate", "1/h", "--mutation-burst", "25")
	batch := func(n int) apptest.Result {
		items := make([]map[string]any, n)
		for i := range items {
			items[i] = map[string]any{"runId": fmt.Sprintf("missing-%d", i), "kind": "APPROVE"}
		}
		return s.PostAs(t, "", decideMany, map[string]any{"d": items})
	}
	if r := batch(200); r.Code != "" {
		t.Fatalf("200 items with 25 tokens: %s %s", r.Code, r.Msg)
	}
	if r := batch(51); r.Code != "RATE_LIMITED" || r.Status != 429 || !strings.Contains(r.Msg, "6 mutations") {
		t.Fatalf("51 items with 5 tokens left: %d %s %s", r.Status, r.Code, r.Msg)
	}
	if r := batch(50); r.Code != "" {
		t.Fatalf("50 items with 5 tokens left: %s %s", r.Code, r.Msg)
	}
	if r := batch(1); r.Code != "RATE_LIMITED" {
		t.Fatalf("1 item with no token left: %s %s", r.Code, r.Msg)
	}
}
