package config

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"interlock/agent"
	"interlock/hidden"
	"interlock/llm"
	"interlock/tools"
)

// Options are what Build needs besides the file.
type Options struct {
	// Version is told to MCP servers.
	Version string
	// DemoModel is the model of agents with provider: demo.
	DemoModel llm.Model
	// Logger receives what MCP servers write to stderr, and their deaths and restarts.
	// Default: slog.Default().
	Logger *slog.Logger
}

// Agents is what a config file builds: the agents, and the connections to close at the end.
type Agents struct {
	List []*agent.Agent
	// Gateway is the MCP gateway of mcpGateway (nil without one); its agent is in List.
	Gateway *Gateway
	servers []*tools.MCPServer
}

// Gateway is what mcpGateway builds: the gateway's agent (external, forwarding its calls),
// the tools it lists to MCP clients, sorted by name, and its waits.
type Gateway struct {
	Agent                  *agent.Agent
	Tools                  []GatewayTool
	Wait, ProgressInterval time.Duration
}

// GatewayTool is a tool the gateway lists: an upstream server's tool, under the name
// <server>__<tool> (the agent's tool of that name runs it).
type GatewayTool struct {
	Name, Server string
	Upstream     tools.MCPTool
}

// gatewaySeparator joins a server's name and its tool's in the gateway's tool names.
const gatewaySeparator = "__"

// Close ends the MCP sessions (stopping stdio servers).
func (a *Agents) Close() {
	for _, s := range a.servers {
		s.Close()
	}
}

