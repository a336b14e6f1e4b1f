// Package gqlguard holds the limits gqlgen leaves to the application, at the GraphQL level: a
// token bound on queries checked before validation, and the GraphQL-over-WebSocket rules
// gqlgen's transport does not enforce (the connection_init timeout and payload, unique operation
// ids, a cap on operations per connection), a cap on the sockets and event streams each client
// holds open (Connections), and a mutation rate per client charged per mutation field. It knows
// nothing of the run service.
package gqlguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
)

// Close codes of the graphql-transport-ws protocol
// (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md), used for the legacy
// graphql-ws subprotocol too, which defines none.
const (
	CloseBadRequest       = 4400 // a message the protocol does not allow, such as a non-object init payload
	CloseInitTimeout      = 4408 // no connection_init within the init timeout
	CloseSubscriberExists = 4409 // an operation id that is already active
	// CloseTooManyInits closes a graphql-transport-ws connection that sends connection_init
	// twice ("Too many initialisation requests"; the number CloseTooManyConnections shares).
	CloseTooManyInits = 4429
	errorMessageCode  = "BAD_USER_INPUT"
)

// transportWS is the graphql-transport-ws subprotocol (graphql-ws, Apollo), whose rules the
// guard enforces to the letter; the legacy graphql-ws subprotocol (subscriptions-transport-ws,
// GraphQL Playground) is left to gqlgen as it is.
const transportWS = "graphql-transport-ws"

// WebsocketLimits are the rules Websocket enforces on every connection.
type WebsocketLimits struct {
	// InitTimeout closes (4408) a connection that sends no connection_init this long after it
	// opened. gqlgen's own InitTimeout closes with 1002 instead, so it is left unset.
	InitTimeout time.Duration
	// MaxOperations is how many operations (subscriptions, and queries sent over the socket)
	// may be active at once on one connection; the next gets an error message for its id.
	MaxOperations int
	// Connections, when set, caps the sockets each client holds open: a socket is counted once
	// its connection_init is accepted (InitFunc has authenticated it), and one over the cap is
	// closed then with 4429 (CloseTooManyConnections). Its slot frees when it closes.
	Connections *Connections
}

// Websocket is gqlgen's WebSocket transport with the rules it lacks: see WebsocketLimits, and
// a connection_init whose payload is not an object is closed with 4400 (gqlgen returns from
// its handler without closing such a socket, leaking its descriptor: github.com/99designs/gqlgen
// transport/websocket.go init). On graphql-transport-ws it holds the protocol's close codes
// where gqlgen closes with 1002 or drops the connection: a subscribe before connection_ack is
// 4401, a second connection_init 4429, and any message the protocol does not allow (not JSON, an
// unknown type, a server's message, a subscribe without an id or a payload object) 4400; a ping
// before connection_init is answered. It also counts the operations active on all connections,
// so a shutdown can wait for their complete messages to go out (Wait).
type Websocket struct {
	inner  transport.Websocket
	limits WebsocketLimits

	mu      sync.Mutex
	active  int           // operations active on every connection
	changed chan struct{} // closed and replaced whenever active decreases
}

var _ graphql.Transport = (*Websocket)(nil)

// NewWebsocket wraps inner (its Implementation included; nil means coder/websocket's defaults).
func NewWebsocket(inner transport.Websocket, limits WebsocketLimits) *Websocket {
	t := &Websocket{limits: limits, changed: make(chan struct{})}
	impl := inner.Implementation
	if impl == nil {
		impl = transport.CoderWebsocketImplementation{}
	}
	inner.Implementation = guardedImplementation{inner: impl, t: t}
	if limits.Connections != nil {
		inner.InitFunc = t.countConnection(inner.InitFunc)
	}
	t.inner = inner
	return t
}

