package runs_test

import (
	"net"
	"sync"
	"testing"
)

// dbProxy is a TCP proxy between a service and the test's MySQL server, which the test uses to
// cut the database off: kill every connection, refuse new ones, or freeze (keep connections
// open but forward nothing, as a network partition does). A connection closed on one side is
// closed on the other, so a client that gives up on a frozen connection releases the server's
// session (and its row locks) as it would over a real network once the peer notices.
type dbProxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	refuse bool
	thawed chan struct{} // closed while forwarding; open while frozen
}

func newDBProxy(t *testing.T, target string) *dbProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, thawed: make(chan struct{})}
	close(p.thawed)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *dbProxy) Addr() string { return p.ln.Addr().String() }

func (p *dbProxy) accept() {
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

func (p *dbProxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go p.pipe(server, client, done)
	go p.pipe(client, server, done)
	<-done // either side closed: close the other too
	client.Close()
	server.Close()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// pipe copies from src to dst, holding what it read while the proxy is frozen. It reads on
// while frozen, so that a side closing is seen (and done told) at once.
func (p *dbProxy) pipe(dst, src net.Conn, done chan<- struct{}) {
	chunks := make(chan []byte, 4096)
	go func() {
		for b := range chunks {
			p.mu.Lock()
			thawed := p.thawed
			p.mu.Unlock()
			<-thawed
			if _, err := dst.Write(b); err != nil {
				return
			}
		}
	}()
	defer close(chunks)
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			chunks <- buf[:n]
		}
		if err != nil {
			done <- struct{}{}
			return
		}
	}
}

// cut closes every connection and, with refuse, closes new ones as they come until restore.
func (p *dbProxy) cut(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
	for c := range p.conns {
		c.Close()
	}
}

// freeze stops forwarding, on open and new connections alike, until restore.
func (p *dbProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

// restore forwards again and accepts new connections.
func (p *dbProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = false
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *dbProxy) close() {
	p.restore()
	p.ln.Close()
	p.cut(false)
}