// Build makes the agents of a checked file: models, HTTP tools, and the tools of every MCP
// server, which it connects to and asks for its tools.
func Build(ctx context.Context, f *File, opt Options) (*Agents, error) {
	out := &Agents{}
	fail := func(path, msg string) (*Agents, error) {
		out.Close()
		return nil, &Error{File: f.path, Problems: []string{path + ": " + msg}}
	}
	byName := map[string]*agent.Tool{}
	servers := map[string]*tools.MCPServer{}
	listed := map[string]map[string]tools.MCPTool{}
	clash := map[string]string{} // tool names two servers list: the refusal, for an agent listing one
	for i, sc := range f.MCPServers {
		at := fmt.Sprintf("mcpServers[%d]", i)
		cfg := tools.MCPConfig{Name: sc.Name, Command: sc.Command, URL: sc.URL, Timeout: sc.Timeout,
			StartTimeout: sc.StartTimeout, MaxSessions: sc.MaxSessions, IdleTimeout: sc.IdleTimeout, Env: expandAll(sc.Env), Headers: expandAll(sc.Headers), Logger: opt.Logger}
		srv, err := tools.ConnectMCP(ctx, cfg, opt.Version)
		if err != nil {
			return fail(at, err.Error())
		}
		out.servers = append(out.servers, srv)
		servers[sc.Name] = srv
		list, err := srv.Tools(ctx)
		if err != nil {
			return fail(at, err.Error())
		}
		listed[sc.Name] = map[string]tools.MCPTool{}
		for _, t := range list {
			listed[sc.Name][t.Name] = t
		}
		for j, name := range sc.Tools {
			if _, ok := listed[sc.Name][name]; !ok {
				return fail(fmt.Sprintf("%s.tools[%d]", at, j), notListed(sc.Name, name, listed[sc.Name]))
			}
		}
		// A name that is not the server's leaves the tool it meant to name ungated, so a
		// person would never be asked: refuse to start instead.
		for _, r := range sc.RequireApproval.Rules {
			if _, ok := listed[sc.Name][r.Tool]; !ok && r.Tool != "*" {
				return fail(at+".requireApproval"+r.path, notListed(sc.Name, r.Tool, listed[sc.Name]))
			}
		}
		for _, t := range list {
			if len(sc.Tools) > 0 && !slices.Contains(sc.Tools, t.Name) {
				continue
			}
			if r, _, bad := hidden.InName(t.Name); bad {
				return fail(at, fmt.Sprintf("its tool %q has %s in its name, which hides or reorders what a person reads; list only the tools wanted with tools: [...]", t.Name, hidden.Describe([]rune{r})))
			}
			if _, dup := byName[t.Name]; dup || clash[t.Name] != "" {
				// Refused only when an agent lists the name: the gateway names tools by
				// their server, so two servers it re-exposes may share tool names.
				clash[t.Name] = fmt.Sprintf("%s: its tool %q has the name of another server's tool; offer it under another name with tools: [{name: …, mcp: {server: %s, tool: %s}}] and leave it out of this server's tools list", at, t.Name, sc.Name, t.Name)
				delete(byName, t.Name)
				continue
			}
			tool := &agent.Tool{
				Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
				ApprovalTimeout: sc.ApprovalTimeout, ExecuteFunc: srv.Execute(t.Name),
				ApproverRoles: sc.ApproverRoles, FollowUp: sc.FollowUp.agent(),
			}
			if err := sc.RequireApproval.For(t.Name).apply(tool); err != nil {
				return fail(at+".requireApproval", err.Error())
			}
			byName[t.Name] = tool
			quorum(tool, sc.Approvals)
		}
	}
	if g := f.MCPGateway; g != nil {
		gw, err := buildGateway(f, g, servers, listed)
		if err != nil {
			return fail("mcpGateway", err.Error())
		}
		out.Gateway = gw
		out.List = append(out.List, gw.Agent)
	}
	var anyTool *agent.Tool // the policy of any tool name (the tool named "*")
	for i, tc := range f.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		t := &agent.Tool{Name: tc.Name, Description: tc.Description,
			ApprovalTimeout: tc.ApprovalTimeout, ApproverRoles: tc.ApproverRoles, FollowUp: tc.FollowUp.agent()}
		approval := tc.RequireApproval
		quorum(t, tc.Approvals)
		t.InputSchema, _ = schemaJSON(tc.Name, tc.InputSchema) // checked by Load
		t.SuspendSchema, _ = schemaJSON(tc.Name, tc.SuspendSchema)
		t.ResumeSchema, _ = schemaJSON(tc.Name, tc.ResumeSchema)
		switch {
		case tc.HTTP != nil:
			t.ExecuteFunc = tools.HTTPExecute(tools.HTTPConfig{URL: tc.HTTP.URL, Timeout: tc.HTTP.Timeout, Headers: expandAll(tc.HTTP.Headers)})
			if t.InputSchema == nil {
				t.InputSchema = []byte(`{"type":"object"}`)
			}
		case tc.MCP != nil:
			mt, ok := listed[tc.MCP.Server][tc.MCP.Tool]
			if !ok {
				return fail(at+".mcp.tool", notListed(tc.MCP.Server, tc.MCP.Tool, listed[tc.MCP.Server]))
			}
			if t.Description == "" {
				t.Description = mt.Description
			}
			if t.InputSchema == nil {
				t.InputSchema = mt.InputSchema
			}
			approval = approval.or(f.server(tc.MCP.Server).RequireApproval.For(tc.MCP.Tool))
			if len(t.ApproverRoles) == 0 {
				t.ApproverRoles = f.server(tc.MCP.Server).ApproverRoles
			}
			if t.ApprovalTimeout == 0 {
				t.ApprovalTimeout = f.server(tc.MCP.Server).ApprovalTimeout
			}
			t.FollowUp = tc.FollowUp.orServer(f.server(tc.MCP.Server).FollowUp).agent()
			if tc.Approvals == nil {
				quorum(t, f.server(tc.MCP.Server).Approvals)
			}
			t.ExecuteFunc = servers[tc.MCP.Server].Execute(tc.MCP.Tool)
		}
		if err := approval.apply(t); err != nil {
			return fail(at+".requireApproval", err.Error())
		}
		if t.Name == AnyTool {
			anyTool = t
			continue
		}
		if _, dup := byName[t.Name]; dup {
			return fail(at+".name", fmt.Sprintf("%q is also the name of an MCP server's tool", t.Name))
		}
		byName[t.Name] = t
	}
	agents := map[string]*agent.Agent{}
	for i, ac := range f.Agents {
		at := fmt.Sprintf("agents[%d]", i)
		a := &agent.Agent{
			ID: ac.ID, Name: ac.Name, Description: ac.Description, Instructions: ac.Instructions,
			MaxSteps: ac.MaxSteps, RequireToolApproval: ac.RequireToolApproval,
		}
		if a.Name == "" {
			a.Name = a.ID
		}
		if ac.Memory != nil && ac.Memory.LastMessages != nil {
			a.HistoryMessages = *ac.Memory.LastMessages
			if a.HistoryMessages == 0 {
				a.HistoryMessages = -1
			}
		}
		if ac.External {
			a.External = true
		} else {
			model, err := buildModel(ac.Model, opt)
			if err != nil {
				return fail(at+".model", err.Error())
			}
			a.Model = model
		}
		for j, name := range ac.Tools {
			if name == AnyTool && ac.External {
				if a.AnyTool != nil {
					return fail(fmt.Sprintf("%s.tools[%d]", at, j), fmt.Sprintf("%q is listed twice", name))
				}
				a.AnyTool = anyTool
				if a.AnyTool == nil {
					a.AnyTool = &agent.Tool{Name: AnyTool, RequireApproval: true}
				}
				continue
			}
			t, ok := byName[name]
			if c := clash[name]; c != "" {
				return fail(strings.SplitN(c, ": ", 2)[0], strings.SplitN(c, ": ", 2)[1])
			}
			if !ok {
				return fail(fmt.Sprintf("%s.tools[%d]", at, j), fmt.Sprintf("unknown tool %q: it is not in tools and no MCP server lists it", name))
			}
			if a.Tool(name) != nil {
				return fail(fmt.Sprintf("%s.tools[%d]", at, j), fmt.Sprintf("%q is listed twice", name))
			}
			a.Tools = append(a.Tools, t)
		}
		agents[a.ID] = a
		out.List = append(out.List, a)
	}
	for _, ac := range f.Agents {
		for _, sub := range ac.SubAgents {
			agents[ac.ID].SubAgents = append(agents[ac.ID].SubAgents, agents[sub])
		}
	}
	for i, ac := range f.Agents {
		if cycle := findCycle(agents[ac.ID], nil); cycle != "" {
			return fail(fmt.Sprintf("agents[%d].subAgents", i), "delegation goes round in a circle: "+cycle)
		}
	}
	return out, nil
}

