package agent

import (
	"fmt"
	"sort"
)

// Registry is the set of agents a server runs, with their schemas compiled once and what their
// loops call fixed once.
//
// It holds its own copies of the agents and tools it was given: the compiled schemas, the
// delegate tools and the middleware's wrappings are set on those copies, never on the caller's
// values, so one set of definitions may be given to several registries (as tests do, and two
// apps in one process) and reads the same afterwards. Get and List return the copies: an agent
// runs as the registry made it only when taken from the registry.
type Registry struct {
	byID map[string]*Agent
	list []*Agent
}

// NewRegistry checks the agents (unique ids and tool names, compilable schemas, sub-agents among
// them) and indexes copies of them. The loop of each agent calls its model and tools through mw
// (nil entries are skipped), the first innermost: NewRegistry(list, tracing, metrics) times what
// tracing spans. A tool shared by several agents is copied, compiled and wrapped once.
func NewRegistry(agents []*Agent, mw ...Middleware) (*Registry, error) {
	r := &Registry{byID: map[string]*Agent{}}
	own := map[*Agent]*Agent{} // each definition → the registry's copy
	tools := map[*Tool]*Tool{} // each tool's definition → the registry's copy
	for _, def := range agents {
		if def.ID == "" || (def.Model == nil && !def.External) {
			return nil, fmt.Errorf("agent %q: an id and a model are required", def.ID)
		}
		if def.External && len(def.SubAgents) > 0 {
			return nil, fmt.Errorf("agent %q: an external agent runs elsewhere and delegates to no sub-agent", def.ID)
		}
		if def.AnyTool != nil && !def.External {
			return nil, fmt.Errorf("agent %q: only an external agent accepts any tool name", def.ID)
		}
		if _, dup := r.byID[def.ID]; dup {
			return nil, fmt.Errorf("agent %q is defined twice", def.ID)
		}
		a := *def
		a.Tools = make([]*Tool, len(def.Tools))
		seen := map[string]bool{}
		for i, t := range def.Tools {
			if seen[t.Name] {
				return nil, fmt.Errorf("agent %q: tool %q is defined twice", a.ID, t.Name)
			}
			seen[t.Name] = true
			c, ok := tools[t]
			if !ok {
				var err error
				if c, err = compileTool(a.ID, t); err != nil {
					return nil, err
				}
				tools[t] = c
			}
			a.Tools[i] = c
		}
		if def.AnyTool != nil {
			c := *def.AnyTool
			var err error
			if c.input, err = CompileSchema(a.ID+"/*/input", c.InputSchema); err != nil {
				return nil, err
			}
			a.AnyTool = &c
		}
		a.delegates, a.model = nil, nil
		r.byID[a.ID], own[def] = &a, &a
		r.list = append(r.list, &a)
	}
	for _, a := range r.list {
		subs := make([]*Agent, len(a.SubAgents))
		for i, sub := range a.SubAgents {
			c := own[sub]
			if c == nil || r.byID[sub.ID] != c {
				return nil, fmt.Errorf("agent %q: sub-agent %q is not among the agents served", a.ID, sub.ID)
			}
			if c.External {
				return nil, fmt.Errorf("agent %q: sub-agent %q is external: it runs elsewhere and cannot be delegated to", a.ID, sub.ID)
			}
			subs[i] = c
		}
		if len(subs) > 0 {
			a.SubAgents = subs
		}
		d, err := delegateTools(a)
		if err != nil {
			return nil, err
		}
		a.delegates = d
	}
	var wrappers []Middleware
	for _, m := range mw {
		if m != nil {
			wrappers = append(wrappers, m)
		}
	}
	wrap(r.list, wrappers)
	sort.Slice(r.list, func(i, j int) bool { return r.list[i].ID < r.list[j].ID })
	return r, nil
}

// compileTool is the registry's copy of t with its input and resume schemas compiled (and its
// suspend schema checked), named for the agent that first lists it.
func compileTool(agentID string, t *Tool) (*Tool, error) {
	c := *t
	c.exec = nil
	var err error
	if c.input, err = CompileSchema(agentID+"/"+t.Name+"/input", t.InputSchema); err != nil {
		return nil, err
	}
	if c.resume, err = CompileSchema(agentID+"/"+t.Name+"/resume", t.ResumeSchema); err != nil {
		return nil, err
	}
	if _, err = CompileSchema(agentID+"/"+t.Name+"/suspend", t.SuspendSchema); err != nil {
		return nil, err
	}
	return &c, nil
}

// Get returns the registry's agent with that id, or nil.
func (r *Registry) Get(id string) *Agent { return r.byID[id] }

// List returns every agent of the registry, ordered by id.
func (r *Registry) List() []*Agent { return r.list }
