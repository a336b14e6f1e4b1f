package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
	// StartTimeout bounds the start of a session: the command started (or the URL reached) and
	// the server's answer to initialize. Default 30 s.
	StartTimeout time.Duration
	// Env are variables a stdio server is started with besides PATH, HOME and the locale (see
	// stdioEnv); values as given, already expanded.
	Env map[string]string
	// Headers are sent with every request to a url server (see headerTransport).
	Headers map[string]string
	// Logger receives the server's stderr lines (stdio), its deaths and its restarts, each
	// with the server's name. Default: slog.Default().
	Logger *slog.Logger
	// MaxSessions bounds the sessions open at once with a url server, one per call in flight
	// (mcp_pool.go): a call beyond them waits for one. Default 16. A stdio server has one.
	MaxSessions int
	// IdleTimeout is how long a url server's session no call uses stays open for the next
	// call. Default 5 minutes.
	IdleTimeout time.Duration
}

// MCPServer is a connection to an MCP server, opened at start and opened again when it is lost
// (a crashed stdio process, a restarted HTTP server) — but only before a call is sent: a tool
// call that may have reached the server is never sent again (see Execute).
type MCPServer struct {
	cfg    MCPConfig
	log    *slog.Logger
	client *mcp.Client

	// calls are the calls in flight, to which a question asked in the middle of a call goes
	// (mcp_midcall.go).
	callsMu sync.Mutex
	calls   map[*inFlight]struct{}

	// pool holds a url server's sessions, one per call in flight (mcp_pool.go); nil for a
	// stdio server, whose one session is session.
	pool *sessionPool

	mu      sync.Mutex
	session *mcp.ClientSession
	proc    *process // the stdio server's process of the session
	lost    bool     // the last session was lost: the next one is a restart
}

// MCPTool is a tool an MCP server lists.
type MCPTool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	// Listed is the tool as the server listed it (title, annotations, output schema, _meta),
	// for the MCP gateway, which lists it again to its clients.
	Listed *mcp.Tool
}

// maxMCPResult bounds the result of a call passed on to the model, as maxHTTPAnswer does for
// HTTP tools: a result goes into the model's context and the database.
const maxMCPResult = maxHTTPAnswer

// maxMCPMessage bounds one message read from a server (the SDK's own line limit for stdio): a
// bound on what a server makes Interlock hold. A result between maxMCPResult and it is refused
// with the session kept; one above it ends the session.
const maxMCPMessage = mcp.DefaultMaxLineLength

// ConnectMCP opens the connection (starting the command for stdio) and checks the server
// answers within the start timeout.
func ConnectMCP(ctx context.Context, cfg MCPConfig, version string) (*MCPServer, error) {
	if len(cfg.Command) == 0 && cfg.URL == "" {
		return nil, errors.New("a command or a url is required")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = defaultMaxSessions
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultIdleTimeout
	}
	s := &MCPServer{cfg: cfg, log: log.With("mcpServer", cfg.Name)}
	// Questions come back as results (mcp_input.go): the SDK's own round trips are off.
	s.client = mcp.NewClient(&mcp.Implementation{Name: "interlock", Version: version}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}, ElicitationHandler: s.askedMidCall})
	if len(cfg.Command) == 0 {
		s.pool = newSessionPool(cfg.MaxSessions, cfg.IdleTimeout, s.openPooled)
	}
	// The first session checks the server answers; a url server's stays open for the first call.
	cs, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	s.release(cs)
	return s, nil
}

// acquire returns a session for one call (or a listing): the stdio server's one session, or a
// url server's session of the call's own (mcp_pool.go). Give it back with release once the call
// has ended — or, when it must not serve another call, with retire or lose.
func (s *MCPServer) acquire(ctx context.Context) (*mcp.ClientSession, error) {
	if s.pool != nil {
		return s.pool.take(ctx)
	}
	return s.connected(ctx)
}

// release gives back a session whose call has ended, for the next call.
func (s *MCPServer) release(cs *mcp.ClientSession) {
	if s.pool != nil {
		s.pool.put(cs)
	}
}

// retire gives back a url server's session whose call ended without its answer (timed out or
// cancelled): the session works, but the server may still go on with the call, and a question
// it asks then must not reach the next call on it — so the session is closed. A stdio server's
// session stays: its questions are told apart otherwise (askedMidCall).
func (s *MCPServer) retire(cs *mcp.ClientSession) {
	if s.pool != nil {
		s.pool.drop(cs, false)
	}
}

