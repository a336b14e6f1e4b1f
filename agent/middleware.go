package agent

import (
	"context"

	"interlock/llm"
)

// ToolFunc is what executes a tool call: a Tool's ExecuteFunc, or a Middleware's wrapping of it.
type ToolFunc func(ctx context.Context, call *Call) (any, error)

// Middleware wraps what the agents of a Registry call — each agent's model and each tool's
// ExecuteFunc — for concerns the loop knows nothing of, such as tracing and metrics. It is
// given to NewRegistry, which fixes once what the loop calls; the agents and tools keep the
// Model and ExecuteFunc they were defined with. So nothing rewrites an agent after it was
// built, and what wraps what is the order of NewRegistry's arguments, not of the wiring's lines.
type Middleware interface {
	// WrapModel returns what the loop calls in place of m, the model of an agent (or what the
	// middleware before made of it): m itself, or a model that calls it. It is called once
	// per agent.
	WrapModel(m llm.Model) llm.Model
	// WrapTool returns what the loop calls to execute t in place of exec (t's ExecuteFunc, or
	// what the middleware before made of it): exec itself, or a function that calls it. It is
	// called once per tool, however many agents share the tool.
	WrapTool(t *Tool, exec ToolFunc) ToolFunc
}

// wrap fixes the model each agent's loop calls and the function each of their tools executes
// with: the definitions wrapped by mw, the first innermost. Tools shared by several agents are
// wrapped once. Without middleware the loop calls the definitions themselves.
func wrap(agents []*Agent, mw []Middleware) {
	done := map[*Tool]bool{}
	for _, a := range agents {
		a.model = a.Model
		for _, m := range mw {
			if a.model == nil {
				break // an external agent has no model
			}
			a.model = m.WrapModel(a.model)
		}
		for _, t := range a.Tools {
			if done[t] {
				continue
			}
			done[t] = true
			t.exec = nil
			if t.ExecuteFunc == nil {
				continue
			}
			t.exec = t.ExecuteFunc
			for _, m := range mw {
				t.exec = m.WrapTool(t, t.exec)
			}
		}
	}
}

// caller is the model the loop calls: the registry's wrapping of Model, or Model itself for an
// agent not taken from a registry.
func (a *Agent) caller() llm.Model {
	if a.model != nil {
		return a.model
	}
	return a.Model
}

// executor is the function the loop executes t with: the registry's wrapping of ExecuteFunc, or
// ExecuteFunc itself for a tool not taken from a registry.
func (t *Tool) executor() ToolFunc {
	if t.exec != nil {
		return t.exec
	}
	return t.ExecuteFunc
}
