package app_test

// A hostile review of approvals for external agents (issue 27): the seams where requests, hooks
// and decisions meet idempotency, authorization, decisions on ids, and input.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// TestReviewHookDecisionIsNotReplayedForALaterCall: Claude Code sends no turn or call id with
// PermissionRequest, so two calls of the same command in one session have identical bodies. A
// person who approved the first approved that call, once: the second must be asked again (a new
// request in the inbox), never answered "allow" from the first decision. Likewise a decline is
// not replayed onto a later call the person might allow.
func TestReviewHookDecisionIsNotReplayedForALaterCall(t *testing.T) {
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		for _, kind := range []string{"claude-code", "codex"} {
			body := apptest.HookFixture(t, kind+"/permission-request.json")
			path := "/hooks/" + kind + "/hooks?wait=30s"
			first := s.PostHookAsync(t, path, "Bearer "+apptest.TokenOf("bot"), body)
			id := pendingRunID(t, s)
			waitFollowed(t, s, id)
			s.MustAs(t, apptest.TokenOf("alice"), approveMutation, map[string]any{"id": id}, nil)
			if a := apptest.Answered(t, first); a.Status != 200 || !strings.Contains(string(a.Body), `"allow"`) {
				t.Fatalf("%s: the first call: %d %s", kind, a.Status, a.Body)
			}
			// The same command again, later in the same session (and turn): a new call, held
			// until someone decides it.
			again := s.PostHookAsync(t, path, "Bearer "+apptest.TokenOf("bot"), body)
			second := pendingRunID(t, s)
			if second == id {
				t.Fatalf("%s: the later call joined the decided request %s", kind, id)
			}
			waitFollowed(t, s, second)
			s.MustAs(t, apptest.TokenOf("alice"), declineMutation, map[string]any{"id": second, "reason": "not now"}, nil)
			if a := apptest.Answered(t, again); a.Status != 200 || !strings.Contains(string(a.Body), "not now") {
				t.Fatalf("%s: the later call: %d %s, want the decline of its own request", kind, a.Status, a.Body)
			}
			// Declined, then asked again: asked again (not denied from the old decision).
			third := s.PostHookAsync(t, path, "Bearer "+apptest.TokenOf("bot"), body)
			thirdID := pendingRunID(t, s)
			if thirdID == second {
				t.Fatalf("%s: the third call joined the declined request %s", kind, second)
			}
			waitFollowed(t, s, thirdID)
			s.MustAs(t, apptest.TokenOf("alice"), approveMutation, map[string]any{"id": thirdID}, nil)
			if a := apptest.Answered(t, third); a.Status != 200 || !strings.Contains(string(a.Body), `"allow"`) {
				t.Fatalf("%s: the third call: %d %s, want the approval of its own request", kind, a.Status, a.Body)
			}
		}
	})
}

// postHookAs POSTs a hook body as subject and returns the answer.
func postHookAs(t testing.TB, s *apptest.Server, path, subject string, body []byte) apptest.HookAnswer {
	t.Helper()
	return apptest.Answered(t, s.PostHookAsync(t, path, "Bearer "+apptest.TokenOf(subject), body))
}

