package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/golang-jwt/jwt/v5"

	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// The config of the approval tests: two external agents (deploy-bot with a schema, approval,
// approverRoles and timeouts; hooks with any tool name), an internal demo agent, and the
// principals below, each with token "token-" + subject, and HS256 JWTs.
const approvalsConfig = `
agents:
  - id: deploy-bot
    name: Deploy bot
    external: true
    tools: [deploy, status, quick]
  - id: hooks
    external: true
    tools: ["*"]
  - id: helper
    model: {provider: demo}
    tools: []
tools:
  - name: deploy
    description: Deploy a service to production
    inputSchema: {type: object, properties: {service: {type: string}, version: {type: string}}, required: [service, version], additionalProperties: false}
    requireApproval: true
    approverRoles: [sre]
    approvalTimeout: 30m
  - name: status
    inputSchema: {type: object}
  - name: quick
    requireApproval: true
    approvalTimeout: 1s
auth:
  separationOfDuties: true
  jwt: {hs256SecretEnv: INTERLOCK_TEST_APPROVALS_JWT, issuer: https://idp.test/, audience: interlock}
  tokens:
`

// approvalsJWTSecret signs the approval tests' JWTs: TestMain puts it in
// INTERLOCK_TEST_APPROVALS_JWT, which their config names.
const approvalsJWTSecret = "a-shared-secret-of-at-least-32-bytes!"

// approvalPrincipals are subject: roles (and resources after a |).
var approvalPrincipals = map[string]string{
	"bot": "requester", "other-bot": "requester", "tenant-bot": "requester|t1",
	"vera": "viewer", "otto": "operator", "sam": "approver, sre", "sue": "sre", "alice": "approver",
	"t2-viewer": "viewer|t2",
}

