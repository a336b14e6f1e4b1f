package apptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// SSEEvent is one event of a text/event-stream: its name and its data (the data lines joined).
type SSEEvent struct {
	Name string
	Data json.RawMessage
}

// Result splits the data of a "next" event of graphql-sse's distinct connections mode into the
// GraphQL result's data and errors.
func (ev SSEEvent) Result() (data, errors json.RawMessage) {
	var r struct{ Data, Errors json.RawMessage }
	json.Unmarshal(ev.Data, &r)
	return r.Data, r.Errors
}

// SSEReader reads the events of a stream in order, as the EventSource algorithm does: fields
// gathered until a blank line dispatches them; comment lines (the heartbeat) are counted.
type SSEReader struct {
	sc       *bufio.Scanner
	Comments int
}

// NewSSEReader reads events from r.
func NewSSEReader(r io.Reader) *SSEReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &SSEReader{sc: sc}
}

// Next returns the next event; false when the stream ended first.
func (r *SSEReader) Next() (SSEEvent, bool) {
	var ev SSEEvent
	var data []string
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "":
			if ev.Name != "" || data != nil {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			r.Comments++
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return SSEEvent{}, false
}

// SubscribeSSE sends a GraphQL operation to the server as a distinct-connection event stream
// (POST, Accept: text/event-stream, with token as a bearer token when given) and returns its
// response, whatever its status: the caller reads it with NewSSEReader and closes it. The
// stream ends with ctx.
func (s *Server) SubscribeSSE(t testing.TB, ctx context.Context, token, query string, vars map[string]any) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
