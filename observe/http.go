package observe

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The transports a GraphQL operation arrives by.
const (
	transportWebsocket = "websocket"
	transportSSE       = "sse"
	transportHTTP      = "http"
)

type requestKey struct{}

// request is what HTTP tells the operations of one request: the transport, and whether one
// of them wrote the request's log line.
type request struct {
	transport string
	logged    atomic.Bool
}

func requestFrom(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// HTTP wraps the GraphQL endpoint: it tells the operations their transport (for
// interlock_graphql_subscriptions_open) and logs, one line each, the requests refused before
// any operation ran (no token: 401, body too large: 413, a preflight at debug level), which
// the operation log never sees. Streams keep their writer: Flush and Hijack pass through.
func HTTP(log *slog.Logger, next http.Handler) http.Handler {
	// The handler's own frame stays small: it is on the stack of every request for as long as
	// the request lasts (a held MCP call, a stream), and the log line is built only once the
	// handler has returned, in a function of its own.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := &request{transport: transportOf(r)}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), requestKey{}, req)))
		if !req.logged.Load() {
			logRequest(log, r, sw.status, req.transport, time.Since(start))
		}
	})
}

// transportOf is the transport a request arrives by.
func transportOf(r *http.Request) string {
	switch {
	case strings.EqualFold(r.Header.Get("Upgrade"), "websocket"):
		return transportWebsocket
	case strings.Contains(r.Header.Get("Accept"), "text/event-stream"):
		return transportSSE
	}
	return transportHTTP
}

// logRequest logs a request no operation logged: at debug level, or info for an error status.
func logRequest(log *slog.Logger, r *http.Request, status int, transport string, took time.Duration) {
	if status == 0 {
		status = http.StatusOK
	}
	level := slog.LevelDebug
	if status >= 400 {
		level = slog.LevelInfo
	}
	log.LogAttrs(r.Context(), level, "http request",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
		slog.String("transport", transport), durationAttr(took))
}

// statusWriter keeps the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush serves SSE.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Hijack serves the WebSocket upgrade.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// durationAttr is a duration in milliseconds, readable in text and in JSON alike.
func durationAttr(d time.Duration) slog.Attr {
	return slog.Float64("duration_ms", float64(d.Microseconds())/1000)
}