// openPooled opens a url server's session for the pool.
func (s *MCPServer) openPooled(ctx context.Context) (*mcp.ClientSession, error) {
	cs, _, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost {
		s.log.Info("MCP server restarted: a new session is open")
		s.lost = false
	}
	return cs, nil
}

// connected returns the stdio server's open session, opening one when there is none or its
// process is known to have exited. Callers that find a session being opened wait for it.
func (s *MCPServer) connected(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil && s.proc != nil && s.proc.exitedNow() {
		s.loseLocked(s.session, "its process exited", false)
	}
	if s.session != nil {
		return s.session, nil
	}
	cs, proc, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	if s.lost {
		s.log.Info("MCP server restarted: a new session is open")
		s.lost = false
	}
	s.session, s.proc = cs, proc
	return cs, nil
}

// open opens a new session (starting the command of a stdio server, whose process it returns),
// within the start timeout.
func (s *MCPServer) open(ctx context.Context) (*mcp.ClientSession, *process, error) {
	startCtx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	t, proc := s.transport()
	cs, err := s.client.Connect(startCtx, t, nil)
	if err != nil {
		if proc != nil {
			proc.abandon()
		}
		if ctx.Err() == nil && startCtx.Err() != nil {
			return nil, nil, fmt.Errorf("MCP server %s did not answer initialize within %s (mcpServers[].startTimeout)", s.cfg.Name, s.cfg.StartTimeout)
		}
		if redirect, ok := asRedirectError(err); ok {
			return nil, nil, fmt.Errorf("MCP server %s %w", s.cfg.Name, redirect)
		}
		return nil, nil, fmt.Errorf("MCP server %s: connect: %w", s.cfg.Name, err)
	}
	return cs, proc, nil
}

// lose forgets a session whose connection failed, so the next call opens a new one. It logs the
// loss once, and closes the session in the background: a stdio process that will not exit must
// not hold up the calls that follow. ended says Interlock ends a session that still works (a
// message too large to read), so the process's exit is not a death. A url server's lost
// connection closes its idle sessions too (the server is likely gone, or restarted and has
// forgotten them); a session Interlock ends is closed alone.
func (s *MCPServer) lose(cs *mcp.ClientSession, why error, ended bool) {
	if s.pool != nil {
		if !ended {
			s.log.Warn("MCP server connection lost; the next call opens a new session", "reason", why.Error())
			s.mu.Lock()
			s.lost = true
			s.mu.Unlock()
		}
		s.pool.drop(cs, !ended)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == cs {
		s.loseLocked(cs, why.Error(), ended)
	}
}

func (s *MCPServer) loseLocked(cs *mcp.ClientSession, why string, ended bool) {
	s.log.Warn("MCP server connection lost; the next call opens a new session", "reason", why)
	if ended && s.proc != nil {
		s.proc.stopping.Store(true)
	}
	s.session, s.proc, s.lost = nil, nil, true
	go cs.Close()
}

// Tools lists the server's tools.
func (s *MCPServer) Tools(ctx context.Context) ([]MCPTool, error) {
	cs, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release(cs)
	var out []MCPTool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: list tools: %w", s.cfg.Name, err)
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: tool %s: input schema: %w", s.cfg.Name, t.Name, err)
		}
		out = append(out, MCPTool{Name: t.Name, Description: t.Description, InputSchema: schema, Listed: t})
	}
	return out, nil
}

// Execute returns an ExecuteFunc that calls the server's tool of that name, at most once. A
// call the server answers with isError, a JSON-RPC error or a redirect that is not followed
// (see sameOriginRedirects), or whose result is too large, is a tool error the model sees. A
// call that fails on the connection before it was sent is sent once more on a new session. A
// call that fails on the connection after it may have reached the server is not: its outcome is
// unknown (agent.OutcomeUnknown), and a person decides whether it runs again. So is a call that
// was sent and not answered within the timeout (the SDK tells the server it is cancelled, which a
// server may heed or not, after doing part of the work or all of it): a person decides when the
// call needed approval, and the model is told of the timeout when it did not
// (agent.OutcomeUnknown.ModelError says why the two differ).
func (s *MCPServer) Execute(tool string) func(ctx context.Context, c *agent.Call) (any, error) {
	return func(ctx context.Context, c *agent.Call) (any, error) {
		res, err := s.callOnce(ctx, tool, c)
		if err != nil {
			return nil, err
		}
		text := contentText(res.Content)
		if res.IsError {
			if text == "" {
				text = "the MCP tool reported an error"
			}
			return nil, errors.New(text)
		}
		var out any = text
		size := len(text)
		if res.StructuredContent != nil {
			b, err := json.Marshal(res.StructuredContent)
			if err != nil {
				return nil, fmt.Errorf("the MCP tool's structured result is not JSON: %w", err)
			}
			out, size = json.RawMessage(b), len(b)
		}
		if size > maxMCPResult {
			return nil, tooLarge(size)
		}
		return out, nil
	}
}