func approvalsYAML() string {
	var b strings.Builder
	b.WriteString(approvalsConfig)
	for subject, spec := range approvalPrincipals {
		roles, resources, scoped := strings.Cut(spec, "|")
		fmt.Fprintf(&b, "    - {subject: %s, role: [%s], sha256: %s", subject, roles, apptest.Sha256Hex(apptest.TokenOf(subject)))
		if scoped {
			fmt.Fprintf(&b, ", resources: [%s]", resources)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// approvalsServer starts a server with the approvals config over db.
func approvalsServer(t *testing.T, db string, args ...string) *apptest.Server {
	t.Helper()
	file := apptest.WriteConfig(t, approvalsYAML())
	return apptest.Start(t, db, append([]string{"--auth=on", "--config", file}, args...)...)
}

// eachApprovalsDB runs fn on an approvals server over SQLite and one over MySQL.
func eachApprovalsDB(t *testing.T, fn func(t *testing.T, s *apptest.Server), args ...string) {
	t.Run("sqlite", func(t *testing.T) { fn(t, approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db", args...)) })
	t.Run("mysql", func(t *testing.T) { fn(t, approvalsServer(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)), args...)) })
}

// signJWT is an HS256 token the approvals server trusts, with claims over the defaults.
func signJWT(t testing.TB, claims jwt.MapClaims) string {
	base := jwt.MapClaims{"iss": "https://idp.test/", "aud": "interlock", "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		base[k] = v
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, base).SignedString([]byte(approvalsJWTSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// approvalAnswer is the JSON of both routes.
type approvalAnswer struct {
	RunID     string          `json:"runId"`
	Status    string          `json:"status"`
	Args      json.RawMessage `json:"args"`
	Reason    *string         `json:"reason"`
	DecidedBy *string         `json:"decidedBy"`
	DecidedAt *time.Time      `json:"decidedAt"`
	ExpiresAt *time.Time      `json:"expiresAt"`
	URL       string          `json:"url"`
}

// httpAnswer is one answer of /approvals: the status, the decoded body, and the error's code.
type httpAnswer struct {
	status  int
	header  http.Header
	body    approvalAnswer
	code    string
	message string
	raw     string
}

// approvalRequest sends a request to /approvals with the Authorization header (none when
// empty) and decodes the answer.
func approvalRequest(t testing.TB, s *apptest.Server, ctx context.Context, authorization, method, path, body string) httpAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return httpAnswer{}
		}
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := httpAnswer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		return out
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("%s %s: %d, body %s is not {\"error\": {code, message}}", method, path, resp.StatusCode, raw)
	}
	out.code, out.message = e.Error.Code, e.Error.Message
	return out
}

// ask POSTs an approval request as subject (by its token) and returns the answer, which must
// be 200.
func ask(t testing.TB, s *apptest.Server, subject, wait string, req map[string]any) approvalAnswer {
	t.Helper()
	body, _ := json.Marshal(req)
	a := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf(subject), "POST", "/approvals?wait="+wait, string(body))
	if a.status != http.StatusOK {
		t.Fatalf("POST /approvals as %s: %d %s", subject, a.status, a.raw)
	}
	return a.body
}

// poll GETs the request as subject.
func poll(t testing.TB, s *apptest.Server, subject, runID, wait string) httpAnswer {
	t.Helper()
	return approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf(subject), "GET", "/approvals/"+runID+"?wait="+wait, "")
}

func deployRequest(extra map[string]any) map[string]any {
	req := map[string]any{"agentId": "deploy-bot", "toolName": "deploy", "args": map[string]any{"service": "api", "version": "1.2.3"}}
	for k, v := range extra {
		req[k] = v
	}
	return req
}

// countRuns counts the runs stored by the server.
func countRuns(t testing.TB, s *apptest.Server) int64 {
	t.Helper()
	var n int64
	if err := s.App.DB().Table("agent_runs").Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFollowed waits until the server holds a wait on the run (its hub has a subscriber).
func waitFollowed(t testing.TB, s *apptest.Server, runID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.App.Service.Followers(runID) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nobody waits on run %s", runID)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// pendingRunID waits until the server stores a request of hooks and returns its run id.
func pendingRunID(t testing.TB, s *apptest.Server) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var out struct {
			SuspendedRuns struct{ Runs []struct{ RunID string } }
		}
		s.MustAs(t, apptest.TokenOf("vera"), `{ suspendedRuns(agentId: "hooks") { runs { runId } } }`, nil, &out)
		if len(out.SuspendedRuns.Runs) > 0 {
			return out.SuspendedRuns.Runs[0].RunID
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no request of hooks was stored")
	return ""
}

const approveMutation = `mutation($id: ID!, $args: JSON) { approveToolCall(runId: $id, args: $args) { status } }`
const declineMutation = `mutation($id: ID!, $reason: String) { declineToolCall(runId: $id, reason: $reason) { status } }`

// TestApprovalsOverHTTP: the long-poll endpoint end to end on both dialects — what it answers
// while pending, and once approved, edited, declined, expired or approved by the policy; what
// it refuses (storing nothing); and that the request is a run like any other in GraphQL.
func TestApprovalsOverHTTP(t *testing.T) {
	t.Parallel()
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		// Refused with nothing stored.
		for _, tc := range []struct {
			name, body string
			status     int
			code, says string
		}{
			{"schema", `{"agentId":"deploy-bot","toolName":"deploy","args":{"service":"api"}}`, 400, "BAD_USER_INPUT", "inputSchema of deploy"},
			{"extra property", `{"agentId":"deploy-bot","toolName":"deploy","args":{"service":"api","version":"1","x":1}}`, 400, "BAD_USER_INPUT", "inputSchema"},
			{"args not an object", `{"agentId":"hooks","toolName":"Bash","args":"ls"}`, 400, "BAD_USER_INPUT", "JSON object"},
			{"no args", `{"agentId":"hooks","toolName":"Bash"}`, 400, "BAD_USER_INPUT", "args is required"},
			{"internal agent", `{"agentId":"helper","toolName":"x","args":{}}`, 400, "BAD_USER_INPUT", "startRun"},
			{"unknown agent", `{"agentId":"nobody","toolName":"x","args":{}}`, 404, "NOT_FOUND", "no agent"},
			{"unknown tool", `{"agentId":"deploy-bot","toolName":"rm","args":{}}`, 400, "BAD_USER_INPUT", `no tool "rm"`},
			{"unknown field", `{"agentId":"hooks","toolName":"Bash","args":{},"tool":"x"}`, 400, "BAD_USER_INPUT", `unknown field "tool"`},
			{"not JSON", `{"agentId":`, 400, "BAD_USER_INPUT", "not valid JSON"},
			{"a number for a string", `{"agentId":"hooks","toolName":3,"args":{}}`, 400, "BAD_USER_INPUT", `"toolName" must be a string`},
		} {
			got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals?wait=5s", tc.body)
			if got.status != tc.status || got.code != tc.code || !strings.Contains(got.message, tc.says) {
				t.Errorf("%s: %d %s %q, want %d %s saying %q", tc.name, got.status, got.code, got.message, tc.status, tc.code, tc.says)
			}
		}
		if got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals?wait=soon", `{}`); got.status != 400 || !strings.Contains(got.message, "wait") {
			t.Errorf("a bad wait: %d %s", got.status, got.raw)
		}
		req, _ := http.NewRequest("POST", s.URL+"/approvals", strings.NewReader(`{"agentId":"hooks","toolName":"Bash","args":{}}`))
		req.Header.Set("Authorization", "Bearer "+apptest.TokenOf("bot"))
		req.Header.Set("Content-Type", "text/plain")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("text/plain: %v %v, want 415", resp.StatusCode, err)
		} else {
			resp.Body.Close()
		}
		big := `{"agentId":"hooks","toolName":"Bash","args":{},"context":"` + strings.Repeat("x", app.MaxBodyBytes) + `"}`
		if got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals", big); got.status != http.StatusRequestEntityTooLarge {
			t.Errorf("a body over the limit: %d", got.status)
		}
		if n := countRuns(t, s); n != 0 {
			t.Fatalf("refused requests stored %d runs", n)
		}
		if got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "DELETE", "/approvals/x", ""); got.status != 405 || got.header.Get("Allow") == "" {
			t.Errorf("DELETE: %d %s", got.status, got.raw)
		}
		if got := poll(t, s, "vera", "00000000-0000-7000-8000-000000000000", "0"); got.status != 404 || got.code != "NOT_FOUND" {
			t.Errorf("an unknown run: %d %s", got.status, got.raw)
		}

		// Pending, as the requester and a viewer see it.
		pending := ask(t, s, "bot", "0", deployRequest(map[string]any{"context": "Deploying **api** 1.2.3", "args": json.RawMessage(`{"version": "1.2.3",  "service": "api"}`)}))
		if pending.Status != "PENDING" || string(pending.Args) != `{"version":"1.2.3","service":"api"}` || pending.ExpiresAt == nil ||
			pending.DecidedAt != nil || pending.URL != s.URL+"/?run="+pending.RunID {
			t.Fatalf("pending: %+v (args %s)", pending, pending.Args)
		}
		if got := poll(t, s, "bot", pending.RunID, "0"); got.status != 200 || got.body.Status != "PENDING" {
			t.Fatalf("GET as the requester: %d %s", got.status, got.raw)
		}
		if got := poll(t, s, "vera", pending.RunID, "0"); got.status != 200 || got.body.Status != "PENDING" {
			t.Fatalf("GET as a viewer: %d %s", got.status, got.raw)
		}
		if got := poll(t, s, "other-bot", pending.RunID, "0"); got.status != 404 {
			t.Fatalf("GET as another requester: %d %s", got.status, got.raw)
		}
		// In GraphQL it is a run like any other: in the inbox, with its context.
		var read struct {
			Run struct {
				Status, StartedBy, Context string
				External                   bool
				ToolCalls                  []struct{ ToolName string }
			}
			Agent struct {
				External bool
				Model    string
			}
			Ext, Int struct{ Total int }
		}
		s.MustAs(t, apptest.TokenOf("vera"), `query($id: ID!) { run(runId: $id) { status startedBy context external toolCalls { toolName } }
			agent(id: "deploy-bot") { external model }
			ext: suspendedRuns(external: true) { total } int: suspendedRuns(external: false) { total } }`, map[string]any{"id": pending.RunID}, &read)
		if read.Run.Status != "SUSPENDED" || read.Run.StartedBy != "bot" || read.Run.Context != "Deploying **api** 1.2.3" || !read.Run.External ||
			read.Run.ToolCalls[0].ToolName != "deploy" || !read.Agent.External || read.Agent.Model != "external" || read.Ext.Total != 1 || read.Int.Total != 0 {
			t.Fatalf("read over GraphQL: %+v", read)
		}

		// Edit and approve: the wait ends with the edited args.
		waited := make(chan approvalAnswer, 1)
		go func() {
			got := poll(t, s, "bot", pending.RunID, "60s")
			waited <- got.body
		}()
		waitFollowed(t, s, pending.RunID)
		s.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": pending.RunID, "args": map[string]any{"service": "api", "version": "1.2.2"}}, nil)
		got := <-waited
		if got.Status != "APPROVED" || string(got.Args) != `{"service":"api","version":"1.2.2"}` || got.DecidedBy == nil || *got.DecidedBy != "sue" ||
			got.DecidedAt == nil || got.ExpiresAt != nil {
			t.Fatalf("edited and approved: %+v (args %s)", got, got.Args)
		}

		// Decline: the POST's own wait ends with the reason.
		done := make(chan approvalAnswer, 1)
		go func() {
			done <- ask(t, s, "bot", "60s", map[string]any{"agentId": "hooks", "toolName": "Bash", "args": map[string]any{"command": "rm -rf build"}})
		}()
		id := pendingRunID(t, s)
		waitFollowed(t, s, id)
		s.MustAs(t, apptest.TokenOf("alice"), declineMutation, map[string]any{"id": id, "reason": "use make clean"}, nil)
		if got := <-done; got.Status != "DECLINED" || got.Reason == nil || *got.Reason != "use make clean" || string(got.Args) != `{"command":"rm -rf build"}` {
			t.Fatalf("declined: %+v", got)
		}

		// Expiry (quick: approvalTimeout 1s).
		expired := ask(t, s, "bot", "60s", map[string]any{"agentId": "deploy-bot", "toolName": "quick", "args": map[string]any{}})
		if expired.Status != "EXPIRED" || expired.Reason == nil || !strings.Contains(*expired.Reason, "timed out") || expired.DecidedBy != nil {
			t.Fatalf("expired: %+v", expired)
		}
		// A tool that needs no approval: approved by the policy at once.
		policy := ask(t, s, "bot", "60s", map[string]any{"agentId": "deploy-bot", "toolName": "status", "args": map[string]any{"verbose": true}})
		if policy.Status != "APPROVED" || policy.DecidedBy != nil || policy.Reason == nil || string(policy.Args) != `{"verbose":true}` {
			t.Fatalf("approved by the policy: %+v", policy)
		}

		// Separation of duties: sam (approver, sre) requested it, so someone else approves;
		// approverRoles: alice (approver, not sre) may not; the requester may decide nothing.
		mine := ask(t, s, "sam", "0", deployRequest(nil))
		for subject, want := range map[string]string{"sam": "FORBIDDEN", "alice": "FORBIDDEN", "bot": "FORBIDDEN"} {
			if r := s.PostAs(t, apptest.TokenOf(subject), approveMutation, map[string]any{"id": mine.RunID}); r.Code != want {
				t.Errorf("%s approving sam's request: %s %s, want %s", subject, r.Code, r.Msg, want)
			}
		}
		if r := s.PostAs(t, apptest.TokenOf("bot"), declineMutation, map[string]any{"id": mine.RunID}); r.Code != "FORBIDDEN" {
			t.Errorf("the requester declining: %s", r.Code)
		}
		s.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": mine.RunID}, nil)
		if got := poll(t, s, "sam", mine.RunID, "0"); got.body.Status != "APPROVED" || *got.body.DecidedBy != "sue" {
			t.Fatalf("approved by sue: %+v", got.body)
		}

		// Resource scoping: a request of resource t1 does not exist for a viewer of t2.
		scoped := ask(t, s, "tenant-bot", "0", deployRequest(map[string]any{"resourceId": "t1"}))
		if got := poll(t, s, "t2-viewer", scoped.RunID, "0"); got.status != 404 || got.code != "NOT_FOUND" {
			t.Fatalf("GET outside the scope: %d %s", got.status, got.raw)
		}
		if got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("tenant-bot"), "POST", "/approvals",
			`{"agentId":"hooks","toolName":"Bash","args":{},"resourceId":"t2"}`); got.status != 403 || got.code != "FORBIDDEN" {
			t.Fatalf("POST for another resource: %d %s", got.status, got.raw)
		}
		// An internal run is not an approval request.
		var started struct{ StartRun struct{ RunID string } }
		s.MustAs(t, apptest.TokenOf("otto"), `mutation { startRun(input: {agentId: "helper", prompt: "hello"}) { runId } }`, nil, &started)
		if got := poll(t, s, "vera", started.StartRun.RunID, "0"); got.status != 404 {
			t.Fatalf("GET of an internal run: %d %s", got.status, got.raw)
		}
	})
}