// TestReviewIdempotencyKeyIsPerPrincipal: an idempotencyKey names a request of one principal.
// Another principal sending the same key (with the same body or another) gets a run of its own:
// never the first principal's run, and no error that would tell the key was used. The same
// principal reusing the key for another request is refused, nothing stored. The hooks' derived
// keys are per principal too: two users' sessions with identical bodies are two requests.
func TestReviewIdempotencyKeyIsPerPrincipal(t *testing.T) {
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		req := deployRequest(map[string]any{"idempotencyKey": "shared-key"})
		mine := ask(t, s, "bot", "0", req)
		theirs := ask(t, s, "other-bot", "0", req)
		if theirs.RunID == mine.RunID {
			t.Fatalf("another principal's key returned bot's run %s", mine.RunID)
		}
		jwtBot := signJWT(t, map[string]any{"sub": "jay", "roles": "requester"})
		body, _ := json.Marshal(req)
		if a := approvalRequest(t, s, context.Background(), "Bearer "+jwtBot, "POST", "/approvals", string(body)); a.status != 200 || a.body.RunID == mine.RunID || a.body.RunID == theirs.RunID {
			t.Fatalf("a JWT principal with the same key: %d %s", a.status, a.raw)
		}
		other := deployRequest(map[string]any{"idempotencyKey": "shared-key", "context": "something else"})
		otherBody, _ := json.Marshal(other)
		// Another principal, same key, another body: a run of its own, no CONFLICT.
		const mutation = `mutation($input: ApprovalRequestInput!) { requestApproval(input: $input) { runId startedBy } }`
		var out struct {
			RequestApproval struct{ RunID, StartedBy string }
		}
		s.MustAs(t, apptest.TokenOf("otto"), mutation, map[string]any{"input": other}, &out)
		if out.RequestApproval.RunID == mine.RunID || out.RequestApproval.StartedBy != "otto" {
			t.Fatalf("otto with bot's key: %+v", out.RequestApproval)
		}
		// The same principal, the same key, another body: refused, nothing stored.
		before := countRuns(t, s)
		if a := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals", string(otherBody)); a.status != 400 || a.code != "BAD_USER_INPUT" || strings.Contains(a.message, mine.RunID) {
			t.Fatalf("bot reusing its key for another request: %d %s", a.status, a.raw)
		}
		if r := s.PostAs(t, apptest.TokenOf("bot"), mutation, map[string]any{"input": other}); r.Code != "BAD_USER_INPUT" {
			t.Fatalf("bot reusing its key over GraphQL: %s %s", r.Code, r.Msg)
		}
		if n := countRuns(t, s); n != before {
			t.Fatalf("a refused reuse stored %d runs", n-before)
		}
		// The hooks: the same session body from two principals is two requests.
		hook := apptest.HookFixture(t, "codex/permission-request.json")
		a := s.PostHookAsync(t, "/hooks/codex/hooks?wait=0", "Bearer "+apptest.TokenOf("bot"), hook)
		b := s.PostHookAsync(t, "/hooks/codex/hooks?wait=0", "Bearer "+apptest.TokenOf("other-bot"), hook)
		apptest.Answered(t, a)
		apptest.Answered(t, b)
		var list struct {
			RecentRuns struct{ Runs []struct{ StartedBy string } }
		}
		s.MustAs(t, apptest.TokenOf("vera"), `{ recentRuns(agentId: "hooks", statuses: [SUSPENDED, COMPLETED]) { runs { startedBy } } }`, nil, &list)
		by := map[string]int{}
		for _, r := range list.RecentRuns.Runs { // each ended at once (wait=0)
			by[r.StartedBy]++
		}
		if by["bot"] != 1 || by["other-bot"] != 1 {
			t.Fatalf("the same hook body from two principals: %v, want one request each", by)
		}
	})
}

// TestReviewConcurrentKeyAcrossInstances: many requests with one key, sent at once to two
// instances over one MariaDB database, make one run; every answer names it.
func TestReviewConcurrentKeyAcrossInstances(t *testing.T) {
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	a, b := approvalsServer(t, db), approvalsServer(t, db)
	body, _ := json.Marshal(deployRequest(map[string]any{"idempotencyKey": "at-once"}))
	const n = 16
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals", string(body))
			if got.status != 200 {
				t.Errorf("request %d: %d %s", i, got.status, got.raw)
			}
			ids[i] = got.body.RunID
		}()
	}
	wg.Wait()
	for i := range ids {
		if ids[i] != ids[0] {
			t.Fatalf("answers name runs %v, want one", ids)
		}
	}
	if c := countRuns(t, a); c != 1 {
		t.Fatalf("%d runs stored, want 1", c)
	}
	// The hooks' derived key, once its request ended (a hook answered at once ends it): the same
	// body sent at once to both instances makes one new request, which every hook joins while it
	// waits, and every hook gets its decision.
	hook := apptest.HookFixture(t, "claude-code/permission-request.json")
	postHookAs(t, a, "/hooks/claude-code/hooks?wait=0", "bot", hook)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			if got := postHookAs(t, s, "/hooks/claude-code/hooks?wait=30s", "bot", hook); got.Status != 200 || !strings.Contains(string(got.Body), "not now") {
				t.Errorf("hook %d: %d %s", i, got.Status, got.Body)
			}
		}()
	}
	second := pendingRunID(t, a)
	apptest.Until(t, "every hook waits on the new request", func() bool {
		return a.App.Service.Followers(second)+b.App.Service.Followers(second) == n
	})
	b.MustAs(t, apptest.TokenOf("alice"), declineMutation, map[string]any{"id": second, "reason": "not now"}, nil)
	wg.Wait()
	if c := countRuns(t, a); c != 3 {
		t.Fatalf("%d runs stored, want 3 (the deploy, the ended hook request, and one new one)", c)
	}
}

// TestReviewRequesterSeesOnlyItsOwnAndDecidesNothing: a requester reads its own requests and
// nothing else — another requester's request, an internal run and an unknown id are alike
// NOT_FOUND over GET /approvals/{id} and GraphQL run — lists nothing, follows its own requests
// only (runEvents, as docs/external-approvals.md promises: another's request, an internal run and an unknown id
// are alike NOT_FOUND, over SSE and both WebSocket subprotocols), and decides nothing (approve,
// edit, decline, resume) on its own request or another's.
func TestReviewRequesterSeesOnlyItsOwnAndDecidesNothing(t *testing.T) {
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) { requesterSeesOnlyItsOwn(t, s) })
}