func (f *File) server(name string) MCPServer {
	for _, s := range f.MCPServers {
		if s.Name == name {
			return s
		}
	}
	return MCPServer{}
}

// notListed says that an MCP server lists no tool of that name, and which it lists, so a
// misspelling is seen at once.
func notListed(server, name string, listed map[string]tools.MCPTool) string {
	names := slices.Sorted(maps.Keys(listed))
	if len(names) == 0 {
		return fmt.Sprintf("%q is not a tool %s lists (it lists none)", name, server)
	}
	return fmt.Sprintf("%q is not a tool %s lists (it lists: %s)", name, server, strings.Join(names, ", "))
}

// expandAll is a map with ${VAR} in its values read from the environment (nil for none).
func expandAll(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k], _ = expandEnv(v) // checked by Load
	}
	return out
}

// quorum sets t's approvals from the config's (none: one approval).
func quorum(t *agent.Tool, a *Approvals) {
	if a != nil {
		t.RequiredApprovals, t.ApprovalRoles = a.Required, a.Roles
	}
}

// findCycle returns "a → b → a" when delegation from a comes back to an agent on the path.
func findCycle(a *agent.Agent, path []string) string {
	if i := slices.Index(path, a.ID); i >= 0 {
		s := ""
		for _, id := range append(path[i:], a.ID) {
			if s != "" {
				s += " → "
			}
			s += id
		}
		return s
	}
	for _, sub := range a.SubAgents {
		if c := findCycle(sub, append(path, a.ID)); c != "" {
			return c
		}
	}
	return ""
}

func buildModel(m *Model, opt Options) (llm.Model, error) {
	if m.Provider == "demo" {
		if opt.DemoModel == nil {
			return &llm.Demo{}, nil
		}
		return opt.DemoModel, nil
	}
	cfg := llm.OpenAIConfig{
		BaseURL: m.BaseURL, Model: m.Name, Temperature: m.Temperature,
		MaxTokens: m.MaxTokens, Timeout: m.Timeout,
	}
	if m.APIKeyEnv != "" {
		cfg.APIKey = os.Getenv(m.APIKeyEnv)
	}
	if m.MaxRetries != nil {
		cfg.MaxRetries = *m.MaxRetries
		if cfg.MaxRetries == 0 {
			cfg.MaxRetries = -1
		}
	}
	return llm.NewOpenAI(cfg)
}

