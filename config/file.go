// Package config reads the YAML file (--config / INTERLOCK_CONFIG) that says which agents a
// server runs: their models, their tools (HTTP endpoints and MCP servers) and the approval
// policy of each tool. Load checks the file without reaching anything; Build turns it into
// agents, connecting to the MCP servers. Both answer a mistake with the file, the path inside
// it (agents[0].model.baseURL) and what is wrong, so a server with a bad config never starts.
package config

import (
	"time"

	"interlock/auth"
	"interlock/notify"
)

// File is the whole config file. Keys are the interface users write: extend, never rename.
type File struct {
	Agents     []Agent     `yaml:"agents"`
	Tools      []Tool      `yaml:"tools"`
	MCPServers []MCPServer `yaml:"mcpServers"`
	// Auth says who may use the server (tokens, JWTs). Default: none, and the server makes
	// one admin token of its own at start.
	Auth *auth.Config `yaml:"auth"`
	// Notifications are the webhooks told when a call waits for a person, is decided or
	// expires. Default: none.
	Notifications *notify.Config `yaml:"notifications"`
	// MCPGateway re-exposes mcpServers to MCP clients at /mcp, holding the calls their
	// requireApproval names for a person. Default: off.
	MCPGateway *MCPGateway `yaml:"mcpGateway"`

	path string // where it was read from, for messages
}

// Agent is one agent a server runs.
type Agent struct {
	ID           string `yaml:"id"`
	Name         string `yaml:"name"`
	Description  string `yaml:"description"`
	Instructions string `yaml:"instructions"`
	Model        *Model `yaml:"model"`
	// Tools are names from tools: or tools an MCP server lists.
	Tools []string `yaml:"tools"`
	// SubAgents are ids of other agents this one may delegate to.
	SubAgents []string `yaml:"subAgents"`
	// RequireToolApproval holds every tool call of this agent for a person.
	RequireToolApproval bool `yaml:"requireToolApproval"`
	// MaxSteps bounds the model calls of one run (default 10).
	MaxSteps int `yaml:"maxSteps"`
	// Memory says how much of its thread a run is given.
	Memory *Memory `yaml:"memory"`
	// External marks an agent that runs elsewhere (its own code, a coding agent): it has no
	// model, instructions, sub-agents, maxSteps or memory, and its runs are approval requests
	// (requestApproval, POST /approvals). Its tools need no http or mcp (the caller runs
	// them); "*" in its tools accepts any tool name, with the policy of the tool named "*" in
	// tools when there is one, else needing approval. Default false.
	External bool `yaml:"external"`
}

// Memory is an agent's use of its memory thread.
type Memory struct {
	// LastMessages is how many of the thread's newest messages a run is given (0: none).
	// Default: the server's (50).
	LastMessages *int `yaml:"lastMessages"`
}

// Model says which model an agent calls.
type Model struct {
	// Provider is openai (any OpenAI-compatible server) or demo (the built-in scripted model).
	Provider string `yaml:"provider"`
	// BaseURL is the API root, such as http://127.0.0.1:11434/v1 (default: OpenAI's).
	BaseURL string `yaml:"baseURL"`
	// Name is the model name the server knows.
	Name string `yaml:"name"`
	// APIKeyEnv names the environment variable holding the API key; the key itself is never
	// in the file.
	APIKeyEnv   string        `yaml:"apiKeyEnv"`
	Temperature *float64      `yaml:"temperature"`
	MaxTokens   int           `yaml:"maxTokens"`
	Timeout     time.Duration `yaml:"timeout"`
	// MaxRetries is how often a call answered 429 or 5xx, or whose answer was cut off, is made
	// again (default 3; 0: never).
	MaxRetries *int `yaml:"maxRetries"`
}

