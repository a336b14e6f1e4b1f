package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sessions of a url server. The protocol does not say which of a session's calls in flight a
// question asked in the middle of a call (elicitation/create) belongs to (mcp_midcall.go), so a
// url server's calls do not share a session: each call in flight has one of its own, taken from
// a small pool — an idle session when there is one, a new one otherwise — and given back when
// the call has ended. A question that arrives on a session then belongs to the one call on it.
// At most MCPConfig.MaxSessions are open at once (a call beyond them waits for one, within its
// timeout); a session idle for MCPConfig.IdleTimeout is closed. A stdio server is one process
// with one session, shared by its calls (MCPServer.connected).

// Defaults of the pool (MCPConfig.MaxSessions, MCPConfig.IdleTimeout).
const (
	defaultMaxSessions = 16
	defaultIdleTimeout = 5 * time.Minute
)

// sessionPool holds a url server's open sessions: those in use by a call, and idle ones.
type sessionPool struct {
	// open opens a new session (MCPServer.open).
	open    func(ctx context.Context) (*mcp.ClientSession, error)
	idleFor time.Duration
	// slots holds one token per session in use: a call that finds it full waits for one.
	slots chan struct{}

	mu     sync.Mutex
	idle   []*idleSession // most recently used last: taken first, so the others age out
	inUse  map[*mcp.ClientSession]struct{}
	closed bool
}

// idleSession is a session no call uses, closed when it stays so for idleFor.
type idleSession struct {
	cs    *mcp.ClientSession
	timer *time.Timer
}

func newSessionPool(max int, idleFor time.Duration, open func(context.Context) (*mcp.ClientSession, error)) *sessionPool {
	return &sessionPool{open: open, idleFor: idleFor, slots: make(chan struct{}, max), inUse: map[*mcp.ClientSession]struct{}{}}
}

// errPoolClosed is the error of a session asked for once the server is closed.
var errPoolClosed = errors.New("the MCP server's connection is closed")

// take returns a session for one call: an idle one, or a new one when none is idle, waiting
// (as long as ctx lets it) while MaxSessions are in use. Give it back with put, or drop it.
func (p *sessionPool) take(ctx context.Context) (*mcp.ClientSession, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("all %d sessions with the MCP server are in use by calls in flight, and none came free: %w", cap(p.slots), context.Cause(ctx))
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.slots
		return nil, errPoolClosed
	}
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle = p.idle[:n-1]
		s.timer.Stop() // should it fire now, it finds the session no longer idle
		p.inUse[s.cs] = struct{}{}
		p.mu.Unlock()
		return s.cs, nil
	}
	p.mu.Unlock()
	cs, err := p.open(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		<-p.slots
		go cs.Close()
		return nil, errPoolClosed
	}
	p.inUse[cs] = struct{}{}
	return cs, nil
}

// put gives back a session whose call has ended and that works: it is idle, for the next call,
// until idleFor passes.
func (p *sessionPool) put(cs *mcp.ClientSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.inUse[cs]; !ok {
		return
	}
	delete(p.inUse, cs)
	<-p.slots
	if p.closed {
		go cs.Close() // closed by close already; once more does no harm
		return
	}
	s := &idleSession{cs: cs}
	s.timer = time.AfterFunc(p.idleFor, func() { p.expire(s) })
	p.idle = append(p.idle, s)
}

// expire closes idle session s, unless a call took it meanwhile.
func (p *sessionPool) expire(s *idleSession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if x == s {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			go s.cs.Close()
			return
		}
	}
}

// drop closes a session taken with take that must not serve another call (its connection
// broke, or its call ended without an answer, so that a late question of that call could not
// be told from one of the next). With all, the idle sessions are closed too: a broken connection
// says the server is likely gone, or restarted and has forgotten them.
func (p *sessionPool) drop(cs *mcp.ClientSession, all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.inUse[cs]; ok {
		delete(p.inUse, cs)
		<-p.slots
	}
	go cs.Close()
	if all {
		p.closeIdleLocked()
	}
}

func (p *sessionPool) closeIdleLocked() {
	for _, s := range p.idle {
		s.timer.Stop()
		go s.cs.Close()
	}
	p.idle = nil
}

// stats reports how many sessions are open: idle, and in use by a call.
func (p *sessionPool) stats() (idle, inUse int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle), len(p.inUse)
}

// close closes every session, idle and in use, and refuses new ones.
func (p *sessionPool) close() error {
	p.mu.Lock()
	p.closed = true
	all := make([]*mcp.ClientSession, 0, len(p.idle)+len(p.inUse))
	for _, s := range p.idle {
		s.timer.Stop()
		all = append(all, s.cs)
	}
	for cs := range p.inUse {
		all = append(all, cs)
	}
	p.idle = nil
	p.mu.Unlock()
	var errs []error
	for _, cs := range all {
		if err := cs.Close(); err != nil && !errors.Is(err, io.EOF) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