// buildGateway makes the gateway's agent from the servers it names: every tool each lists (or
// only those of its tools:), named <server>__<tool>, with the server's requireApproval,
// approvalTimeout and approverRoles, run by the server through tools.MCPServer.Forward.
func buildGateway(f *File, g *MCPGateway, servers map[string]*tools.MCPServer, listed map[string]map[string]tools.MCPTool) (*Gateway, error) {
	gw := &Gateway{Wait: g.Wait, ProgressInterval: g.ProgressInterval,
		Agent: &agent.Agent{ID: g.AgentID, Name: "MCP gateway", External: true, Forwards: true,
			Description: "Calls of MCP clients through /mcp to " + strings.Join(g.Servers, ", ")}}
	if gw.Wait == 0 {
		gw.Wait = DefaultGatewayWait
	}
	if gw.ProgressInterval == 0 {
		gw.ProgressInterval = DefaultGatewayProgressInterval
	}
	// A gateway name is one tool: "a" listing "b__c" and "a__b" listing "c" would both be
	// a__b__c, listed as one and run (and gated) as the other.
	owner := map[string]string{}
	for _, name := range g.Servers {
		sc := f.server(name)
		for _, tn := range slices.Sorted(maps.Keys(listed[name])) {
			if len(sc.Tools) > 0 && !slices.Contains(sc.Tools, tn) {
				continue
			}
			if r, _, bad := hidden.InName(tn); bad {
				return nil, fmt.Errorf("%s lists a tool %q with %s in its name, which hides or reorders what a person reads; list only the tools wanted with mcpServers[].tools", name, tn, hidden.Describe([]rune{r}))
			}
			up := listed[name][tn]
			gt := GatewayTool{Name: name + gatewaySeparator + tn, Server: name, Upstream: up}
			if other, dup := owner[gt.Name]; dup {
				return nil, fmt.Errorf("servers %s and %s both give /mcp a tool named %q (<server>__<tool>); rename one of the servers, or leave the tool out with mcpServers[].tools", other, name, gt.Name)
			}
			owner[gt.Name] = name
			gw.Tools = append(gw.Tools, gt)
			tool := &agent.Tool{
				Name: gt.Name, Description: up.Description, InputSchema: up.InputSchema,
				ApprovalTimeout: sc.ApprovalTimeout, ApproverRoles: sc.ApproverRoles,
				FollowUp: sc.FollowUp.agent(), ExecuteFunc: servers[name].Forward(tn),
			}
			if err := sc.RequireApproval.For(tn).apply(tool); err != nil {
				return nil, err
			}
			quorum(tool, sc.Approvals)
			gw.Agent.Tools = append(gw.Agent.Tools, tool)
		}
	}
	slices.SortFunc(gw.Tools, func(a, b GatewayTool) int { return strings.Compare(a.Name, b.Name) })
	return gw, nil
}

// agent is the follow-up as the agent package holds it.
func (fu FollowUp) agent() agent.FollowUp {
	return agent.FollowUp{RemindAfter: fu.RemindAfter, EscalateAfter: fu.EscalateAfter,
		EscalateTo: slices.Clone(fu.EscalateTo), ExpiringBefore: fu.ExpiringBefore}
}

// orServer is an MCP tool's follow-up: each step it does not set is its server's (escalateAfter
// with the server's escalateTo).
func (fu FollowUp) orServer(sc FollowUp) FollowUp {
	if fu.RemindAfter == 0 {
		fu.RemindAfter = sc.RemindAfter
	}
	if fu.EscalateAfter == 0 {
		fu.EscalateAfter, fu.EscalateTo = sc.EscalateAfter, sc.EscalateTo
	}
	if fu.ExpiringBefore == 0 {
		fu.ExpiringBefore = sc.ExpiringBefore
	}
	return fu
}
