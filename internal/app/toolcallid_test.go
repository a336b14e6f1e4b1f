package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// toolPost is one request an HTTP tool's endpoint received, its arguments as raw bytes.
type toolPost struct {
	ToolCallID string          `json:"toolCallId"`
	Args       json.RawMessage `json:"args"`
}

// rawEndpoint is an HTTP tool's backend that records the bytes of each call's arguments.
type rawEndpoint struct {
	*httptest.Server
	mu    sync.Mutex
	posts []toolPost
}

func newRawEndpoint(t *testing.T) *rawEndpoint {
	e := &rawEndpoint{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p toolPost
		json.NewDecoder(r.Body).Decode(&p)
		e.mu.Lock()
		e.posts = append(e.posts, p)
		e.mu.Unlock()
		io.WriteString(w, `{"result": {"refunded": true}}`)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *rawEndpoint) got() []toolPost {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]toolPost(nil), e.posts...)
}

// idServer starts a server with authentication on (alice and bob approve, root administers), a
// billing agent on a model scripted with steps whose refund tool (an HTTP tool) needs approval,
// and a desk agent (demo model) that delegates to billing.
func idServer(t *testing.T, db string, steps ...[]apptest.ScriptedCall) (*apptest.Server, *rawEndpoint) {
	t.Helper()
	model, refunds := apptest.ScriptedModel(t, steps...), newRawEndpoint(t)
	file := apptest.WriteConfig(t, fmt.Sprintf(`
auth:
  tokens:
    - {subject: alice, role: approver, sha256: %s}
    - {subject: bob, role: approver, sha256: %s}
    - {subject: root, role: admin, sha256: %s}
agents:
  - id: billing
    description: Refunds orders.
    model: {provider: openai, baseURL: %s/v1, name: scripted}
    tools: [refund]
  - id: desk
    description: Hands requests on.
    model: {provider: demo}
    subAgents: [billing]
tools:
  - name: refund
    description: Refund an order
    inputSchema: {type: object}
    requireApproval: true
    http: {url: %s/refund, timeout: 5s}
`, apptest.Sha256Hex(apptest.TokenOf("alice")), apptest.Sha256Hex(apptest.TokenOf("bob")), apptest.Sha256Hex(apptest.TokenOf("root")), model.URL, refunds.URL))
	return apptest.Start(t, db, "--auth=on", "--config", file), refunds
}

// eachIDServer runs fn on an idServer over SQLite and one over MySQL.
func eachIDServer(t *testing.T, fn func(t *testing.T, s *apptest.Server, refunds *rawEndpoint), steps ...[]apptest.ScriptedCall) {
	t.Run("sqlite", func(t *testing.T) {
		s, e := idServer(t, "sqlite:"+t.TempDir()+"/interlock.db", steps...)
		fn(t, s, e)
	})
	t.Run("mysql", func(t *testing.T) {
		s, e := idServer(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)), steps...)
		fn(t, s, e)
	})
}

const approveByID = `mutation($id: ID!, $c: ID) { approveToolCall(runId: $id, toolCallId: $c) { status } }`
const declineByID = `mutation($id: ID!, $c: ID) { declineToolCall(runId: $id, toolCallId: $c, reason: "no") { status } }`

// callRecord is what a toolCallId was seen naming, and where first.
type callRecord struct{ tool, args, where string }

