package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"interlock/agent"
	"interlock/runtype"
)

// Error is everything wrong with a config file, one problem per line, each with its path.
type Error struct {
	File     string
	Problems []string
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return e.File + ": " + e.Problems[0]
	}
	return e.File + ":\n  " + strings.Join(e.Problems, "\n  ")
}

// Load reads and checks a config file. It reaches nothing outside the file: MCP servers are
// contacted by Build.
func Load(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, raw)
}

// Parse checks a config file's contents; path only names it in errors.
func Parse(path string, raw []byte) (*File, error) {
	f := &File{path: path}
	if err := yaml.UnmarshalWithOptions(raw, f, yaml.DisallowUnknownField()); err != nil {
		return nil, &Error{File: path, Problems: []string{yamlProblem(err)}}
	}
	if p := f.check(); len(p) > 0 {
		return nil, &Error{File: path, Problems: p}
	}
	return f, nil
}

// yamlProblem is a YAML error in one line: "line 3, column 5: …" without the source excerpt.
func yamlProblem(err error) string {
	var se yaml.Error
	if errors.As(err, &se) {
		if tok := se.GetToken(); tok != nil && tok.Position != nil {
			return fmt.Sprintf("line %d, column %d: %s", tok.Position.Line, tok.Position.Column, se.GetMessage())
		}
		return se.GetMessage()
	}
	return strings.TrimSpace(err.Error())
}