// Forward returns an ExecuteFunc that calls the server's tool of that name, at most once, as
// Execute does, for the MCP gateway: its result is the server's CallToolResult as JSON, whole
// (content, structuredContent, isError, _meta), for the gateway to hand its client as it came.
// A result the server marks isError is such a result, not an error: the client reads it as the
// server wrote it. The errors (a call that could not be made, a result over maxMCPResult, an
// outcome unknown) are Execute's.
func (s *MCPServer) Forward(tool string) func(ctx context.Context, c *agent.Call) (any, error) {
	return func(ctx context.Context, c *agent.Call) (any, error) {
		res, err := s.callOnce(ctx, tool, c)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, fmt.Errorf("the MCP tool's result is not JSON: %w", err)
		}
		if len(b) > maxMCPResult {
			return nil, tooLarge(len(b))
		}
		return json.RawMessage(b), nil
	}
}

// callOnce sends call c of tool to the server at most once (see Execute), within the timeout,
// with the receipt of its approval in _meta. The timeout does not run while a question the
// server asked in the middle of the call waits for a person (mcp_midcall.go): that wait is
// bounded by the question's own deadline (the tool's approvalTimeout), and by the server.
func (s *MCPServer) callOnce(ctx context.Context, tool string, c *agent.Call) (*mcp.CallToolResult, error) {
	ctx, f := s.begin(ctx, c)
	defer f.end()
	var object map[string]json.RawMessage
	if err := json.Unmarshal(c.Args, &object); err != nil || object == nil {
		return nil, fmt.Errorf("MCP tools take an object of arguments")
	}
	// Sent as they are, not decoded and encoded again: the server gets the bytes a person
	// approved (key order and number digits included).
	params := &mcp.CallToolParams{Meta: approvalMeta(c.Receipt), Name: tool, Arguments: c.Args}
	var err error
	if params.InputResponses, params.RequestState, err = answers(c); err != nil {
		return nil, err
	}
	res, err := s.call(ctx, f, params)
	if errors.Is(err, errNotSent) {
		res, err = s.call(ctx, f, params) // nothing reached the server: one new attempt
	}
	if err != nil {
		msg := fmt.Sprintf("the MCP tool did not answer within %s", s.cfg.Timeout)
		if errors.Is(err, errSentTimedOut) {
			return nil, &agent.OutcomeUnknown{
				Reason:     fmt.Sprintf("the MCP server %s did not answer %s within %s after the call was sent, so whether it took effect is unknown; approve to run it again or decline", s.cfg.Name, tool, s.cfg.Timeout),
				ModelError: msg,
			}
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, errors.New(msg)
		}
		return nil, err
	}
	f.end() // a question still waiting is taken back before the result is handed on
	if res.NeedsInput() || len(res.InputRequests) > 0 {
		return nil, askedForInput(c, s.cfg.Name, res) // nothing ran: a person answers, then it is made again
	}
	return res, nil
}

// tooLarge is the error of a result over maxMCPResult: the tool ran, its result is not kept.
func tooLarge(size int) error {
	about := ""
	if size > 0 {
		about = fmt.Sprintf(" (%d bytes)", size)
	}
	return fmt.Errorf("the MCP tool ran, but its result%s is larger than the %d bytes passed on, so it was dropped", about, maxMCPResult)
}

// errSentTimedOut marks a call that was sent and not answered within the timeout: it may have
// been carried out.
var errSentTimedOut = errors.New("the call was sent and not answered in time")

// errNotSent marks a call that failed on the connection before it was sent: it can be sent on
// a new session without any risk of running twice.
var errNotSent = errors.New("the call was not sent")

// toolError is an error answer of the server (JSON-RPC), as opposed to a broken connection.
type toolError struct{ err error }

func (e toolError) Error() string { return e.err.Error() }

