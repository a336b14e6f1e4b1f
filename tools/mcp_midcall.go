package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/agent"
)

// Questions asked in the middle of a call. A server of the protocols before 2026-07-28 asks its
// client with elicitation/create while its tools/call is in flight. The protocol does not say
// which call a question belongs to (the SDK hands the client's handler the request and its
// session alone), so a question goes to the one call in flight on the session it arrived on. A
// url server's calls each have a session of their own (mcp_pool.go), so its questions always
// can be told apart. A stdio server is one process with one session, shared by its calls: when
// several are in flight at once it cannot be told which one asks, and the question is refused,
// as is a question while none is (a server asking on its own). The call's agent.Call.Ask holds
// it for a person (the run
// service stores the run SUSPENDED on the call, still executing, under the lease of the
// instance that runs it); the person's answer (resumeRun) is accepted with their data; a
// question nobody answered within the tool's approvalTimeout is cancelled. Only a form
// question, which a person answers with data matching its schema, can be held: a URL to open
// is refused.
//
// While a question waits the call's own timeout (MCPConfig.Timeout) is paused, so a person may
// take as long as the tool's approvalTimeout allows (with none, as long as the server waits).
// When the call ends while a question waits (the server gave up on it, or Interlock's
// execution stops), the question is taken back before the call's outcome is handed on.

// inFlight is a call in flight on the server: what a question asked during it goes to.
type inFlight struct {
	ask   func(context.Context, agent.Question) (agent.Answer, error)
	clock *callClock
	ctx   context.Context // ends when the call does: a question still waiting is taken back
	stop  context.CancelFunc
	done  func()

	// session is the session the call is being made on, nil before and after (guarded by the
	// server's callsMu): a question asked on it may be this call's.
	session *mcp.ClientSession

	mu     sync.Mutex
	over   bool           // the call has returned: no question is taken any more
	asking sync.WaitGroup // questions being held for a person
}

// on records the session call f is being made on of server s (nil: none any more).
func (f *inFlight) on(s *MCPServer, cs *mcp.ClientSession) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	f.session = cs
}

// begin registers call c as in flight, with its timeout, and returns the call's context (which
// ends at the timeout, paused while a question waits) and the call: end it once it returned.
func (s *MCPServer) begin(ctx context.Context, c *agent.Call) (context.Context, *inFlight) {
	ctx, cancel := context.WithCancelCause(ctx)
	f := &inFlight{ask: c.Ask, clock: newCallClock(s.cfg.Timeout, func() { cancel(context.DeadlineExceeded) })}
	f.ctx, f.stop = context.WithCancel(ctx)
	f.done = sync.OnceFunc(func() {
		f.clock.stop()
		cancel(context.Canceled)
		s.callsMu.Lock()
		delete(s.calls, f)
		s.callsMu.Unlock()
	})
	s.callsMu.Lock()
	if s.calls == nil {
		s.calls = map[*inFlight]struct{}{}
	}
	s.calls[f] = struct{}{}
	s.callsMu.Unlock()
	return ctx, f
}

// end marks the call returned: a question still waiting for a person is taken back (its ask
// returns once it is), and no other is taken. It may be called more than once.
func (f *inFlight) end() {
	f.mu.Lock()
	f.over = true
	f.mu.Unlock()
	f.stop()
	f.asking.Wait()
	f.done()
}

// asker is the call a question asked now on session cs goes to: the only one in flight on it,
// with a way to ask.
func (s *MCPServer) asker(cs *mcp.ClientSession) (*inFlight, error) {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	var open []*inFlight
	for f := range s.calls {
		if f.session != cs {
			continue
		}
		f.mu.Lock()
		if !f.over {
			open = append(open, f)
		}
		f.mu.Unlock()
	}
	switch {
	case len(open) == 0:
		return nil, errors.New("Interlock holds a server's question for a person only while one of its tool calls is in flight, and none is")
	case len(open) > 1:
		return nil, fmt.Errorf("Interlock cannot tell which of the %d tool calls in flight asked this question: the MCP server %s runs on stdio, one process with one session that its calls share, and the protocol does not say which call a question belongs to, so it is not held for a person (a url server's calls each have a session of their own)", len(open), s.cfg.Name)
	case open[0].ask == nil:
		return nil, errors.New("Interlock cannot hold a question for a person during this call")
	}
	return open[0], nil
}