// TestApprovalsGraphQLMutation: requestApproval over GraphQL stores the request as POST
// /approvals does (and its idempotency key is the same key), and the external filter of
// suspendedRunsChanged delivers it.
func TestApprovalsGraphQLMutation(t *testing.T) {
	t.Parallel()
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		ws := apptest.DialAs(t, s.URL, "graphql-transport-ws", apptest.TokenOf("vera"))
		ext := ws.Subscribe(`subscription { suspendedRunsChanged(external: true) { kind run { runId external } } }`, nil)
		internal := ws.Subscribe(`subscription { suspendedRunsChanged(external: false) { kind run { runId } } }`, nil)
		s.WaitWatchers(t, 2) // both subscriptions are live: the request below is news to them
		const mutation = `mutation($input: ApprovalRequestInput!) { requestApproval(input: $input) { runId status startedBy context toolCalls { toolName args expiresAt } } }`
		input := deployRequest(map[string]any{"context": "why", "idempotencyKey": "k-1", "threadId": "session-1"})
		var out struct {
			RequestApproval struct {
				RunID, Status, StartedBy, Context string
				ToolCalls                         []struct {
					ToolName  string
					Args      json.RawMessage
					ExpiresAt *time.Time
				}
			}
		}
		s.MustAs(t, apptest.TokenOf("bot"), mutation, map[string]any{"input": input}, &out)
		got := out.RequestApproval
		if got.Status != "SUSPENDED" || got.StartedBy != "bot" || got.Context != "why" || got.ToolCalls[0].ExpiresAt == nil {
			t.Fatalf("requestApproval: %+v", got)
		}
		data, _, _ := ws.Next(ext)
		if !strings.Contains(string(data), got.RunID) || !strings.Contains(string(data), `"external":true`) {
			t.Fatalf("suspendedRunsChanged(external: true): %s", data)
		}
		again := ask(t, s, "bot", "0", input)
		if again.RunID != got.RunID {
			t.Fatalf("POST with the key of the mutation made run %s, not %s", again.RunID, got.RunID)
		}
		other := input
		other["context"] = "another"
		if r := s.PostAs(t, apptest.TokenOf("bot"), mutation, map[string]any{"input": other}); r.Code != "BAD_USER_INPUT" {
			t.Fatalf("the key with another request: %s", r.Code)
		}
		if r := s.PostAs(t, apptest.TokenOf("bot"), mutation, map[string]any{"input": map[string]any{"agentId": "deploy-bot", "toolName": "deploy", "args": map[string]any{}}}); r.Code != "BAD_USER_INPUT" {
			t.Fatalf("invalid args: %s", r.Code)
		}
		if n := countRuns(t, s); n != 1 {
			t.Fatalf("%d runs, want 1", n)
		}
		// The internal subscription saw nothing: the next thing it gets is an internal run's.
		var started struct{ StartRun struct{ RunID string } }
		s.MustAs(t, apptest.TokenOf("otto"), `mutation { startRun(input: {agentId: "helper", prompt: "hello", requireToolApproval: true}) { runId } }`, nil, &started)
		_ = started
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var m apptest.WSMessage
		if err := wsjson.Read(ctx, ws.Conn, &m); err == nil && m.ID == internal && strings.Contains(string(m.Payload), got.RunID) {
			t.Fatalf("suspendedRunsChanged(external: false) delivered the request: %s", m.Payload)
		}
	})
}

