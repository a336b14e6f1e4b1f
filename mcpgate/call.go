package mcpgate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/agent"
	"interlock/runs"
	"interlock/runtype"
)

// gateway serves the calls of the tools it lists.
type gateway struct{ o Options }

// call is the handler of the tool of that name. A call is a request of the gateway's agent,
// named by an idempotency key derived from what the call is (who calls, in which session or
// thread, which tool, which canonical arguments): a retry of the same call while the request
// waits joins it, the first retry after its outcome gets that outcome (and gives the key up),
// and the call after that is a new request. The answer is held until the outcome or Wait.
//
// Tasks (the spec's calls answered later under a task id) are not served: the Go SDK does
// not implement them and most clients refuse them. Their seam is here: a held call's request
// is already durable and named (its run id, in every answer's _meta), so a task would be
// that run, its status AwaitOutcome with no wait, its result the outcome answer gives.
func (g *gateway) call(name string) mcp.ToolHandler {
	// The handler's goroutine is held as long as the call: what it keeps on its stack while it
	// waits is small (the request is made, and the answer built, in functions that have
	// returned or not yet begun), so that the runtime shrinks that stack to a few KiB.
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, res, err := g.request(ctx, req, name)
		if c == nil {
			return res, err
		}
		defer c.release()
		out, err := g.hold(req, c)
		return g.deliver(req, c, out, err)
	}
}

// heldCall is what a call keeps while it is held: the run's id, not the run.
type heldCall struct {
	ctx          context.Context // the call's, with its principal
	runID, key   string
	progressText string // what its progress notifications say, when it asked for them
	release      func() // gives back its connection slot
}

// request stores the call's request (or joins the one an identical call stored), or returns
// the answer that refuses it (with nil).
func (g *gateway) request(ctx context.Context, req *mcp.CallToolRequest, name string) (*heldCall, *mcp.CallToolResult, error) {
	p := g.principalOf(req)
	if p == nil {
		return nil, nil, fmt.Errorf("the call carries no credentials")
	}
	ctx = runtype.WithPrincipal(ctx, p)
	if g.o.RateFunc != nil {
		if d := g.o.RateFunc(ctx); d > 0 {
			return nil, refused(runtype.Errorf(rateLimited, "too many calls: retry in %d seconds", max(1, int(math.Ceil(d.Seconds()))))), nil
		}
	}
	release := func() {}
	if g.o.SlotFunc != nil {
		// Every call is held (for its decision, or while its tool runs), so it takes one of
		// the connections its client may hold at once before anything is stored, as a
		// waiting POST /approvals does; with none left it is refused, nothing stored.
		var err error
		if release, err = g.o.SlotFunc(ctx); err != nil {
			return nil, refused(runtype.Errorf(tooManyConnections, "%v: a call is held until it is decided; let one of your held calls end, then call again", err)), nil
		}
	}
	args := req.Params.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	canonical, err := agent.CanonicalJSON(args)
	if err != nil {
		release()
		return nil, refused(runtype.Errorf(runtype.CodeBadUserInput, "the arguments are not JSON: %v", err)), nil
	}
	thread := threadOf(req, p)
	key := callKey(thread, name, canonical)
	params := runs.ApprovalParams{AgentID: g.o.AgentID, ToolName: name, Args: canonical, ThreadID: thread,
		ResourceID: resourceOf(p), Context: callContext(req), IdempotencyKey: key}
	run, err := g.o.Service.RequestApproval(ctx, params)
	if err != nil {
		release()
		return nil, refused(err), nil
	}
	c := &heldCall{ctx: ctx, runID: run.ID, key: key, release: release}
	if req.Params.GetProgressToken() != nil {
		c.progressText = "waiting for a person's approval in Interlock"
		switch {
		case run.Status == runtype.StatusRunning:
			c.progressText = "approved: the tool is running"
		case len(run.ToolCalls) > 0 && !run.ToolCalls[0].RequiresApproval:
			c.progressText = "the tool's server asked a question: waiting for a person's answer in Interlock"
		}
	}
	return c, nil, nil
}

