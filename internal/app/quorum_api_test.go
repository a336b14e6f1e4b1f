package app_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// quorumConfig is a config file with authentication on: otto starts runs; alice, bob and carol
// are approvers in finance; erin an approver outside it. billing, on the fake model, calls
// refund, an HTTP tool held for 2 approvals from finance.
func quorumConfig(t *testing.T) (file string, refunds *apptest.RefundEndpoint) {
	t.Helper()
	model, refunds := apptest.FakeModel(t, "refund"), apptest.NewRefundEndpoint(t)
	token := func(subject, role string) string {
		return fmt.Sprintf("    - {subject: %s, role: %s, sha256: %s}\n", subject, role, apptest.Sha256Hex(apptest.TokenOf(subject)))
	}
	return apptest.WriteConfig(t, "auth:\n  tokens:\n"+token("otto", "operator")+token("alice", "[approver, finance]")+
		token("bob", "[approver, finance]")+token("carol", "[approver, finance]")+token("erin", "approver")+`
agents:
  - id: billing
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [refund]
tools:
  - name: refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    approvals: {required: 2, roles: [finance]}
    http: {url: `+refunds.URL+`/refund, timeout: 5s}
`), refunds
}

const quorumRunFields = `runId status
	toolCalls { toolCallId args approvals { required count args edited by { subject at argsDigest editedArgs } superseded { subject } } }
	decisions { kind decidedBy editedArgs receipt approvals { required count by { subject } } }`

type quorumRun struct {
	RunID     string `json:"runId"`
	Status    string `json:"status"`
	ToolCalls []struct {
		ToolCallID string          `json:"toolCallId"`
		Args       json.RawMessage `json:"args"`
		Approvals  *quorumView     `json:"approvals"`
	} `json:"toolCalls"`
	Decisions []struct {
		Kind       string          `json:"kind"`
		DecidedBy  *string         `json:"decidedBy"`
		EditedArgs json.RawMessage `json:"editedArgs"`
		Receipt    *string         `json:"receipt"`
		Approvals  *quorumView     `json:"approvals"`
	} `json:"decisions"`
}

type quorumView struct {
	Required int             `json:"required"`
	Count    int             `json:"count"`
	Args     json.RawMessage `json:"args"`
	Edited   bool            `json:"edited"`
	By       []struct {
		Subject    string          `json:"subject"`
		At         string          `json:"at"`
		ArgsDigest string          `json:"argsDigest"`
		EditedArgs json.RawMessage `json:"editedArgs"`
	} `json:"by"`
	Superseded []struct {
		Subject string `json:"subject"`
	} `json:"superseded"`
}

func (q *quorumView) subjects() string {
	if q == nil {
		return "<nil>"
	}
	var s []string
	for _, b := range q.By {
		s = append(s, b.Subject)
	}
	return strings.Join(s, ",")
}

