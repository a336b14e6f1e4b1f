package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// sqlCounter is a TCP relay between the measured server and MySQL that counts the statements
// the server sends, read off the MySQL wire protocol: every command packet (sequence 0) that is
// a COM_QUERY (the server's driver puts arguments into the statement, so every statement is
// one) or a COM_STMT_EXECUTE. It counts what the server process does, whatever code sends it,
// and nothing of the bench's own connections. TLS and compression are not spoken (the server
// asks for neither on a plain mysql:// URL).
type sqlCounter struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	counts map[string]int64
	conns  map[net.Conn]bool
	closed bool
}

// startSQLCounter relays 127.0.0.1:<free port> to target (host:port).
func startSQLCounter(target string) (*sqlCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the SQL counter: %w", err)
	}
	c := &sqlCounter{ln: ln, target: target, counts: map[string]int64{}, conns: map[net.Conn]bool{}}
	go c.accept()
	return c, nil
}

// through rewrites a mysql:// setting so that its connections go through the counter.
func (c *sqlCounter) through(setting string) (string, error) {
	u, err := url.Parse(setting)
	if err != nil {
		return "", err
	}
	u.Host = c.ln.Addr().String()
	return u.String(), nil
}

func (c *sqlCounter) accept() {
	for {
		client, err := c.ln.Accept()
		if err != nil {
			return
		}
		db, err := net.Dial("tcp", c.target)
		if err != nil {
			client.Close()
			continue
		}
		if !c.track(client, db) {
			return
		}
		go func() {
			_, _ = io.Copy(client, db)
			client.Close()
		}()
		go func() {
			c.relay(client, db)
			db.Close()
		}()
	}
}

func (c *sqlCounter) track(conns ...net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		for _, n := range conns {
			n.Close()
		}
		return false
	}
	for _, n := range conns {
		c.conns[n] = true
	}
	return true
}

// relay copies the client's packets to the database, counting its statements.
func (c *sqlCounter) relay(client, db net.Conn) {
	var head [4]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(client, head[:]); err != nil {
			return
		}
		n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
		if cap(payload) < n {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(client, payload); err != nil {
			return
		}
		if head[3] == 0 && n > 0 {
			switch payload[0] {
			case 0x03: // COM_QUERY
				c.count(statementKind(payload[1:]))
			case 0x17: // COM_STMT_EXECUTE
				c.count("EXECUTE (prepared)")
			}
		}
		if _, err := db.Write(head[:]); err != nil {
			return
		}
		if _, err := db.Write(payload); err != nil {
			return
		}
	}
}

func (c *sqlCounter) count(kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[kind]++
}

// snapshot is the statements counted so far, by kind.
func (c *sqlCounter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Close stops relaying and closes every connection.
func (c *sqlCounter) Close() {
	c.ln.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for n := range c.conns {
		n.Close()
	}
}

var (
	firstWord = regexp.MustCompile(`^\s*([A-Za-z]+)`)
	tableName = regexp.MustCompile("(?i)\\b(?:FROM|INTO|UPDATE)\\s+`?(\\w+)`?")
)

// statementKind names a statement by its verb and first table: "SELECT agent_runs",
// "INSERT run_events", "COMMIT".
func statementKind(q []byte) string {
	s := string(q[:min(len(q), 400)])
	m := firstWord.FindStringSubmatch(s)
	if m == nil {
		return "other"
	}
	verb := strings.ToUpper(m[1])
	if t := tableName.FindStringSubmatch(s); t != nil {
		return verb + " " + t[1]
	}
	return verb
}

// isTxControl says whether kind is a transaction's start or end, which the store's statement
// counts (a GORM callback) leave out.
func isTxControl(kind string) bool {
	switch kind {
	case "START", "BEGIN", "COMMIT", "ROLLBACK":
		return true
	}
	return false
}

// countDelta is what was counted between two snapshots: the statements (transaction control
// left out), the transactions' starts and ends, and each kind's count, most first.
type countDelta struct {
	Statements, TxControl int64
	Kinds                 []kindCount
}

type kindCount struct {
	Kind string
	N    int64
}

func diffCounts(before, after map[string]int64) countDelta {
	var d countDelta
	for k, v := range after {
		n := v - before[k]
		if n == 0 {
			continue
		}
		if isTxControl(k) {
			d.TxControl += n
		} else {
			d.Statements += n
		}
		d.Kinds = append(d.Kinds, kindCount{k, n})
	}
	sort.Slice(d.Kinds, func(i, j int) bool {
		if d.Kinds[i].N != d.Kinds[j].N {
			return d.Kinds[i].N > d.Kinds[j].N
		}
		return d.Kinds[i].Kind < d.Kinds[j].Kind
	})
	return d
}

// errNoCounter: statements are counted on MySQL only.
var errNoCounter = errors.New("statements are counted on MySQL/MariaDB only (a relay reads them off the wire)")
