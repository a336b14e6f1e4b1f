package app

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

	"interlock/dbtest"
)

// scriptedCall is one tool call a scripted model asks for: its id (the model's), tool and
// arguments exactly as the model writes them.
type scriptedCall struct{ id, tool, args string }

// scriptedModel is a local server speaking the streamed chat-completions wire format that asks,
// in its step n (the number of assistant messages with tool calls so far), for the calls of
// steps[n], and once the steps are done answers with the content of the last tool message.
func scriptedModel(t *testing.T, steps ...[]scriptedCall) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role      string `json:"role"`
				Content   any    `json:"content"`
				ToolCalls []any  `json:"tool_calls"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		step := 0
		for _, m := range body.Messages {
			if m.Role == "assistant" && len(m.ToolCalls) > 0 {
				step++
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta string) {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", delta)
		}
		if step < len(steps) {
			var calls []string
			for i, c := range steps[step] {
				args, _ := json.Marshal(c.args)
				calls = append(calls, fmt.Sprintf(`{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, i, c.id, c.tool, args))
			}
			send(`{"role":"assistant","tool_calls":[` + strings.Join(calls, ",") + `]}`)
		} else {
			last := body.Messages[len(body.Messages)-1]
			content, _ := json.Marshal(fmt.Sprint("Done: ", last.Content))
			send(`{"role":"assistant","content":` + string(content) + `}`)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

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
func idServer(t *testing.T, db string, steps ...[]scriptedCall) (*testServer, *rawEndpoint) {
	t.Helper()
	model, refunds := scriptedModel(t, steps...), newRawEndpoint(t)
	t.Setenv("INTERLOCK_TEST_MODEL_KEY", "sk-test")
	file := writeConfig(t, fmt.Sprintf(`
auth:
  tokens:
    - {subject: alice, role: approver, sha256: %s}
    - {subject: bob, role: approver, sha256: %s}
    - {subject: root, role: admin, sha256: %s}
agents:
  - id: billing
    description: Refunds orders.
    model: {provider: openai, baseURL: %s/v1, name: scripted, apiKeyEnv: INTERLOCK_TEST_MODEL_KEY}
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
`, sha256Hex(tokenOf("alice")), sha256Hex(tokenOf("bob")), sha256Hex(tokenOf("root")), model.URL, refunds.URL))
	return startServer(t, db, "--auth=on", "--config", file), refunds
}

// eachIDServer runs fn on an idServer over SQLite and one over MySQL.
func eachIDServer(t *testing.T, fn func(t *testing.T, s *testServer, refunds *rawEndpoint), steps ...[]scriptedCall) {
	t.Run("sqlite", func(t *testing.T) {
		s, e := idServer(t, "sqlite:"+t.TempDir()+"/interlock.db", steps...)
		fn(t, s, e)
	})
	t.Run("mysql", func(t *testing.T) {
		s, e := idServer(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)), steps...)
		fn(t, s, e)
	})
}

