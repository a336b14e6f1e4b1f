package config_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"interlock/config"
)

// The example: an external agent with a tool that has no executor, its schema and
// approval policy applied as for any tool.
const externalYAML = `
agents:
  - id: deploy-bot
    name: Deploy bot
    external: true
    tools: [deploy]
  - id: claude-code
    external: true
    tools: [Bash, "*"]
tools:
  - name: deploy
    description: Deploy a service to production
    inputSchema: {type: object, properties: {service: {type: string}, version: {type: string}}, required: [service, version]}
    requireApproval: true
    approverRoles: [sre]
    approvalTimeout: 30m
  - name: Bash
    requireApproval: true
  - name: "*"
    requireApproval: true
    approvalTimeout: 10m
    approverRoles: [dev]
`

func TestBuildExternalAgents(t *testing.T) {
	t.Parallel()
	a, err := build(t, externalYAML)
	if err != nil {
		t.Fatal(err)
	}
	deploy := a.List[0]
	if !deploy.External || deploy.Model != nil || deploy.AnyTool != nil {
		t.Fatalf("deploy-bot: external %v, model %v, any tool %v; want external, no model, only its tools", deploy.External, deploy.Model, deploy.AnyTool)
	}
	tool := deploy.Tool("deploy")
	if tool == nil || tool.ExecuteFunc != nil || !tool.RequireApproval || tool.ApprovalTimeout != 30*time.Minute || tool.ApproverRoles[0] != "sre" {
		t.Fatalf("deploy tool %+v", tool)
	}
	var schema map[string]any
	if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema["required"] == nil {
		t.Fatalf("deploy's inputSchema %s", tool.InputSchema)
	}
	if deploy.Tool("Edit") != nil {
		t.Fatal("deploy-bot accepts a tool it does not list")
	}
	cc := a.List[1]
	if cc.Tool("Bash").ApprovalTimeout != 0 {
		t.Fatalf("a listed tool keeps its own policy, not the \"*\" tool's")
	}
	edit := cc.Tool("Edit")
	if edit == nil || edit.Name != "Edit" || !edit.RequireApproval || edit.ApprovalTimeout != 10*time.Minute || len(edit.ApproverRoles) != 1 || edit.InputSchema != nil {
		t.Fatalf("any other name takes the \"*\" tool's policy: %+v", edit)
	}
	if err := edit.ValidateInput(json.RawMessage(`{"anything": [1, 2]}`)); err != nil {
		t.Fatalf("a tool without a schema takes any arguments: %v", err)
	}
}

// Without a tool named "*", any tool name of an external agent needs approval.
func TestBuildAnyToolNeedsApprovalByDefault(t *testing.T) {
	t.Parallel()
	a, err := build(t, "agents:\n  - id: hooks\n    external: true\n    tools: ['*']\n")
	if err != nil {
		t.Fatal(err)
	}
	if tool := a.List[0].Tool("Write"); tool == nil || !tool.RequireApproval || tool.ApprovalTimeout != 0 {
		t.Fatalf("Write: %+v", tool)
	}
}

func TestExternalConfigErrorsNameThePath(t *testing.T) {
	t.Parallel()
	const internal = "agents:\n  - id: a\n    model: {provider: demo}\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"model on an external agent", "agents:\n  - id: x\n    external: true\n    model: {provider: demo}\n", []string{"agents[0].model: an external agent has no model"}},
		{"instructions on an external agent", "agents:\n  - id: x\n    external: true\n    instructions: be careful\n    maxSteps: 3\n    memory: {lastMessages: 2}\n",
			[]string{"agents[0].instructions: has no effect on an external agent", "agents[0].maxSteps: has no effect", "agents[0].memory: has no effect"}},
		{"sub-agents of an external agent", internal + "  - id: x\n    external: true\n    subAgents: [a]\n", []string{"agents[1].subAgents: has no effect on an external agent"}},
		{"delegating to an external agent", "agents:\n  - id: a\n    model: {provider: demo}\n    subAgents: [x]\n  - id: x\n    external: true\n", []string{`agents[0].subAgents[0]: "x" is an external agent`}},
		{"any tool on an internal agent", internal + "    tools: ['*']\n", []string{`agents[0].tools[0]: "*" (any tool name) is for external agents only`}},
		{"a tool without executor listed by an internal agent", internal + "    tools: [t]\n  - id: x\n    external: true\n    tools: [t]\ntools:\n  - name: t\n", []string{"tools[0]: a tool needs http: {url: …} or mcp: {server: …, tool: …}, unless only external agents list it"}},
		{"the any tool with an executor", "agents:\n  - id: x\n    external: true\n    tools: ['*']\ntools:\n  - name: '*'\n    http: {url: 'http://x/'}\n", []string{`tools[0]: the tool "*" is the approval policy`}},
		{"the any tool twice", "agents:\n  - id: x\n    external: true\n    tools: ['*']\ntools:\n  - name: '*'\n  - name: '*'\n", []string{`tools[1].name: "*" is defined twice`}},
		{"a bad schema of an external tool", "agents:\n  - id: x\n    external: true\n    tools: [t]\ntools:\n  - name: t\n    inputSchema: {type: objekt}\n", []string{"tools[0].inputSchema: is not a valid JSON Schema"}},
		{"requester deciding", "agents:\n  - id: x\n    external: true\n    tools: [t]\ntools:\n  - name: t\n    approverRoles: [requester]\n", []string{"tools[0].approverRoles[0]: the requester role asks for approvals and may not decide them"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse("bad.yaml", []byte(tc.yaml))
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
