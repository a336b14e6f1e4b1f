package gqlguard

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"unicode/utf8"

	"interlock/gqlhttp"
)

// CloseTooManyConnections closes a WebSocket whose client already holds the most connections
// allowed (Connections): 4000 plus HTTP's 429, as 4401 and 4403 mirror 401 and 403.
const CloseTooManyConnections = 4429

// CodeTooManyConnections refuses an event stream (SSE) whose client already holds the most
// connections allowed; extensions.retryAfter says when to try again.
const CodeTooManyConnections = "TOO_MANY_CONNECTIONS"

// connectionRetryAfter is the Retry-After of a refused event stream, in seconds. A slot frees
// only when one of the client's own streams or sockets closes, which the server cannot foresee;
// this is a pace for a client that retries, not a promise.
const connectionRetryAfter = 5

// Connections caps the long-lived connections each client holds open at once: WebSockets
// (counted from connection_init, when the principal of a browser's header-less socket is first
// known, until the socket closes), event streams (from the request until the stream ends), and
// the requests the approvals package holds while they wait (long-polls, coding-agent hooks:
// Acquire, from before the request is stored until it is answered): one requester held 3,000
// waits (+170 MiB RSS, 3,000 descriptors) before they were counted, and holds 32 now.
// One viewer holding 10,000 subscriptions over many sockets took 380 MiB; the per-connection cap
// (WebsocketLimits.MaxOperations) bounds only what one socket holds, this bounds the sockets.
//
// A client is the subject SubjectFunc returns for the request's context (the authenticated
// principal), or else the client IP address Middleware recorded, as for MutationRate.
type Connections struct {
	max     int
	subject func(context.Context) string

	mu   sync.Mutex
	open map[string]int // by client key; a client with none open has no entry
}

// NewConnections allows each client max connections at once (max ≤ 0: no limit). subject may
// be nil, or return "" for a context without a principal; the client IP is used then.
func NewConnections(max int, subject func(context.Context) string) *Connections {
	return &Connections{max: max, subject: subject, open: map[string]int{}}
}

// TooManyConnectionsError is the refusal of a connection over the cap.
type TooManyConnectionsError struct {
	// Client names the client: its principal's subject, or its address.
	Client string
	Max    int
}

func (e *TooManyConnectionsError) Error() string {
	return fmt.Sprintf("too many connections for %s: it already holds %d WebSockets, event streams and waits, the most allowed; close one (or subscribe over an open socket) and retry",
		e.Client, e.Max)
}

// client names the client of ctx: its key in open, and the name a refusal gives.
func (c *Connections) client(ctx context.Context) (key, name string) {
	if c.subject != nil {
		if s := c.subject(ctx); s != "" {
			return "principal:" + s, s
		}
	}
	ip := ClientIP(ctx)
	return "ip:" + ip, ip
}

// Acquire takes one of ctx's client's slots, returning the func that gives it back (once,
// however often it is called), or a *TooManyConnectionsError when all are taken.
func (c *Connections) Acquire(ctx context.Context) (release func(), err error) {
	if c == nil || c.max <= 0 {
		return func() {}, nil
	}
	key, name := c.client(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[key] >= c.max {
		return nil, &TooManyConnectionsError{Client: name, Max: c.max}
	}
	c.open[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.open[key]--; c.open[key] <= 0 {
				delete(c.open, key)
			}
		})
	}, nil
}

// Stream takes a slot for an event stream of ctx's client (gqlhttp.Options.StreamFunc: a
// distinct SSE stream, or a reservation of graphql-sse's single connection mode, from the
// request until the stream ends). Over the cap it is refused with 429 Too Many Requests,
// Retry-After and a GraphQL error (TOO_MANY_CONNECTIONS, extensions.retryAfter) before anything
// is streamed.
func (c *Connections) Stream(ctx context.Context) (release func(), err error) {
	release, err = c.Acquire(ctx)
	if err != nil {
		return nil, &gqlhttp.Refusal{
			Status:     http.StatusTooManyRequests,
			Message:    err.Error(),
			Code:       CodeTooManyConnections,
			Extensions: map[string]any{"retryAfter": connectionRetryAfter},
			Header:     gqlhttp.RetryAfter(connectionRetryAfter),
		}
	}
	return release, nil
}

// closeReason is the close reason of a socket over the cap: a WebSocket close reason holds at
// most 123 bytes, so a long subject is cut.
func closeReason(e *TooManyConnectionsError) string {
	const prefix = "too many connections for "
	name := e.Client
	if max := 123 - len(prefix); len(name) > max {
		cut := max - 3
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = name[:cut] + "..."
	}
	return prefix + name
}