func requesterSeesOnlyItsOwn(t *testing.T, s *apptest.Server) {
	mine := ask(t, s, "bot", "0", deployRequest(nil))
	theirs := ask(t, s, "other-bot", "0", deployRequest(nil))
	var started struct{ StartRun struct{ RunID string } }
	s.MustAs(t, apptest.TokenOf("otto"), `mutation { startRun(input: {agentId: "helper", prompt: "hello"}) { runId } }`, nil, &started)
	unknown := "00000000-0000-7000-8000-000000000000"
	bot := apptest.TokenOf("bot")

	var msgs []string
	for _, id := range []string{theirs.RunID, started.StartRun.RunID, unknown} {
		if got := poll(t, s, "bot", id, "0"); got.status != 404 || got.code != "NOT_FOUND" {
			t.Errorf("GET /approvals/%s as bot: %d %s", id, got.status, got.raw)
		}
		// run(runId) answers null for a run that does not exist for the caller.
		r := s.PostAs(t, bot, `query($id: ID!) { run(runId: $id) { runId } }`, map[string]any{"id": id})
		if r.Code != "" || string(r.Data) != `{"run":null}` {
			t.Errorf("run(%s) as bot: %s %s %s", id, r.Code, r.Msg, r.Data)
		}
		msgs = append(msgs, string(r.Data))
	}
	if msgs[0] != msgs[2] {
		t.Errorf("another's run and an unknown one answer differently: %q vs %q", msgs[0], msgs[2])
	}
	if r := s.PostAs(t, bot, `query($id: ID!) { run(runId: $id) { runId startedBy } }`, map[string]any{"id": mine.RunID}); r.Code != "" {
		t.Errorf("run(own) as bot: %s %s", r.Code, r.Msg)
	}
	for _, q := range []string{`{ suspendedRuns { total } }`, `{ recentRuns { total } }`, `{ threads { total } }`} {
		if r := s.PostAs(t, bot, q, nil); r.Code != "FORBIDDEN" {
			t.Errorf("%s as bot: %s %s %s", q, r.Code, r.Msg, r.Data)
		}
	}
	// Following: its own request, with the run on RUN_* events; any other run is NOT_FOUND, in
	// the words of an unknown one, on every transport.
	const follow = `subscription($id: ID!) { runEvents(runId: $id) { type run { runId startedBy } } }`
	for _, id := range []string{mine.RunID, theirs.RunID, started.StartRun.RunID, unknown} {
		vars := map[string]any{"id": id}
		sse := s.SSEAs(t, bot, follow, vars)
		ws1 := s.WsAs(t, "graphql-transport-ws", bot, follow, vars)
		ws2 := s.WsAs(t, "graphql-ws", bot, follow, vars)
		for name, r := range map[string]apptest.Result{"SSE": sse, "graphql-transport-ws": ws1, "graphql-ws": ws2} {
			if id == mine.RunID {
				if want := `{"runEvents":{"type":"RUN_STARTED","run":{"runId":"` + id + `","startedBy":"bot"}}}`; r.Code != "" || string(r.Data) != want {
					t.Errorf("runEvents(own request) as bot over %s: %q %s %s, want %s", name, r.Code, r.Msg, r.Data, want)
				}
				continue
			}
			if r.Code != "NOT_FOUND" || r.Msg != `no run with id "`+id+`"` {
				t.Errorf("runEvents(%s) as bot over %s: %q %s %s", id, name, r.Code, r.Msg, r.Data)
			}
		}
	}
	ws := apptest.DialAs(t, s.URL, "graphql-transport-ws", bot)
	_, _, errs := ws.Next(ws.Subscribe(`subscription { suspendedRunsChanged { kind } }`, nil))
	if code, _ := apptest.FirstError(errs); code != "FORBIDDEN" {
		t.Errorf("suspendedRunsChanged as bot: %s", errs)
	}
	// Deciding: refused, nothing decided.
	for _, id := range []string{mine.RunID, theirs.RunID} {
		for name, m := range map[string]string{
			"approve": approveMutation, "decline": declineMutation,
			"edit":   `mutation($id: ID!) { approveToolCall(runId: $id, args: {service: "api", version: "9"}) { status } }`,
			"resume": `mutation($id: ID!) { resumeRun(runId: $id, resumeData: {}) { status } }`,
		} {
			if r := s.PostAs(t, bot, m, map[string]any{"id": id}); r.Code != "FORBIDDEN" {
				t.Errorf("%s of %s as bot: %s %s", name, id, r.Code, r.Msg)
			}
		}
	}
	for _, id := range []string{mine.RunID, theirs.RunID} {
		if got := poll(t, s, "vera", id, "0"); got.body.Status != "PENDING" {
			t.Errorf("%s after the refused decisions: %+v", id, got.body)
		}
	}
	// A mutation over GET is refused, and stores nothing.
	before := countRuns(t, s)
	q := `mutation { requestApproval(input: {agentId: "hooks", toolName: "Bash", args: {}}) { runId } }`
	req, _ := http.NewRequest("GET", s.URL+"/graphql?query="+urlQuery(q), nil)
	req.Header.Set("Authorization", "Bearer "+bot)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 && countRuns(t, s) != before {
		t.Fatalf("requestApproval over GET stored a run")
	}
	if countRuns(t, s) != before {
		t.Fatalf("requestApproval over GET (%d) stored a run", resp.StatusCode)
	}
	if resp.StatusCode < 400 {
		t.Errorf("requestApproval over GET: %d, want a refusal", resp.StatusCode)
	}
}