// idRun is a run as these tests read it.
type idRun struct {
	RunID     string
	Status    string
	Output    *string
	ToolCalls []apiToolCall
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

func (s *testServer) idStart(t *testing.T, agentID, prompt string) string {
	t.Helper()
	var out struct{ StartRun idRun }
	s.mustAs(t, tokenOf("root"), `mutation($in: StartRunInput!) { startRun(input: $in) { runId } }`,
		map[string]any{"in": map[string]any{"agentId": agentID, "prompt": prompt}}, &out)
	return out.StartRun.RunID
}

func (s *testServer) idRun(t *testing.T, runID string) idRun {
	t.Helper()
	var out struct{ Run idRun }
	s.mustAs(t, tokenOf("root"), `query($id: ID!) { run(runId: $id) { `+idRunFields+` } }`, map[string]any{"id": runID}, &out)
	return out.Run
}

// waitRun polls the run until ok says it is as wanted.
func (s *testServer) waitRun(t *testing.T, runID string, what string, ok func(idRun) bool) idRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := s.idRun(t, runID)
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
func (s *testServer) suspendedOn(t *testing.T, runID string, n int, not ...string) idRun {
	t.Helper()
	return s.waitRun(t, runID, fmt.Sprintf("suspended on %d new calls", n), func(r idRun) bool {
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

func (s *testServer) finished(t *testing.T, runID string) idRun {
	t.Helper()
	return s.waitRun(t, runID, "finished", func(r idRun) bool { return r.Status == "COMPLETED" || r.Status == "FAILED" })
}

const approveByID = `mutation($id: ID!, $c: ID) { approveToolCall(runId: $id, toolCallId: $c) { status } }`
const declineByID = `mutation($id: ID!, $c: ID) { declineToolCall(runId: $id, toolCallId: $c, reason: "no") { status } }`

// allEvents reads every event of a finished run.
func (s *testServer) allEvents(t *testing.T, runID string) []apiEvent {
	t.Helper()
	ws := dialAs(t, s.url, "graphql-transport-ws", tokenOf("root"))
	defer ws.conn.CloseNow()
	ws.conn.SetReadLimit(1 << 20) // a refused call's arguments are shown whole
	return follow(t, ws, ws.subscribe(eventsQuery, map[string]any{"runId": runID, "after": 0}), nil)
}

// callRecord is what a toolCallId was seen naming, and where first.
type callRecord struct{ tool, args, where string }

// oneCallPerID checks the invariant: wherever a toolCallId of the run appears — its events, the
// calls it waited on (seen), its decisions — it names the same tool with the same arguments,
// byte for byte. It returns what each id names.
func oneCallPerID(t *testing.T, s *testServer, runID string, seen ...[]apiToolCall) map[string]callRecord {
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
	for _, ev := range s.allEvents(t, runID) {
		if c := ev.ToolCall; c != nil {
			see(c.ToolCallID, c.ToolName, c.Args, fmt.Sprintf("event %d %s", ev.Seq, ev.Type))
		}
	}
	for _, list := range seen {
		for _, c := range list {
			see(c.ToolCallID, c.ToolName, c.Args, "toolCalls")
		}
	}
	for _, d := range s.idRun(t, runID).Decisions {
		see(d.ToolCallID, d.ToolName, d.Args, "decisions")
	}
	return names
}

// TestModelReusingCallIDsAcrossSteps: a model that calls its refunds call_same in every step.
// Each call gets an id of the server's; the approval alice gave the first call, sent again by
// bob once the second call waits, is CONFLICT naming alice and when, and never approves the
// second call (amount 1 was shown, amount 5000 must not run).
func TestModelReusingCallIDsAcrossSteps(t *testing.T) {
	eachIDServer(t, func(t *testing.T, s *testServer, refunds *rawEndpoint) {
		runID := s.idStart(t, "billing", "refund order 1")
		first := s.suspendedOn(t, runID, 1)
		a := first.ToolCalls[0]
		if a.ToolCallID == "call_same" || string(a.Args) != `{"orderId":"1","amount":1}` {
			t.Fatalf("first call shown as %+v", a)
		}
		s.mustAs(t, tokenOf("alice"), approveByID, map[string]any{"id": runID, "c": a.ToolCallID}, nil)
		second := s.suspendedOn(t, runID, 1, a.ToolCallID)
		b := second.ToolCalls[0]
		if b.ToolCallID == a.ToolCallID || string(b.Args) != `{"orderId":"1","amount":5000}` {
			t.Fatalf("second call shown as %+v (first was %s)", b, a.ToolCallID)
		}

		stale := s.postAs(t, tokenOf("bob"), approveByID, map[string]any{"id": runID, "c": a.ToolCallID})
		if stale.code != "CONFLICT" || !strings.Contains(stale.msg, a.ToolCallID) || !strings.Contains(stale.msg, "approved by alice at 20") {
			t.Fatalf("stale approve of %s: %s %q, want CONFLICT saying alice approved it and when", a.ToolCallID, stale.code, stale.msg)
		}
		if r := s.idRun(t, runID); r.Status != "SUSPENDED" || len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolCallID != b.ToolCallID {
			t.Fatalf("after the stale approve the run is %s on %+v", r.Status, r.ToolCalls)
		}
		if posts := refunds.got(); len(posts) != 1 || posts[0].ToolCallID != a.ToolCallID || string(posts[0].Args) != string(a.Args) {
			t.Fatalf("the tool received %+v, want only the first call, as shown", posts)
		}

		s.mustAs(t, tokenOf("bob"), declineByID, map[string]any{"id": runID, "c": b.ToolCallID}, nil)
		if r := s.finished(t, runID); r.Status != "COMPLETED" {
			t.Fatalf("run %s", r.Status)
		}
		if posts := refunds.got(); len(posts) != 1 {
			t.Fatalf("the declined call ran: %+v", posts)
		}
		names := oneCallPerID(t, s, runID, first.ToolCalls, second.ToolCalls)
		if len(names) != 2 {
			t.Fatalf("ids seen: %+v, want two calls", names)
		}
	}, []scriptedCall{{"call_same", "refund", `{"orderId":"1","amount":1}`}},
		[]scriptedCall{{"call_same", "refund", `{"orderId":"1","amount":5000}`}})
}

// TestModelReusingCallIDsWithinAStep: two calls of one step with the same model id are two
// calls, each decided on its own (one click is one decision), and the run goes on once both are.
func TestModelReusingCallIDsWithinAStep(t *testing.T) {
	eachIDServer(t, func(t *testing.T, s *testServer, refunds *rawEndpoint) {
		runID := s.idStart(t, "billing", "refund orders 1 and 2")
		r := s.suspendedOn(t, runID, 2)
		one, two := r.ToolCalls[0], r.ToolCalls[1]
		if one.ToolCallID == two.ToolCallID || string(one.Args) != `{"orderId":"1","amount":1}` || string(two.Args) != `{"orderId":"2","amount":2}` {
			t.Fatalf("calls shown as %+v", r.ToolCalls)
		}
		s.mustAs(t, tokenOf("alice"), approveByID, map[string]any{"id": runID, "c": one.ToolCallID}, nil)
		after := s.idRun(t, runID)
		if after.Status != "SUSPENDED" || len(after.ToolCalls) != 1 || after.ToolCalls[0].ToolCallID != two.ToolCallID {
			t.Fatalf("after approving %s the run is %s on %+v, want SUSPENDED on %s", one.ToolCallID, after.Status, after.ToolCalls, two.ToolCallID)
		}
		if len(after.Decisions) != 1 || after.Decisions[0].ToolCallID != one.ToolCallID {
			t.Fatalf("one approval stored %+v", after.Decisions)
		}
		again := s.postAs(t, tokenOf("bob"), approveByID, map[string]any{"id": runID, "c": one.ToolCallID})
		if again.code != "CONFLICT" || !strings.Contains(again.msg, "approved by alice") {
			t.Fatalf("approving %s again: %s %q", one.ToolCallID, again.code, again.msg)
		}
		s.mustAs(t, tokenOf("bob"), approveByID, map[string]any{"id": runID, "c": two.ToolCallID}, nil)
		if done := s.finished(t, runID); done.Status != "COMPLETED" {
			t.Fatalf("run %s", done.Status)
		}
		posts := refunds.got()
		if len(posts) != 2 {
			t.Fatalf("the tool received %+v, want the two calls", posts)
		}
		for i, want := range []apiToolCall{one, two} {
			if posts[i].ToolCallID != want.ToolCallID || string(posts[i].Args) != string(want.Args) {
				t.Fatalf("POST %d was %s %s, want %s %s", i, posts[i].ToolCallID, posts[i].Args, want.ToolCallID, want.Args)
			}
		}
		oneCallPerID(t, s, runID, r.ToolCalls)
	}, []scriptedCall{{"call_same", "refund", `{"orderId":"1","amount":1}`}, {"call_same", "refund", `{"orderId":"2","amount":2}`}})
}

// TestSupervisorLateApproveNeverDecidesALaterCall: a sub-agent asks for a refund of order 7,
// then, once approved, of order 800. Approving the supervisor's run with the toolCallId the
// approver saw (as the console's Approve and bulk approve send it) after the second call
// surfaced is CONFLICT naming who approved and when: order 800 never runs unseen.
func TestSupervisorLateApproveNeverDecidesALaterCall(t *testing.T) {
	eachIDServer(t, func(t *testing.T, s *testServer, refunds *rawEndpoint) {
		runID := s.idStart(t, "desk", "refund what the customer asks")
		first := s.suspendedOn(t, runID, 1)
		seen := first.ToolCalls[0]
		if seen.ToolName != "refund" || string(seen.Args) != `{"orderId":"7","amount":1}` {
			t.Fatalf("supervisor shows %+v", seen)
		}
		s.mustAs(t, tokenOf("alice"), approveByID, map[string]any{"id": runID, "c": seen.ToolCallID}, nil)
		second := s.suspendedOn(t, runID, 1, seen.ToolCallID)
		later := second.ToolCalls[0]
		if string(later.Args) != `{"orderId":"800","amount":500}` {
			t.Fatalf("supervisor shows %+v after the first approval", later)
		}

		late := s.postAs(t, tokenOf("bob"), approveByID, map[string]any{"id": runID, "c": seen.ToolCallID})
		if late.code != "CONFLICT" || !strings.Contains(late.msg, seen.ToolCallID) || !strings.Contains(late.msg, "approved by alice at 20") {
			t.Fatalf("late approve of %s: %s %q, want CONFLICT saying alice approved it and when", seen.ToolCallID, late.code, late.msg)
		}
		if posts := refunds.got(); len(posts) != 1 || string(posts[0].Args) != `{"orderId":"7","amount":1}` {
			t.Fatalf("the tool received %+v, want order 7 only", posts)
		}
		if r := s.idRun(t, runID); r.Status != "SUSPENDED" || len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolCallID != later.ToolCallID {
			t.Fatalf("after the late approve the supervisor is %s on %+v", r.Status, r.ToolCalls)
		}

		s.mustAs(t, tokenOf("bob"), declineByID, map[string]any{"id": runID, "c": later.ToolCallID}, nil)
		if r := s.finished(t, runID); r.Status != "COMPLETED" {
			t.Fatalf("supervisor run %s", r.Status)
		}
		if posts := refunds.got(); len(posts) != 1 {
			t.Fatalf("order 800 ran after a decline: %+v", posts)
		}
		names := oneCallPerID(t, s, runID, first.ToolCalls, second.ToolCalls)
		if len(names) != 3 { // the delegate call and the two refunds it shows
			t.Fatalf("ids seen on the supervisor: %+v", names)
		}
	}, []scriptedCall{{"call_1", "refund", `{"orderId":"7","amount":1}`}},
		[]scriptedCall{{"call_1", "refund", `{"orderId":"800","amount":500}`}})
}

// TestArgumentsAreCanonicalEverywhere: what the API shows of a call's arguments is byte for byte
// what the tool receives (whitespace dropped, key order kept, "<" and "&" escaped once, as every
// JSON encoder of the server writes them); arguments with a key given
// twice are refused (a tool error the model reads), never held for a person or run, since
// parsers disagree on which "amount" wins.
func TestArgumentsAreCanonicalEverywhere(t *testing.T) {
	eachIDServer(t, func(t *testing.T, s *testServer, refunds *rawEndpoint) {
		runID := s.idStart(t, "billing", "refund order 1")
		r := s.suspendedOn(t, runID, 1)
		c := r.ToolCalls[0]
		if string(c.Args) != `{"orderId":"1","note":"\u003cb\u003e\u0026\u003c/b\u003e","amount":10}` {
			t.Fatalf("args shown as %s", c.Args)
		}
		s.mustAs(t, tokenOf("alice"), approveByID, map[string]any{"id": runID, "c": c.ToolCallID}, nil)
		done := s.finished(t, runID)
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
	}, []scriptedCall{{"call_1", "refund", "{ \"orderId\" : \"1\",\n  \"note\": \"<b>&</b>\", \"amount\": 10 }"}},
		[]scriptedCall{{"call_2", "refund", `{"orderId":"2","amount":1,"amount":5000}`}})
}

// deepJSON is a value nested n levels deep.
func deepJSON(n int) string {
	return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
}

// TestDeepArgumentsAreRefused: a model's arguments 9,000 levels deep are a tool error the model
// reads, and the run goes on; edited arguments and resume data as deep are BAD_USER_INPUT and
// nothing is stored.
func TestDeepArgumentsAreRefused(t *testing.T) {
	eachIDServer(t, func(t *testing.T, s *testServer, refunds *rawEndpoint) {
		runID := s.idStart(t, "billing", "refund order 1")
		r := s.suspendedOn(t, runID, 1)
		c := r.ToolCalls[0]
		if string(c.Args) != `{"orderId":"1"}` {
			t.Fatalf("held on %d calls, first %.200s, want the second call (the deep one answered with an error)", len(r.ToolCalls), c.Args)
		}
		var deep any
		if err := json.Unmarshal([]byte(deepJSON(9000)), &deep); err != nil {
			t.Fatal(err)
		}
		edited := s.postAs(t, tokenOf("alice"), `mutation($id: ID!, $c: ID, $a: JSON) { approveToolCall(runId: $id, toolCallId: $c, args: $a) { status } }`,
			map[string]any{"id": runID, "c": c.ToolCallID, "a": deep})
		if edited.code != "BAD_USER_INPUT" || !strings.Contains(edited.msg, "nested deeper than 64") {
			t.Fatalf("deep edited args: %s %q", edited.code, edited.msg)
		}
		if after := s.idRun(t, runID); after.Status != "SUSPENDED" || len(after.Decisions) != 0 {
			t.Fatalf("after deep edited args the run is %s with decisions %+v", after.Status, after.Decisions)
		}
		s.mustAs(t, tokenOf("alice"), approveByID, map[string]any{"id": runID, "c": c.ToolCallID}, nil)
		done := s.finished(t, runID)
		if done.Status != "COMPLETED" {
			t.Fatalf("run %s", done.Status)
		}
		events := s.allEvents(t, runID)
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
	}, []scriptedCall{{"call_1", "refund", deepJSON(9000)}, {"call_2", "refund", `{"orderId":"1"}`}})

	// Resume data as deep, for the demo agent's question to the customer.
	eachDB(t, func(t *testing.T, s *testServer) {
		run := s.startSuspended(t, "support-agent", "ask the customer for their size")
		// Valid for the tool's resumeSchema but for its depth.
		var deep any
		if err := json.Unmarshal([]byte(`{"answer":"M","sizes":`+deepJSON(9000)+`}`), &deep); err != nil {
			t.Fatal(err)
		}
		e := s.wantError(t, "BAD_USER_INPUT", `mutation($id: ID!, $d: JSON!) { resumeRun(runId: $id, resumeData: $d) { status } }`, map[string]any{"id": run.RunID, "d": deep})
		if !strings.Contains(e.Message, "resumeData: nested deeper than 64 levels") {
			t.Fatalf("deep resumeData: %q", e.Message)
		}
		var out struct{ Run idRun }
		s.must(t, `query($id: ID!) { run(runId: $id) { `+idRunFields+` } }`, map[string]any{"id": run.RunID}, &out)
		if out.Run.Status != "SUSPENDED" || len(out.Run.Decisions) != 0 || len(out.Run.ToolCalls) != 1 {
			t.Fatalf("after deep resumeData the run is %s, decisions %+v", out.Run.Status, out.Run.Decisions)
		}
	})
}
