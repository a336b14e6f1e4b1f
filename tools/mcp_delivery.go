package tools

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// delivery is what the transport learns of one tool call (an MCP call, or an HTTP tool's
// request): whether its request left Interlock (after which it may have reached the server, and
// is never sent again), and whether its answer was too large to read. It travels with the call's
// context, the only thing the SDK hands from the call to the transport (and the one thing a
// redirect policy sees of the call, see sameOriginRedirects).
type delivery struct {
	sent     atomic.Bool
	tooLarge atomic.Bool
}

func (d *delivery) wasSent() bool    { return d.sent.Load() }
func (d *delivery) isTooLarge() bool { return d.tooLarge.Load() }

type deliveryKey struct{}

func withDelivery(ctx context.Context, d *delivery) context.Context {
	return context.WithValue(ctx, deliveryKey{}, d)
}

func deliveryOf(ctx context.Context) *delivery {
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// deliveryTransport is the HTTP client's transport of a url server: a request counts as sent
// once it was written to a connection (one that fails before, a refused connection say, never
// reached the server), and an answer is read only up to maxMCPMessage bytes.
type deliveryTransport struct{ base http.RoundTripper }

func (t *deliveryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	d := deliveryOf(req.Context())
	if d != nil {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(i httptrace.WroteRequestInfo) {
				if i.Err == nil {
					d.sent.Store(true)
				}
			},
		}))
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxMCPMessage, d: d}
	}
	return resp, err
}

// errMessageTooLarge ends the reading of an answer past maxMCPMessage.
var errMessageTooLarge = errors.New("the MCP server's answer is larger than Interlock reads")

type limitedBody struct {
	io.ReadCloser
	left int
	d    *delivery
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if b.d != nil {
			b.d.tooLarge.Store(true)
		}
		return 0, errMessageTooLarge
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= n
	return n, err
}

// deliveryConn is the connection of a stdio server: a request counts as sent once it was
// written to the process's stdin. A message longer than maxMCPMessage ends the connection (the
// SDK's line limit); when one call was waiting, the too-long message was its answer.
type deliveryConn struct {
	mcp.Connection
	mu      sync.Mutex
	waiting map[any]*delivery // by JSON-RPC id
}

func (c *deliveryConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	d := deliveryOf(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && d != nil && req.IsCall() && err == nil {
		d.sent.Store(true)
		c.mu.Lock()
		c.waiting[req.ID.Raw()] = d
		c.mu.Unlock()
	}
	return err
}

func (c *deliveryConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		delete(c.waiting, resp.ID.Raw())
	}
	if err != nil && strings.Contains(err.Error(), "maximum line length") && len(c.waiting) == 1 {
		for _, d := range c.waiting {
			d.tooLarge.Store(true)
		}
	}
	return msg, err
}