// oneCallPerID checks the invariant: wherever a toolCallId of the run appears — its events, the
// calls it waited on (seen), its decisions — it names the same tool with the same arguments,
// byte for byte. It returns what each id names.
func oneCallPerID(t *testing.T, s *apptest.Server, runID string, seen ...[]apptest.ToolCall) map[string]callRecord {
	t.Helper()
	names := map[string]callRecord{}
	see := func(id, tool string, args json.RawMessage, where string) {
		if len(args) == 0 {
			return // events and calls that carry no arguments (resume suspensions) name no args
		}
		if prev, ok := names[id]; ok && (prev.tool != tool || prev.args != string(args)) {
			t.Fatalf("run %s: toolCallId %s names %s %s in %s but %s %s in %s", runID, id, prev.tool, prev.args, prev.where, tool, args, where)
		}
		if _, ok := names[id]; !ok {
			names[id] = callRecord{tool, string(args), where}
		}
	}
	for _, ev := range allEvents(t, s, runID) {
		if c := ev.ToolCall; c != nil {
			see(c.ToolCallID, c.ToolName, c.Args, fmt.Sprintf("event %d %s", ev.Seq, ev.Type))
		}
	}
	for _, list := range seen {
		for _, c := range list {
			see(c.ToolCallID, c.ToolName, c.Args, "toolCalls")
		}
	}
	for _, d := range readIDRun(t, s, runID).Decisions {
		see(d.ToolCallID, d.ToolName, d.Args, "decisions")
	}
	return names
}

// TestModelReusingCallIDsAcrossSteps: a model that calls its refunds call_same in every step.
// Each call gets an id of the server's; the approval alice gave the first call, sent again by
// bob once the second call waits, is CONFLICT naming alice and when, and never approves the
// second call (amount 1 was shown, amount 5000 must not run).
func TestModelReusingCallIDsAcrossSteps(t *testing.T) {
	t.Parallel()
	eachIDServer(t, func(t *testing.T, s *apptest.Server, refunds *rawEndpoint) {
		runID := idStart(t, s, "billing", "refund order 1")
		first := suspendedOn(t, s, runID, 1)
		a := first.ToolCalls[0]
		if a.ToolCallID == "call_same" || string(a.Args) != `{"orderId":"1","amount":1}` {
			t.Fatalf("first call shown as %+v", a)
		}
		s.MustAs(t, apptest.TokenOf("alice"), approveByID, map[string]any{"id": runID, "c": a.ToolCallID}, nil)
		second := suspendedOn(t, s, runID, 1, a.ToolCallID)
		b := second.ToolCalls[0]
		if b.ToolCallID == a.ToolCallID || string(b.Args) != `{"orderId":"1","amount":5000}` {
			t.Fatalf("second call shown as %+v (first was %s)", b, a.ToolCallID)
		}

		stale := s.PostAs(t, apptest.TokenOf("bob"), approveByID, map[string]any{"id": runID, "c": a.ToolCallID})
		if stale.Code != "CONFLICT" || !strings.Contains(stale.Msg, a.ToolCallID) || !strings.Contains(stale.Msg, "approved by alice at 20") {
			t.Fatalf("stale approve of %s: %s %q, want CONFLICT saying alice approved it and when", a.ToolCallID, stale.Code, stale.Msg)
		}
		if r := readIDRun(t, s, runID); r.Status != "SUSPENDED" || len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolCallID != b.ToolCallID {
			t.Fatalf("after the stale approve the run is %s on %+v", r.Status, r.ToolCalls)
		}
		if posts := refunds.got(); len(posts) != 1 || posts[0].ToolCallID != a.ToolCallID || string(posts[0].Args) != string(a.Args) {
			t.Fatalf("the tool received %+v, want only the first call, as shown", posts)
		}

		s.MustAs(t, apptest.TokenOf("bob"), declineByID, map[string]any{"id": runID, "c": b.ToolCallID}, nil)
		if r := finished(t, s, runID); r.Status != "COMPLETED" {
			t.Fatalf("run %s", r.Status)
		}
		if posts := refunds.got(); len(posts) != 1 {
			t.Fatalf("the declined call ran: %+v", posts)
		}
		names := oneCallPerID(t, s, runID, first.ToolCalls, second.ToolCalls)
		if len(names) != 2 {
			t.Fatalf("ids seen: %+v, want two calls", names)
		}
	}, []apptest.ScriptedCall{{ID: "call_same", Tool: "refund", Args: `{"orderId":"1","amount":1}`}},
		[]apptest.ScriptedCall{{ID: "call_same", Tool: "refund", Args: `{"orderId":"1","amount":5000}`}})
}