// deliver is the answer to a held call once hold returned.
func (g *gateway) deliver(req *mcp.CallToolRequest, c *heldCall, out *runs.CallOutcome, err error) (*mcp.CallToolResult, error) {
	ctx := c.ctx
	if err != nil && ctx.Err() != nil {
		// The client cancelled or went away: the request stays in the inbox, and an
		// identical call later joins it.
		return nil, err
	}
	if err != nil {
		// The outcome could not be read (storage unreachable, say): the request stands, and
		// the identical call later reads it.
		g.o.Logger.Error("MCP gateway: the outcome of a call could not be read", "run", c.runID, "err", err)
		return refused(err), nil
	}
	if out.Kind == runs.OutcomePending {
		return g.pending(req, out), nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err() // gone as the outcome came: the identical call gets it
	}
	// The outcome reaches a caller: the next identical call is a new request. (An answer
	// lost after this point, its client gone just now, stays on record in the run.)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := g.o.Service.ReleaseKey(rctx, c.runID, c.key); err != nil {
		g.o.Logger.Warn("MCP gateway: the key of a delivered call was not released; an identical call gets the same outcome again", "run", c.runID, "err", err)
	}
	return answer(out), nil
}

// hold waits for the outcome of the call's run (as the request stored or joined it) for up to
// Wait, sending the client progress every ProgressInterval when it asked for progress (a
// progress token). It returns the outcome, or the run as it stands (pending) when Wait passes
// or this instance stops, or the call's context's error. One wait on the run's stream,
// whatever the heartbeat: the beats come from a timer, never from reading the run again (no
// query per held call), and the timer has no goroutine while it waits.
func (g *gateway) hold(req *mcp.CallToolRequest, c *heldCall) (*runs.CallOutcome, error) {
	if token := req.Params.GetProgressToken(); token != nil {
		defer g.heartbeat(c.ctx, req, token, c.progressText)()
	}
	return g.o.Service.AwaitOutcome(c.ctx, c.runID, g.o.Wait)
}

// heartbeat sends notifications/progress for token every ProgressInterval until the returned
// stop is called or ctx ends: a heartbeat, not a measure of progress (no total, and progress
// that only grows). Each beat runs in the timer's own goroutine, and the next is armed only
// once it is sent, so beats never overlap and their progress grows.
func (g *gateway) heartbeat(ctx context.Context, req *mcp.CallToolRequest, token any, msg string) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		beats   int
		t       *time.Timer
	)
	beat := func() {
		mu.Lock()
		if stopped || ctx.Err() != nil {
			mu.Unlock()
			return
		}
		beats++
		n := beats
		mu.Unlock()
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n), Message: msg}); err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(g.o.ProgressInterval)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(g.o.ProgressInterval, beat)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// threadOf is the thread of a call's run: its MCP session, or, for a client without one (the
// sessionless protocol), a stable id of the client and the principal, so that a client's calls
// are grouped, and a retry finds the request it repeats.
func threadOf(req *mcp.CallToolRequest, p *runtype.Principal) string {
	if id := req.Session.ID(); id != "" {
		return "mcp-" + id
	}
	client := ""
	if ci := req.ClientInfo(); ci != nil {
		client = ci.Name
	}
	// The resource is part of it: a thread belongs to the resource of its first run, so a
	// thread named for one resource is never one another resource's run could have claimed
	// first (anyone can work the id out), and a principal whose resource changes starts another.
	resource := resourceOf(p)
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s%d:%s%s", len(p.Subject), p.Subject, len(resource), resource, client))
	return "mcp-client-" + hex.EncodeToString(sum[:16])
}

// resourceOf is the resource of the principal's calls: its only resource when it is scoped to
// one (its first when to several), none when it is not scoped.
func resourceOf(p *runtype.Principal) string {
	if len(p.Resources) > 0 {
		return p.Resources[0]
	}
	return ""
}

// callKey is the idempotency key of a call: the same for the same call (thread, tool, canonical
// arguments; the run service adds who calls), different for any other.
func callKey(thread, tool string, args json.RawMessage) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d:%s%d:%s%s", len(thread), thread, len(tool), tool, args))
	return "mcp-gateway:" + hex.EncodeToString(sum[:])
}

// callContext is what the person deciding is told of where a call comes from: the client as it
// names itself (its words, not Interlock's).
func callContext(req *mcp.CallToolRequest) string {
	ci := req.ClientInfo()
	if ci == nil {
		return "Called through the MCP gateway."
	}
	quoted := func(s string) string { // one code span whatever the client wrote
		s = strings.NewReplacer("`", "'", "\n", " ", "\r", " ").Replace(s)
		if r := []rune(s); len(r) > 100 {
			s = string(r[:100]) + "…"
		}
		return "`" + s + "`"
	}
	// Its name only: the context is part of what a retry must repeat, and a client upgraded
	// while its call waits is still that client.
	return fmt.Sprintf("Called through the MCP gateway by an MCP client that names itself %s.", quoted(ci.Name))
}

// The codes of calls refused for their client's limits, gqlguard's and /approvals'.
const (
	rateLimited        runtype.Code = "RATE_LIMITED"
	tooManyConnections runtype.Code = "TOO_MANY_CONNECTIONS"
)
