package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/policy"
	"interlock/runs"
	"interlock/runtype"
)

// policyTool is a refund tool whose requireApproval is expr, counting its executions and the
// receipts it was given.
func policyTool(t *testing.T, expr string, executed *atomic.Int64, receipts *[]string) *agent.Tool {
	t.Helper()
	tl := &agent.Tool{Name: "issue_refund", InputSchema: json.RawMessage(`{"type":"object"}`),
		ExecuteFunc: func(_ context.Context, c *agent.Call) (any, error) {
			executed.Add(1)
			*receipts = append(*receipts, c.Receipt)
			return "refunded", nil
		}}
	if expr != "" {
		p, err := policy.Compile(expr, policy.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		tl.Policy = p
	}
	return tl
}

// refundCalls is a model that asks for one refund with args, then answers "done".
func refundCalls(args string) *scripted {
	return &scripted{steps: []step{
		func(context.Context, llm.Request, func(string) error) (llm.Response, error) {
			return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "issue_refund", Args: json.RawMessage(args)}}}, nil
		},
		answer("done"),
	}}
}

// TestPolicyJudgesModelCalls: a model's call is judged by its tool's expression when it is
// stored: false lets it run, recorded AUTO_APPROVED by nobody with the rule, the policy's revision
// and a receipt (which the tool is given); true, an evaluation error (a missing field) and the
// cost limit each hold it for a person with the rule or the error as its approvalReason — never
// skipped — and a person's decision on it records the revision that asked.
func TestPolicyJudgesModelCalls(t *testing.T) {
	t.Parallel()
	const rule = "args.amount > 100 || run.resourceId.startsWith('vip-')"
	big := `{"amount":1,"items":[` + strings.TrimSuffix(strings.Repeat("1,", 3000), ",") + `]}`
	cases := []struct {
		name, expr, args, resource string
		ask                        bool
		reason                     string
	}{
		{"false lets it run", rule, `{"amount":50}`, "acme", false, `policy: requireApproval "` + rule + `" is false for this call`},
		{"true asks", rule, `{"amount":500}`, "acme", true, `policy requireApproval "` + rule + `" is true for this call`},
		{"the resource asks", rule, `{"amount":5}`, "vip-7", true, "is true for this call"},
		{"a missing field asks", rule, `{"amount":5}`, "", true, "could not be evaluated, so a person decides: no such key: resourceId"},
		{"a wrong type asks", rule, `{"amount":"lots"}`, "acme", true, "could not be evaluated, so a person decides: no such overload"},
		{"the cost limit asks", "args.items.map(x, args.items.map(y, x * y)).size() > 0", big, "acme", true, "could not be evaluated, so a person decides: it "}, // its cost limit, or its deadline on a loaded machine,
		{"plain false", "", `{"amount":5000}`, "acme", false, "policy: requireApproval is false (the tool needs no approval)"},
	}
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var executed atomic.Int64
				var receipts []string
				a := &agent.Agent{ID: "refunder", Model: refundCalls(c.args), Tools: []*agent.Tool{policyTool(t, c.expr, &executed, &receipts)}}
				signer := &recordingSigner{}
				f := setupWith(t, db, runs.Config{Receipts: signer}, setupOpts{agents: []*agent.Agent{a}})
				r := f.start(t, runs.StartParams{AgentID: "refunder", Prompt: "refund", ResourceID: &c.resource})
				revision := policy.Revision("false")
				if c.expr != "" {
					revision = policy.Revision(c.expr)
				}
				if !c.ask {
					done := f.finished(t, r.ID)
					if done.Status != runtype.StatusCompleted || executed.Load() != 1 || len(done.Decisions) != 1 {
						t.Fatalf("run %s, %d executions, decisions %+v", done.Status, executed.Load(), done.Decisions)
					}
					d := done.Decisions[0]
					if d.Kind != runtype.DecisionAutoApproved || d.DecidedBy != nil || d.Reason == nil || *d.Reason != c.reason ||
						d.PolicyRevision == nil || *d.PolicyRevision != revision || d.ToolCallID != "tc_1" || string(d.Args) != c.args {
						t.Fatalf("decision %+v (reason %v, revision %v)", d, deref(d.Reason), deref(d.PolicyRevision))
					}
					if want := "receipt-" + r.ID + "-tc_1"; d.Receipt == nil || *d.Receipt != want || len(receipts) != 1 || receipts[0] != want {
						t.Fatalf("receipt %v, the tool was given %q; want %s", deref(d.Receipt), receipts, want)
					}
					if asked := signer.asked[0]; asked.DecidedBy != nil || asked.Tool != "issue_refund" || string(asked.Args) != c.args {
						t.Fatalf("signed %+v", asked)
					}
					calls := ofType(allEvents(t, f, r.ID), runtype.EventToolCallRequested)
					if len(calls) != 1 || calls[0].ToolCall.RequiresApproval || calls[0].ToolCall.PolicyRevision != revision {
						t.Fatalf("TOOL_CALL %+v", calls)
					}
					return
				}
				f.until(t, r.ID, 0, runtype.StatusSuspended)
				got, err := f.svc.Get(bg(), r.ID)
				if err != nil || got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || executed.Load() != 0 || len(got.Decisions) != 0 {
					t.Fatalf("run %+v, %v; %d executions: want it held for a person", got, err, executed.Load())
				}
				call := got.ToolCalls[0]
				if !call.RequiresApproval || !strings.Contains(call.ApprovalReason, c.reason) || call.PolicyRevision != revision {
					t.Fatalf("held call's reason %q (revision %s), want %q", call.ApprovalReason, call.PolicyRevision, c.reason)
				}
				if ev := ofType(allEvents(t, f, r.ID), runtype.EventToolCallApproval); len(ev) != 1 || ev[0].ToolCall.ApprovalReason != call.ApprovalReason {
					t.Fatalf("TOOL_CALL_APPROVAL %+v", ev)
				}
				done, err := f.svc.Approve(as("alice", nil, runtype.RoleApprover), runs.DecideParams{RunID: r.ID})
				if err != nil {
					t.Fatal(err)
				}
				done = f.finished(t, done.ID)
				if d := done.Decisions[0]; d.Kind != runtype.DecisionApproved || deref(d.DecidedBy) != "alice" || deref(d.PolicyRevision) != revision || executed.Load() != 1 {
					t.Fatalf("decision %+v, %d executions", d, executed.Load())
				}
			})
		}
	})
}