func urlQuery(s string) string { return url.QueryEscape(s) }

// TestReviewDecisionsOnRequests: a decision naming a call the request does not have decides
// nothing; edited arguments that break the tool's schema, or that are not an object on a tool
// of "*", are BAD_USER_INPUT with nothing decided; resumeRun on a request is refused with
// nothing changed; startRun of an external agent is BAD_USER_INPUT; a second decision is
// CONFLICT naming who decided, and the answer of the request stays the first decision.
func TestReviewDecisionsOnRequests(t *testing.T) {
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		sue, alice := apptest.TokenOf("sue"), apptest.TokenOf("alice")
		deploy := ask(t, s, "bot", "0", deployRequest(nil))
		bash := ask(t, s, "bot", "0", map[string]any{"agentId": "hooks", "toolName": "Bash", "args": map[string]any{"command": "ls"}})
		var read struct {
			Run struct{ ToolCalls []struct{ ToolCallID string } }
		}
		s.MustAs(t, apptest.TokenOf("vera"), `query($id: ID!) { run(runId: $id) { toolCalls { toolCallId } } }`, map[string]any{"id": deploy.RunID}, &read)
		callID := read.Run.ToolCalls[0].ToolCallID
		pending := func(what, id string) {
			t.Helper()
			if got := poll(t, s, "vera", id, "0"); got.body.Status != "PENDING" {
				t.Fatalf("%s: the request is %+v, want PENDING", what, got.body)
			}
		}
		const approveCall = `mutation($id: ID!, $call: ID, $args: JSON) { approveToolCall(runId: $id, toolCallId: $call, args: $args) { status } }`
		for _, wrong := range []string{"tc_2", callID + "x", "tc_0"} {
			if r := s.PostAs(t, sue, approveCall, map[string]any{"id": deploy.RunID, "call": wrong}); r.Code == "" || r.Code == "INTERNAL" {
				t.Fatalf("approving call %q: %q %s", wrong, r.Code, r.Msg)
			}
			pending("a wrong toolCallId", deploy.RunID)
		}
		for name, args := range map[string]any{"missing version": map[string]any{"service": "api"}, "extra property": map[string]any{"service": "api", "version": "1", "x": 1},
			"a string": "api", "an array": []any{1}} {
			if r := s.PostAs(t, sue, approveCall, map[string]any{"id": deploy.RunID, "args": args}); r.Code != "BAD_USER_INPUT" {
				t.Fatalf("edit with %s: %q %s", name, r.Code, r.Msg)
			}
			pending("edit with "+name, deploy.RunID)
		}
		for name, args := range map[string]any{"a string": "ls", "an array": []any{"ls"}, "a number": 1, "deep": json.RawMessage(apptest.DeepJSON(200))} {
			if r := s.PostAs(t, alice, approveCall, map[string]any{"id": bash.RunID, "args": args}); r.Code != "BAD_USER_INPUT" {
				t.Fatalf("edit of a * tool with %s: %q %s", name, r.Code, r.Msg)
			}
			pending("edit of a * tool with "+name, bash.RunID)
		}
		if r := s.PostAs(t, alice, `mutation($id: ID!) { resumeRun(runId: $id, resumeData: {ok: true}) { status } }`, map[string]any{"id": bash.RunID}); r.Code != "BAD_USER_INPUT" {
			t.Fatalf("resumeRun on a request: %q %s", r.Code, r.Msg)
		}
		pending("resumeRun", bash.RunID)
		if r := s.PostAs(t, apptest.TokenOf("otto"), `mutation { startRun(input: {agentId: "deploy-bot", prompt: "deploy"}) { runId } }`, nil); r.Code != "BAD_USER_INPUT" {
			t.Fatalf("startRun of an external agent: %q %s", r.Code, r.Msg)
		}
		// The right call, then a second decision by someone else.
		s.MustAs(t, sue, approveCall, map[string]any{"id": deploy.RunID, "call": callID}, nil)
		r := s.PostAs(t, apptest.TokenOf("sam"), `mutation($id: ID!, $call: ID) { declineToolCall(runId: $id, toolCallId: $call, reason: "no") { status } }`, map[string]any{"id": deploy.RunID, "call": callID})
		if r.Code != "CONFLICT" || !strings.Contains(r.Msg, "sue") {
			t.Fatalf("a second decision: %q %s, want CONFLICT naming sue", r.Code, r.Msg)
		}
		if r := s.PostAs(t, apptest.TokenOf("sam"), declineMutation, map[string]any{"id": deploy.RunID}); r.Code != "CONFLICT" {
			t.Fatalf("a second decision without toolCallId: %q %s", r.Code, r.Msg)
		}
		if got := poll(t, s, "bot", deploy.RunID, "0"); got.body.Status != "APPROVED" || *got.body.DecidedBy != "sue" || string(got.body.Args) != `{"service":"api","version":"1.2.3"}` {
			t.Fatalf("after the second decision: %+v", got.body)
		}
	})
}