// TestApprovalsCredentials: every credential case against POST /approvals, GET
// /approvals/{runId} and requestApproval over HTTP and both WebSocket subprotocols, through the
// whole handler.
func TestApprovalsCredentials(t *testing.T) {
	t.Parallel()
	s := approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db")
	own := ask(t, s, "bot", "0", deployRequest(nil))
	expired := signJWT(t, jwt.MapClaims{"sub": "jay", "roles": "requester", "exp": time.Now().Add(-time.Hour).Unix()})
	jwtRequester := signJWT(t, jwt.MapClaims{"sub": "jay", "roles": "requester"})
	jwtOwn := ask(t, s, "bot", "0", deployRequest(nil)) // not jay's
	type cred struct {
		name, header string
		// post, get: the status of POST /approvals and of GET of bot's request; gql: the code
		// of requestApproval ("" when it succeeds).
		post, get int
		gql       string
	}
	creds := []cred{
		{"none", "", 401, 401, "UNAUTHENTICATED"},
		{"unknown token", "Bearer token-mallory", 401, 401, "UNAUTHENTICATED"},
		{"malformed", "Basic Ym90OnB3", 401, 401, "UNAUTHENTICATED"},
		{"empty bearer", "Bearer ", 401, 401, "UNAUTHENTICATED"},
		{"expired JWT", "Bearer " + expired, 401, 401, "UNAUTHENTICATED"},
		{"requester", "Bearer " + apptest.TokenOf("bot"), 200, 200, ""},
		{"another requester", "Bearer " + apptest.TokenOf("other-bot"), 200, 404, ""},
		{"JWT requester", "Bearer " + jwtRequester, 200, 404, ""},
		{"viewer", "Bearer " + apptest.TokenOf("vera"), 403, 200, "FORBIDDEN"},
		{"custom role", "Bearer " + apptest.TokenOf("sue"), 403, 200, "FORBIDDEN"},
		{"operator", "Bearer " + apptest.TokenOf("otto"), 200, 200, ""},
	}
	_ = jwtOwn
	const mutation = `mutation($input: ApprovalRequestInput!) { requestApproval(input: $input) { runId status } }`
	for _, c := range creds {
		post := approvalRequest(t, s, context.Background(), c.header, "POST", "/approvals", `{"agentId":"hooks","toolName":"Bash","args":{"command":"ls"}}`)
		if post.status != c.post {
			t.Errorf("POST /approvals with %s: %d %s, want %d", c.name, post.status, post.raw, c.post)
		}
		if c.post == 401 && (post.code != "UNAUTHENTICATED" || post.header.Get("WWW-Authenticate") == "") {
			t.Errorf("POST /approvals with %s: %s, challenge %q", c.name, post.code, post.header.Get("WWW-Authenticate"))
		}
		get := approvalRequest(t, s, context.Background(), c.header, "GET", "/approvals/"+own.RunID, "")
		if get.status != c.get {
			t.Errorf("GET /approvals/{id} with %s: %d %s, want %d", c.name, get.status, get.raw, c.get)
		}
		vars := map[string]any{"input": map[string]any{"agentId": "hooks", "toolName": "Bash", "args": map[string]any{"command": "ls"}}}
		token := strings.TrimPrefix(c.header, "Bearer ")
		if strings.HasPrefix(c.header, "Bearer ") || c.header == "" {
			if r := s.PostAs(t, token, mutation, vars); r.Code != c.gql {
				t.Errorf("requestApproval over HTTP with %s: %s %s, want %q", c.name, r.Code, r.Msg, c.gql)
			}
		} else {
			body, _ := json.Marshal(map[string]any{"query": mutation, "variables": vars})
			req, _ := http.NewRequest("POST", s.URL+"/graphql", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", c.header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if r := apptest.DecodeGQL(t, resp); resp.StatusCode != 401 || r.Code() != "UNAUTHENTICATED" {
				t.Errorf("requestApproval over HTTP with %s: %d %s", c.name, resp.StatusCode, r.Code())
			}
		}
		for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
			c0 := apptest.DialRawWS(t, s.URL, protocol)
			payload, _ := json.Marshal(map[string]any{"authorization": c.header})
			if c.header == "" {
				payload = []byte(`{}`)
			}
			c0.Send(apptest.WSMessage{Type: "connection_init", Payload: payload})
			if c.gql == "UNAUTHENTICATED" {
				if code, _ := wsClose(t, c0); code != 4401 {
					t.Errorf("requestApproval over %s with %s: closed %d, want 4401", protocol, c.name, code)
				}
				continue
			}
			if m := c0.Read(); m.Type != "connection_ack" {
				t.Fatalf("%s with %s: %s", protocol, c.name, m.Type)
			}
			_, _, errs := c0.Next(c0.Subscribe(mutation, vars))
			if code, msg := apptest.FirstError(errs); code != c.gql {
				t.Errorf("requestApproval over %s with %s: %s %s, want %q", protocol, c.name, code, msg, c.gql)
			}
			c0.Conn.Close(websocket.StatusNormalClosure, "")
		}
	}
}

