package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
)

// mcpInitialize posts an initialize (the session protocol) to /mcp with the Authorization
// header auth (none when empty), and a session id when given; it returns the status, the
// challenge and the body.
func mcpInitialize(t *testing.T, url, auth, session string) (int, string, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	method := body
	if session != "" {
		method = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(method))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && session == "" {
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// TestMCPGatewayCredentials: every credential case, over the session protocol (a raw
// initialize through the whole handler) and the sessionless one (the Go SDK's client at
// 2026-07-28): no token, a wrong one and an expired JWT are 401 with the bearer challenge; a
// viewer, a custom role alone and a requester bound to another agent are 403 with the reason, before
// any session; a requester (static or JWT, bound to the gateway's agent or to none) and an
// admin get in. A session opened by one principal is refused to another's token.
func TestMCPGatewayCredentials(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	config := gatewayConfig(up, "5s", "") + "\n" // after the tokens: bound requesters and a JWT
	extra := fmt.Sprintf(`    - {subject: boundbot, role: requester, agents: [mcp-gateway], sha256: %s}
    - {subject: otherbot, role: requester, agents: [deploy-bot], sha256: %s}
  jwt: {hs256SecretEnv: INTERLOCK_TEST_APPROVALS_JWT, issuer: https://idp.test/, audience: interlock, claims: {agents: agents}}
`, apptest.Sha256Hex(apptest.TokenOf("boundbot")), apptest.Sha256Hex(apptest.TokenOf("otherbot")))
	// The extra tokens go into auth.tokens, before gatewayConfig's separationOfDuties.
	i := strings.Index(config, "  separationOfDuties")
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", config[:i]+extra+config[i:]+"agents:\n  - {id: deploy-bot, external: true, tools: [\"*\"]}\n")

	expired := signJWT(t, jwt.MapClaims{"sub": "late", "roles": []string{"requester"}, "agents": []string{"mcp-gateway"}, "exp": time.Now().Add(-time.Minute).Unix()})
	cases := []struct {
		name, auth string
		status     int
		says       string
	}{
		{"no token", "", 401, `Bearer realm="interlock"`},
		{"wrong token", "Bearer nope", 401, `error="invalid_token"`},
		{"not bearer", "Basic " + apptest.TokenOf("agentbot"), 401, `Bearer realm="interlock"`},
		{"expired JWT", "Bearer " + expired, 401, `error="invalid_token"`},
		{"viewer", "Bearer " + apptest.TokenOf("vera"), 403, "requester"},
		{"custom role only", "Bearer " + signJWT(t, jwt.MapClaims{"sub": "cr", "roles": []string{"sre"}, "agents": []string{"mcp-gateway"}}), 403, "requester"},
		{"bound to another agent", "Bearer " + apptest.TokenOf("otherbot"), 403, "only for deploy-bot"},
		{"JWT without the agent", "Bearer " + signJWT(t, jwt.MapClaims{"sub": "jb", "roles": []string{"requester"}, "agents": []string{"x"}}), 403, "only for x"},
		{"requester", "Bearer " + apptest.TokenOf("agentbot"), 200, ""},
		{"requester bound to the gateway", "Bearer " + apptest.TokenOf("boundbot"), 200, ""},
		{"JWT requester", "Bearer " + signJWT(t, jwt.MapClaims{"sub": "jwtbot", "roles": []string{"requester"}, "agents": []string{"mcp-gateway"}}), 200, ""},
		{"approver (operators and above hold the requester role)", "Bearer " + apptest.TokenOf("alice"), 200, ""},
		{"admin", "Bearer " + apptest.TokenOf("root"), 200, ""},
	}
	for _, c := range cases {
		status, header, body := mcpInitialize(t, s.URL, c.auth, "")
		switch {
		case status != c.status:
			t.Errorf("%s: initialize = %d %q, want %d", c.name, status, body, c.status)
		case c.status == 401 && !strings.Contains(header, c.says):
			t.Errorf("%s: challenge %q, want %q", c.name, header, c.says)
		case c.status == 403 && !strings.Contains(body, c.says):
			t.Errorf("%s: 403 says %q, want %q", c.name, body, c.says)
		case c.status == 200 && header == "":
			t.Errorf("%s: no session", c.name)
		}
		// The sessionless protocol, through the Go SDK's client.
		token := strings.TrimPrefix(c.auth, "Bearer ")
		cl := mcp.NewClient(&mcp.Implementation{Name: "cred-test", Version: "1"}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		tr := &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", MaxRetries: -1}
		if c.auth != "" && strings.HasPrefix(c.auth, "Bearer ") {
			tr.HTTPClient = bearer(token)
		}
		cs, err := cl.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err == nil {
			_, err = cs.ListTools(ctx, nil)
			cs.Close()
		}
		cancel()
		if (err == nil) != (c.status == 200) {
			t.Errorf("%s over 2026-07-28: list err = %v, want success %v", c.name, err, c.status == 200)
		}
	}

	// A session is its opener's: another principal's token on it is refused.
	_, session, _ := mcpInitialize(t, s.URL, "Bearer "+apptest.TokenOf("agentbot"), "")
	if status, _, body := mcpInitialize(t, s.URL, "Bearer "+apptest.TokenOf("root"), session); status != http.StatusForbidden {
		t.Errorf("admin's token on agentbot's session = %d %q, want 403", status, body)
	}
}

// TestMCPGatewaySeparationOfDuties: a call made through the gateway with an approver's token
// is started by that approver, who may not approve it (FORBIDDEN); another approver may.
func TestMCPGatewaySeparationOfDuties(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "30s", ""))
	cs := gatewayClient(t, s, apptest.TokenOf("alice"), "2025-11-25", nil)
	got := heldCall(cs, "orders__refund", map[string]any{"order": 1, "amount": 1}, 40*time.Second)
	id := waitingRun(t, s)
	r := s.PostAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id) { id } }`, map[string]any{"id": id})
	if r.Code != "FORBIDDEN" {
		t.Fatalf("alice approving her own call through the gateway: %q %q, want FORBIDDEN", r.Code, r.Msg)
	}
	decide(t, s, "bob", id, `approveToolCall(runId: $id) { id }`)
	res := <-got
	if res.IsError || approval(res)["decidedBy"] != "bob" || len(up.Calls("refund")) != 1 {
		t.Fatalf("after bob's approval: %+v %v, %d refunds", res, approval(res), len(up.Calls("refund")))
	}
}

// TestMCPGatewayLimits: each call takes a token of the client's mutation rate (over it: an
// isError RATE_LIMITED answer, nothing stored), and one of the connections the client may hold
// at once (all taken: an isError TOO_MANY_CONNECTIONS answer, nothing stored), as /approvals.
func TestMCPGatewayLimits(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServerWith(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "30s", ""),
		"--max-connections-per-principal", "1", "--mutation-rate", "1/h", "--mutation-burst", "2")
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	held := heldCall(cs, "orders__refund", map[string]any{"order": 1, "amount": 1}, 40*time.Second)
	first := waitingRun(t, s)
	// The one slot is taken by the held call.
	res := callTool(t, cs, "orders__refund", map[string]any{"order": 2, "amount": 1}, 10*time.Second, nil)
	if !res.IsError || approval(res)["code"] != "TOO_MANY_CONNECTIONS" {
		t.Fatalf("a call over the connection cap = %+v %q, want TOO_MANY_CONNECTIONS", res, resultText(res))
	}
	// The burst is 2, and both calls took a token: the third is over the rate.
	res = callTool(t, cs, "orders__refund", map[string]any{"order": 3, "amount": 1}, 10*time.Second, nil)
	if !res.IsError || approval(res)["code"] != "RATE_LIMITED" {
		t.Fatalf("a call over the rate = %+v %q, want RATE_LIMITED", res, resultText(res))
	}
	var data struct{ SuspendedRuns struct{ Total int } }
	s.MustAs(t, apptest.TokenOf("alice"), `{ suspendedRuns(agentId: "mcp-gateway") { total } }`, nil, &data)
	if data.SuspendedRuns.Total != 1 {
		t.Fatalf("%d requests stored, want 1 (refused calls store none)", data.SuspendedRuns.Total)
	}
	decide(t, s, "alice", first, `approveToolCall(runId: $id) { id }`)
	if res := <-held; res.IsError {
		t.Fatalf("the held call: %+v", res)
	}
}