// TestReviewBadInputIsRefusedCleanly: whatever a POST /approvals or a hook sends, a refusal is a
// 4xx with {"error": {code, message}} — never a 500, never SQL — and stores nothing.
func TestReviewBadInputIsRefusedCleanly(t *testing.T) {
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		long := func(n int, r string) string { return strings.Repeat(r, n) }
		for name, body := range map[string]string{
			"args nested too deep":     `{"agentId":"hooks","toolName":"Bash","args":` + apptest.DeepJSON(500) + `}`,
			"args an array":            `{"agentId":"hooks","toolName":"Bash","args":[1]}`,
			"args a number":            `{"agentId":"hooks","toolName":"Bash","args":1}`,
			"args true":                `{"agentId":"hooks","toolName":"Bash","args":true}`,
			"args with a key twice":    `{"agentId":"hooks","toolName":"Bash","args":{"a":1,"a":2}}`,
			"args invalid UTF-8":       "{\"agentId\":\"hooks\",\"toolName\":\"Bash\",\"args\":{\"c\":\"\xff\xfe\"}}",
			"context too long":         `{"agentId":"hooks","toolName":"Bash","args":{},"context":"` + long(32*1024+1, "é") + `"}`,
			"toolName too long":        `{"agentId":"hooks","toolName":"` + long(192, "𝄞") + `","args":{}}`,
			"threadId too long":        `{"agentId":"hooks","toolName":"Bash","args":{},"threadId":"` + long(192, "t") + `"}`,
			"resourceId too long":      `{"agentId":"hooks","toolName":"Bash","args":{},"resourceId":"` + long(192, "r") + `"}`,
			"idempotencyKey too long":  `{"agentId":"hooks","toolName":"Bash","args":{},"idempotencyKey":"` + long(256, "k") + `"}`,
			"agentId too long":         `{"agentId":"` + long(5000, "a") + `","toolName":"Bash","args":{}}`,
			"a second JSON value":      `{"agentId":"hooks","toolName":"Bash","args":{}} {}`,
			"an array body":            `[{"agentId":"hooks","toolName":"Bash","args":{}}]`,
			"null":                     `null`,
			"args null":                `{"agentId":"hooks","toolName":"Bash","args":null}`,
			"toolName with NUL":        `{"agentId":"deploy-bot","toolName":"deploy\u0000","args":{}}`,
			"agentId of a number":      `{"agentId":1,"toolName":"Bash","args":{}}`,
			"a field in another case":  `{"agentId":"hooks","toolName":"Bash","args":{},"Context":"x"}`,
			"a field twice":            `{"agentId":"hooks","toolName":"Bash","args":{},"context":"x","context":"y"}`,
			"a field twice, case":      `{"agentId":"hooks","toolName":"Bash","args":{},"Context":"x","context":"y"}`,
			"toolName twice":           `{"agentId":"deploy-bot","toolName":"status","args":{},"toolName":"deploy"}`,
			"a huge number in args":    `{"agentId":"deploy-bot","toolName":"deploy","args":{"service":"a","version":1e999999}}`,
			"a string for the version": `{"agentId":"deploy-bot","toolName":"deploy","args":{"service":"a","version":1}}`,
		} {
			got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals?wait=1s", body)
			if got.status < 400 || got.status >= 500 || got.code == "" || got.message == "" {
				t.Errorf("%s: %d %s", name, got.status, got.raw)
			}
			if low := strings.ToLower(got.message); strings.Contains(low, "sql") || strings.Contains(low, "error 1") || strings.Contains(low, "gorm") {
				t.Errorf("%s: the message tells the storage: %s", name, got.message)
			}
		}
		for name, body := range map[string]string{
			"tool_input invalid UTF-8": "{\"session_id\":\"s\",\"hook_event_name\":\"PermissionRequest\",\"tool_name\":\"Bash\",\"tool_input\":{\"command\":\"\xff\"}}",
			"tool_input too deep":      `{"session_id":"s","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":` + apptest.DeepJSON(500) + `}`,
			"tool_name too long":       `{"session_id":"s","hook_event_name":"PermissionRequest","tool_name":"` + long(300, "x") + `","tool_input":{}}`,
			"session_id too long":      `{"session_id":"` + long(300, "s") + `","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{}}`,
			"a huge command":           `{"session_id":"s","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"` + long(40000, "x") + `"},"cwd":"` + long(40000, "c") + `"}`,
		} {
			a := postHookAs(t, s, "/hooks/claude-code/hooks?wait=0", "bot", []byte(body))
			var e struct {
				Error struct{ Code, Message string }
			}
			_ = json.Unmarshal(a.Body, &e)
			if a.Status < 400 || a.Status >= 500 || e.Error.Code == "" {
				t.Errorf("hook with %s: %d %.300s", name, a.Status, a.Body)
			}
		}
		if n := countRuns(t, s); n != 0 {
			t.Fatalf("refused requests stored %d runs", n)
		}
	})
}

