// Package mcpgate is the MCP approval gateway: an MCP server over Streamable HTTP (/mcp) that
// lists the tools of configured upstream MCP servers and holds the calls their policy names
// for a person. Each call is a request of the gateway's agent (an external agent that forwards
// its calls, agent.Agent.Forwards): the run service stores it, a person decides it in the
// console or over the API like any other, and the run service — not this package — runs the
// upstream tool once, at the decision. This package only turns MCP requests into requests of
// the run service and the run's outcome into MCP results; it knows no storage and no rules.
package mcpgate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/auth"
	"interlock/runs"
	"interlock/runtype"
	"interlock/tools"
)

// Service is what the gateway asks of the run service (runs.Service).
type Service interface {
	RequestApproval(ctx context.Context, p runs.ApprovalParams) (*runtype.Run, error)
	AwaitOutcome(ctx context.Context, runID string, wait time.Duration) (*runs.CallOutcome, error)
	ReleaseKey(ctx context.Context, runID, key string) error
	MayRequest(ctx context.Context, agentID string) error
	Stopped() <-chan struct{}
}

// Tool is a tool the gateway lists: Upstream as its server lists it, under Name
// (<server>__<tool>), which is also the name of the gateway agent's tool that runs it.
type Tool struct {
	Name     string
	Upstream tools.MCPTool
}

// Options configure the gateway.
type Options struct {
	Service Service
	// AgentID is the gateway's agent: every call is a request of it.
	AgentID string
	// Tools are listed in this order.
	Tools []Tool
	// Wait is how long a call is held for its outcome before the client is told it is
	// pending; ProgressInterval how often a held call whose client sent a progress token is
	// sent notifications/progress.
	Wait, ProgressInterval time.Duration
	// ConsoleURL is the console's base URL for the links in pending answers; empty: the
	// server's own address, as the request reached it (never the Host header).
	ConsoleURL string
	// Version is told to clients in the server's implementation info.
	Version string
	Logger  *slog.Logger
	// RateFunc, when set, is asked before each call (each may store a request): a positive
	// duration refuses the call as RATE_LIMITED, saying when to retry (the mutation rate, one
	// bucket per client, as /approvals' POST).
	RateFunc func(ctx context.Context) time.Duration
	// SlotFunc, when set, takes one of the connections a client may hold at once
	// (--max-connections-per-principal) for each call held; a client holding all of its own gets
	// its pending answer at once instead of being held.
	SlotFunc func(ctx context.Context) (release func(), err error)
	// AuthOff says authentication is off: every call acts for runtype.Anonymous, and no
	// token is asked for.
	AuthOff bool
}

// sessionlessVersion is the first protocol version without sessions (SEP-2575).
const sessionlessVersion = "2026-07-28"

// principalKey is the key under which the token's principal travels in the SDK's TokenInfo:
// the SDK hands a tool handler the TokenInfo of the HTTP request that carried the call, not
// that request's context.
const principalKey = "interlock.principal"

// Handler is the handler of /mcp.
type Handler struct {
	http.Handler
	// posts counts the requests being answered (a held call is one), so that a stopping
	// server answers them before it cuts what is left (Wait).
	posts sync.WaitGroup
	// wait is the gateway's Wait; consoleURL the base of its links (localBase).
	wait       time.Duration
	consoleURL string
}

// ServeHTTP serves one request, counted until it is answered, with its deadlines moved past
// the hold (holdDeadlines) and its links' base set (localBase). One frame for all three: it
// stays on the stack of the connection's goroutine as long as a held call.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		h.posts.Add(1)
		defer h.posts.Done()
	}
	holdDeadlines(w, r, h.wait)
	localBase(r, h.consoleURL)
	h.Handler.ServeHTTP(w, r)
}

// Wait returns once every POST being served is answered, or ctx ends. A stopping server calls
// it after the run service stopped — which answers the held calls as they stand (pending, for
// the client to call again elsewhere) — and before it closes the connections left: a call cut
// without its answer is a failed tool call to its client.
func (h *Handler) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { h.posts.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// New returns the handler of /mcp. It expects the principal of each request in its context
// (auth.Require, or auth.Anonymous with authentication off): Authenticated wraps it in the
// SDK's TokenInfo, which also binds an MCP session to the subject that opened it.
func New(o Options) *Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	g := &gateway{o: o}
	srv := mcp.NewServer(&mcp.Implementation{Name: "interlock", Title: "Interlock MCP approval gateway", Version: o.Version},
		&mcp.ServerOptions{
			Instructions: "Calls of some tools wait for a person's approval in Interlock. A call that is still " +
				"waiting when the gateway's wait passes is answered as pending: call the tool again with the same " +
				"arguments to get its outcome.",
			Logger: o.Logger,
		})
	for _, t := range o.Tools {
		listed := *t.Upstream.Listed // a copy: the upstream's own listing is never changed
		listed.Name = t.Name
		srv.AddTool(&listed, g.call(t.Name))
	}
	server := func(*http.Request) *mcp.Server { return srv }
	sessions := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		Logger: o.Logger,
		// A session nobody uses for a day ends: its held calls stay in the inbox.
		SessionTimeout: 24 * time.Hour,
	})
	// The 2026-07-28 protocol has no sessions: the SDK serves it only without them, so its
	// requests (which name their version in a header) go to a sessionless handler of the same
	// server, and the older protocols' to the one that keeps sessions.
	// A sessionless client that goes away cancels its call (the spec: no resumption), so a
	// held call's handler sees it, and leaves the request for the identical call later.
	sessionless := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{Logger: o.Logger, Stateless: true, PropagateRequestCancellation: true})
	var served http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Who may not ask for the gateway's agent is refused at the door, before it lists a
		// tool or opens a session: a viewer's or an approver's token, one bound to other agents.
		if err := o.Service.MayRequest(r.Context(), o.AgentID); err != nil {
			var re *runtype.Error
			if errors.As(err, &re) && re.Code == runtype.CodeUnauthenticated {
				Unauthorized(w, r, err)
				return
			}
			msg := "forbidden"
			if re != nil {
				msg = re.Message
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		if r.Header.Get("Mcp-Protocol-Version") >= sessionlessVersion {
			sessionless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
	if !o.AuthOff {
		served = mcpauth.RequireBearerToken(tokenInfo, &mcpauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(served)
	}
	return &Handler{Handler: served, wait: o.Wait, consoleURL: o.ConsoleURL}
}

// tokenInfo is the SDK's view of the principal auth put in the request's context: UserID (the
// subject, which binds a session to whoever opened it) and the principal itself.
func tokenInfo(ctx context.Context, _ string, r *http.Request) (*mcpauth.TokenInfo, error) {
	p := runtype.PrincipalFrom(r.Context())
	if p == nil {
		return nil, errors.Join(mcpauth.ErrInvalidToken, errors.New("no principal"))
	}
	return &mcpauth.TokenInfo{UserID: p.Subject, Expiration: p.Expires, Extra: map[string]any{principalKey: p}}, nil
}

// principalOf is the principal a call acts for (nil: none, which the run service refuses).
func (g *gateway) principalOf(req *mcp.CallToolRequest) *runtype.Principal {
	if g.o.AuthOff {
		return runtype.Anonymous()
	}
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil
	}
	p, _ := req.Extra.TokenInfo.Extra[principalKey].(*runtype.Principal)
	return p
}

// Unauthorized answers a request to /mcp that failed authentication: 401 with the bearer
// challenge (auth.Challenge) and the reason as plain text, as the SDK's own refusals are.
func Unauthorized(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, auth.Challenge(w, err), http.StatusUnauthorized)
}