// askedMidCall is the client's elicitation handler: a server of a protocol before 2026-07-28
// asking in the middle of a call (the 2026-07-28 protocol's questions come back as results,
// the SDK's round trips being off). A form question goes to the call in flight, whose run waits
// for a person; its answer is the server's result: accept with the person's data, or cancel when
// nobody answered in time or the question was taken back.
func (s *MCPServer) askedMidCall(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	p := r.Params
	if p.Mode != "" && p.Mode != "form" {
		s.log.Warn("MCP server asked for input Interlock cannot give; refused", "mode", p.Mode, "message", p.Message)
		return nil, fmt.Errorf("the MCP server %s asked for %s elicitation, which Interlock cannot give: only questions a person answers with a form are held for a person", s.cfg.Name, p.Mode)
	}
	f, err := s.asker(r.Session)
	if err != nil {
		s.log.Warn("MCP server asked for input in the middle of a call; refused", "message", p.Message, "err", err)
		return nil, err
	}
	f.mu.Lock()
	if f.over {
		f.mu.Unlock()
		return nil, errors.New("the tool call this question belongs to has ended")
	}
	f.asking.Add(1)
	f.mu.Unlock()
	defer f.asking.Done()

	schema := json.RawMessage(`{"type":"object"}`)
	if p.RequestedSchema != nil {
		if b, err := json.Marshal(p.RequestedSchema); err == nil {
			schema = b
		}
	}
	payload, err := json.Marshal(inputPayload{Message: p.Message, RequestedSchema: schema})
	if err != nil {
		return nil, fmt.Errorf("the MCP server's question: %w", err)
	}
	// The question waits as long as the person takes (within its own deadline): the call's
	// timeout does not run meanwhile. It ends when the call does, or the server cancels it.
	f.clock.pause()
	defer f.clock.resume()
	askCtx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	ans, err := f.ask(askCtx, agent.Question{Payload: payload, Schema: schema})
	if err != nil {
		s.log.Info("MCP server's question in the middle of a call not answered", "message", p.Message, "err", err)
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
	switch ans.Kind {
	case agent.CallResumed:
		var content map[string]any
		if err := json.Unmarshal(ans.Data, &content); err != nil {
			return nil, fmt.Errorf("the answer to the MCP server's question is not a JSON object: %w", err)
		}
		return &mcp.ElicitResult{Action: "accept", Content: content}, nil
	case agent.CallDeclined:
		return &mcp.ElicitResult{Action: "decline"}, nil
	default:
		return &mcp.ElicitResult{Action: "cancel"}, nil
	}
}

// callClock is a call's timeout that can be paused: while a question asked in the middle of the
// call waits for a person, the call's own timeout does not run.
type callClock struct {
	mu     sync.Mutex
	timer  *time.Timer
	left   time.Duration // time left when paused
	since  time.Time     // when the timer last started
	paused int
	done   bool
}

func newCallClock(d time.Duration, fire func()) *callClock {
	return &callClock{timer: time.AfterFunc(d, fire), left: d, since: time.Now()}
}

func (c *callClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused++; c.paused == 1 && !c.done {
		if !c.timer.Stop() {
			c.done = true // it fired: the call is over
			return
		}
		c.left -= time.Since(c.since)
	}
}

func (c *callClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused--; c.paused == 0 && !c.done {
		c.since = time.Now()
		c.timer.Reset(max(c.left, 0))
	}
}

func (c *callClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	c.timer.Stop()
}