// TestReviewWebhooksAndInboxSeeEachRequestOnce: two instances over one MariaDB database, with a
// webhook: requests made on either and decided on the other (approved, declined, expired) are
// announced to the webhook exactly once each — approval_requested, then decided or expired — and
// to suspendedRunsChanged(external: true) at most once as SUSPENDED and once as LEFT; a request of a tool
// that needs no approval is announced to neither (nobody is asked), and its decision is on
// record with decidedBy null.
func TestReviewWebhooksAndInboxSeeEachRequestOnce(t *testing.T) {
	t.Parallel()
	rec := newReceiver(t)
	file := apptest.WriteConfig(t, approvalsYAML()+fmt.Sprintf(`notifications:
  pollInterval: 20ms
  retryBackoff: 20ms
  webhooks: [{url: %q, secretEnv: INTERLOCK_TEST_WEBHOOK_SECRET}]
`, rec.URL))
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	a := apptest.Start(t, db, "--auth=on", "--config", file)
	b := apptest.Start(t, db, "--auth=on", "--config", file)
	ws := apptest.DialAs(t, a.URL, "graphql-transport-ws", apptest.TokenOf("vera"))
	sub := ws.Subscribe(`subscription { suspendedRunsChanged(external: true) { kind run { runId } } }`, nil)
	a.WaitWatchers(t, 1)

	approved := ask(t, a, "bot", "0", deployRequest(nil))
	declined := ask(t, b, "bot", "0", map[string]any{"agentId": "hooks", "toolName": "Bash", "args": map[string]any{"command": "make"}})
	policy := ask(t, a, "bot", "0", map[string]any{"agentId": "deploy-bot", "toolName": "status", "args": map[string]any{}})
	b.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": approved.RunID}, nil)
	a.MustAs(t, apptest.TokenOf("alice"), declineMutation, map[string]any{"id": declined.RunID, "reason": "no"}, nil)
	expired := ask(t, b, "bot", "30s", map[string]any{"agentId": "deploy-bot", "toolName": "quick", "args": map[string]any{}})
	if expired.Status != "EXPIRED" || policy.Status != "APPROVED" || policy.DecidedBy != nil {
		t.Fatalf("expired %+v, policy %+v", expired, policy)
	}

	want := map[string]int{
		"approval_requested  " + approved.RunID: 1, "decided approved " + approved.RunID: 1,
		"approval_requested  " + declined.RunID: 1, "decided declined " + declined.RunID: 1,
		"approval_requested  " + expired.RunID: 1, "expired  " + expired.RunID: 1,
	}
	got := map[string]int{}
	apptest.Until(t, "the webhook got every announcement and the outbox is drained", func() bool {
		var pending int64
		if err := a.App.DB().Table("notifications").Where("delivered_at IS NULL").Count(&pending).Error; err != nil {
			t.Fatal(err)
		}
		got = map[string]int{}
		for _, h := range rec.got() {
			var e struct {
				Type, Decision string
				Run            struct{ ID string }
			}
			_ = json.Unmarshal(h.body, &e)
			got[fmt.Sprintf("%s %s %s", e.Type, e.Decision, e.Run.ID)]++
		}
		return pending == 0 && len(got) >= len(want)
	})
	for k, n := range got {
		if want[k] != n {
			t.Errorf("webhook: %q delivered %d times, want %d", k, n, want[k])
		}
	}
	for k := range want {
		if got[k] == 0 {
			t.Errorf("webhook: %q never delivered", k)
		}
	}
	// suspendedRunsChanged: SUSPENDED and LEFT once each per request that waited, in order.
	seen := map[string][]string{}
	left := func(id string) bool { return slices.Contains(seen[id], "LEFT") }
	for !left(approved.RunID) || !left(declined.RunID) || !left(expired.RunID) {
		data, done, errs := ws.Next(sub)
		if done || errs != nil {
			t.Fatalf("suspendedRunsChanged ended: %s", errs)
		}
		var c struct {
			SuspendedRunsChanged struct {
				Kind string
				Run  struct{ RunID string }
			}
		}
		_ = json.Unmarshal(data, &c)
		id := c.SuspendedRunsChanged.Run.RunID
		if id == policy.RunID {
			t.Fatalf("suspendedRunsChanged announced the policy's approval: %s", data)
		}
		seen[id] = append(seen[id], c.SuspendedRunsChanged.Kind)
		if len(seen[id]) > 2 {
			t.Fatalf("suspendedRunsChanged announced %s %v", id, seen[id])
		}
	}
	for _, id := range []string{approved.RunID, declined.RunID, expired.RunID} {
		// A suspension another instance stored and this one read only once it was decided is
		// not news (runs.Service.watch): then LEFT alone.
		if k := strings.Join(seen[id], ","); k != "SUSPENDED,LEFT" && k != "LEFT" {
			t.Errorf("suspendedRunsChanged for %s: %v", id, seen[id])
		}
	}
}