// TestModelReusingCallIDsWithinAStep: two calls of one step with the same model id are two
// calls, each decided on its own (one click is one decision), and the run goes on once both are.
func TestModelReusingCallIDsWithinAStep(t *testing.T) {
	t.Parallel()
	eachIDServer(t, func(t *testing.T, s *apptest.Server, refunds *rawEndpoint) {
		runID := idStart(t, s, "billing", "refund orders 1 and 2")
		r := suspendedOn(t, s, runID, 2)
		one, two := r.ToolCalls[0], r.ToolCalls[1]
		if one.ToolCallID == two.ToolCallID || string(one.Args) != `{"orderId":"1","amount":1}` || string(two.Args) != `{"orderId":"2","amount":2}` {
			t.Fatalf("calls shown as %+v", r.ToolCalls)
		}
		s.MustAs(t, apptest.TokenOf("alice"), approveByID, map[string]any{"id": runID, "c": one.ToolCallID}, nil)
		after := readIDRun(t, s, runID)
		if after.Status != "SUSPENDED" || len(after.ToolCalls) != 1 || after.ToolCalls[0].ToolCallID != two.ToolCallID {
			t.Fatalf("after approving %s the run is %s on %+v, want SUSPENDED on %s", one.ToolCallID, after.Status, after.ToolCalls, two.ToolCallID)
		}
		if len(after.Decisions) != 1 || after.Decisions[0].ToolCallID != one.ToolCallID {
			t.Fatalf("one approval stored %+v", after.Decisions)
		}
		again := s.PostAs(t, apptest.TokenOf("bob"), approveByID, map[string]any{"id": runID, "c": one.ToolCallID})
		if again.Code != "CONFLICT" || !strings.Contains(again.Msg, "approved by alice") {
			t.Fatalf("approving %s again: %s %q", one.ToolCallID, again.Code, again.Msg)
		}
		s.MustAs(t, apptest.TokenOf("bob"), approveByID, map[string]any{"id": runID, "c": two.ToolCallID}, nil)
		if done := finished(t, s, runID); done.Status != "COMPLETED" {
			t.Fatalf("run %s", done.Status)
		}
		posts := refunds.got()
		if len(posts) != 2 {
			t.Fatalf("the tool received %+v, want the two calls", posts)
		}
		for i, want := range []apptest.ToolCall{one, two} {
			if posts[i].ToolCallID != want.ToolCallID || string(posts[i].Args) != string(want.Args) {
				t.Fatalf("POST %d was %s %s, want %s %s", i, posts[i].ToolCallID, posts[i].Args, want.ToolCallID, want.Args)
			}
		}
		oneCallPerID(t, s, runID, r.ToolCalls)
	}, []apptest.ScriptedCall{{ID: "call_same", Tool: "refund", Args: `{"orderId":"1","amount":1}`}, {ID: "call_same", Tool: "refund", Args: `{"orderId":"2","amount":2}`}})
}

