package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"interlock/agent"
	"interlock/llm"
)

// An external agent has no model, delegates to none, and no agent delegates to it; only an
// external agent takes any tool name, and Tool then names a copy of AnyTool.
func TestRegistryOfExternalAgents(t *testing.T) {
	t.Parallel()
	anyTool := &agent.Tool{Name: "*", RequireApproval: true, InputSchema: json.RawMessage(`{"type":"object","required":["command"]}`)}
	ext := &agent.Agent{ID: "hooks", External: true, AnyTool: anyTool, Tools: []*agent.Tool{{Name: "Read"}}}
	reg, err := agent.NewRegistry([]*agent.Agent{ext})
	if err != nil {
		t.Fatalf("an external agent without a model: %v", err)
	}
	ext = reg.Get("hooks")
	bash := ext.Tool("Bash")
	if bash == nil || bash.Name != "Bash" || !bash.RequireApproval || anyTool.Name != "*" {
		t.Fatalf("Tool(Bash) = %+v (the policy's own name %q)", bash, anyTool.Name)
	}
	if err := bash.ValidateInput(json.RawMessage(`{}`)); err == nil {
		t.Fatal("the copy does not keep the policy's compiled schema")
	}
	if ext.Tool("Read").RequireApproval {
		t.Fatal("a tool of its own keeps its own policy")
	}
	for name, list := range map[string][]*agent.Agent{
		"no model":               {{ID: "a"}},
		"sub-agents":             {{ID: "x", External: true, SubAgents: []*agent.Agent{{ID: "y", Model: &llm.Demo{}}}}, {ID: "y", Model: &llm.Demo{}}},
		"delegating to it":       {{ID: "boss", Model: &llm.Demo{}, SubAgents: []*agent.Agent{{ID: "x", External: true}}}},
		"any tool, not external": {{ID: "a", Model: &llm.Demo{}, AnyTool: &agent.Tool{Name: "*"}}},
	} {
		if name == "delegating to it" {
			list = append(list, list[0].SubAgents[0])
		}
		if name == "sub-agents" {
			list[1] = list[0].SubAgents[0]
		}
		if _, err := agent.NewRegistry(list); err == nil || !strings.Contains(err.Error(), "agent") {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
}
