package mcpgate

import (
	"net/http"
	"time"

	"interlock/notify"
)

// baseHeader carries, from the HTTP request to the tool handler, the base URL of the console
// links of that request's answers. The SDK hands a handler the request's headers, not its
// context; localBase sets the header itself, replacing whatever a client sent under that name.
const baseHeader = "Interlock-Console-Base"

// localBase sets baseHeader on r: consoleURL, or else the server's own address as the request
// reached it (the local address of its connection). Never the Host header: a client, or
// whatever relays its request, could make the link point anywhere.
func localBase(r *http.Request, consoleURL string) {
	base := consoleURL
	if base == "" {
		base = notify.ServerBase(r)
	}
	r.Header.Set(baseHeader, base)
}

// runURL is run runID's page in the console, under the base of the request that carried the
// call.
func runURL(h http.Header, runID string) string { return notify.RunURL(h.Get(baseHeader), runID) }

// holdDeadlines moves the server's read and write deadlines, set for a request answered at
// once, past the longest a call is held (wait, and a minute to answer): the read deadline
// fires in the connection's background read once the body is read and would cancel the held
// call, the write one would cut its answer. A GET (the client's standing event stream) has
// none: it lasts as long as the session.
func holdDeadlines(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	rc := http.NewResponseController(w)
	until := time.Now().Add(wait + time.Minute)
	if r.Method == http.MethodGet {
		until = time.Time{}
	}
	_ = rc.SetReadDeadline(until) // http.ErrNotSupported (a test recorder): no deadline to move
	_ = rc.SetWriteDeadline(until)
}