// TestSupervisorLateApproveNeverDecidesALaterCall: a sub-agent asks for a refund of order 7,
// then, once approved, of order 800. Approving the supervisor's run with the toolCallId the
// approver saw (as the console's Approve and bulk approve send it) after the second call
// surfaced is CONFLICT naming who approved and when: order 800 never runs unseen.
func TestSupervisorLateApproveNeverDecidesALaterCall(t *testing.T) {
	t.Parallel()
	eachIDServer(t, func(t *testing.T, s *apptest.Server, refunds *rawEndpoint) {
		runID := idStart(t, s, "desk", "refund what the customer asks")
		first := suspendedOn(t, s, runID, 1)
		seen := first.ToolCalls[0]
		if seen.ToolName != "refund" || string(seen.Args) != `{"orderId":"7","amount":1}` {
			t.Fatalf("supervisor shows %+v", seen)
		}
		s.MustAs(t, apptest.TokenOf("alice"), approveByID, map[string]any{"id": runID, "c": seen.ToolCallID}, nil)
		second := suspendedOn(t, s, runID, 1, seen.ToolCallID)
		later := second.ToolCalls[0]
		if string(later.Args) != `{"orderId":"800","amount":500}` {
			t.Fatalf("supervisor shows %+v after the first approval", later)
		}

		late := s.PostAs(t, apptest.TokenOf("bob"), approveByID, map[string]any{"id": runID, "c": seen.ToolCallID})
		if late.Code != "CONFLICT" || !strings.Contains(late.Msg, seen.ToolCallID) || !strings.Contains(late.Msg, "approved by alice at 20") {
			t.Fatalf("late approve of %s: %s %q, want CONFLICT saying alice approved it and when", seen.ToolCallID, late.Code, late.Msg)
		}
		if posts := refunds.got(); len(posts) != 1 || string(posts[0].Args) != `{"orderId":"7","amount":1}` {
			t.Fatalf("the tool received %+v, want order 7 only", posts)
		}
		if r := readIDRun(t, s, runID); r.Status != "SUSPENDED" || len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolCallID != later.ToolCallID {
			t.Fatalf("after the late approve the supervisor is %s on %+v", r.Status, r.ToolCalls)
		}

		s.MustAs(t, apptest.TokenOf("bob"), declineByID, map[string]any{"id": runID, "c": later.ToolCallID}, nil)
		if r := finished(t, s, runID); r.Status != "COMPLETED" {
			t.Fatalf("supervisor run %s", r.Status)
		}
		if posts := refunds.got(); len(posts) != 1 {
			t.Fatalf("order 800 ran after a decline: %+v", posts)
		}
		names := oneCallPerID(t, s, runID, first.ToolCalls, second.ToolCalls)
		if len(names) != 3 { // the delegate call and the two refunds it shows
			t.Fatalf("ids seen on the supervisor: %+v", names)
		}
	}, []apptest.ScriptedCall{{ID: "call_1", Tool: "refund", Args: `{"orderId":"7","amount":1}`}},
		[]apptest.ScriptedCall{{ID: "call_1", Tool: "refund", Args: `{"orderId":"800","amount":500}`}})
}

// TestArgumentsAreCanonicalEverywhere: what the API shows of a call's arguments is byte for byte
// what the tool receives (whitespace dropped, key order kept, "<" and "&" escaped once, as every
// JSON encoder of the server writes them); arguments with a key given
// twice are refused (a tool error the model reads), never held for a person or run, since
// parsers disagree on which "amount" wins.
func TestArgumentsAreCanonicalEverywhere(t *testing.T) {
	t.Parallel()
	eachIDServer(t, func(t *testing.T, s *apptest.Server, refunds *rawEndpoint) {
		runID := idStart(t, s, "billing", "refund order 1")
		r := suspendedOn(t, s, runID, 1)
		c := r.ToolCalls[0]
		if string(c.Args) != `{"orderId":"1","note":"\u003cb\u003e\u0026\u003c/b\u003e","amount":10}` {
			t.Fatalf("args shown as %s", c.Args)
		}
		s.MustAs(t, apptest.TokenOf("alice"), approveByID, map[string]any{"id": runID, "c": c.ToolCallID}, nil)
		done := finished(t, s, runID)
		if posts := refunds.got(); len(posts) != 1 || !bytes.Equal(posts[0].Args, c.Args) {
			t.Fatalf("the tool received %+v, want %s byte for byte", posts, c.Args)
		}
		if done.Status != "COMPLETED" || !strings.Contains(deref(done.Output), `key "amount" appears twice`) {
			t.Fatalf("run %s, output %q: the model is not told its arguments were refused", done.Status, deref(done.Output))
		}
		names := oneCallPerID(t, s, runID, r.ToolCalls)
		var refused *callRecord
		for _, rec := range names {
			if strings.Contains(rec.args, "5000") {
				refused = &rec
			}
		}
		if refused == nil || !strings.HasPrefix(refused.args, `"`) {
			t.Fatalf("the refused call shows %+v, want its arguments as a JSON string", names)
		}
		if len(refunds.got()) != 1 {
			t.Fatal("the refused call ran")
		}
	}, []apptest.ScriptedCall{{ID: "call_1", Tool: "refund", Args: "{ \"orderId\" : \"1\",\n  \"note\": \"<b>&</b>\", \"amount\": 10 }"}},
		[]apptest.ScriptedCall{{ID: "call_2", Tool: "refund", Args: `{"orderId":"2","amount":1,"amount":5000}`}})
}

