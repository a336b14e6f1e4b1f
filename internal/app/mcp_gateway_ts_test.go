package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// The MCP gateway as the official TypeScript SDK client sees it (client.mjs, through
// startTSMCPClient): the client most MCP hosts are built on, against a real server with the
// gateway (gatewayConfig) and a real upstream (apptest.NewMCPUpstream). The Go SDK's view is
// mcp_gateway_test.go's.

// tsGateway starts an upstream and a server over db whose gateway holds a gated call for wait.
func tsGateway(t *testing.T, db, wait string) (*apptest.MCPUpstream, *apptest.Server) {
	t.Helper()
	up := apptest.NewMCPUpstream(t)
	return up, apptest.AuthServer(t, db, gatewayConfig(up, wait, ""))
}

// tsSQLite is a fresh SQLite database for one test.
func tsSQLite(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "i.db") }

// agentbotToken is the requester whose token the MCP client uses (gatewayConfig).
var agentbotToken = apptest.TokenOf("agentbot")

// tsCallResult is the CallToolResult of a "result" line, as the server sent it; a line of any
// other op fails the test.
func tsCallResult(t *testing.T, line map[string]any) map[string]any {
	t.Helper()
	res, _ := line["result"].(map[string]any)
	if line["op"] != "result" || res == nil {
		t.Fatalf("client.mjs printed %v, want a call's result", line)
	}
	return res
}

// tsApproval is the io.interlock/approval _meta of a result (nil when it has none).
func tsApproval(res map[string]any) map[string]any {
	meta, _ := res["_meta"].(map[string]any)
	m, _ := meta["io.interlock/approval"].(map[string]any)
	return m
}

