package app_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
)

// TestMCPGatewaySessionlessThreadCannotBeTakenByAnother: the thread of a sessionless client's
// calls is computed from its principal's subject and the name the client gives itself, both
// guessable, and a thread stays with the resource of its first run. Another requester, scoped
// to another resource, who names that thread first in requestApproval must not be able to make
// every later gateway call of that client fail.
func TestMCPGatewaySessionlessThreadCannotBeTakenByAnother(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	config := gatewayConfig(up, "5s", "")
	mallory := fmt.Sprintf("    - {subject: mallory, role: requester, resources: [evil], sha256: %s}\n", apptest.Sha256Hex(apptest.TokenOf("mallory")))
	i := strings.Index(config, "  separationOfDuties")
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", config[:i]+mallory+config[i:])

	// agentbot's sessionless client, as gatewayClient names itself: its thread, worked out
	// the way the gateway does from what anyone can guess.
	subject, client := "agentbot", "gateway-test"
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s%s", len(subject), subject, client))
	thread := "mcp-client-" + hex.EncodeToString(sum[:16])

	r := s.PostAs(t, apptest.TokenOf("mallory"), `mutation($in: ApprovalRequestInput!) { requestApproval(input: $in) { id threadId } }`,
		map[string]any{"in": map[string]any{"agentId": "mcp-gateway", "toolName": "orders__lookup", "args": map[string]any{"order": 1},
			"threadId": thread, "resourceId": "evil"}})
	if r.Code != "" {
		t.Fatalf("mallory's request on the guessed thread: %s %s", r.Code, r.Msg)
	}

	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2026-07-28", nil)
	res := callTool(t, cs, "orders__lookup", map[string]any{"order": 7}, 20*time.Second, nil)
	if res.IsError {
		m, _ := json.Marshal(res.Meta)
		t.Fatalf("agentbot's call after mallory named its thread = %q %s: another principal can make a client's calls fail", resultText(res), m)
	}
}

// TestMCPGatewayResourceOrderKeepsTheThread: a principal scoped to several resources files its
// calls under the first; an identity provider that lists the same resources in another order in
// the next token (claims arrays carry no order guarantee) must not leave every later call of
// that sessionless client refused because its thread stays with the resource of the first.
func TestMCPGatewayResourceOrderKeepsTheThread(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	config := gatewayConfig(up, "5s", "")
	jwt := "  jwt: {hs256SecretEnv: INTERLOCK_TEST_APPROVALS_JWT, issuer: https://idp.test/, audience: interlock, claims: {resources: tenants}}\n"
	i := strings.Index(config, "  separationOfDuties")
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", config[:i]+jwt+config[i:])
	for n, tenants := range [][]string{{"r1", "r2"}, {"r2", "r1"}} {
		token := signJWT(t, map[string]any{"sub": "ana", "roles": []string{"requester"}, "tenants": tenants})
		cs := gatewayClient(t, s, token, "2026-07-28", nil)
		res := callTool(t, cs, "orders__lookup", map[string]any{"order": n}, 20*time.Second, nil)
		if res.IsError {
			t.Fatalf("ana's call with tenants %v = %q", tenants, resultText(res))
		}
	}
}
