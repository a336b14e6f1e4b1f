package gqlhttp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// errStreamClosed is what a write to an event stream that ended returns.
var errStreamClosed = errors.New("the event stream is closed")

// eventWriteTimeout bounds each write to an event stream: a client that reads nothing for this
// long is cut, instead of holding its handler and its slot for ever (the server's own write
// deadline is lifted for streams).
const eventWriteTimeout = 30 * time.Second

// eventWriter writes one Server-Sent Events stream: events from any goroutine, one at a time,
// each flushed, and a comment line whenever the stream has been silent for the heartbeat.
type eventWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu     sync.Mutex
	closed bool
	last   time.Time // of the last write

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// openEvents starts the stream on w: the stream is spared the server's read and write
// deadlines (it lasts as long as it is wanted, and its request body has been read), its headers
// and a first comment go out at once (some browsers wait for a first byte), and its heartbeat
// runs.
func openEvents(w http.ResponseWriter, heartbeat time.Duration) *eventWriter {
	e := &eventWriter{w: w, rc: http.NewResponseController(w), stop: make(chan struct{}), done: make(chan struct{})}
	// A writer without deadlines (a test recorder) has none to cut the stream with either.
	_ = e.rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", EventStream+"; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not hold events back
	_ = e.rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
	w.WriteHeader(http.StatusOK)
	_ = e.write([]byte(":\n\n"))
	go e.beat(heartbeat)
	return e
}

// write sends p and flushes it, unless the stream is closed.
func (e *eventWriter) write(p []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errStreamClosed
	}
	e.last = time.Now()
	_ = e.rc.SetWriteDeadline(e.last.Add(eventWriteTimeout))
	if _, err := e.w.Write(p); err != nil {
		e.closed = true
		return err
	}
	if err := e.rc.Flush(); err != nil {
		e.closed = true
		return err
	}
	return nil
}

// event sends one event with its data (a JSON value, or none).
func (e *eventWriter) event(name string, data []byte) error {
	b := make([]byte, 0, len(name)+len(data)+20)
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return e.write(b)
}

// beat writes a comment line whenever the stream has been silent for every.
func (e *eventWriter) beat(every time.Duration) {
	defer close(e.done)
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-timer.C:
		}
		e.mu.Lock()
		idle := time.Since(e.last)
		e.mu.Unlock()
		if idle >= every {
			if e.write([]byte(":\n\n")) != nil {
				return
			}
			idle = 0
		}
		timer.Reset(every - idle)
	}
}

// close ends the stream: nothing more is written, and the heartbeat has stopped when it
// returns. It may be called more than once, from any goroutine.
func (e *eventWriter) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stopOnce.Do(func() { close(e.stop) })
	<-e.done
}

// stream answers with an event stream (graphql-sse's distinct connections mode): each response
// a next event, then complete. Payloads of a query after its first are @defer's.
func (t *Transport) stream(ctx context.Context, w http.ResponseWriter, responses graphql.ResponseHandler, op ast.Operation) {
	e := openEvents(w, t.opts.Heartbeat)
	defer e.close()
	first := true
	for {
		resp := responses(ctx)
		if resp == nil {
			break
		}
		if e.event("next", marshal(payload(resp, first, op))) != nil {
			return
		}
		first = false
	}
	_ = e.event("complete", nil)
}

// incremental is a @defer payload after the first, in the shape Apollo Client and urql read
// over multipart/mixed and SSE alike (deferSpec=20220824): the deferred data with the path of
// the object it belongs to, inside "incremental".
type incremental struct {
	Incremental []deferred `json:"incremental"`
	HasNext     bool       `json:"hasNext"`
}

type deferred struct {
	Data   json.RawMessage `json:"data,omitempty"`
	Path   ast.Path        `json:"path"`
	Label  string          `json:"label,omitempty"`
	Errors gqlerror.List   `json:"errors,omitempty"`
}

// payload is what one response of an operation is on a stream: the response itself, or for a
// query's later responses, the @defer payload it carries.
func payload(resp *graphql.Response, first bool, op ast.Operation) any {
	if first || op != ast.Query {
		return resultOf(resp)
	}
	path := resp.Path
	if path == nil {
		path = ast.Path{}
	}
	hasNext := resp.HasNext != nil && *resp.HasNext
	return incremental{Incremental: []deferred{{Data: resp.Data, Path: path, Label: resp.Label, Errors: resp.Errors}}, HasNext: hasNext}
}
