package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// quorumFixture serves dual-agent, whose issue_refund needs 2 approvals from holders of the
// finance role (or admin), and payments-bot, an external agent whose pay needs 2 from anyone
// who may decide; ran records the arguments each execution of issue_refund got.
type quorumFixture struct {
	*fixture
	mu  sync.Mutex
	ran []string
}

func quorumSetup(t *testing.T, db *gorm.DB) *quorumFixture {
	t.Helper()
	q := &quorumFixture{}
	refund := &agent.Tool{Name: "issue_refund", RequireApproval: true, RequiredApprovals: 2, ApprovalRoles: []string{"finance"},
		InputSchema: json.RawMessage(`{"type":"object"}`),
		ExecuteFunc: func(ctx context.Context, c *agent.Call) (any, error) {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.ran = append(q.ran, string(c.Args))
			return map[string]any{"ok": true}, nil
		}}
	pay := &agent.Tool{Name: "pay", RequireApproval: true, RequiredApprovals: 2, InputSchema: json.RawMessage(`{"type":"object"}`)}
	q.fixture = setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{
		{ID: "dual-agent", Name: "Dual control", Model: &llm.Demo{}, Tools: []*agent.Tool{refund}},
		{ID: "payments-bot", Name: "Payments", External: true, Tools: []*agent.Tool{pay}},
	}})
	return q
}

func (q *quorumFixture) executions() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.ran...)
}

// held starts a dual-agent run as carol (an admin: she may approve, but not her own run) and
// waits for it to hold its refund.
func (q *quorumFixture) held(t *testing.T) *runtype.Run {
	t.Helper()
	r, err := q.svc.StartRun(as("carol", nil, runtype.RoleAdmin), runs.StartParams{AgentID: "dual-agent", Prompt: "refund order 1 for 5"})
	if err != nil {
		t.Fatal(err)
	}
	q.until(t, r.ID, 0, runtype.StatusSuspended, runtype.StatusCompleted, runtype.StatusFailed)
	got, err := q.svc.Get(bg(), r.ID)
	if err != nil || got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 {
		t.Fatalf("run %+v, %v: want it suspended on one call", got, err)
	}
	return got
}

var (
	alice = as("alice", nil, runtype.RoleApprover, "finance")
	bob   = as("bob", nil, runtype.RoleApprover, "finance")
	dave  = as("dave", nil, runtype.RoleApprover, "finance")
	erin  = as("erin", nil, runtype.RoleApprover) // may decide, but not a finance tool's quorum
)

func subjects(a *runtype.Approvals) []string {
	if a == nil {
		return nil
	}
	out := make([]string, len(a.By))
	for i, x := range a.By {
		out[i] = x.Subject
	}
	return out
}

