package agent_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"interlock/agent"
	"interlock/llm"
)

// trail is the log of the middleware calls of one test.
type trail struct {
	mu    sync.Mutex
	lines []string
	wraps []string // what was wrapped: "model AGENT-MODEL", "tool NAME"
}

func (tr *trail) add(to *[]string, s string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	*to = append(*to, s)
}

func (tr *trail) take() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := tr.lines
	tr.lines = nil
	return out
}

// named is a middleware that logs "NAME model" and "NAME tool TOOL" on each call it passes on.
type named struct {
	name string
	tr   *trail
}

type loggedModel struct {
	llm.Model
	named
}

func (m loggedModel) Stream(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
	m.tr.add(&m.tr.lines, m.name+" model")
	return m.Model.Stream(ctx, req, onText)
}

func (n named) WrapModel(m llm.Model) llm.Model {
	n.tr.add(&n.tr.wraps, n.name+" model")
	return loggedModel{m, n}
}

func (n named) WrapTool(t *agent.Tool, exec agent.ToolFunc) agent.ToolFunc {
	n.tr.add(&n.tr.wraps, n.name+" tool "+t.Name)
	return func(ctx context.Context, c *agent.Call) (any, error) {
		n.tr.add(&n.tr.lines, n.name+" tool "+t.Name)
		return exec(ctx, c)
	}
}

// TestRegistryMiddleware: the loop calls the model and the tools through the registry's
// middleware, the first given innermost (nil skipped); a tool shared by two agents is wrapped
// once; the registry wraps its own copies: the agents given keep the model and functions they
// were defined with, and run unwrapped.
func TestRegistryMiddleware(t *testing.T) {
	t.Parallel()
	tr := &trail{}
	m := &model{turns: []turn{ask(call("m1", "lookup_order", `{"orderId":"1"}`)), say("Done.")}}
	shared := lookup()
	first := &agent.Agent{ID: "first", Model: m, Tools: []*agent.Tool{shared.Tool}}
	second := &agent.Agent{ID: "second", Model: &model{}, Tools: []*agent.Tool{shared.Tool}}
	exec := shared.ExecuteFunc
	reg, err := agent.NewRegistry([]*agent.Agent{first, second}, named{"inner", tr}, nil, named{"outer", tr})
	if err != nil {
		t.Fatal(err)
	}
	wantWraps := []string{"inner model", "outer model", "inner tool lookup_order", "outer tool lookup_order", "inner model", "outer model"}
	if !slices.Equal(tr.wraps, wantWraps) {
		t.Errorf("wrapped %q, want %q (each agent's model, the shared tool once)", tr.wraps, wantWraps)
	}
	if first.Model != llm.Model(m) || second.Tools[0] != shared.Tool {
		t.Error("the registry changed the agents' definitions")
	}

	run(t, reg.Get("first"), agent.NewSnapshot(nil, "go", false), &host{})
	want := []string{"outer model", "inner model", "outer tool lookup_order", "inner tool lookup_order", "outer model", "inner model"}
	if got := tr.take(); !slices.Equal(got, want) {
		t.Errorf("the loop called %q, want %q", got, want)
	}
	if len(shared.executed()) != 1 {
		t.Errorf("the tool ran %d times, want once", len(shared.executed()))
	}

	// The definitions themselves are not wrapped: the agent given runs without the middleware.
	m.turns = append(m.turns, ask(call("m2", "lookup_order", `{"orderId":"3"}`)), say("Done."))
	run(t, first, agent.NewSnapshot(nil, "go", false), &host{})
	if got := tr.take(); len(got) != 0 {
		t.Errorf("the agent given to the registry ran through %q", got)
	}
	if _, err := exec(t.Context(), &agent.Call{ToolCall: llm.ToolCall{Args: []byte(`{"orderId":"2"}`)}}); err != nil {
		t.Fatal(err)
	}
	if got := tr.take(); len(got) != 0 {
		t.Errorf("calling the tool's ExecuteFunc went through %q", got)
	}
}