// countConnection runs init (which authenticates the socket), then takes a slot of its
// client's, which the socket gives back when it closes; over the cap, the socket is closed
// with 4429 and the reason "too many connections for <client>" (graphql-ws clients get the
// whole message in a connection_error first).
func (t *Websocket) countConnection(init transport.WebsocketInitFunc) transport.WebsocketInitFunc {
	return func(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
		var ack *transport.InitPayload
		if init != nil {
			var err error
			if ctx, ack, err = init(ctx, payload); err != nil {
				return ctx, ack, err
			}
		}
		release, err := t.limits.Connections.Acquire(ctx)
		if err != nil {
			var tooMany *TooManyConnectionsError
			errors.As(err, &tooMany)
			ctx = transport.WithWebsocketCloseCode(ctx, CloseTooManyConnections)
			return transport.AppendCloseReason(ctx, closeReason(tooMany)), nil, err
		}
		conn, _ := ctx.Value(acceptedKey{}).(**guardedConn)
		if conn == nil || *conn == nil || !(*conn).onClose(release) {
			release() // no connection to hold it, or it closed already
		}
		return ctx, ack, nil
	}
}

// Supports reports whether r asks for a WebSocket upgrade.
func (t *Websocket) Supports(r *http.Request) bool { return t.inner.Supports(r) }

// acceptedKey carries, in the request's context, where Accept leaves the connection for Do.
type acceptedKey struct{}

// Do serves one WebSocket connection with gqlgen's transport and, once gqlgen is done with it,
// makes sure it is closed: whatever path gqlgen returned by, no socket outlives its handler.
func (t *Websocket) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	var accepted *guardedConn
	r = r.WithContext(context.WithValue(r.Context(), acceptedKey{}, &accepted))
	t.inner.Do(w, r, exec)
	if accepted != nil {
		accepted.Close()
	}
}

// Active is how many operations are active on all connections.
func (t *Websocket) Active() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active
}

// Wait blocks until no operation is active on any connection (each has sent its complete or
// error message, or its connection closed), or ctx ends.
func (t *Websocket) Wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		n, changed := t.active, t.changed
		t.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d websocket operations still active: %w", n, ctx.Err())
		}
	}
}