func approvalRows(t *testing.T, db *gorm.DB, runID string) int64 {
	t.Helper()
	var n int64
	if err := db.Table("tool_call_approvals").Where("run_id = ?", runID).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestQuorumCountsDistinctEligibleApprovers: the first approval is recorded and the run waits
// (approvals 1 of 2, who); the same person again is CONFLICT, a principal outside approvals.roles
// and the run's starter are FORBIDDEN, and the second person's approval runs the tool once,
// its decision and the events naming both.
func TestQuorumCountsDistinctEligibleApprovers(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		q := quorumSetup(t, db)
		r := q.held(t)
		call := r.ToolCalls[0].ToolCallID
		p := runs.DecideParams{RunID: r.ID, ToolCallID: &call}

		got, err := q.svc.Approve(alice, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || got.ToolCalls[0].Approvals.Count() != 1 ||
			subjects(got.ToolCalls[0].Approvals)[0] != "alice" || len(got.Decisions) != 0 {
			t.Fatalf("after one approval: %s, calls %+v, decisions %d", got.Status, got.ToolCalls, len(got.Decisions))
		}
		_, err = q.svc.Approve(alice, p)
		wantCode(t, err, runtype.CodeConflict)
		if !strings.Contains(err.Error(), "alice already approved") || !strings.Contains(err.Error(), "1 of 2") {
			t.Fatalf("the second approval of alice: %v", err)
		}
		_, err = q.svc.Approve(erin, p)
		wantCode(t, err, runtype.CodeForbidden)
		_, err = q.svc.Approve(as("carol", nil, runtype.RoleAdmin), p)
		wantCode(t, err, runtype.CodeForbidden) // she started it: she never counts
		_, err = q.svc.Approve(runtype.WithPrincipal(context.Background(), runtype.Anonymous()), p)
		wantCode(t, err, runtype.CodeForbidden) // nobody in particular is not a second person
		if n := len(q.executions()); n != 0 {
			t.Fatalf("the tool ran %d times before the quorum", n)
		}

		if _, err := q.svc.Approve(dave, p); err != nil {
			t.Fatal(err)
		}
		done := q.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || len(q.executions()) != 1 {
			t.Fatalf("run %s, the tool ran %d times", done.Status, len(q.executions()))
		}
		if len(done.Decisions) != 1 || deref(done.Decisions[0].DecidedBy) != "dave" ||
			strings.Join(subjects(done.Decisions[0].Approvals), ",") != "alice,dave" {
			t.Fatalf("decisions %+v", done.Decisions)
		}
		if n := approvalRows(t, db, r.ID); n != 2 {
			t.Fatalf("%d approvals stored, want 2", n)
		}
		evs, err := gormstore.New(db).Events(bg(), r.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var recorded []string
		approved := 0
		for _, ev := range evs {
			switch ev.Type {
			case runtype.EventToolCallApprovalRecorded:
				recorded = append(recorded, ev.DecidedBy+":"+strings.Join(subjects(ev.ToolCall.Approvals), "+"))
				if ev.ToolCall.Approvals.Required != 2 {
					t.Fatalf("event's required %d", ev.ToolCall.Approvals.Required)
				}
			case runtype.EventToolCallApproved:
				approved++
			}
		}
		if strings.Join(recorded, " ") != "alice:alice dave:alice+dave" || approved != 1 {
			t.Fatalf("recorded %v, %d TOOL_CALL_APPROVED", recorded, approved)
		}
		_, err = q.svc.Approve(bob, p)
		wantCode(t, err, runtype.CodeConflict)
	})
}

// TestQuorumAnyEligibleDeclineDeclines: after one approval, one decline declines at once: the
// tool never runs. A decline by a principal outside approvals.roles is FORBIDDEN.
func TestQuorumAnyEligibleDeclineDeclines(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		q := quorumSetup(t, db)
		r := q.held(t)
		p := runs.DecideParams{RunID: r.ID}
		if _, err := q.svc.Approve(alice, p); err != nil {
			t.Fatal(err)
		}
		_, err := q.svc.Decline(erin, p, "no")
		wantCode(t, err, runtype.CodeForbidden)
		if _, err := q.svc.Decline(bob, p, "not this one"); err != nil {
			t.Fatal(err)
		}
		done := q.finished(t, r.ID)
		if len(q.executions()) != 0 || len(done.Decisions) != 1 || done.Decisions[0].Kind != runtype.DecisionDeclined || deref(done.Decisions[0].DecidedBy) != "bob" {
			t.Fatalf("ran %d times, decisions %+v", len(q.executions()), done.Decisions)
		}
	})
}

// TestQuorumEditedArgumentsResetTheCount: an approval of other arguments starts the count
// again — the earlier approval is superseded, the call shows the arguments being approved —
// an approval without them is then CONFLICT, and the tool runs with the edited arguments once
// two people approved those.
func TestQuorumEditedArgumentsResetTheCount(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		q := quorumSetup(t, db)
		r := q.held(t)
		p := runs.DecideParams{RunID: r.ID}
		if _, err := q.svc.Approve(alice, p); err != nil {
			t.Fatal(err)
		}
		edited := json.RawMessage(`{"amount":1,"order":1}`)
		got, err := q.svc.EditAndApprove(bob, p, edited)
		if err != nil {
			t.Fatal(err)
		}
		a := got.ToolCalls[0].Approvals
		if got.Status != runtype.StatusSuspended || a.Count() != 1 || subjects(a)[0] != "bob" || a.Round != 1 ||
			len(a.Superseded) != 1 || a.Superseded[0].Subject != "alice" || !strings.Contains(string(a.Args), `"amount":1`) {
			t.Fatalf("after the edit: %s, approvals %+v", got.Status, a)
		}
		_, err = q.svc.Approve(alice, p)
		wantCode(t, err, runtype.CodeConflict) // she has not approved the edited arguments
		if !strings.Contains(err.Error(), "edited by bob") {
			t.Fatalf("the refusal does not say who edited: %v", err)
		}
		_, err = q.svc.EditAndApprove(bob, p, edited)
		wantCode(t, err, runtype.CodeConflict) // bob approved these already
		if _, err := q.svc.EditAndApprove(alice, p, json.RawMessage(`{"order":1,"amount":1}`)); err != nil {
			t.Fatal(err)
		}
		done := q.finished(t, r.ID)
		ran := q.executions()
		if len(ran) != 1 || ran[0] != `{"amount":1,"order":1}` {
			t.Fatalf("the tool ran with %v", ran)
		}
		d := done.Decisions[0]
		if !strings.Contains(string(d.EditedArgs), `"amount":1`) || strings.Join(subjects(d.Approvals), ",") != "bob,alice" {
			t.Fatalf("decision %+v, approvals %+v", d, d.Approvals)
		}
		if n := approvalRows(t, db, r.ID); n != 3 {
			t.Fatalf("%d approvals stored, want 3 (alice's superseded one kept)", n)
		}
	})
}