func quorumRead(t *testing.T, s *apptest.Server, id string) quorumRun {
	t.Helper()
	var out struct{ Run quorumRun }
	s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { `+quorumRunFields+` } }`, map[string]any{"id": id}, &out)
	return out.Run
}

// quorumHeld starts a billing run as otto and waits for it to hold its refund.
func quorumHeld(t *testing.T, s *apptest.Server) string {
	t.Helper()
	r := s.SuspendAs(t, apptest.TokenOf("otto"), "refund order 7", map[string]any{"agentId": "billing"})
	return r.RunID
}

const quorumApprove = `mutation($id: ID!, $args: JSON) { approveToolCall(runId: $id, args: $args) { ` + quorumRunFields + ` } }`

// TestQuorumOverGraphQL: the API shows a tool's quorum and a held call's count and who; the
// first approval keeps the run suspended (1 of 2, alice), the same person again is CONFLICT, a
// principal outside the tool's roles FORBIDDEN; an edit resets the count; the second approval of
// the edited arguments runs the tool once with them, its decision naming both approvers and
// carrying the receipt; the stream has TOOL_CALL_APPROVAL_RECORDED with the count.
func TestQuorumOverGraphQL(t *testing.T) {
	t.Parallel()
	eachQuorumDB(t, func(t *testing.T, s *apptest.Server, refunds *apptest.RefundEndpoint) {
		var agents struct {
			Agents []struct {
				ID    string
				Tools []struct {
					Name      string
					Approvals struct {
						Required int
						Roles    []string
					}
				}
			}
		}
		s.MustAs(t, apptest.TokenOf("alice"), `{ agents { id tools { name approvals { required roles } } } }`, nil, &agents)
		if tl := agents.Agents[0].Tools[0]; tl.Approvals.Required != 2 || strings.Join(tl.Approvals.Roles, ",") != "finance" {
			t.Fatalf("tool %+v", tl)
		}
		id := quorumHeld(t, s)
		run := quorumRead(t, s, id)
		if a := run.ToolCalls[0].Approvals; a == nil || a.Required != 2 || a.Count != 0 || a.Edited || string(a.Args) != string(run.ToolCalls[0].Args) {
			t.Fatalf("a held call's approvals %+v", a)
		}

		var out struct{ ApproveToolCall quorumRun }
		s.MustAs(t, apptest.TokenOf("alice"), quorumApprove, map[string]any{"id": id}, &out)
		got := out.ApproveToolCall
		if a := got.ToolCalls[0].Approvals; got.Status != "SUSPENDED" || a.Count != 1 || a.Required != 2 || a.subjects() != "alice" ||
			a.By[0].At == "" || !strings.HasPrefix(a.By[0].ArgsDigest, "sha256:") {
			t.Fatalf("after alice: %s %+v", got.Status, a)
		}
		if r := s.PostAs(t, apptest.TokenOf("alice"), quorumApprove, map[string]any{"id": id}); r.Code != "CONFLICT" || !strings.Contains(r.Msg, "already approved") {
			t.Fatalf("alice again: %s %s", r.Code, r.Msg)
		}
		if r := s.PostAs(t, apptest.TokenOf("erin"), quorumApprove, map[string]any{"id": id}); r.Code != "FORBIDDEN" {
			t.Fatalf("erin: %s %s", r.Code, r.Msg)
		}
		edited := map[string]any{"orderId": "7", "amount": 2}
		s.MustAs(t, apptest.TokenOf("bob"), quorumApprove, map[string]any{"id": id, "args": edited}, &out)
		if a := out.ApproveToolCall.ToolCalls[0].Approvals; a.Count != 1 || a.subjects() != "bob" || !a.Edited || len(a.Superseded) != 1 {
			t.Fatalf("after bob's edit: %+v", a)
		}
		if r := s.PostAs(t, apptest.TokenOf("carol"), quorumApprove, map[string]any{"id": id}); r.Code != "CONFLICT" || !strings.Contains(r.Msg, "edited by bob") {
			t.Fatalf("carol without the edited arguments: %s %s", r.Code, r.Msg)
		}
		if calls, _ := refunds.Got(); len(calls) != 0 {
			t.Fatalf("the tool ran before its quorum: %v", calls)
		}
		s.MustAs(t, apptest.TokenOf("carol"), quorumApprove, map[string]any{"id": id, "args": edited}, &out)
		apptest.Eventually(t, func() bool { return quorumRead(t, s, id).Status == "COMPLETED" }, func() string { return "the run did not complete" })
		done := quorumRead(t, s, id)
		d := done.Decisions[0]
		if d.Kind != "APPROVED" || *d.DecidedBy != "carol" || d.Receipt == nil || d.Approvals.subjects() != "bob,carol" || d.Approvals.Required != 2 {
			t.Fatalf("decision %+v approvals %+v", d, d.Approvals)
		}
		ws := apptest.DialAs(t, s.URL, "graphql-transport-ws", apptest.TokenOf("alice"))
		op := ws.Subscribe(`subscription($id: ID!) { runEvents(runId: $id, after: 0) { type decidedBy toolCall { approvals { required count by { subject } } } } }`, map[string]any{"id": id})
		var seen []string
		for {
			data, done, errs := ws.Next(op)
			if errs != nil || done {
				t.Fatalf("stream ended early: %s (saw %v)", errs, seen)
			}
			var ev struct {
				RunEvents struct {
					Type      string
					DecidedBy *string
					ToolCall  *struct{ Approvals *quorumView }
				}
			}
			json.Unmarshal(data, &ev)
			e := ev.RunEvents
			switch e.Type {
			case "TOOL_CALL_APPROVAL_RECORDED", "TOOL_CALL_APPROVED":
				a := e.ToolCall.Approvals
				seen = append(seen, fmt.Sprintf("%s by %s: %d of %d %s", e.Type, *e.DecidedBy, a.Count, a.Required, a.subjects()))
			}
			if e.Type == "RUN_FINISHED" {
				break
			}
		}
		want := "TOOL_CALL_APPROVAL_RECORDED by alice: 1 of 2 alice; TOOL_CALL_APPROVAL_RECORDED by bob: 1 of 2 bob; " +
			"TOOL_CALL_APPROVAL_RECORDED by carol: 2 of 2 bob,carol; TOOL_CALL_APPROVED by carol: 2 of 2 bob,carol"
		if strings.Join(seen, "; ") != want {
			t.Fatalf("events:\n%s\nwant\n%s", strings.Join(seen, "; "), want)
		}
		if calls, _ := refunds.Got(); len(calls) != 1 || calls[0]["args"].(map[string]any)["amount"] != 2.0 {
			t.Fatalf("the tool got %v, want one call with the edited arguments", calls)
		}
	})
}

// eachQuorumDB runs fn on a server with quorumConfig over SQLite, then over MySQL, each with
// a tool backend of its own.
func eachQuorumDB(t *testing.T, fn func(t *testing.T, s *apptest.Server, refunds *apptest.RefundEndpoint)) {
	for _, name := range []string{"sqlite", "mysql"} {
		t.Run(name, func(t *testing.T) {
			file, refunds := quorumConfig(t)
			db := "sqlite:" + filepath.Join(t.TempDir(), "interlock.db")
			if name == "mysql" {
				db = dbtest.MySQLURL(dbtest.MySQLDSN(t))
			}
			fn(t, apptest.Start(t, db, "--auth=on", "--config", file), refunds)
		})
	}
}

// TestQuorumRaceOverTwoInstances: 3 people approve 10 times each at once, spread over two
// instances on one MySQL database: exactly 2 approvals are recorded and the HTTP tool is
// called once.
func TestQuorumRaceOverTwoInstances(t *testing.T) {
	t.Parallel()
	file, refunds := quorumConfig(t)
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	a := apptest.Start(t, db, "--auth=on", "--config", file)
	b := apptest.Start(t, db, "--auth=on", "--config", file)
	id := quorumHeld(t, a)
	codes := make([]string, 30)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range codes {
		srv := []*apptest.Server{a, b}[i%2]
		who := []string{"alice", "bob", "carol"}[i%3]
		wg.Go(func() {
			<-gate
			codes[i] = srv.PostAs(t, apptest.TokenOf(who), `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": id}).Code
		})
	}
	close(gate)
	wg.Wait()
	apptest.Eventually(t, func() bool { return quorumRead(t, b, id).Status == "COMPLETED" }, func() string { return "the run did not complete" })
	done := quorumRead(t, a, id)
	count := map[string]int{}
	for _, c := range codes {
		count[c]++
	}
	calls, _ := refunds.Got()
	if len(calls) != 1 || len(done.Decisions) != 1 || done.Decisions[0].Approvals.Count != 2 || count[""]+count["CONFLICT"] != 30 {
		t.Fatalf("%d tool calls, decisions %+v, answers %v", len(calls), done.Decisions, count)
	}
	t.Logf("answers %v; approved by %s", count, done.Decisions[0].Approvals.subjects())
}