func (t *Websocket) add(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active += n
	if n < 0 {
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// guardedImplementation accepts connections with the inner implementation and wraps them.
type guardedImplementation struct {
	inner transport.WebsocketImplementation
	t     *Websocket
}

func (g guardedImplementation) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	conn, err := g.inner.Accept(w, r, opts)
	if err != nil {
		return nil, err
	}
	c := &guardedConn{inner: conn, t: g.t, ops: map[string]struct{}{}}
	if g.t.limits.InitTimeout > 0 {
		c.mu.Lock() // the timer may fire before the assignment is done
		c.initTimer = time.AfterFunc(g.t.limits.InitTimeout, func() {
			c.closeWith(CloseInitTimeout, "Connection initialisation timeout")
		})
		c.mu.Unlock()
	}
	if slot, ok := r.Context().Value(acceptedKey{}).(**guardedConn); ok {
		*slot = c
	}
	return c, nil
}

// guardedConn sees every message in both directions: it checks what the client sends before
// gqlgen reads it, and keeps the set of active operation ids.
type guardedConn struct {
	inner transport.WebsocketConn
	t     *Websocket

	mu        sync.Mutex
	initTimer *time.Timer
	initSeen  bool                // the first message for gqlgen arrived (connection_init, on graphql-transport-ws)
	acked     bool                // connection_ack was sent
	ops       map[string]struct{} // active operation ids
	closed    bool
	release   func() // gives back the connection's slot of its client's; nil when none is held
}

var (
	_ transport.WebsocketConn          = (*guardedConn)(nil)
	_ transport.WebsocketReadLimiter   = (*guardedConn)(nil)
	_ transport.WebsocketReadDeadliner = (*guardedConn)(nil)
)

// envelope is what every message of both subprotocols has.
type envelope struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// errClosedByGuard is returned to gqlgen's reader once the guard closed the connection.
var errClosedByGuard = fmt.Errorf("closed by the websocket guard: %w", transport.ErrWebsocketClosed)

// NextReader returns the client's next message that gqlgen should see. It closes the
// connection on a non-object init payload (4400) or an id already active (4409), and answers an
// operation over the cap with an error message itself; on graphql-transport-ws it also holds
// the protocol (transportRule).
func (c *guardedConn) NextReader() (int, io.Reader, error) {
	strict := c.inner.Subprotocol() == transportWS
	for {
		typ, r, err := c.inner.NextReader()
		if err != nil {
			return typ, r, err
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return typ, nil, err
		}
		var m envelope
		valid := json.Unmarshal(data, &m) == nil
		if strict {
			switch rule := c.transportRule(valid, m, data); rule.code {
			case 0:
			case ruleSkip:
				continue
			default:
				c.closeWith(rule.code, rule.reason)
				return typ, nil, errClosedByGuard
			}
		}
		c.mu.Lock()
		first := !c.initSeen
		c.initSeen = true
		if first && c.initTimer != nil {
			c.initTimer.Stop()
		}
		c.mu.Unlock()
		if !valid {
			return typ, bytes.NewReader(data), nil // gqlgen answers what is not JSON
		}
		switch m.Type {
		case "connection_init":
			if !isObjectOrNull(m.Payload) {
				c.closeWith(CloseBadRequest, "connection_init payload must be an object")
				return typ, nil, errClosedByGuard
			}
		case "subscribe", "start":
			switch c.begin(m.ID) {
			case beginDuplicate:
				c.closeWith(CloseSubscriberExists, "Subscriber for "+m.ID+" already exists")
				return typ, nil, errClosedByGuard
			case beginOverCap:
				c.refuse(m.ID, fmt.Sprintf("this connection already has %d active operations, the most allowed; complete one or open another connection", c.t.limits.MaxOperations))
				continue
			}
		case "complete", "stop":
			c.end(m.ID)
		}
		return typ, bytes.NewReader(data), nil
	}
}

// ruleSkip is a transportRule verdict: the guard answered the message itself (or it needs no
// answer), and gqlgen does not see it.
const ruleSkip = -1

type rule struct {
	code   int // 0: pass the message to gqlgen; ruleSkip; otherwise the close code
	reason string
}

// transportRule is what graphql-transport-ws
// (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md) says of a client message:
// pass it on, skip it, or close with a code.
func (c *guardedConn) transportRule(valid bool, m envelope, data []byte) rule {
	bad := rule{CloseBadRequest, "Invalid message received"}
	if !valid || !isObject(data) {
		return bad
	}
	c.mu.Lock()
	initSeen, acked := c.initSeen, c.acked
	c.mu.Unlock()
	switch m.Type {
	case "connection_init":
		if initSeen {
			return rule{CloseTooManyInits, "Too many initialisation requests"}
		}
	case "subscribe":
		if !acked {
			return rule{CloseUnauthenticated, "Unauthorized"}
		}
		if m.ID == "" || !validSubscribePayload(m.Payload) {
			return rule{CloseBadRequest, "Invalid message received: subscribe needs an id and a payload with a query"}
		}
	case "complete":
		if m.ID == "" {
			return rule{CloseBadRequest, "Invalid message received: complete needs an id"}
		}
		if !acked {
			return rule{ruleSkip, ""} // nothing is running; gqlgen would close with 1002 before init
		}
	case "ping", "pong":
		if m.Payload != nil && !isObjectOrNull(m.Payload) {
			return bad
		}
		if !acked {
			// gqlgen reads only connection_init before the ack (anything else: 1002); the
			// protocol allows a ping at any time.
			if m.Type == "ping" {
				_ = c.inner.WriteJSON(envelope{Type: "pong"})
			}
			return rule{ruleSkip, ""}
		}
	default: // unknown, or a message only the server sends (connection_ack, next, error)
		return bad
	}
	return rule{}
}

// validSubscribePayload reports whether a subscribe payload is a GraphQL request: an object
// whose query is a string (or absent, for a persisted query), operationName a string or null,
// variables and extensions objects or null.
func validSubscribePayload(payload json.RawMessage) bool {
	if !isObject(payload) {
		return false
	}
	var p struct {
		Query         *json.RawMessage `json:"query"`
		OperationName json.RawMessage  `json:"operationName"`
		Variables     json.RawMessage  `json:"variables"`
		Extensions    json.RawMessage  `json:"extensions"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return false
	}
	isString := func(v json.RawMessage) bool { var s string; return json.Unmarshal(v, &s) == nil }
	if p.Query != nil && !isString(*p.Query) || p.Query == nil && len(p.Extensions) == 0 {
		return false
	}
	if len(p.OperationName) > 0 && string(p.OperationName) != "null" && !isString(p.OperationName) {
		return false
	}
	return (len(p.Variables) == 0 || isObjectOrNull(p.Variables)) && (len(p.Extensions) == 0 || isObjectOrNull(p.Extensions))
}

// isObject reports whether data is a JSON object.
func isObject(data []byte) bool {
	d := bytes.TrimSpace(data)
	return len(d) > 0 && d[0] == '{'
}

// WriteJSON sends v and, for the end of an operation (complete or error), forgets its id once
// the message is out. Once the connection is closed nothing more is sent: gqlgen's coder
// adapter writes the close frame from a goroutine, and the operations it then cancels would
// otherwise race it with a "complete" the client reads before the close code (4409, 4408).
func (c *guardedConn) WriteJSON(v any) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil // dropped, as a message written after the close frame would be
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var m envelope
	_ = json.Unmarshal(b, &m)
	if m.Type == "connection_ack" {
		// Before the write: the client may subscribe as soon as it reads the ack.
		c.mu.Lock()
		c.acked = true
		c.mu.Unlock()
	}
	err = c.inner.WriteJSON(json.RawMessage(b))
	if m.Type == "complete" || m.Type == "error" {
		c.end(m.ID)
	}
	return err
}

type beginResult int

const (
	begun beginResult = iota
	beginDuplicate
	beginOverCap
)

func (c *guardedConn) begin(id string) beginResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ops[id]; ok {
		return beginDuplicate
	}
	if max := c.t.limits.MaxOperations; max > 0 && len(c.ops) >= max {
		return beginOverCap
	}
	if c.closed {
		return begun // gqlgen will not run it; nothing to count
	}
	c.ops[id] = struct{}{}
	c.t.add(1)
	return begun
}

func (c *guardedConn) end(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.ops[id]; ok {
		delete(c.ops, id)
		c.t.add(-1)
	}
}

// refuse sends the error message that ends operation id without running it.
func (c *guardedConn) refuse(id, message string) {
	payload, _ := json.Marshal([]map[string]any{{"message": message, "extensions": map[string]any{"code": errorMessageCode}}})
	_ = c.inner.WriteJSON(envelope{ID: id, Type: "error", Payload: payload})
}

// closeWith starts the close handshake with code and reason, then closes. WriteClose marks
// the connection closed first, so that no message goes out after the close is decided.
func (c *guardedConn) closeWith(code int, reason string) {
	_ = c.WriteClose(code, reason)
	c.Close()
}

// onClose makes release run when the connection closes, and reports whether it will: false
// when it is closed already.
func (c *guardedConn) onClose(release func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.release = release
	return true
}

// Close closes the connection, forgets its operations and gives back its client's slot. It may
// be called more than once.
func (c *guardedConn) Close() error {
	c.mu.Lock()
	if c.initTimer != nil {
		c.initTimer.Stop()
	}
	c.closed = true
	n := len(c.ops)
	clear(c.ops)
	release := c.release
	c.release = nil
	c.mu.Unlock()
	if n > 0 {
		c.t.add(-n)
	}
	if release != nil {
		release()
	}
	return c.inner.Close()
}

// WriteClose starts gqlgen's own close (a protocol error, the end of the connection): from
// then on nothing more is sent either, as after the guard's.
func (c *guardedConn) WriteClose(code int, message string) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.inner.WriteClose(code, message)
}

func (c *guardedConn) Subprotocol() string { return c.inner.Subprotocol() }

func (c *guardedConn) SetReadLimit(limit int64) {
	if l, ok := c.inner.(transport.WebsocketReadLimiter); ok {
		l.SetReadLimit(limit)
	}
}

func (c *guardedConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.inner.(transport.WebsocketReadDeadliner); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}

// isObjectOrNull reports whether a present init payload is one gqlgen can decode (an object,
// or null); an absent one is fine too.
func isObjectOrNull(payload json.RawMessage) bool {
	p := bytes.TrimSpace(payload)
	return len(p) == 0 || p[0] == '{' || string(p) == "null"
}
