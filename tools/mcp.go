package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/agent"
)

// MCPConfig is one MCP server: a command speaking MCP on stdio, or a streamable HTTP URL.
type MCPConfig struct {
	Name    string
	Command []string
	URL     string
	// Timeout bounds one tool call. Default 60 s.
	Timeout time.Duration
	// Env are variables a stdio server is started with besides PATH, HOME and the locale (see
	// stdioEnv); values as given, already expanded.
	Env map[string]string
	// Headers are sent with every request to a url server (see headerTransport).
	Headers map[string]string
}

// MCPServer is a connection to an MCP server, opened at start and opened again when it is lost
// (a crashed stdio process, a restarted HTTP server).
type MCPServer struct {
	cfg    MCPConfig
	client *mcp.Client

	mu      sync.Mutex
	session *mcp.ClientSession
}

// MCPTool is a tool an MCP server lists.
type MCPTool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// ConnectMCP opens the connection (starting the command for stdio) and checks the server
// answers.
func ConnectMCP(ctx context.Context, cfg MCPConfig, version string) (*MCPServer, error) {
	if len(cfg.Command) == 0 && cfg.URL == "" {
		return nil, errors.New("a command or a url is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	s := &MCPServer{cfg: cfg, client: mcp.NewClient(&mcp.Implementation{Name: "interlock", Version: version}, nil)}
	if _, err := s.connected(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// connected returns the open session, opening one when there is none.
func (s *MCPServer) connected(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil {
		return s.session, nil
	}
	cs, err := s.client.Connect(ctx, s.transport(), nil)
	if err != nil {
		return nil, fmt.Errorf("MCP server %s: connect: %w", s.cfg.Name, err)
	}
	s.session = cs
	return cs, nil
}

// drop forgets a session that failed, so the next call opens a new one.
func (s *MCPServer) drop(cs *mcp.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == cs {
		s.session.Close()
		s.session = nil
	}
}

// Tools lists the server's tools.
func (s *MCPServer) Tools(ctx context.Context) ([]MCPTool, error) {
	cs, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	var out []MCPTool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: list tools: %w", s.cfg.Name, err)
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: tool %s: input schema: %w", s.cfg.Name, t.Name, err)
		}
		out = append(out, MCPTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

// Execute returns an ExecuteFunc that calls the server's tool of that name. A call the server
// answers with isError, or that fails on the wire, is a tool error the model sees; a lost
// connection is opened again once.
func (s *MCPServer) Execute(tool string) func(ctx context.Context, c *agent.Call) (any, error) {
	return func(ctx context.Context, c *agent.Call) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		var object map[string]json.RawMessage
		if err := json.Unmarshal(c.Args, &object); err != nil || object == nil {
			return nil, fmt.Errorf("MCP tools take an object of arguments")
		}
		// Sent as they are, not decoded and encoded again: the server gets the bytes a person
		// approved (key order and number digits included).
		args := c.Args
		res, err := s.call(ctx, tool, args)
		if err != nil && ctx.Err() == nil && !isToolError(err) {
			res, err = s.call(ctx, tool, args) // the session was dropped: one new attempt
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("the MCP tool did not answer within %s", s.cfg.Timeout)
			}
			return nil, err
		}
		text := contentText(res.Content)
		if res.IsError {
			if text == "" {
				text = "the MCP tool reported an error"
			}
			return nil, errors.New(text)
		}
		if res.StructuredContent != nil {
			return res.StructuredContent, nil
		}
		return text, nil
	}
}

// toolError is an error answer of the server (JSON-RPC), as opposed to a broken connection.
type toolError struct{ err error }

func (e toolError) Error() string { return e.err.Error() }

func isToolError(err error) bool { var te toolError; return errors.As(err, &te) }

func (s *MCPServer) call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	cs, err := s.connected(ctx)
	if err != nil {
		return nil, err
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		var rpcErr interface{ ErrorCode() int64 }
		if errors.As(err, &rpcErr) || strings.Contains(err.Error(), "jsonrpc") {
			return nil, toolError{fmt.Errorf("MCP server %s: %w", s.cfg.Name, err)}
		}
		s.drop(cs)
		return nil, fmt.Errorf("MCP server %s: %w", s.cfg.Name, err)
	}
	return res, nil
}

// contentText joins the text parts of a result (the form most MCP tools answer in).
func contentText(parts []mcp.Content) string {
	var b strings.Builder
	for _, p := range parts {
		if t, ok := p.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// Close ends the session (and the stdio process).
func (s *MCPServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		return nil
	}
	err := s.session.Close()
	s.session = nil
	return err
}