// Tool is a tool agents may list: an HTTP endpoint, or an MCP server's tool under a name of
// this file's choosing. A tool only external agents list needs neither (its caller runs it):
// it has a name, a schema and an approval policy. The tool named "*" is the policy of every
// tool name an external agent with tools: ["*"] is asked about that is not a tool of its own.
type Tool struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// InputSchema is the JSON Schema of the arguments (YAML or JSON syntax). MCP tools default
	// to the schema their server lists; HTTP tools to any object.
	InputSchema any `yaml:"inputSchema"`
	// SuspendSchema and ResumeSchema describe, for a tool that answers {"suspend": …}, the
	// payload a person sees and the resumeData they must send back.
	SuspendSchema any `yaml:"suspendSchema"`
	ResumeSchema  any `yaml:"resumeSchema"`
	// RequireApproval is true (every call waits for a person), false (the default: none
	// does), or a CEL expression over the call — args, tool, agent, run, principal — true
	// when a person must decide ("args.amount > 100"): compiled at start, a bad expression
	// stops the server with its path; an evaluation error asks a person (docs/policies.md).
	RequireApproval Approval `yaml:"requireApproval"`
	// ApprovalTimeout (such as 30m) is how long a call of this tool waits for a person — for
	// approval, or for resume data after it suspended — before it expires: the tool does not
	// run and the model is told the request timed out. At least 1s; default: no limit. An MCP
	// tool without one takes its server's.
	ApprovalTimeout time.Duration `yaml:"approvalTimeout"`
	// FollowUp: remindAfter, escalateAfter with escalateTo, expiringBefore. An MCP tool
	// without them takes its server's.
	FollowUp `yaml:",inline"`
	HTTP     *HTTP    `yaml:"http"`
	MCP      *MCPTool `yaml:"mcp"`
	// ApproverRoles are the only roles (besides admin) that may decide the tool's calls.
	ApproverRoles []string `yaml:"approverRoles"`
	// Approvals asks for several people's approval of each call (a quorum). Default: one. An
	// MCP tool without it takes its server's.
	Approvals *Approvals `yaml:"approvals"`
}

// Approvals is a tool's quorum: how many distinct people must approve a call before it runs,
// and who may.
type Approvals struct {
	// Required is how many approvals from distinct eligible principals a call needs (at least
	// 1; 1 is one approval, as without approvals). The run's starter never counts; the same
	// person approving twice is refused; any eligible decline declines at once; an approval of
	// edited arguments starts the count again.
	Required int `yaml:"required"`
	// Roles, when set, narrow who may approve or decline the calls to holders of one of them
	// (or admin), besides approverRoles.
	Roles []string `yaml:"roles"`
}

// FollowUp is what the server does while a call of a tool waits for a person, before it
// expires; each step is sent once per call, as a run event, a webhook and a marker in the
// console. Default: none of them.
type FollowUp struct {
	// RemindAfter (such as 10m): after this long without a decision, a reminder
	// (webhook approval.reminder). At least 1s.
	RemindAfter time.Duration `yaml:"remindAfter"`
	// EscalateAfter (such as 30m): after this long without a decision, the call is escalated
	// (webhook approval.escalated), and the roles of EscalateTo may decide it from then on,
	// besides approverRoles (or approver) and admin. At least 1s; needs escalateTo.
	EscalateAfter time.Duration `yaml:"escalateAfter"`
	EscalateTo    []string      `yaml:"escalateTo"`
	// ExpiringBefore (such as 10m): this long before the call expires, a warning
	// (webhook approval.expiring). Needs approvalTimeout, and must be shorter than it.
	ExpiringBefore time.Duration `yaml:"expiringBefore"`
}

// HTTP is an HTTP tool's endpoint. ${VAR} in header values is read from the environment.
type HTTP struct {
	URL     string            `yaml:"url"`
	Timeout time.Duration     `yaml:"timeout"`
	Headers map[string]string `yaml:"headers"`
}