var (
	// toolName is what chat-completion APIs accept as a function name.
	toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	agentID  = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,100}$`)
	// envName is a variable name every shell can set.
	envName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// check finds every problem that can be found without leaving the process.
func (f *File) check() []string {
	var p problems
	f.checkGateway(&p)
	if len(f.Agents) == 0 && f.MCPGateway == nil && (len(f.Tools) > 0 || len(f.MCPServers) > 0) {
		p.add("agents", "at least one agent is required to use tools (a file without agents serves the built-in demo agents)")
	}
	servers := map[string]bool{}
	for i, s := range f.MCPServers {
		at := fmt.Sprintf("mcpServers[%d]", i)
		switch {
		case s.Name == "":
			p.add(at+".name", "is required")
		case servers[s.Name]:
			p.add(at+".name", fmt.Sprintf("%q is defined twice", s.Name))
		}
		servers[s.Name] = true
		switch {
		case len(s.Command) == 0 && s.URL == "":
			p.add(at, "a command (stdio) or a url (streamable HTTP) is required")
		case len(s.Command) > 0 && s.URL != "":
			p.add(at, "has both a command and a url; give one")
		case s.URL != "":
			p.url(at+".url", s.URL)
		}
		if s.Timeout < 0 {
			p.add(at+".timeout", "must be positive")
		}
		if s.StartTimeout < 0 {
			p.add(at+".startTimeout", "must be positive")
		}
		if s.MaxSessions < 0 {
			p.add(at+".maxSessions", "must be positive")
		}
		if s.IdleTimeout < 0 {
			p.add(at+".idleTimeout", "must be positive")
		}
		if len(s.Command) > 0 && (s.MaxSessions != 0 || s.IdleTimeout != 0) {
			p.add(at, "maxSessions and idleTimeout are for a url server: a command is one process with one session")
		}
		p.approvalTimeout(at+".approvalTimeout", s.ApprovalTimeout)
		s.RequireApproval.problems(&p, at+".requireApproval")
		p.approverRoles(at+".approverRoles", s.ApproverRoles)
		p.followUp(at, s.FollowUp, s.ApprovalTimeout)
		p.approvals(at+".approvals", s.Approvals)
		if s.Approvals != nil && s.Approvals.Required > 1 && len(s.RequireApproval.Rules) == 0 {
			p.add(at+".approvals", fmt.Sprintf("required: %d needs requireApproval naming the tools it holds: a call that is not held runs without anyone's approval", s.Approvals.Required))
		}
		if len(s.Env) > 0 && s.URL != "" {
			p.add(at+".env", "is for a command (stdio) server; a url server is sent headers")
		}
		if len(s.Headers) > 0 && len(s.Command) > 0 {
			p.add(at+".headers", "are sent to a url server; a command (stdio) server is given env")
		}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			if !envName.MatchString(k) {
				p.add(at+".env", fmt.Sprintf("%q is not a variable name (letters, digits and _, not starting with a digit)", k))
			}
			if _, err := expandEnv(s.Env[k]); err != nil {
				p.add(at+".env."+k, err.Error())
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
			if _, err := expandEnv(s.Headers[k]); err != nil {
				p.add(at+".headers."+k, err.Error())
			}
		}
	}
	// A tool without http or mcp is a tool only external agents may list (they run it
	// themselves): internalUse and externalUse tell which agents list each name.
	internalUse, externalUse := map[string]bool{}, map[string]bool{}
	for _, a := range f.Agents {
		for _, name := range a.Tools {
			if a.External {
				externalUse[name] = true
			} else {
				internalUse[name] = true
			}
		}
	}
	tools := map[string]bool{}
	for i, t := range f.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Name == AnyTool:
		case !toolName.MatchString(t.Name):
			p.add(at+".name", fmt.Sprintf("%q is not a tool name (1 to 64 letters, digits, _ or -)", t.Name))
		case tools[t.Name]:
			p.add(at+".name", fmt.Sprintf("%q is defined twice", t.Name))
		}
		if t.Name == AnyTool && tools[t.Name] {
			p.add(at+".name", fmt.Sprintf("%q is defined twice", t.Name))
		}
		tools[t.Name] = true
		switch {
		case t.Name == AnyTool && (t.HTTP != nil || t.MCP != nil):
			p.add(at, `the tool "*" is the approval policy of any tool name an external agent is asked about: it has no http or mcp`)
		case t.Name == AnyTool:
		case t.HTTP == nil && t.MCP == nil && (internalUse[t.Name] || !externalUse[t.Name]):
			p.add(at, "a tool needs http: {url: …} or mcp: {server: …, tool: …}, unless only external agents list it (they run it themselves)")
		case t.HTTP != nil && t.MCP != nil:
			p.add(at, "has both http and mcp; give one")
		case t.HTTP != nil:
			p.url(at+".http.url", t.HTTP.URL)
			if t.HTTP.Timeout < 0 {
				p.add(at+".http.timeout", "must be positive")
			}
		case t.MCP != nil:
			if !servers[t.MCP.Server] {
				p.add(at+".mcp.server", fmt.Sprintf("%q is not in mcpServers", t.MCP.Server))
			}
			if t.MCP.Tool == "" {
				p.add(at+".mcp.tool", "is required")
			}
		}
		p.approvalTimeout(at+".approvalTimeout", t.ApprovalTimeout)
		t.RequireApproval.problem(&p, at+".requireApproval")
		for _, s := range t.schemas() {
			if _, err := schemaJSON(t.Name+"/"+s.key, s.value); err != nil {
				p.add(at+"."+s.key, err.Error())
			}
		}
		p.approverRoles(at+".approverRoles", t.ApproverRoles)
		timeout := t.ApprovalTimeout
		if timeout == 0 && t.MCP != nil && servers[t.MCP.Server] {
			timeout = f.server(t.MCP.Server).ApprovalTimeout // what the tool takes
		}
		p.followUp(at, t.FollowUp, timeout)
		p.approvals(at+".approvals", t.Approvals)
		if t.Approvals != nil && t.Approvals.Required > 1 && !t.RequireApproval.Bool && t.RequireApproval.Expr == "" && t.MCP == nil && t.Name != AnyTool {
			p.add(at+".approvals", fmt.Sprintf("required: %d needs requireApproval: true: a call that is not held for approval runs without anyone's", t.Approvals.Required))
		}
		for k, v := range t.httpHeaders() {
			if _, err := expandEnv(v); err != nil {
				p.add(at+".http.headers."+k, err.Error())
			}
		}
	}
	ids := map[string]bool{}
	for i, a := range f.Agents {
		at := fmt.Sprintf("agents[%d]", i)
		switch {
		case !agentID.MatchString(a.ID):
			p.add(at+".id", fmt.Sprintf("%q is not an agent id (1 to 100 letters, digits, _, . or -)", a.ID))
		case ids[a.ID]:
			p.add(at+".id", fmt.Sprintf("%q is defined twice", a.ID))
		}
		ids[a.ID] = true
		if a.Memory != nil && a.Memory.LastMessages != nil && *a.Memory.LastMessages < 0 {
			p.add(at+".memory.lastMessages", "must be 0 or more")
		}
		if a.MaxSteps < 0 {
			p.add(at+".maxSteps", "must be positive")
		}
		for j, name := range a.Tools {
			if name == AnyTool && !a.External {
				p.add(fmt.Sprintf("%s.tools[%d]", at, j), `"*" (any tool name) is for external agents only: list the tools a model may call`)
			}
		}
		if a.External {
			f.checkExternal(&p, at, a)
			continue
		}
		f.checkModel(&p, at+".model", a.Model)
	}
	external := map[string]bool{}
	for _, a := range f.Agents {
		external[a.ID] = a.External
	}
	for i, a := range f.Agents {
		for j, sub := range a.SubAgents {
			switch {
			case !ids[sub]:
				p.add(fmt.Sprintf("agents[%d].subAgents[%d]", i, j), fmt.Sprintf("%q is not an agent id in agents", sub))
			case sub == a.ID:
				p.add(fmt.Sprintf("agents[%d].subAgents[%d]", i, j), "an agent cannot delegate to itself")
			case external[sub]:
				p.add(fmt.Sprintf("agents[%d].subAgents[%d]", i, j), fmt.Sprintf("%q is an external agent: it runs elsewhere and cannot be delegated to", sub))
			}
		}
	}
	if g := f.MCPGateway; g != nil && g.AgentID != "" {
		external[g.AgentID] = true // the gateway's own agent, external
	}
	if f.Auth != nil {
		p.list = append(p.list, f.Auth.Problems("auth")...)
		for i, t := range f.Auth.Tokens {
			for j, id := range t.Agents {
				at := fmt.Sprintf("auth.tokens[%d].agents[%d]", i, j)
				switch isExternal, ok := external[id]; {
				case id == "":
				case !ok:
					p.add(at, fmt.Sprintf("%q is not an agent id in agents", id))
				case !isExternal:
					p.add(at, fmt.Sprintf("%q runs in Interlock: approvals are requested for external agents (external: true)", id))
				}
			}
		}
	}
	if f.Notifications != nil {
		p.list = append(p.list, f.Notifications.Problems("notifications")...)
	}
	return p.list
}

// AnyTool is the name that stands for any tool name: in an external agent's tools, and as the
// name of the tool whose policy applies to them.
const AnyTool = "*"

// checkExternal checks an external agent (at is its path): it runs elsewhere, so what only a
// model uses has no place in it.
// checkGateway checks mcpGateway: an agent id of its own, servers that are mcpServers, and
// waits that make sense.
func (f *File) checkGateway(p *problems) {
	g := f.MCPGateway
	if g == nil {
		return
	}
	switch {
	case g.AgentID == "":
		p.add("mcpGateway.agentId", "is required: the id of the agent whose runs are the gateway's calls (such as mcp-gateway)")
	case slices.ContainsFunc(f.Agents, func(a Agent) bool { return a.ID == g.AgentID }):
		p.add("mcpGateway.agentId", fmt.Sprintf("%q is also the id of an agent in agents: the gateway makes its own agent; give it another id", g.AgentID))
	}
	if len(g.Servers) == 0 {
		p.add("mcpGateway.servers", "is required: the names of the mcpServers to re-expose")
	}
	seen := map[string]bool{}
	for i, name := range g.Servers {
		at := fmt.Sprintf("mcpGateway.servers[%d]", i)
		switch {
		case seen[name]:
			p.add(at, fmt.Sprintf("%q is listed twice", name))
		case !slices.ContainsFunc(f.MCPServers, func(s MCPServer) bool { return s.Name == name }):
			p.add(at, fmt.Sprintf("%q is not the name of one of mcpServers", name))
		}
		seen[name] = true
	}
	if g.Wait < 0 {
		p.add("mcpGateway.wait", "must be positive")
	}
	if g.ProgressInterval < 0 || (g.ProgressInterval > 0 && g.ProgressInterval < 100*time.Millisecond) {
		p.add("mcpGateway.progressInterval", "must be at least 100ms")
	}
}

func (f *File) checkExternal(p *problems, at string, a Agent) {
	why := "has no effect on an external agent: it runs elsewhere and Interlock only holds its calls for a person"
	if a.Model != nil {
		p.add(at+".model", "an external agent has no model: it runs elsewhere (leave model out, or external: false)")
	}
	if a.Instructions != "" {
		p.add(at+".instructions", why)
	}
	if len(a.SubAgents) > 0 {
		p.add(at+".subAgents", why)
	}
	if a.MaxSteps != 0 {
		p.add(at+".maxSteps", why)
	}
	if a.Memory != nil {
		p.add(at+".memory", why)
	}
}

func (f *File) checkModel(p *problems, at string, m *Model) {
	if m == nil {
		p.add(at, "is required: {provider: openai, name: …} or {provider: demo}")
		return
	}
	switch m.Provider {
	case "demo":
	case "openai":
		if m.Name == "" {
			p.add(at+".name", "is required (the model name the server knows, such as gpt-4o-mini or llama3.1)")
		}
		if m.BaseURL != "" {
			p.url(at+".baseURL", m.BaseURL)
		}
		if m.APIKeyEnv != "" && os.Getenv(m.APIKeyEnv) == "" {
			p.add(at+".apiKeyEnv", fmt.Sprintf("the environment variable %s is not set", m.APIKeyEnv))
		}
	case "":
		p.add(at+".provider", "is required: openai or demo")
	default:
		p.add(at+".provider", fmt.Sprintf("%q is not a provider: use openai (any OpenAI-compatible server) or demo", m.Provider))
	}
	if m.Temperature != nil && (*m.Temperature < 0 || *m.Temperature > 2) {
		p.add(at+".temperature", "must be between 0 and 2")
	}
	if m.MaxTokens < 0 {
		p.add(at+".maxTokens", "must be positive")
	}
	if m.Timeout < 0 {
		p.add(at+".timeout", "must be positive")
	}
	if m.MaxRetries != nil && *m.MaxRetries < 0 {
		p.add(at+".maxRetries", "must be 0 or more")
	}
}

type keyedSchema struct {
	key   string
	value any
}

func (t *Tool) schemas() []keyedSchema {
	return []keyedSchema{{"inputSchema", t.InputSchema}, {"suspendSchema", t.SuspendSchema}, {"resumeSchema", t.ResumeSchema}}
}

func (t *Tool) httpHeaders() map[string]string {
	if t.HTTP == nil {
		return nil
	}
	return t.HTTP.Headers
}

// expandEnv replaces ${VAR} (and $VAR) with the variable's value; an unset variable is an
// error, since a header like "Bearer " would fail at the first call instead of at start.
func expandEnv(s string) (string, error) {
	var missing []string
	out := os.Expand(s, func(name string) string {
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("the environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

type problems struct{ list []string }

func (p *problems) add(path, msg string) { p.list = append(p.list, path+": "+msg) }

// approvalTimeout checks an approvalTimeout: absent (0), or at least a second.
func (p *problems) approvalTimeout(path string, d time.Duration) {
	if d != 0 && d < time.Second {
		p.add(path, fmt.Sprintf("%s is too short: give at least 1s (such as 30m), or leave it out for no limit", d))
	}
}

// followUp checks the remindAfter, escalateAfter, escalateTo and expiringBefore of the tool or
// server at path, whose calls expire after timeout (0: never): each duration at least a second
// and shorter than the timeout (a step after the expiry would never be sent); escalateAfter and
// escalateTo together, escalateTo naming roles that may decide; expiringBefore only with a
// timeout.
func (p *problems) followUp(path string, fu FollowUp, timeout time.Duration) {
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"remindAfter", fu.RemindAfter}, {"escalateAfter", fu.EscalateAfter}, {"expiringBefore", fu.ExpiringBefore}} {
		switch {
		case d.d == 0:
		case d.d < time.Second:
			p.add(path+"."+d.key, fmt.Sprintf("%s is too short: give at least 1s (such as 10m), or leave it out", d.d))
		case d.key == "expiringBefore" && timeout == 0:
			p.add(path+"."+d.key, "needs approvalTimeout: a call without one never expires")
		case timeout > 0 && d.d >= timeout:
			p.add(path+"."+d.key, fmt.Sprintf("%s is not shorter than approvalTimeout (%s): the call expires first", d.d, timeout))
		}
	}
	switch {
	case fu.EscalateAfter != 0 && len(fu.EscalateTo) == 0:
		p.add(path+".escalateAfter", "needs escalateTo: the roles that may decide the call once it is escalated")
	case fu.EscalateAfter == 0 && len(fu.EscalateTo) > 0:
		p.add(path+".escalateTo", "needs escalateAfter: how long a call waits before these roles may decide it")
	}
	p.approverRoles(path+".escalateTo", fu.EscalateTo)
}

// approverRoles checks that each of a tool's approverRoles names a role that may decide.
func (p *problems) approverRoles(path string, roles []string) {
	for j, r := range roles {
		switch {
		case strings.TrimSpace(r) == "":
			p.add(fmt.Sprintf("%s[%d]", path, j), "must name a role")
		case runtype.Role(r) == runtype.RoleRequester:
			p.add(fmt.Sprintf("%s[%d]", path, j), "the requester role asks for approvals and may not decide them")
		}
	}
}

// maxApprovals bounds approvals.required: a quorum larger than any team is a typo.
const maxApprovals = 100

// approvals checks a quorum: required from 1 to maxApprovals, roles as approverRoles.
func (p *problems) approvals(path string, a *Approvals) {
	if a == nil {
		return
	}
	if a.Required < 1 || a.Required > maxApprovals {
		p.add(path+".required", fmt.Sprintf("%d is not a number of approvals: give 1 to %d (1: one approval, as without approvals)", a.Required, maxApprovals))
	}
	p.approverRoles(path+".roles", a.Roles)
}

func (p *problems) url(path, s string) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.add(path, fmt.Sprintf("%q is not an http(s) URL", s))
	}
}

// schemaJSON turns a schema written in YAML into JSON and checks it compiles (nil: none).
func schemaJSON(name string, v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("is not a JSON Schema: %w", err)
	}
	if _, err := agent.CompileSchema(name, raw); err != nil {
		return nil, fmt.Errorf("is not a valid JSON Schema: %s", strings.TrimPrefix(err.Error(), "schema "+name+": "))
	}
	return raw, nil
}