// TestDeepArgumentsAreRefused: a model's arguments 9,000 levels deep are a tool error the model
// reads, and the run goes on; edited arguments and resume data as deep are BAD_USER_INPUT and
// nothing is stored.
func TestDeepArgumentsAreRefused(t *testing.T) {
	t.Parallel()
	eachIDServer(t, func(t *testing.T, s *apptest.Server, refunds *rawEndpoint) {
		runID := idStart(t, s, "billing", "refund order 1")
		r := suspendedOn(t, s, runID, 1)
		c := r.ToolCalls[0]
		if string(c.Args) != `{"orderId":"1"}` {
			t.Fatalf("held on %d calls, first %.200s, want the second call (the deep one answered with an error)", len(r.ToolCalls), c.Args)
		}
		var deep any
		if err := json.Unmarshal([]byte(apptest.DeepJSON(9000)), &deep); err != nil {
			t.Fatal(err)
		}
		edited := s.PostAs(t, apptest.TokenOf("alice"), `mutation($id: ID!, $c: ID, $a: JSON) { approveToolCall(runId: $id, toolCallId: $c, args: $a) { status } }`,
			map[string]any{"id": runID, "c": c.ToolCallID, "a": deep})
		if edited.Code != "BAD_USER_INPUT" || !strings.Contains(edited.Msg, "nested deeper than 64") {
			t.Fatalf("deep edited args: %s %q", edited.Code, edited.Msg)
		}
		if after := readIDRun(t, s, runID); after.Status != "SUSPENDED" || len(after.Decisions) != 0 {
			t.Fatalf("after deep edited args the run is %s with decisions %+v", after.Status, after.Decisions)
		}
		s.MustAs(t, apptest.TokenOf("alice"), approveByID, map[string]any{"id": runID, "c": c.ToolCallID}, nil)
		done := finished(t, s, runID)
		if done.Status != "COMPLETED" {
			t.Fatalf("run %s", done.Status)
		}
		events := allEvents(t, s, runID)
		refused := false
		for _, ev := range events {
			if ev.Type == "TOOL_RESULT" && ev.Error != nil && strings.Contains(*ev.Error, "nested deeper than 64 levels") {
				refused = true
				if ev.ToolCall == nil || len(ev.ToolCall.Args) == 0 || ev.ToolCall.Args[0] != '"' {
					t.Fatalf("the deep call's event shows %+v, want its arguments as a JSON string", ev.ToolCall)
				}
			}
		}
		if !refused {
			t.Fatal("no TOOL_RESULT tells the model its arguments nest too deeply")
		}
		if posts := refunds.got(); len(posts) != 1 || string(posts[0].Args) != `{"orderId":"1"}` {
			t.Fatalf("the tool received %+v", posts)
		}
	}, []apptest.ScriptedCall{{ID: "call_1", Tool: "refund", Args: apptest.DeepJSON(9000)}, {ID: "call_2", Tool: "refund", Args: `{"orderId":"1"}`}})

	// Resume data as deep, for the demo agent's question to the customer.
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		run := startSuspended(t, s, "support-agent", "ask the customer for their size")
		// Valid for the tool's resumeSchema but for its depth.
		var deep any
		if err := json.Unmarshal([]byte(`{"answer":"M","sizes":`+apptest.DeepJSON(9000)+`}`), &deep); err != nil {
			t.Fatal(err)
		}
		e := s.WantError(t, "BAD_USER_INPUT", `mutation($id: ID!, $d: JSON!) { resumeRun(runId: $id, resumeData: $d) { status } }`, map[string]any{"id": run.RunID, "d": deep})
		if !strings.Contains(e.Message, "resumeData: nested deeper than 64 levels") {
			t.Fatalf("deep resumeData: %q", e.Message)
		}
		var out struct{ Run idRun }
		s.Must(t, `query($id: ID!) { run(runId: $id) { `+idRunFields+` } }`, map[string]any{"id": run.RunID}, &out)
		// ask_customer's policy let it run (AUTO_APPROVED) before it asked; no other decision.
		if out.Run.Status != "SUSPENDED" || len(out.Run.Decisions) != 1 || out.Run.Decisions[0].Kind != "AUTO_APPROVED" || len(out.Run.ToolCalls) != 1 {
			t.Fatalf("after deep resumeData the run is %s, decisions %+v", out.Run.Status, out.Run.Decisions)
		}
	})
}