// MCPTool names a tool of a server in mcpServers.
type MCPTool struct {
	Server string `yaml:"server"`
	Tool   string `yaml:"tool"`
}

// MCPServer is an MCP server whose tools agents may use: a command speaking MCP on stdio, or a
// streamable HTTP URL. Each tool it lists (or only those in Tools) becomes a tool of that name.
type MCPServer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	URL     string   `yaml:"url"`
	// Tools, when set, are the only tools of the server offered.
	Tools []string `yaml:"tools"`
	// Env are the variables a command (stdio) server is started with besides PATH, HOME and
	// the locale (LANG, LANGUAGE, LC_*, TZ), which are all it gets of Interlock's environment.
	// ${VAR} in a value is read from Interlock's environment at start. Default: none.
	Env map[string]string `yaml:"env"`
	// Headers are sent with every request to a url server, such as Authorization. ${VAR} in a
	// value is read from the environment at start. Default: none.
	Headers map[string]string `yaml:"headers"`
	// RequireApproval lists the server's tools whose calls wait for a person ("*": all), or
	// maps tool names ("*": every tool it does not name) to true, false or a CEL expression,
	// as a tool's requireApproval. Each name must be a tool the server lists: a misspelt name
	// would leave its tool ungated.
	RequireApproval ServerApproval `yaml:"requireApproval"`
	// ApprovalTimeout is the approvalTimeout of the server's tools (see Tool.ApprovalTimeout).
	ApprovalTimeout time.Duration `yaml:"approvalTimeout"`
	// FollowUp is the remindAfter, escalateAfter, escalateTo and expiringBefore of the
	// server's tools (see FollowUp).
	FollowUp `yaml:",inline"`
	// Timeout bounds one call to the server. Default 60s.
	Timeout time.Duration `yaml:"timeout"`
	// StartTimeout bounds the start of a session with the server (the command started, or the
	// url reached, and its answer to initialize), at start and at each reconnect. Default 30s.
	StartTimeout time.Duration `yaml:"startTimeout"`
	// MaxSessions bounds the sessions open at once with a url server: each call in flight has
	// one of its own, so that a question the server asks in the middle of a call belongs to it
	// (docs/mcp-gateway.md); a call beyond them waits for one. Default 16. Not for a command.
	MaxSessions int `yaml:"maxSessions"`
	// IdleTimeout is how long a url server's session no call uses stays open for the next
	// call. Default 5m. Not for a command.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// ApproverRoles are the only roles (besides admin) that may decide its tools' calls.
	ApproverRoles []string `yaml:"approverRoles"`
	// Approvals is the quorum of its tools' calls (see Tool.Approvals). Default: one approval.
	Approvals *Approvals `yaml:"approvals"`
}

// MCPGateway is the MCP approval gateway (/mcp): MCP clients see the tools of Servers, and each
// call they make is a run of the agent AgentID — held for a person when its server's
// requireApproval names the tool, forwarded at once otherwise, recorded either way.
type MCPGateway struct {
	// AgentID is the id of the gateway's agent, an external agent made from Servers (it must
	// not be one of agents:): its runs are the calls; tokens bound to agents need it.
	AgentID string `yaml:"agentId"`
	// Servers are the names of the mcpServers re-exposed; each tool is listed as
	// <server>__<tool>. Servers not named are never exposed.
	Servers []string `yaml:"servers"`
	// Wait is how long a held call's answer waits for a decision before the client is told
	// the call is pending (it calls again to get the outcome). Default 50s, under the 60 s
	// after which common clients give up on a silent call.
	Wait time.Duration `yaml:"wait"`
	// ProgressInterval is how often a held call whose client sent a progress token is sent
	// notifications/progress. Default 15s.
	ProgressInterval time.Duration `yaml:"progressInterval"`
}

// Defaults of the gateway's waits.
const (
	DefaultGatewayWait             = 50 * time.Second
	DefaultGatewayProgressInterval = 15 * time.Second
)
