package dbtest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy between a service and the test's MySQL server, which the test uses to
// cut the database off: kill every connection, refuse new ones, or freeze (keep connections
// open but forward nothing, as a network partition does). A connection closed on one side is
// closed on the other, so a client that gives up on a frozen connection releases the server's
// session (and its row locks) as it would over a real network once the peer notices. It can
// also break one statement where the test wants it (KillOn, LoseCommitAnswer): it reads what
// clients send (statements, and the arguments of prepared ones, travel as plain bytes).
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	refuse bool
	thawed chan struct{} // closed while forwarding; open while frozen
	trap   *trap         // the next statement to break, nil when none
}

// trap is a statement the proxy breaks once: the first client packet that contains pattern.
type trap struct {
	pattern    []byte
	loseCommit bool // break the answer of the transaction's COMMIT, not the statement
	sprung     chan struct{}
}

// link is the state of one proxied connection.
type link struct {
	armed atomic.Bool // it sent the pattern of a LoseCommitAnswer trap
	deaf  atomic.Bool // what the server answers is dropped
}

// NewProxy listens on a free local port and forwards to target (host:port) until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, thawed: make(chan struct{})}
	close(p.thawed)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.refuse { // cut while this one was being dialled: it must not outlive the cut
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	l := &link{}
	go p.pipe(server, client, l, true, done)
	go p.pipe(client, server, l, false, done)
	<-done // either side closed: close the other too
	client.Close()
	server.Close()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// pipe copies from src to dst (up: from the client to the server), holding what it read while
// the proxy is frozen. It reads on while frozen, so that a side closing is seen (and done told)
// at once.
func (p *Proxy) pipe(dst, src net.Conn, l *link, up bool, done chan<- struct{}) {
	chunks := make(chan []byte, 4096)
	go func() {
		for b := range chunks {
			p.mu.Lock()
			thawed := p.thawed
			p.mu.Unlock()
			<-thawed
			if !up && l.deaf.Load() {
				continue // the answer is lost
			}
			if _, err := dst.Write(b); err != nil {
				return
			}
		}
	}()
	defer close(chunks)
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 && up && p.spring(l, buf[:n]) {
			done <- struct{}{} // killed before the server got it
			return
		}
		if n > 0 {
			chunks <- buf[:n]
		}
		if err != nil {
			done <- struct{}{}
			return
		}
	}
}

// KillOn breaks the next statement whose packet contains pattern (its text, or one of its
// arguments): the connection that carries it is closed before the server gets it, as a killed
// connection is. The returned channel is closed when it happened.
func (p *Proxy) KillOn(pattern string) <-chan struct{} {
	return p.setTrap(&trap{pattern: []byte(pattern)})
}

// LoseCommitAnswer breaks the transaction of the next statement whose packet contains pattern
// after the server committed it: the COMMIT goes through, and nothing the server answers on
// that connection reaches the client, which never learns that its write was stored (until the
// connection is closed, by Cut, or by the client giving up). The channel is closed once the
// COMMIT went to the server.
func (p *Proxy) LoseCommitAnswer(pattern string) <-chan struct{} {
	return p.setTrap(&trap{pattern: []byte(pattern), loseCommit: true})
}

func (p *Proxy) setTrap(t *trap) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	t.sprung = make(chan struct{})
	p.trap = t
	return t.sprung
}

// spring checks a packet a client sends on l against the trap, and reports whether the
// connection must be killed before it is forwarded.
func (p *Proxy) spring(l *link, b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.trap
	switch {
	case t == nil:
		return false
	case bytes.Contains(b, t.pattern) && !t.loseCommit:
		p.trap = nil
		close(t.sprung)
		return true
	case bytes.Contains(b, t.pattern):
		l.armed.Store(true)
	case l.armed.Load() && bytes.Contains(b, []byte("COMMIT")):
		l.deaf.Store(true)
		p.trap = nil
		close(t.sprung)
	}
	return false
}

// Cut closes every connection and, with refuse, closes new ones as they come until Restore.
func (p *Proxy) Cut(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
	for c := range p.conns {
		c.Close()
	}
}

// Freeze stops forwarding, on open and new connections alike, until Restore.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

// Restore forwards again and accepts new connections.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = false
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *Proxy) close() {
	p.Restore()
	p.ln.Close()
	p.Cut(false)
}