// TestReviewKilledInstanceRunsNothing: an instance holding a long-poll on a request is killed
// with SIGKILL; another instance over the same database (MariaDB) recovers what it must and
// executes nothing for the request: it stays SUSPENDED with its four events, the client's re-POST
// with the same idempotencyKey finds it, and the decision on the survivor ends it — the stored
// events never show the run RUNNING again or failed.
func TestReviewKilledInstanceRunsNothing(t *testing.T) {
	t.Parallel()
	file := apptest.WriteConfig(t, approvalsYAML())
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	a := apptest.StartProc(t, db, "--auth=on", "--config", file)
	req := deployRequest(map[string]any{"idempotencyKey": "crash-1"})
	body, _ := json.Marshal(req)
	held := make(chan struct{})
	go func() {
		defer close(held)
		r, _ := http.NewRequest("POST", a.URL+"/approvals?wait=10m", strings.NewReader(string(body)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+apptest.TokenOf("bot"))
		if resp, err := http.DefaultClient.Do(r); err == nil {
			resp.Body.Close()
			t.Errorf("the long-poll on the killed instance was answered %d", resp.StatusCode)
		}
	}()
	b := approvalsServer(t, db, "--lease-ttl", "1s")
	var id string
	apptest.Until(t, "the request is stored", func() bool {
		var out struct {
			SuspendedRuns struct{ Runs []struct{ RunID string } }
		}
		b.MustAs(t, apptest.TokenOf("vera"), `{ suspendedRuns(agentId: "deploy-bot") { runs { runId } } }`, nil, &out)
		if len(out.SuspendedRuns.Runs) == 1 {
			id = out.SuspendedRuns.Runs[0].RunID
		}
		return id != ""
	})
	a.Kill9(t)
	<-held
	if n, err := b.App.Service.RecoverExpired(context.Background()); err != nil || n != 0 {
		t.Fatalf("recovery after the kill: %d runs, %v", n, err)
	}
	again := ask(t, b, "bot", "0", req)
	if again.RunID != id || again.Status != "PENDING" {
		t.Fatalf("re-POST on the survivor: %+v, want %s PENDING", again, id)
	}
	types := func() []string {
		var out []string
		if err := b.App.DB().Table("run_events").Where("run_id = ?", id).Order("seq").Pluck("type", &out).Error; err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := strings.Join(types(), ","); got != "RUN_STARTED,TOOL_CALL,TOOL_CALL_APPROVAL,RUN_SUSPENDED" {
		t.Fatalf("events after the kill and recovery: %s", got)
	}
	waited := make(chan approvalAnswer, 1)
	go func() { waited <- poll(t, b, "bot", id, "60s").body }()
	waitFollowed(t, b, id)
	b.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": id}, nil)
	if got := <-waited; got.Status != "APPROVED" {
		t.Fatalf("after the decision: %+v", got)
	}
	if got := strings.Join(types(), ","); got != "RUN_STARTED,TOOL_CALL,TOOL_CALL_APPROVAL,RUN_SUSPENDED,TOOL_CALL_APPROVED,RUN_FINISHED" {
		t.Fatalf("events after the decision: %s", got)
	}
}

// TestReviewWaitValues: ?wait= on both routes and the hooks: negative, garbage, NaN and
// overflowing values are 400 saying so; values above --max-approval-wait (a duration or a number
// of seconds, however large) wait the maximum and answer PENDING.
func TestReviewWaitValues(t *testing.T) {
	t.Parallel()
	s := approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db", "--max-approval-wait", "1s")
	r := ask(t, s, "bot", "0", deployRequest(nil))
	hook := apptest.HookFixture(t, "codex/permission-request.json")
	for _, w := range []string{"-1s", "-3", "-0.5", "soon", "NaN", "Inf", "-Inf", "1e400", "9999999999999999h", "1h30", "%00", "10%20s"} {
		if got := poll(t, s, "bot", r.RunID, w); got.status != 400 || got.code != "BAD_USER_INPUT" || !strings.Contains(got.message, "wait") {
			t.Errorf("GET ?wait=%s: %d %s", w, got.status, got.raw)
		}
		if got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals?wait="+w, `{"agentId":"hooks","toolName":"Bash","args":{}}`); got.status != 400 {
			t.Errorf("POST ?wait=%s: %d %s", w, got.status, got.raw)
		}
		if a := postHookAs(t, s, "/hooks/codex/hooks?wait="+w, "bot", hook); a.Status != 400 {
			t.Errorf("hook ?wait=%s: %d %s", w, a.Status, a.Body)
		}
	}
	if n := countRuns(t, s); n != 1 {
		t.Fatalf("bad waits stored %d runs", n-1)
	}
	var wg sync.WaitGroup
	for _, w := range []string{"1h", "1e18", "9223372036854775807ns", "3600"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := poll(t, s, "bot", r.RunID, w); got.status != 200 || got.body.Status != "PENDING" {
				t.Errorf("GET ?wait=%s: %d %s", w, got.status, got.raw)
			}
		}()
	}
	wg.Wait()
}