// wsClose reads until the socket closes and returns its close status.
func wsClose(t *testing.T, c *apptest.WSClient) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		var m apptest.WSMessage
		err := wsjson.Read(ctx, c.Conn, &m)
		if err == nil {
			if m.Type == "connection_ack" {
				t.Fatalf("%s: acknowledged", c.Protocol)
			}
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a close", c.Protocol, err)
		}
		return ce.Code, ce.Reason
	}
}

// TestApprovalsAcrossInstances: two servers over one database (MariaDB; and one SQLite file):
// the same idempotency key on either returns the same run, and a decision taken on B ends the
// long-poll held by A within a second, with the decision.
func TestApprovalsAcrossInstances(t *testing.T) {
	t.Parallel()
	both := func(t *testing.T, db string) {
		a, b := approvalsServer(t, db), approvalsServer(t, db)
		req := deployRequest(map[string]any{"idempotencyKey": "deploy-api-1.2.3"})
		first := ask(t, a, "bot", "0", req)
		if again := ask(t, b, "bot", "0", req); again.RunID != first.RunID {
			t.Fatalf("the same key on B made run %s, not %s", again.RunID, first.RunID)
		}
		if n := countRuns(t, a); n != 1 {
			t.Fatalf("%d runs, want 1", n)
		}
		var worst time.Duration
		for i, kind := range []string{"approve", "decline"} {
			r := ask(t, a, "bot", "0", deployRequest(map[string]any{"idempotencyKey": fmt.Sprintf("k-%d", i)}))
			answered := make(chan time.Time, 1)
			var got httpAnswer
			go func() {
				got = poll(t, a, "bot", r.RunID, "60s")
				answered <- time.Now()
			}()
			waitFollowed(t, a, r.RunID)
			if kind == "approve" {
				b.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": r.RunID}, nil)
			} else {
				b.MustAs(t, apptest.TokenOf("sue"), declineMutation, map[string]any{"id": r.RunID, "reason": "no"}, nil)
			}
			decided := time.Now() // B answered: the decision is committed
			var at time.Time
			select {
			case at = <-answered:
			case <-time.After(20 * time.Second):
				t.Fatal("the decision on B did not end A's long-poll")
			}
			latency := at.Sub(decided)
			worst = max(worst, latency)
			t.Logf("%s on B → A's long-poll answered %s later", kind, latency.Round(time.Millisecond))
			want := map[string]string{"approve": "APPROVED", "decline": "DECLINED"}[kind]
			if got.status != 200 || got.body.Status != want || *got.body.DecidedBy != "sue" {
				t.Fatalf("A answered %d %+v, want %s by sue", got.status, got.body, want)
			}
			if latency > time.Second {
				t.Errorf("A's long-poll ended %s after B's decision, more than 1s", latency)
			}
		}
		t.Logf("worst cross-instance latency: %s", worst.Round(time.Millisecond))
	}
	t.Run("mysql", func(t *testing.T) { both(t, dbtest.MySQLURL(dbtest.MySQLDSN(t))) })
	t.Run("sqlite", func(t *testing.T) { both(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db")) })
}

// TestApprovalsClientGoesAway: a client that disconnects mid-wait ends the wait on the server
// (no subscription is left), and its re-POST with the same idempotencyKey gets the same run:
// one run exists (the service's own test, TestAwaitApproval, shows that it is the end of the
// request's context that ends the wait).
func TestApprovalsClientGoesAway(t *testing.T) {
	t.Parallel()
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		req := map[string]any{"agentId": "hooks", "toolName": "Bash", "args": map[string]any{"command": "make deploy"}, "idempotencyKey": "session-1/tool-7"}
		body, _ := json.Marshal(req)
		ctx, cancel := context.WithCancel(context.Background())
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			approvalRequest(t, s, ctx, "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals?wait=10m", string(body))
		}()
		id := pendingRunID(t, s)
		waitFollowed(t, s, id)
		cancel()
		<-ended
		deadline := time.Now().Add(20 * time.Second)
		for s.App.Service.Followers(id) != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the server still waits for a client that went away")
			}
			time.Sleep(2 * time.Millisecond)
		}
		again := ask(t, s, "bot", "0", req)
		if again.RunID != id || again.Status != "PENDING" {
			t.Fatalf("re-POST: %+v, want run %s PENDING", again, id)
		}
		if n := countRuns(t, s); n != 1 {
			t.Fatalf("%d runs, want 1", n)
		}
	})
}