// call makes call f (params) on a session of its own (a url server's, mcp_pool.go) or the
// stdio server's one, at most once.
func (s *MCPServer) call(ctx context.Context, f *inFlight, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	tool := params.Name
	cs, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	f.on(s, cs) // a question asked on cs now may be f's
	tr := &delivery{}
	res, err := cs.CallTool(withDelivery(ctx, tr), params)
	f.on(s, nil)
	if err == nil {
		s.release(cs)
		return res, nil
	}
	if redirect, ok := asRedirectError(err); ok {
		// The server answered with a redirect that was not followed (sameOriginRedirects): the
		// call ran nowhere, and the session is as it was.
		s.release(cs)
		return nil, fmt.Errorf("MCP server %s %w", s.cfg.Name, redirect)
	}
	switch {
	case tr.isTooLarge():
		s.lose(cs, err, true)
		return nil, tooLarge(0)
	case serverAnswered(err):
		// The server answered the call with an error (an unknown tool, invalid arguments).
		s.release(cs)
		return nil, toolError{fmt.Errorf("MCP server %s: %w", s.cfg.Name, err)}
	case ctx.Err() != nil:
		// Timed out or cancelled: the session is fine (the SDK tells the server the call is
		// cancelled), but not for another call (retire); the caller says what happened.
		s.retire(cs)
		if tr.wasSent() && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			s.log.Warn("MCP call's outcome unknown: the request was sent and no answer came within the timeout", "tool", tool, "timeout", s.cfg.Timeout.String())
			return nil, fmt.Errorf("MCP server %s: %w: %w", s.cfg.Name, errSentTimedOut, context.Cause(ctx))
		}
		return nil, context.Cause(ctx)
	}
	s.lose(cs, err, false)
	if !tr.wasSent() || errors.Is(err, mcp.ErrSessionMissing) {
		// Nothing reached the server, or it refused the session before running anything.
		return nil, fmt.Errorf("MCP server %s: %w: %w", s.cfg.Name, errNotSent, err)
	}
	what := "the connection to the MCP server " + s.cfg.Name + " broke"
	if len(s.cfg.Command) > 0 {
		what = "the MCP server " + s.cfg.Name + " stopped"
	}
	s.log.Warn("MCP call's outcome unknown: the request was sent and no answer came back", "tool", tool, "err", err)
	return nil, &agent.OutcomeUnknown{Reason: fmt.Sprintf("%s while executing %s, so whether it took effect is unknown; approve to run it again or decline", what, tool)}
}

// serverAnswered reports an error the server answered the call with (an unknown tool, invalid
// arguments), as opposed to one of the SDK's own JSON-RPC errors for a connection that closed or
// a request the transport could not deliver (client closing -32003, server closing -32004,
// rejected by transport -32005).
func serverAnswered(err error) bool {
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || errors.Is(err, mcp.ErrConnectionClosed) {
		return false
	}
	switch rpcErr.Code {
	case -32003, -32004, -32005:
		return false
	}
	return true
}

// contentText is a result as the model reads it: its text parts, and a description of each
// part that is not text (an image, audio, a resource), which the model cannot see but should
// know was there.
func contentText(parts []mcp.Content) string {
	var lines []string
	for _, p := range parts {
		switch c := p.(type) {
		case *mcp.TextContent:
			lines = append(lines, c.Text)
		case *mcp.ImageContent:
			lines = append(lines, fmt.Sprintf("[image: %s, %d bytes, not shown]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			lines = append(lines, fmt.Sprintf("[audio: %s, %d bytes, not played]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			lines = append(lines, fmt.Sprintf("[resource link: %s %s%s]", c.Name, c.URI, mimeNote(c.MIMEType)))
		case *mcp.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				lines = append(lines, "[resource: empty]")
			case r.Blob != nil:
				lines = append(lines, fmt.Sprintf("[resource %s%s: %d bytes of binary data, not shown]", r.URI, mimeNote(r.MIMEType), len(r.Blob)))
			default:
				lines = append(lines, fmt.Sprintf("[resource %s%s]\n%s", r.URI, mimeNote(r.MIMEType), r.Text))
			}
		default:
			lines = append(lines, fmt.Sprintf("[%T content, not shown]", p))
		}
	}
	return strings.Join(lines, "\n")
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

func mimeNote(mime string) string {
	if mime == "" {
		return ""
	}
	return " (" + mime + ")"
}

// Close ends the sessions and waits (boundedly) for a stdio process to exit.
func (s *MCPServer) Close() error {
	if s.pool != nil {
		return s.pool.close()
	}
	s.mu.Lock()
	cs, proc := s.session, s.proc
	s.session, s.proc = nil, nil
	s.mu.Unlock()
	if cs == nil {
		return nil
	}
	if proc != nil {
		proc.stopping.Store(true)
	}
	err := cs.Close()
	if proc != nil {
		proc.waitExit()
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}