// tsText is the text of a result's text content.
func tsText(res map[string]any) string {
	var b strings.Builder
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, _ := c.(map[string]any); m["type"] == "text" {
			s, _ := m["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// runStatus is the status of run id, as an admin reads it.
func runStatus(t *testing.T, s *apptest.Server, id string) string {
	t.Helper()
	var data struct{ Run struct{ Status string } }
	s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { status } }`, map[string]any{"id": id}, &data)
	return data.Run.Status
}

// waitCompleted waits until run id is COMPLETED: the outcome of its call is stored.
func waitCompleted(t *testing.T, s *apptest.Server, id string) {
	t.Helper()
	apptest.Until(t, "run "+id+" COMPLETED", func() bool { return runStatus(t, s, id) == "COMPLETED" })
}

// mcpFront serves the app of a test server on an address of its own and counts the JSON-RPC
// messages posted to it by method. A test can hold the nth message of a method before the
// server sees it (Hold), and learn when the server has finished with it (Answered): a step of
// client.mjs, which runs its steps back to back, is made to wait for the test, and the test for
// the server, without guessing at times. A held message is one a slow network delays; nothing
// is changed on its way.
type mcpFront struct {
	URL  string
	next http.Handler

	mu       sync.Mutex
	seen     map[string]int
	holds    map[frontMsg]chan struct{}
	answered map[frontMsg]chan struct{}
}

// frontMsg is the nth message of a method (from 1).
type frontMsg struct {
	method string
	n      int
}

// newMCPFront serves s's app in front of the test's MCP client, for the test's life.
func newMCPFront(t *testing.T, s *apptest.Server) *mcpFront {
	t.Helper()
	f := &mcpFront{next: s.App.Handler(), seen: map[string]int{}, holds: map[frontMsg]chan struct{}{}, answered: map[frontMsg]chan struct{}{}}
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	f.URL = srv.URL
	return f
}

// Hold keeps the nth message of method from the server until release is called (or the test
// ends). Call it before the message is sent.
func (f *mcpFront) Hold(t *testing.T, method string, n int) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.holds[frontMsg{method, n}] = ch
	f.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release)
	return release
}

// Answered is closed once the server's handler of the nth message of method has returned: a
// request has had its answer (or its end), a notification has been taken.
func (f *mcpFront) Answered(method string, n int) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answeredLocked(frontMsg{method, n})
}

func (f *mcpFront) answeredLocked(m frontMsg) chan struct{} {
	ch, ok := f.answered[m]
	if !ok {
		ch = make(chan struct{})
		f.answered[m] = ch
	}
	return ch
}

func (f *mcpFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct{ Method string }
	_ = json.Unmarshal(body, &msg) // a response or a batch: not counted
	if msg.Method == "" {
		f.next.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.seen[msg.Method]++
	m := frontMsg{msg.Method, f.seen[msg.Method]}
	hold := f.holds[m]
	answered := f.answeredLocked(m)
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	defer close(answered)
	f.next.ServeHTTP(w, r)
}

// TestMCPGatewayTSUnauthorized: without a token, or with a wrong one, the TypeScript client
// cannot connect, seeing HTTP 401; the 401 carries the bearer challenge (RFC 6750), with
// error="invalid_token" for the wrong token only.
func TestMCPGatewayTSUnauthorized(t *testing.T) {
	t.Parallel()
	up, s := tsGateway(t, tsSQLite(t), "20s")

	lines := runTSMCPClient(t, s.URL+"/mcp", "not-"+agentbotToken, []map[string]any{{"op": "list"}})
	if len(lines) != 1 || lines[0]["op"] != "connect-error" || lines[0]["code"] != float64(401) {
		t.Fatalf("with a wrong token the client printed %v, want one connect-error with code 401", lines)
	}
	// client.mjs always sends a token: a relay that drops the header makes the request carry none.
	noAuth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Authorization")
		s.App.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(noAuth.Close)
	lines = runTSMCPClient(t, noAuth.URL+"/mcp", agentbotToken, []map[string]any{{"op": "list"}})
	if len(lines) != 1 || lines[0]["op"] != "connect-error" || lines[0]["code"] != float64(401) {
		t.Fatalf("without a token the client printed %v, want one connect-error with code 401", lines)
	}

	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, tc := range []struct{ name, token, challenge string }{
		{"no token", "", `Bearer realm="interlock"`},
		{"wrong token", "not-" + agentbotToken, `Bearer realm="interlock", error="invalid_token"`},
	} {
		req, err := http.NewRequest(http.MethodPost, s.URL+"/mcp", strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || got != tc.challenge {
			t.Errorf("%s: POST /mcp answered %d with WWW-Authenticate %q, want 401 with %q", tc.name, resp.StatusCode, got, tc.challenge)
		}
	}
	if n := len(up.Calls("")); n != 0 {
		t.Fatalf("the upstream was called %d times by clients that never authenticated", n)
	}
}

// TestMCPGatewayTSListsTools: tools/list answers exactly the tools of the servers the gateway
// names (orders, not files), under <server>__<tool>, sorted, each as its upstream lists it
// (title, annotations such as refund's destructiveHint, input and output schemas) but for the
// name — read by the same client from the upstream itself.
func TestMCPGatewayTSListsTools(t *testing.T) {
	t.Parallel()
	up, s := tsGateway(t, tsSQLite(t), "20s")

	lines := runTSMCPClient(t, s.URL+"/mcp", agentbotToken, []map[string]any{{"op": "list"}})
	if got := ops(lines); !reflect.DeepEqual(got, []any{"session", "list"}) {
		t.Fatalf("the client printed %v, want a session and a list: %s", got, jsonLines(lines))
	}
	if lines[0]["id"] == nil || lines[0]["id"] == "" {
		t.Errorf("the gateway gave the client no session: %v", lines[0])
	}
	listed, _ := lines[1]["tools"].([]any)
	var names []string
	gateway := map[string]map[string]any{}
	for _, tl := range listed {
		m, _ := tl.(map[string]any)
		name, _ := m["name"].(string)
		names = append(names, name)
		gateway[name] = m
	}
	if !reflect.DeepEqual(names, []string{"orders__lookup", "orders__refund"}) {
		t.Fatalf("tools = %v, want orders__lookup, orders__refund, in that order (files is not re-exposed)", names)
	}
	refund := gateway["orders__refund"]
	annotations, _ := refund["annotations"].(map[string]any)
	schema, _ := refund["inputSchema"].(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	if annotations["destructiveHint"] != true || refund["title"] != "Refund an order" || schema["type"] != "object" || props["order"] == nil || props["amount"] == nil {
		t.Fatalf("orders__refund is listed as %v, want the upstream's title, destructiveHint and input schema (order, amount)", refund)
	}

	// The upstream's own listing, read by the same client: equal but for the name.
	lines = runTSMCPClient(t, up.URL, "unused", []map[string]any{{"op": "list"}})
	if got := ops(lines); !reflect.DeepEqual(got, []any{"session", "list"}) {
		t.Fatalf("the client printed %v for the upstream: %s", got, jsonLines(lines))
	}
	upstream, _ := lines[1]["tools"].([]any)
	if len(upstream) != 2 {
		t.Fatalf("the upstream lists %v, want refund and lookup", upstream)
	}
	for _, tl := range upstream {
		m, _ := tl.(map[string]any)
		name := fmt.Sprint("orders__", m["name"])
		m["name"] = name
		if !reflect.DeepEqual(gateway[name], m) {
			t.Errorf("the gateway lists %v, the upstream (renamed) %v", gateway[name], m)
		}
	}
}

// TestMCPGatewayTSUngatedCall: a call of a tool the policy does not gate runs at once and
// answers the upstream's result, with the gateway's _meta saying it was approved (by policy).
func TestMCPGatewayTSUngatedCall(t *testing.T) {
	t.Parallel()
	up, s := tsGateway(t, tsSQLite(t), "20s")

	lines := runTSMCPClient(t, s.URL+"/mcp", agentbotToken, []map[string]any{
		{"op": "call", "name": "orders__lookup", "args": map[string]any{"order": 7}},
	})
	if got := ops(lines); !reflect.DeepEqual(got, []any{"session", "result"}) {
		t.Fatalf("the client printed %v, want a session and a result: %s", got, jsonLines(lines))
	}
	res := tsCallResult(t, lines[1])
	a := tsApproval(res)
	if res["isError"] == true || tsText(res) != "order 7: shipped" || a["status"] != "APPROVED" || a["runId"] == nil {
		t.Fatalf("the ungated call answered %v, want the upstream's text and status APPROVED with a runId", res)
	}
	if st := runStatus(t, s, a["runId"].(string)); st != "COMPLETED" {
		t.Errorf("the ungated call's run is %s, want COMPLETED", st)
	}
	if calls := up.Calls("lookup"); len(calls) != 1 || calls[0].Args["order"] != float64(7) {
		t.Fatalf("the upstream's lookup calls = %+v, want one for order 7", calls)
	}
}

// TestMCPGatewayTSHeldCallWithProgress: a gated call whose client asked for progress is held
// until a person decides, with progress notifications meanwhile (a heartbeat that keeps the
// client's timeout from firing); approved, it answers the upstream's structured result, and
// the upstream ran once.
func TestMCPGatewayTSHeldCallWithProgress(t *testing.T) {
	t.Parallel()
	up, s := tsGateway(t, tsSQLite(t), "20s")

	run := startTSMCPClient(t, s.URL+"/mcp", agentbotToken, []map[string]any{
		{"op": "call", "name": "orders__refund", "args": map[string]any{"order": 42, "amount": 30}, "progress": true},
	})
	// Two notifications while nobody has decided yet: the call is held, and says so.
	for i := 1; i <= 2; i++ {
		p := run.Next(t, "progress")
		if msg, _ := p["message"].(string); !strings.Contains(msg, "waiting for a person's approval") {
			t.Fatalf("progress line %d while held is %v, want it to say the call waits for approval", i, p)
		}
	}
	id := waitingRun(t, s)
	if n := len(up.Calls("refund")); n != 0 {
		t.Fatalf("the upstream ran refund %d times before anyone approved it", n)
	}
	decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
	lines := run.Wait(t)

	var progress []float64
	for _, l := range lines[1 : len(lines)-1] {
		if l["op"] != "progress" {
			t.Fatalf("the client printed %v between its session and the result, want progress only: %s", l["op"], jsonLines(lines))
		}
		progress = append(progress, l["progress"].(float64))
	}
	increasing := len(progress) >= 2
	for i := 1; i < len(progress); i++ {
		increasing = increasing && progress[i] > progress[i-1]
	}
	if !increasing {
		t.Errorf("progress values %v, want at least 2, each greater than the one before", progress)
	}
	res := tsCallResult(t, lines[len(lines)-1])
	a := tsApproval(res)
	sc, _ := json.Marshal(res["structuredContent"])
	if res["isError"] == true || string(sc) != `{"order":42,"refunded":30}` || a["status"] != "APPROVED" || a["runId"] != id || a["decidedBy"] != "alice" {
		t.Fatalf("the approved call answered %v, want the upstream's structured result, APPROVED by alice in run %s", res, id)
	}
	if calls := up.Calls("refund"); len(calls) != 1 || calls[0].Args["order"] != float64(42) || calls[0].Args["amount"] != float64(30) {
		t.Fatalf("the upstream's refund calls = %+v, want one, with the call's arguments", calls)
	}
}

// TestMCPGatewayTSPendingThenRetry: with a short wait, a gated call is answered as pending (not
// an error: a runId, and the console link a person decides it at); an identical call while it
// waits joins the same request, a call with other arguments is another; the first identical
// call after the approval gets the result, and the next identical call is a new request. The
// upstream runs once. On both dialects: the key's join and release are storage's.
func TestMCPGatewayTSPendingThenRetry(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testTSPendingThenRetry(t, tsSQLite(t))
	})
	t.Run("mysql", func(t *testing.T) {
		t.Parallel()
		testTSPendingThenRetry(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)))
	})
}

func testTSPendingThenRetry(t *testing.T, db string) {
	up, s := tsGateway(t, db, "1s")
	front := newMCPFront(t, s)
	// The fourth call waits at the front until the approved call has run.
	release := front.Hold(t, "tools/call", 4)
	a := map[string]any{"order": 42, "amount": 30}
	call := func(id string, args map[string]any) map[string]any {
		return map[string]any{"op": "call", "id": id, "name": "orders__refund", "args": args}
	}
	run := startTSMCPClient(t, front.URL+"/mcp", agentbotToken, []map[string]any{
		call("first", a),
		call("other", map[string]any{"order": 42, "amount": 31}),
		call("joins", a),
		call("after approval", a),
		call("after delivery", a),
	})

	pending := func(line map[string]any) string {
		t.Helper()
		res := tsCallResult(t, line)
		m := tsApproval(res)
		id, _ := m["runId"].(string)
		if res["isError"] == true || m["status"] != "PENDING" || id == "" {
			t.Fatalf("call %q answered %v, want a pending result (not an error) with a runId", line["id"], res)
		}
		link := front.URL + "/?" + url.Values{"run": {id}}.Encode()
		if text := tsText(res); !strings.Contains(text, link) || !strings.Contains(text, "same arguments") {
			t.Fatalf("call %q's pending text is %q, want the console link %s and to call again with the same arguments", line["id"], text, link)
		}
		return id
	}
	first := pending(run.Next(t, "result"))
	other := pending(run.Next(t, "result"))
	if other == first {
		t.Fatalf("a call with other arguments joined request %s, want a request of its own", first)
	}
	if joined := pending(run.Next(t, "result")); joined != first {
		t.Fatalf("an identical call while the request waits made request %s, want it to join %s", joined, first)
	}
	if n := len(up.Calls("refund")); n != 0 {
		t.Fatalf("the upstream ran refund %d times before anyone approved it", n)
	}

	decide(t, s, "alice", first, `approveToolCall(runId: $id) { id }`)
	waitCompleted(t, s, first)
	release()
	res := tsCallResult(t, run.Next(t, "result"))
	m := tsApproval(res)
	sc, _ := json.Marshal(res["structuredContent"])
	if res["isError"] == true || m["status"] != "APPROVED" || m["runId"] != first || string(sc) != `{"order":42,"refunded":30}` {
		t.Fatalf("the identical call after the approval answered %v, want the result of request %s, APPROVED", res, first)
	}
	if again := pending(run.Next(t, "result")); again == first || again == other {
		t.Fatalf("the identical call after the result was delivered answered request %s, want a new request", again)
	}
	run.Wait(t)
	if calls := up.Calls("refund"); len(calls) != 1 || calls[0].Args["amount"] != float64(30) {
		t.Fatalf("the upstream's refund calls = %+v, want the approved one only", calls)
	}
}

// TestMCPGatewayTSAbortedCall: a held call the client aborts (notifications/cancelled) leaves
// its request waiting in the inbox; approved while no call waits for it, the upstream runs
// once, and the next identical call gets that result, from the same request.
func TestMCPGatewayTSAbortedCall(t *testing.T) {
	t.Parallel()
	up, s := tsGateway(t, tsSQLite(t), "20s")
	front := newMCPFront(t, s)
	// The cancellation reaches the server only once the test saw the request stored (it could
	// otherwise come before the request is), and the retry only once the approved call ran.
	releaseCancel := front.Hold(t, "notifications/cancelled", 1)
	releaseRetry := front.Hold(t, "tools/call", 2)
	a := map[string]any{"order": 42, "amount": 30}
	run := startTSMCPClient(t, front.URL+"/mcp", agentbotToken, []map[string]any{
		{"op": "call", "id": "aborted", "name": "orders__refund", "args": a, "abortAfterMs": 500},
		{"op": "call", "id": "retry", "name": "orders__refund", "args": a},
	})
	aborted := run.Next(t, "error")
	if aborted["id"] != "aborted" || aborted["code"] != float64(-32001) || !strings.Contains(fmt.Sprint(aborted["message"]), "aborted by the client") {
		t.Fatalf("the aborted call printed %v, want an error saying the client aborted it", aborted)
	}
	id := waitingRun(t, s)
	releaseCancel()
	apptest.Until(t, "the server done with the aborted call", func() bool {
		select {
		case <-front.Answered("tools/call", 1):
			return true
		default:
			return false
		}
	})
	if again := waitingRun(t, s); again != id {
		t.Fatalf("after the abort the waiting request is %s, want %s still", again, id)
	}

	decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
	apptest.Until(t, "the upstream's refund called once", func() bool { return len(up.Calls("refund")) == 1 })
	waitCompleted(t, s, id)
	releaseRetry()
	lines := run.Wait(t)
	res := tsCallResult(t, lines[len(lines)-1])
	m := tsApproval(res)
	sc, _ := json.Marshal(res["structuredContent"])
	if res["isError"] == true || m["status"] != "APPROVED" || m["runId"] != id || string(sc) != `{"order":42,"refunded":30}` {
		t.Fatalf("the identical call after the aborted one was approved answered %v, want its result, APPROVED in run %s", res, id)
	}
	if n := len(up.Calls("refund")); n != 1 {
		t.Fatalf("the upstream ran refund %d times, want once", n)
	}
}

// TestMCPGatewayTSDeclined: a declined call is an error result saying a person declined it,
// with their reason; the tool never runs.
func TestMCPGatewayTSDeclined(t *testing.T) {
	t.Parallel()
	up, s := tsGateway(t, tsSQLite(t), "20s")

	run := startTSMCPClient(t, s.URL+"/mcp", agentbotToken, []map[string]any{
		{"op": "call", "name": "orders__refund", "args": map[string]any{"order": 43, "amount": 5}},
	})
	id := waitingRun(t, s)
	decide(t, s, "bob", id, `declineToolCall(runId: $id, reason: "order 43 was never paid") { id }`)
	lines := run.Wait(t)
	res := tsCallResult(t, lines[len(lines)-1])
	m := tsApproval(res)
	text := tsText(res)
	if res["isError"] != true || !strings.Contains(text, "declined") || !strings.Contains(text, "order 43 was never paid") ||
		m["status"] != "DECLINED" || m["runId"] != id || m["decidedBy"] != "bob" {
		t.Fatalf("the declined call answered %v, want an error saying bob declined it, with the reason", res)
	}
	if n := len(up.Calls("refund")); n != 0 {
		t.Fatalf("the upstream ran refund %d times after a decline, want never", n)
	}
}

// TestMCPGatewayTSCallWhoseUpstreamAsksMidCall: the TypeScript SDK client's call is approved,
// then its upstream asks a question in the middle of the call; a person answers it (resumeRun)
// and the held call gets the upstream's result for that answer, the upstream running once.
func TestMCPGatewayTSCallWhoseUpstreamAsksMidCall(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstreamAsking(t)
	cfg := strings.Replace(gatewayConfig(up, "30s", ""), "requireApproval: [refund]", "requireApproval: [refund, refund_ask]", 1)
	s := apptest.AuthServer(t, tsSQLite(t), cfg)
	run := startTSMCPClient(t, s.URL+"/mcp", agentbotToken, []map[string]any{
		{"op": "call", "name": "orders__refund_ask", "args": map[string]any{"order": 12}, "progress": true},
	})
	id := waitingRun(t, s)
	decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
	apptest.Until(t, "the upstream's question waiting for a person", func() bool {
		var out struct {
			Run struct {
				Status    string
				ToolCalls []struct{ AskedMidCall bool }
			}
		}
		s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { status toolCalls { askedMidCall } } }`, map[string]any{"id": id}, &out)
		return out.Run.Status == "SUSPENDED" && len(out.Run.ToolCalls) == 1 && out.Run.ToolCalls[0].AskedMidCall
	})
	resume := `mutation($id: ID!, $d: JSON!) { resumeRun(runId: $id, resumeData: $d) { id } }`
	if r := s.PostAs(t, apptest.TokenOf("alice"), resume, map[string]any{"id": id, "d": map[string]any{"reason": "arrived broken"}}); r.Code != "" {
		t.Fatalf("resumeRun: %s %s", r.Code, r.Msg)
	}
	lines := run.Wait(t)
	res := tsCallResult(t, lines[len(lines)-1])
	if res["isError"] == true || tsText(res) != "refunded because arrived broken" || tsApproval(res)["runId"] != id {
		t.Fatalf("the held call answered %v, want the upstream's result for the answer, in run %s", res, id)
	}
	if calls := up.Calls("refund_ask"); len(calls) != 1 || calls[0].Args["why"] != "arrived broken" {
		t.Fatalf("the upstream's refund_ask calls = %+v, want one, answered", calls)
	}
}