// TestPolicyOverRequestApproval: an external agent's request is judged by the same expression,
// with the caller as principal: a call the policy lets through is COMPLETED at once, AUTO_APPROVED
// with the rule, the revision and a receipt; one it asks about waits with the reason; a rule on
// the principal's roles reads the caller's.
func TestPolicyOverRequestApproval(t *testing.T) {
	t.Parallel()
	const rule = "args.amount > 100 && !('refunds-lead' in principal.roles)"
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		p, err := policy.Compile(rule, policy.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		bot := &agent.Agent{ID: "refund-bot", External: true, Tools: []*agent.Tool{{Name: "issue_refund", Policy: p, InputSchema: json.RawMessage(`{"type":"object"}`)}}}
		f := setupWith(t, db, runs.Config{Receipts: &recordingSigner{}}, setupOpts{agents: []*agent.Agent{bot}})
		caller := as("bot-token", nil, runtype.RoleRequester)
		small := request(t, f, caller, runs.ApprovalParams{AgentID: "refund-bot", ToolName: "issue_refund", Args: json.RawMessage(`{"amount":20}`)})
		if small.Status != runtype.StatusCompleted || len(small.Decisions) != 1 {
			t.Fatalf("small refund: %s %+v", small.Status, small.Decisions)
		}
		if d := small.Decisions[0]; d.Kind != runtype.DecisionAutoApproved || d.DecidedBy != nil || deref(d.Reason) != `policy: requireApproval "`+rule+`" is false for this call` ||
			deref(d.PolicyRevision) != p.Revision() || d.Receipt == nil {
			t.Fatalf("decision %+v", d)
		}
		stored, err := f.svc.Get(bg(), small.ID)
		if err != nil || len(stored.Decisions) != 1 || stored.Decisions[0].Kind != runtype.DecisionAutoApproved || deref(stored.Decisions[0].PolicyRevision) != p.Revision() {
			t.Fatalf("stored %+v, %v", stored, err)
		}
		large := request(t, f, caller, runs.ApprovalParams{AgentID: "refund-bot", ToolName: "issue_refund", Args: json.RawMessage(`{"amount":200}`)})
		if large.Status != runtype.StatusSuspended || large.ToolCalls[0].ApprovalReason != `policy requireApproval "`+rule+`" is true for this call` {
			t.Fatalf("large refund: %s %+v", large.Status, large.ToolCalls)
		}
		lead := as("lead-token", nil, runtype.RoleRequester, "refunds-lead")
		byLead := request(t, f, lead, runs.ApprovalParams{AgentID: "refund-bot", ToolName: "issue_refund", Args: json.RawMessage(`{"amount":200}`)})
		if byLead.Status != runtype.StatusCompleted || byLead.Decisions[0].Kind != runtype.DecisionAutoApproved {
			t.Fatalf("the lead's refund: %s %+v", byLead.Status, byLead.Decisions)
		}
		// Without a principal a rule can name (the server's own), the rule cannot be told: asked.
		anon := request(t, f, bg(), runs.ApprovalParams{AgentID: "refund-bot", ToolName: "issue_refund", Args: json.RawMessage(`{"amount":200}`)})
		if anon.Status != runtype.StatusSuspended || !strings.Contains(anon.ToolCalls[0].ApprovalReason, "no such key: roles") {
			t.Fatalf("without a principal: %s %+v", anon.Status, anon.ToolCalls)
		}
	})
}