// TestQuorumRacingApprovals: 3 people approve 10 times each at once: exactly 2 approvals are
// recorded and the tool runs once; every answer is the run or CONFLICT (a repeat of the final
// approval by the same person is answered with the run, as any repeated decision).
func TestQuorumRacingApprovals(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		q := quorumSetup(t, db)
		r := q.held(t)
		var ok, conflict, other atomic.Int64
		var wg sync.WaitGroup
		for i := range 30 {
			who := []context.Context{alice, bob, dave}[i%3]
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := q.svc.Approve(who, runs.DecideParams{RunID: r.ID})
				switch {
				case err == nil:
					ok.Add(1) // the approvals counted, and the repeats of the winner's (repeat.go)
				case runtype.ErrorCode(err) == runtype.CodeConflict:
					conflict.Add(1)
				default:
					other.Add(1)
					t.Errorf("approval: %v", err)
				}
			}()
		}
		wg.Wait()
		q.finished(t, r.ID)
		if n := approvalRows(t, db, r.ID); n != 2 || len(q.executions()) != 1 || ok.Load() < 2 || ok.Load()+conflict.Load() != 30 {
			t.Fatalf("%d approvals stored, %d executions, %d ok, %d CONFLICT, %d other", n, len(q.executions()), ok.Load(), conflict.Load(), other.Load())
		}
	})
}

// TestQuorumOnAnExternalRequest: an external agent's request needs its two approvals too; the
// second ends it, approved, with a receipt.
func TestQuorumOnAnExternalRequest(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		q := quorumSetup(t, db)
		r := request(t, q.fixture, as("bot", nil, runtype.RoleRequester), runs.ApprovalParams{AgentID: "payments-bot", ToolName: "pay", Args: json.RawMessage(`{"to":"acme"}`)})
		got, err := q.svc.Approve(erin, runs.DecideParams{RunID: r.ID})
		if err != nil || got.Status != runtype.StatusSuspended || got.ToolCalls[0].Approvals.Count() != 1 {
			t.Fatalf("first approval: %+v, %v", got, err)
		}
		_, err = q.svc.Approve(as("bot", nil, runtype.RoleAdmin), runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeForbidden) // the requester never counts
		got, err = q.svc.Approve(alice, runs.DecideParams{RunID: r.ID})
		if err != nil || got.Status != runtype.StatusCompleted || len(got.Decisions) != 1 || got.Decisions[0].Kind != runtype.DecisionApproved {
			t.Fatalf("second approval: %+v, %v", got, err)
		}
		if a := got.Decisions[0].Approvals; strings.Join(subjects(a), ",") != "erin,alice" {
			t.Fatalf("approvals %+v", a)
		}
	})
}

// TestQuorumFinalApprovalRepeatedWithTheModelsArgs: the final approval of a quorum sent with
// the model's own arguments (as a client that always sends what it shows does) is stored
// without edited ones; sending it again is the same decision, answered with the run as stored,
// not CONFLICT — and the tool ran once. Other arguments from the same person are CONFLICT.
func TestQuorumFinalApprovalRepeatedWithTheModelsArgs(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		q := quorumSetup(t, db)
		r := q.held(t)
		call := r.ToolCalls[0].ToolCallID
		p := runs.DecideParams{RunID: r.ID, ToolCallID: &call}
		model := r.ToolCalls[0].Args
		if _, err := q.svc.Approve(alice, p); err != nil {
			t.Fatal(err)
		}
		if _, err := q.svc.EditAndApprove(dave, p, model); err != nil {
			t.Fatal(err)
		}
		q.finished(t, r.ID)
		got, err := q.svc.EditAndApprove(dave, p, model)
		if err != nil {
			t.Fatalf("dave's final approval with the model's arguments, again: %v; want the stored result", err)
		}
		if got.ID != r.ID || len(got.Decisions) != 1 || deref(got.Decisions[0].DecidedBy) != "dave" {
			t.Fatalf("the repeat answered %+v", got)
		}
		if _, err := q.svc.Approve(dave, p); err != nil { // the same arguments, not sent
			t.Fatalf("dave's final approval again without args: %v", err)
		}
		_, err = q.svc.EditAndApprove(dave, p, json.RawMessage(`{"amount":2,"order":1}`))
		wantCode(t, err, runtype.CodeConflict)
		if n := len(q.executions()); n != 1 {
			t.Fatalf("the tool ran %d times, want 1", n)
		}
	})
}