// idRun is a run as the tool-call id tests read it.
type idRun struct {
	RunID     string
	Status    string
	Output    *string
	ToolCalls []apptest.ToolCall
	Decisions []struct {
		ToolCallID string
		ToolName   string
		Kind       string
		DecidedBy  *string
		DecidedAt  string
		Args       json.RawMessage
		EditedArgs json.RawMessage
	}
}

const idRunFields = `runId status output toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted }
	decisions { toolCallId toolName kind decidedBy decidedAt args editedArgs }`

// idStart starts a run of agentID on s as root and returns its id.
func idStart(t *testing.T, s *apptest.Server, agentID, prompt string) string {
	t.Helper()
	var out struct{ StartRun idRun }
	s.MustAs(t, apptest.TokenOf("root"), `mutation($in: StartRunInput!) { startRun(input: $in) { runId } }`,
		map[string]any{"in": map[string]any{"agentId": agentID, "prompt": prompt}}, &out)
	return out.StartRun.RunID
}

// readIDRun reads a run of s as root.
func readIDRun(t *testing.T, s *apptest.Server, runID string) idRun {
	t.Helper()
	var out struct{ Run idRun }
	s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { `+idRunFields+` } }`, map[string]any{"id": runID}, &out)
	return out.Run
}

// waitIDRun polls the run until ok says it is as wanted.
func waitIDRun(t *testing.T, s *apptest.Server, runID string, what string, ok func(idRun) bool) idRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := readIDRun(t, s, runID)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: not %s within 20s: %+v", runID, what, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// suspendedOn waits until the run is SUSPENDED on n calls none of which is in not.
func suspendedOn(t *testing.T, s *apptest.Server, runID string, n int, not ...string) idRun {
	t.Helper()
	return waitIDRun(t, s, runID, fmt.Sprintf("suspended on %d new calls", n), func(r idRun) bool {
		if r.Status != "SUSPENDED" || len(r.ToolCalls) != n {
			return false
		}
		for _, c := range r.ToolCalls {
			for _, old := range not {
				if c.ToolCallID == old {
					return false
				}
			}
		}
		return true
	})
}

// finished waits until the run is COMPLETED or FAILED.
func finished(t *testing.T, s *apptest.Server, runID string) idRun {
	t.Helper()
	return waitIDRun(t, s, runID, "finished", func(r idRun) bool { return r.Status == "COMPLETED" || r.Status == "FAILED" })
}

// allEvents reads every event of a finished run as root.
func allEvents(t *testing.T, s *apptest.Server, runID string) []apptest.Event {
	t.Helper()
	ws := apptest.DialAs(t, s.URL, "graphql-transport-ws", apptest.TokenOf("root"))
	defer ws.Conn.CloseNow()
	ws.Conn.SetReadLimit(1 << 20) // a refused call's arguments are shown whole
	return apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": runID, "after": 0}), nil)
}