// TestApprovalsWaitIsCapped: a wait above --max-approval-wait waits that long, and answers
// PENDING; it is not refused.
func TestApprovalsWaitIsCapped(t *testing.T) {
	t.Parallel()
	s := approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db", "--max-approval-wait", "1s")
	id := ask(t, s, "bot", "0", deployRequest(nil)).RunID
	start := time.Now()
	capped := poll(t, s, "bot", id, "1h")
	if capped.status != 200 || capped.body.Status != "PENDING" || time.Since(start) < time.Second || time.Since(start) > 30*time.Second {
		t.Fatalf("a wait above the maximum: %d %+v after %s", capped.status, capped.body, time.Since(start))
	}
}

// TestApprovalsMutationRate: each POST /approvals takes a token of its client's mutation rate,
// the bucket GraphQL mutations take from.
func TestApprovalsMutationRate(t *testing.T) {
	t.Parallel()
	s := approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db", "--mutation-rate", "1/h", "--mutation-burst", "2")
	ask(t, s, "bot", "0", deployRequest(nil))
	ask(t, s, "bot", "0", deployRequest(nil))
	got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "POST", "/approvals", `{"agentId":"hooks","toolName":"Bash","args":{}}`)
	if got.status != http.StatusTooManyRequests || got.code != "RATE_LIMITED" || got.header.Get("Retry-After") == "" {
		t.Fatalf("third POST: %d %s, Retry-After %q", got.status, got.raw, got.header.Get("Retry-After"))
	}
	if r := s.PostAs(t, apptest.TokenOf("bot"), `mutation { requestApproval(input: {agentId: "hooks", toolName: "Bash", args: {}}) { runId } }`, nil); r.Code != "RATE_LIMITED" {
		t.Fatalf("a mutation after the POSTs spent the bucket: %s", r.Code)
	}
	if got := poll(t, s, "bot", "00000000-0000-7000-8000-000000000000", "0"); got.status != 404 {
		t.Fatalf("GET is not limited: %d", got.status)
	}
	// Another client has its own bucket.
	ask(t, s, "other-bot", "0", deployRequest(nil))
	_ = url.Values{}
}
