package httpguard

import (
	"net/http"
	"strings"
	"time"
)

// SpareStreams lets WebSocket requests outlive the server's ReadTimeout and WriteTimeout, which
// every other request keeps: http.Server sets both deadlines on the connection for each
// request, and a socket that lasts longer would be cut (the write deadline fails the next
// message; the read deadline fires in the connection's background read and cancels the
// request's context). Both are cleared at once (hijacking the connection clears them too).
// Event streams are spared by gqlhttp itself, once it has decided to stream: a request listing
// text/event-stream in Accept may well be answered with one JSON document, which keeps them.
func SpareStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWebsocket(r) {
			rc := http.NewResponseController(w)
			noDeadline(rc.SetReadDeadline)
			noDeadline(rc.SetWriteDeadline)
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
