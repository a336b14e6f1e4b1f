package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"gorm.io/gorm"

	"interlock/internal/dbtest"
	"interlock/receipt"
	"interlock/runs"
	"interlock/runtype"
)

// recordingSigner signs "receipt-N" and records what it was asked to sign; with fail set it
// refuses, as a signer whose keys cannot be read does.
type recordingSigner struct {
	mu    sync.Mutex
	fail  bool
	asked []receipt.Decision
}

func (s *recordingSigner) Sign(_ context.Context, d receipt.Decision) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return "", errors.New("the signing keys cannot be read")
	}
	s.asked = append(s.asked, d)
	return "receipt-" + d.RunID + "-" + d.ToolCallID, nil
}

// TestReceiptIsSignedForWhatRuns: the service asks its signer for the receipt of exactly the
// decision it stores — the edited arguments, the decider, the decision's time — and stores the
// one it gets with it; a decline asks for none.
func TestReceiptIsSignedForWhatRuns(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		signer := &recordingSigner{}
		f := externalSetup(t, db, runs.Config{Receipts: signer})
		bot := as("deploy-bot-token", nil, runtype.RoleRequester)
		r := request(t, f, bot, runs.ApprovalParams{})
		decided, err := f.svc.EditAndApprove(as("sam", nil, "sre"), runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"service":"api","version":"1.2.2"}`))
		if err != nil {
			t.Fatal(err)
		}
		d := decided.Decisions[0]
		if len(signer.asked) != 1 {
			t.Fatalf("signed %d receipts, want 1", len(signer.asked))
		}
		asked := signer.asked[0]
		if asked.RunID != r.ID || asked.ToolCallID != "tc_1" || asked.AgentID != "deploy-bot" || asked.Tool != "deploy" ||
			string(asked.Args) != `{"service":"api","version":"1.2.2"}` || asked.DecidedBy == nil || *asked.DecidedBy != "sam" || !asked.DecidedAt.Equal(d.DecidedAt) {
			t.Fatalf("signed %+v (args %s); want the edited args decided by sam at %s", asked, asked.Args, d.DecidedAt)
		}
		if d.Receipt == nil || *d.Receipt != "receipt-"+r.ID+"-tc_1" {
			t.Fatalf("decision %+v: want the signed receipt", d)
		}
		declined := request(t, f, bot, runs.ApprovalParams{})
		if out, err := f.svc.Decline(as("sam", nil, "sre"), runs.DecideParams{RunID: declined.ID}, "no"); err != nil || out.Decisions[0].Receipt != nil {
			t.Fatalf("decline: %v, decisions %+v: want no receipt", err, out.Decisions)
		}
		if len(signer.asked) != 1 {
			t.Fatalf("a decline was signed: %+v", signer.asked[1:])
		}
	})
}

// TestAFailedSignatureDecidesNothing: when the receipt cannot be signed, an approval fails and
// nothing is stored — the call still waits, the policy's request is not stored — so a call
// never runs on an approval without its receipt; a decline needs none and goes through.
func TestAFailedSignatureDecidesNothing(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		signer := &recordingSigner{fail: true}
		f := externalSetup(t, db, runs.Config{Receipts: signer})
		bot := as("deploy-bot-token", nil, runtype.RoleRequester)
		r := request(t, f, bot, runs.ApprovalParams{})
		if _, err := f.svc.Approve(as("sam", nil, "sre"), runs.DecideParams{RunID: r.ID}); err == nil {
			t.Fatal("an approval without its receipt succeeded")
		}
		if got, _ := f.svc.Get(bg(), r.ID); got.Status != runtype.StatusSuspended || len(got.Decisions) != 0 || len(got.ToolCalls) != 1 {
			t.Fatalf("after a failed signature: %s, decisions %+v; want the call still waiting", got.Status, got.Decisions)
		}
		var before int64
		f.db.Table("agent_runs").Count(&before)
		if _, err := f.svc.RequestApproval(bot, runs.ApprovalParams{AgentID: "deploy-bot", ToolName: "status", Args: json.RawMessage(`{}`)}); err == nil {
			t.Fatal("the policy approved without a receipt")
		}
		var after int64
		f.db.Table("agent_runs").Count(&after)
		if after != before {
			t.Fatalf("%d runs stored by a policy approval that could not be signed", after-before)
		}
		if _, err := f.svc.Decline(as("sam", nil, "sre"), runs.DecideParams{RunID: r.ID}, "no"); err != nil {
			t.Fatalf("decline: %v", err)
		}
	})
}

// TestSupervisorReceiptNamesTheInnerCall: an approval taken on a supervisor's run of a
// sub-agent's call is signed for the call that runs — the innermost run, its call id, its agent —
// and every level's decision keeps that one receipt.
func TestSupervisorReceiptNamesTheInnerCall(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		signer := &recordingSigner{}
		f := setupChainWith(t, db, runs.Config{Receipts: signer})
		c := suspendedChain(t, f, "refund order 42 for 30")
		inner := c.support.ToolCalls[0]
		if _, err := f.svc.Approve(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: c.chief.ID}); err != nil {
			t.Fatal(err)
		}
		f.finished(t, c.chief.ID)
		if len(signer.asked) != 1 {
			t.Fatalf("signed %d receipts, want 1", len(signer.asked))
		}
		if a := signer.asked[0]; a.RunID != c.support.ID || a.ToolCallID != inner.ToolCallID || a.AgentID != "support-agent" ||
			a.Tool != "issue_refund" || string(a.Args) != string(inner.Args) {
			t.Fatalf("signed %+v; want the support run's call %s", a, inner.ToolCallID)
		}
		want := "receipt-" + c.support.ID + "-" + inner.ToolCallID
		for _, id := range []string{c.chief.ID, c.supervisor.ID, c.support.ID} {
			r, err := f.svc.Get(bg(), id)
			if err != nil || len(r.Decisions) != 1 || r.Decisions[0].Receipt == nil || *r.Decisions[0].Receipt != want {
				t.Fatalf("run %s decisions %+v (%v): want the inner call's receipt", id, r.Decisions, err)
			}
		}
	})
}