// TestReviewSeparationOfDutiesForJWTs: a JWT principal that requests (startedBy its subject) may
// not approve its own request even holding the tool's approver role, may still decline it; a JWT
// approver without the tool's approverRoles may not decide it; one with them may.
func TestReviewSeparationOfDutiesForJWTs(t *testing.T) {
	s := approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db")
	jay := signJWT(t, map[string]any{"sub": "jay", "roles": []string{"requester", "approver", "sre"}})
	kim := signJWT(t, map[string]any{"sub": "kim", "roles": []string{"approver"}})
	lee := signJWT(t, map[string]any{"sub": "lee", "roles": []string{"sre"}})
	body, _ := json.Marshal(deployRequest(nil))
	mine := approvalRequest(t, s, context.Background(), "Bearer "+jay, "POST", "/approvals", string(body))
	if mine.status != 200 {
		t.Fatalf("jay's request: %d %s", mine.status, mine.raw)
	}
	id := mine.body.RunID
	if r := s.PostAs(t, jay, approveMutation, map[string]any{"id": id}); r.Code != "FORBIDDEN" {
		t.Fatalf("jay approving jay's request: %q %s", r.Code, r.Msg)
	}
	if r := s.PostAs(t, jay, `mutation($id: ID!) { approveToolCall(runId: $id, args: {service: "api", version: "2"}) { status } }`, map[string]any{"id": id}); r.Code != "FORBIDDEN" {
		t.Fatalf("jay editing and approving jay's request: %q %s", r.Code, r.Msg)
	}
	if r := s.PostAs(t, kim, approveMutation, map[string]any{"id": id}); r.Code != "FORBIDDEN" {
		t.Fatalf("kim (approver, not sre) approving: %q %s", r.Code, r.Msg)
	}
	if got := poll(t, s, "vera", id, "0"); got.body.Status != "PENDING" {
		t.Fatalf("after the refused approvals: %+v", got.body)
	}
	s.MustAs(t, lee, approveMutation, map[string]any{"id": id}, nil)
	if got := approvalRequest(t, s, context.Background(), "Bearer "+jay, "GET", "/approvals/"+id, ""); got.body.Status != "APPROVED" || *got.body.DecidedBy != "lee" {
		t.Fatalf("approved by lee, as jay reads it: %d %s", got.status, got.raw)
	}
	second := approvalRequest(t, s, context.Background(), "Bearer "+jay, "POST", "/approvals", string(body))
	s.MustAs(t, jay, declineMutation, map[string]any{"id": second.body.RunID, "reason": "changed my mind"}, nil)
}
