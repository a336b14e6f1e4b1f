package config_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/auth"
	"interlock/config"
	"interlock/runtype"
)

func TestExampleConfigIsValid(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-example")
	t.Setenv("REFUND_TOKEN", "example")
	f, err := config.Load("../examples/interlock.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Agents) != 2 || f.Agents[0].Model.BaseURL != "http://127.0.0.1:11434/v1" || f.Tools[0].HTTP.Timeout.String() != "10s" {
		t.Fatalf("read %+v", f.Agents[0])
	}
	if s := f.MCPServers[0]; s.Env["ORDERS_REGION"] != "eu-west-1" || len(s.Env) != 1 || s.RequireApproval.Rules[0].Tool != "cancel_order" {
		t.Fatalf("mcpServers[0] read as %+v", s)
	}
	if n := f.Notifications; n == nil || len(n.Webhooks) != 2 || n.Webhooks[1].Format != "slack" || n.Webhooks[1].URLEnv != "SLACK_WEBHOOK_URL" {
		t.Fatalf("notifications read as %+v", n)
	}
}

// TestConfigErrorsNameThePath: each mistake is reported with the file, where in it, and what
// is wrong.
func TestConfigErrorsNameThePath(t *testing.T) {
	const agentOK = "agents:\n  - id: a\n    model: {provider: demo}\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"bad YAML", "agents:\n  - id: a\n   model: [", []string{"bad.yaml: line "}},
		{"unknown key", "agents:\n  - id: a\n    modle: {provider: demo}\n", []string{"line 3", "unknown field \"modle\""}},
		{"notification webhook without a secret", "notifications:\n  webhooks: [{url: 'https://hooks.example/x', format: json}]\n", []string{"notifications.webhooks[0].secretEnv: is required for the json format"}},
		{"tools but no agents", "tools: [{name: t, http: {url: 'http://127.0.0.1:1/t'}}]\n", []string{"agents: at least one agent is required to use tools"}},
		{"missing model", "agents:\n  - id: a\n", []string{"agents[0].model: is required"}},
		{"missing model name", "agents:\n  - id: a\n    model: {provider: openai}\n", []string{"agents[0].model.name: is required"}},
		{"bad base URL", "agents:\n  - id: a\n    model: {provider: openai, name: m, baseURL: 'localhost:11434'}\n", []string{`agents[0].model.baseURL: "localhost:11434" is not an http(s) URL`}},
		{"unknown provider", "agents:\n  - id: a\n    model: {provider: anthropic}\n", []string{`agents[0].model.provider: "anthropic" is not a provider`}},
		{"unset key variable", "agents:\n  - id: a\n    model: {provider: openai, name: m, apiKeyEnv: INTERLOCK_TEST_UNSET_KEY}\n", []string{"agents[0].model.apiKeyEnv: the environment variable INTERLOCK_TEST_UNSET_KEY is not set"}},
		{"invalid schema", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/'}\n    inputSchema: {type: objekt}\n", []string{"tools[0].inputSchema: is not a valid JSON Schema"}},
		{"tool without kind", agentOK + "tools:\n  - name: t\n", []string{"tools[0]: a tool needs http"}},
		{"bad tool name", agentOK + "tools:\n  - name: 'refund money'\n    http: {url: 'http://x/'}\n", []string{`tools[0].name: "refund money" is not a tool name`}},
		{"unknown MCP server", agentOK + "tools:\n  - name: t\n    mcp: {server: orders, tool: x}\n", []string{`tools[0].mcp.server: "orders" is not in mcpServers`}},
		{"unset header variable", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/', headers: {Authorization: 'Bearer ${INTERLOCK_TEST_UNSET_TOKEN}'}}\n", []string{"tools[0].http.headers.Authorization: the environment variable INTERLOCK_TEST_UNSET_TOKEN is not set"}},
		{"unknown sub-agent", "agents:\n  - id: a\n    model: {provider: demo}\n    subAgents: [b]\n", []string{`agents[0].subAgents[0]: "b" is not an agent id`}},
		{"duplicate agent", agentOK + "  - id: a\n    model: {provider: demo}\n", []string{`agents[1].id: "a" is defined twice`}},
		{"short approval timeout", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/'}\n    approvalTimeout: 10ms\n", []string{"tools[0].approvalTimeout: 10ms is too short"}},
		{"negative approval timeout", agentOK + "tools:\n  - name: t\n    http: {url: 'http://x/'}\n    approvalTimeout: -5m\n", []string{"tools[0].approvalTimeout: -5m0s is too short"}},
		{"unset MCP env variable", agentOK + "mcpServers:\n  - name: s\n    command: [s]\n    env: {TOKEN: '${INTERLOCK_TEST_UNSET_TOKEN}'}\n", []string{"mcpServers[0].env.TOKEN: the environment variable INTERLOCK_TEST_UNSET_TOKEN is not set"}},
		{"bad MCP env name", agentOK + "mcpServers:\n  - name: s\n    command: [s]\n    env: {'A=B': x}\n", []string{`mcpServers[0].env: "A=B" is not a variable name`}},
		{"MCP env for a url server", agentOK + "mcpServers:\n  - name: s\n    url: 'http://x/'\n    env: {A: b}\n", []string{"mcpServers[0].env: is for a command (stdio) server; a url server is sent headers"}},
		{"unset MCP header variable", agentOK + "mcpServers:\n  - name: s\n    url: 'http://x/'\n    headers: {Authorization: 'Bearer ${INTERLOCK_TEST_UNSET_TOKEN}'}\n", []string{"mcpServers[0].headers.Authorization: the environment variable INTERLOCK_TEST_UNSET_TOKEN is not set"}},
		{"MCP headers for a stdio server", agentOK + "mcpServers:\n  - name: s\n    command: [s]\n    headers: {A: b}\n", []string{"mcpServers[0].headers: are sent to a url server; a command (stdio) server is given env"}},
		{"empty MCP approver role", agentOK + "mcpServers:\n  - name: s\n    url: 'http://x/'\n    approverRoles: [refunds, ' ']\n", []string{"mcpServers[0].approverRoles[1]: must name a role"}},
		{"bad MCP approval timeout", agentOK + "mcpServers:\n  - name: s\n    url: 'http://x/'\n    approvalTimeout: 1ms\n", []string{"mcpServers[0].approvalTimeout: 1ms is too short"}},
		{"several problems", "agents:\n  - id: a\n  - id: b\n    model: {provider: x}\n", []string{"agents[0].model: is required", "agents[1].model.provider"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), "bad.yaml:") {
				t.Fatalf("%q does not name the file", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func build(t *testing.T, yaml string) (*config.Agents, error) {
	t.Helper()
	f, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	a, err := config.Build(context.Background(), f, config.Options{Version: "test"})
	if a != nil {
		t.Cleanup(a.Close)
	}
	return a, err
}

func TestBuildUnknownTool(t *testing.T) {
	_, err := build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [refund]\n")
	if err == nil || err.Error() != `test.yaml: agents[0].tools[0]: unknown tool "refund": it is not in tools and no MCP server lists it` {
		t.Fatalf("error %v", err)
	}
}

func TestBuildDelegationCycle(t *testing.T) {
	_, err := build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    subAgents: [b]\n  - id: b\n    model: {provider: demo}\n    subAgents: [a]\n")
	if err == nil || !strings.Contains(err.Error(), "agents[0].subAgents: delegation goes round in a circle: a → b → a") {
		t.Fatalf("error %v", err)
	}
}

// TestBuildMCPTools: a server's tools become tools with its schemas, an alias takes its own
// name, and the approval policy of the server applies.
func TestBuildMCPTools(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	type in struct {
		OrderID string `json:"orderId"`
	}
	for _, name := range []string{"lookup_order", "cancel_order", "delete_everything"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "does " + name},
			func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
				return nil, nil, nil
			})
	}
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(h.Close) // after the sessions close (cleanups run last first)
	a, err := build(t, `
agents:
  - id: a
    model: {provider: demo}
    tools: [lookup, cancel_order]
tools:
  - name: lookup
    mcp: {server: orders, tool: lookup_order}
    approvalTimeout: 5m
mcpServers:
  - name: orders
    url: `+h.URL+`
    tools: [lookup_order, cancel_order]
    requireApproval: [cancel_order]
    approvalTimeout: 30m
`)
	if err != nil {
		t.Fatal(err)
	}
	ag := a.List[0]
	lookup, cancel := ag.Tool("lookup"), ag.Tool("cancel_order")
	if lookup == nil || cancel == nil || len(ag.Tools) != 2 {
		t.Fatalf("tools %+v", ag.Tools)
	}
	if lookup.Description != "does lookup_order" || !strings.Contains(string(lookup.InputSchema), "orderId") || lookup.RequireApproval {
		t.Fatalf("lookup %+v", lookup)
	}
	if !cancel.RequireApproval {
		t.Fatal("cancel_order does not need approval")
	}
	if cancel.ApprovalTimeout != 30*time.Minute || lookup.ApprovalTimeout != 5*time.Minute {
		t.Fatalf("approval timeouts: cancel_order %s (want the server's 30m), lookup %s (want its own 5m)", cancel.ApprovalTimeout, lookup.ApprovalTimeout)
	}
	_, err = build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [delete_everything]\nmcpServers:\n  - name: orders\n    url: "+h.URL+"\n    tools: [lookup_order]\n")
	if err == nil || !strings.Contains(err.Error(), `agents[0].tools[0]: unknown tool "delete_everything"`) {
		t.Fatalf("a tool left out of the server's list: %v", err)
	}
	_, err = build(t, "agents:\n  - id: a\n    model: {provider: demo}\nmcpServers:\n  - name: orders\n    url: "+h.URL+"\n    tools: [refund]\n")
	if err == nil || !strings.Contains(err.Error(), `mcpServers[0].tools[0]: "refund" is not a tool orders lists (it lists: cancel_order, delete_everything, lookup_order)`) {
		t.Fatalf("error %v", err)
	}
}

// TestBuildHTTPToolApprovalTimeout: approvalTimeout on an HTTP tool reaches the agent's tool.
func TestBuildHTTPToolApprovalTimeout(t *testing.T) {
	a, err := build(t, "agents:\n  - id: a\n    model: {provider: demo}\n    tools: [refund]\ntools:\n  - name: refund\n    requireApproval: true\n    approvalTimeout: 30m\n    http: {url: 'http://127.0.0.1:1/'}\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := a.List[0].Tool("refund").ApprovalTimeout; got != 30*time.Minute {
		t.Fatalf("approval timeout %s, want 30m", got)
	}
}

const authAgent = "agents:\n  - id: a\n    model: {provider: demo}\n"

// sha256Of is the SHA-256 of "test" (printf test | sha256sum).
const sha256Of = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// TestAuthSection: the documented auth: example reads back field by field, and its tokens
// authenticate.
func TestAuthSection(t *testing.T) {
	t.Parallel()
	f, err := config.Parse("auth.yaml", []byte(authAgent+`  - {id: deploy-bot, external: true, tools: ["*"]}
auth:
  tokens:
    - {subject: alice, role: approver, sha256: "`+sha256Of+`"}
    - {subject: portal, role: viewer, sha256: "`+strings.Repeat("ab", 32)+`", resources: [customer-1, customer-2]}
    - {subject: bob, role: [approver, refunds], sha256: "`+strings.Repeat("CD", 32)+`"}
    - {subject: kiosk, role: viewer, sha256: "`+strings.Repeat("ef", 32)+`", resources: []}
    - {subject: ci-deploy, role: requester, sha256: "`+strings.Repeat("01", 32)+`", agents: [deploy-bot]}
  jwt:
    jwksURL: https://idp.example.com/.well-known/jwks.json
    issuer: https://idp.example.com/
    audience: interlock
    claims: {subject: sub, roles: roles, resources: tenants, agents: agents}
  separationOfDuties: true
`))
	if err != nil {
		t.Fatal(err)
	}
	a := f.Auth
	if a == nil || len(a.Tokens) != 5 || !a.SeparationOfDuties {
		t.Fatalf("read %+v", a)
	}
	alice, portal, bob, kiosk := a.Tokens[0], a.Tokens[1], a.Tokens[2], a.Tokens[3]
	if ci := a.Tokens[4]; len(ci.Agents) != 1 || ci.Agents[0] != "deploy-bot" || alice.Agents != nil {
		t.Fatalf("ci-deploy %+v, alice %+v", ci, alice)
	}
	if alice.Subject != "alice" || len(alice.Role) != 1 || alice.Role[0] != runtype.RoleApprover || alice.SHA256 != sha256Of || alice.Resources != nil {
		t.Fatalf("alice %+v", alice)
	}
	if len(portal.Resources) != 2 || portal.Resources[1] != "customer-2" {
		t.Fatalf("portal %+v", portal)
	}
	if len(bob.Role) != 2 || bob.Role[0] != runtype.RoleApprover || bob.Role[1] != "refunds" {
		t.Fatalf("bob %+v", bob)
	}
	if kiosk.Resources == nil || len(kiosk.Resources) != 0 {
		t.Fatalf("kiosk resources %#v, want empty (none visible), not nil (all)", kiosk.Resources)
	}
	j := a.JWT
	if j == nil || j.JWKSURL != "https://idp.example.com/.well-known/jwks.json" || j.Issuer != "https://idp.example.com/" ||
		j.Audience != "interlock" || j.Claims != (auth.Claims{Subject: "sub", Roles: "roles", Resources: "tenants", Agents: "agents"}) {
		t.Fatalf("jwt %+v", j)
	}

	// The tokens as read authenticate (the JWKS is left out: nothing serves it here).
	tokensOnly := *a
	tokensOnly.JWT = nil
	authn, err := auth.New(context.Background(), &tokensOnly, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer authn.Close()
	p, err := authn.Authenticate(context.Background(), "Bearer test")
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "alice" || !p.Has(runtype.RoleApprover) || p.Resources != nil {
		t.Fatalf("principal %+v", p)
	}

	f, err = config.Parse("auth.yaml", []byte(authAgent+"auth:\n  jwt: {hs256SecretEnv: JWT_SECRET, issuer: i, audience: a}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Auth.JWT.HS256SecretEnv != "JWT_SECRET" || f.Auth.JWT.Claims.WithDefaults() != (auth.Claims{Subject: "sub", Roles: "roles"}) {
		t.Fatalf("jwt %+v", f.Auth.JWT)
	}
	if f, err := config.Parse("auth.yaml", []byte(authAgent)); err != nil || f.Auth != nil {
		t.Fatalf("no auth section: %+v, %v", f, err)
	}
}

// TestAuthProblems: each mistake in auth: is reported with its path and why.
func TestAuthProblems(t *testing.T) {
	t.Parallel()
	tok := func(fields string) string { return "auth:\n  tokens:\n    - {" + fields + "}\n" }
	good := `subject: alice, role: approver, sha256: "` + sha256Of + `"`
	jwt := func(fields string) string { return "auth:\n  jwt: {" + fields + "}\n" }
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"empty section", "auth: {separationOfDuties: true}\n", []string{"auth: needs tokens, jwt or oidc, or nobody can sign in"}},
		{"token in clear", tok(`subject: alice, role: approver, sha256: "test"`), []string{"auth.tokens[0].sha256: must be the SHA-256 of the token in hex (64 characters), never the token itself"}},
		{"digest not hex", tok(`subject: alice, role: approver, sha256: "` + strings.Repeat("zz", 32) + `"`), []string{"auth.tokens[0].sha256: must be the SHA-256 of the token in hex"}},
		{"no digest", tok(`subject: alice, role: approver`), []string{"auth.tokens[0].sha256: must be the SHA-256"}},
		{"no subject", tok(`role: approver, sha256: "` + sha256Of + `"`), []string{"auth.tokens[0].subject: is required"}},
		{"subject twice", tok(good) + `    - {subject: alice, role: viewer, sha256: "` + strings.Repeat("ab", 32) + `"}` + "\n", []string{`auth.tokens[1].subject: "alice" is already the subject of tokens[0]`}},
		{"same token twice", tok(good) + `    - {subject: bob, role: viewer, sha256: "` + strings.ToUpper(sha256Of) + `"}` + "\n", []string{"auth.tokens[1].sha256: is the same token as tokens[0]"}},
		{"no role", tok(`subject: alice, sha256: "` + sha256Of + `"`), []string{"auth.tokens[0].role: at least one role is required"}},
		{"empty role list", tok(`subject: alice, role: [], sha256: "` + sha256Of + `"`), []string{"auth.tokens[0].role: at least one role is required"}},
		{"empty role", tok(`subject: alice, role: [approver, ""], sha256: "` + sha256Of + `"`), []string{"auth.tokens[0].role[1]: is empty"}},
		{"role not a name", tok(`subject: alice, role: {admin: true}, sha256: "` + sha256Of + `"`), []string{"auth.tokens[0].role: must be a role name or a list of role names"}},
		{"resources without value", "auth:\n  tokens:\n    - subject: alice\n      role: viewer\n      sha256: " + sha256Of + "\n      resources:\n", []string{"auth.tokens[0].resources: has no value: write [] for no resource, or leave the key out for every resource"}},
		{"empty resource", tok(good + `, resources: [""]`), []string{"auth.tokens[0].resources[0]: is empty"}},
		{"agents without value", "auth:\n  tokens:\n    - subject: alice\n      role: requester\n      sha256: " + sha256Of + "\n      agents:\n", []string{"auth.tokens[0].agents: has no value: write [] for no agent, or leave the key out for any agent"}},
		{"empty agent", tok(good + `, agents: [""]`), []string{"auth.tokens[0].agents[0]: is empty"}},
		{"unknown agent", tok(good + `, agents: [deploy-bot]`), []string{`auth.tokens[0].agents[0]: "deploy-bot" is not an agent id in agents`}},
		{"internal agent", tok(good + `, agents: [a]`), []string{`auth.tokens[0].agents[0]: "a" runs in Interlock: approvals are requested for external agents`}},
		{"unknown token key", tok(good + `, token: test`), []string{`unknown field "token"`}},
		{"jwt without keys", jwt("issuer: i, audience: a"), []string{"auth.jwt: needs jwksURL (the identity provider's key set) or hs256SecretEnv (a shared secret)"}},
		{"jwt with both keys", jwt("jwksURL: 'https://idp/jwks', hs256SecretEnv: S, issuer: i, audience: a"), []string{"auth.jwt: has both jwksURL and hs256SecretEnv; give one"}},
		{"jwks not http", jwt("jwksURL: 'file:///etc/jwks.json', issuer: i, audience: a"), []string{`auth.jwt.jwksURL: "file:///etc/jwks.json" is not an http(s) URL`}},
		{"no issuer", jwt("jwksURL: 'https://idp/jwks', audience: a"), []string{"auth.jwt.issuer: is required: without it tokens from any issuer"}},
		{"no audience", jwt("jwksURL: 'https://idp/jwks', issuer: i"), []string{"auth.jwt.audience: is required: without it tokens the issuer made for other applications"}},
		{"unknown jwt key", jwt("jwksURL: 'https://idp/jwks', issuer: i, audience: a, audiences: [b]"), []string{`unknown field "audiences"`}},
		{"unknown claim key", jwt("jwksURL: 'https://idp/jwks', issuer: i, audience: a, claims: {groups: g}"), []string{`unknown field "groups"`}},
		{"several", tok(`subject: "", role: [], sha256: x`), []string{"auth.tokens[0].subject", "auth.tokens[0].role", "auth.tokens[0].sha256"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(authAgent+tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%q does not say %q", err, w)
				}
			}
		})
	}
}
