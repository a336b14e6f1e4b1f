package httpguard

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// SpareStreams lets WebSocket and Server-Sent Events requests outlive the server's ReadTimeout
// and WriteTimeout, which every other request keeps: http.Server sets both deadlines on the
// connection for each request, and a stream that lasts longer would be cut (the write deadline
// fails the next event; the read deadline fires in the connection's background read and cancels
// the request's context). For a WebSocket both are cleared at once (hijacking the connection
// clears them too). For SSE the write deadline is cleared at once and the read deadline once the
// body has been read, so a client still has ReadTimeout to send its request.
func SpareStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case isWebsocket(r):
			rc := http.NewResponseController(w)
			noDeadline(rc.SetReadDeadline)
			noDeadline(rc.SetWriteDeadline)
		case isEventStream(r):
			rc := http.NewResponseController(w)
			noDeadline(rc.SetWriteDeadline)
			if r.Body != nil && r.Body != http.NoBody {
				r.Body = &clearOnEOF{ReadCloser: r.Body, rc: rc}
			} else {
				noDeadline(rc.SetReadDeadline)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// noDeadline clears one of rc's deadlines. A writer that has none (http.ErrNotSupported: a test
// recorder) has none to cut a stream with either, so the error is of no consequence.
func noDeadline(set func(time.Time) error) { _ = set(time.Time{}) }

func isWebsocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

func isEventStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// clearOnEOF clears the connection's read deadline once the body is read to its end.
type clearOnEOF struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *clearOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		noDeadline(b.rc.SetReadDeadline)
	}
	return n, err
}
