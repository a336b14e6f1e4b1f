package gqlhttp

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// TokenHeader carries the reservation token of a single connection stream (graphql-sse); an
// EventSource, which sets no headers, sends it as the token query parameter instead.
const TokenHeader = "X-GraphQL-Event-Stream-Token"

// streamToken is the reservation token r names, or "".
func streamToken(r *http.Request) string {
	if t := r.Header.Get(TokenHeader); t != "" {
		return t
	}
	return r.URL.Query().Get("token")
}

// registry holds the reservations of single connection streams, by token.
type registry struct {
	mu      sync.Mutex
	streams map[string]*stream
}

// stream is one reservation of graphql-sse's single connection mode: made by PUT, connected
// once by a GET asking for text/event-stream, it carries the results of the operations POSTed
// with its token, each event naming its operation's id. It ends when its connection closes, when
// its owner's credentials expire, or when no connection came within the reservation timeout;
// its operations end with it, and its connection slot is given back.
type stream struct {
	t            *Transport
	token, owner string
	release      func()
	expire       *time.Timer // ends a reservation nobody connects to

	connected chan struct{} // closed when the stream connects
	ended     chan struct{} // closed when it ends
	endOnce   sync.Once

	mu  sync.Mutex
	ew  *eventWriter         // the connection; nil until connected
	ops map[string]*singleOp // active operations by id; nil once ended
}

type singleOp struct{ cancel context.CancelFunc }

// reserve answers a PUT: a new reservation, its token in the body (201), holding one of the
// client's connection slots until it ends.
func (t *Transport) reserve(w http.ResponseWriter, r *http.Request) {
	if Negotiate(r.Header.Values("Accept"), PlainText) == "" {
		WriteError(w, r, http.StatusNotAcceptable, CodeBadUserInput, "a reservation's token is text/plain: accept it (or */*)")
		return
	}
	release := t.acquire(w, r)
	if release == nil {
		return
	}
	s := &stream{t: t, token: rand.Text(), owner: t.owner(r.Context()), release: release,
		connected: make(chan struct{}), ended: make(chan struct{}), ops: map[string]*singleOp{}}
	s.expire = time.AfterFunc(t.opts.ReservationTimeout, func() {
		s.mu.Lock()
		connected := s.ew != nil // set under mu as the connection begins, before connected closes
		s.mu.Unlock()
		if !connected {
			s.end()
		}
	})
	t.streams.mu.Lock()
	t.streams.streams[s.token] = s
	t.streams.mu.Unlock()
	h := w.Header()
	h.Set("Content-Type", PlainText+"; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(s.token))
}

func (t *Transport) owner(ctx context.Context) string {
	if t.opts.OwnerFunc == nil {
		return ""
	}
	return t.opts.OwnerFunc(ctx)
}

// lookup finds the reservation of token made by r's client, or answers 404: a token of another
// client's is not found either, so that a token says nothing to whoever else holds it.
func (t *Transport) lookup(w http.ResponseWriter, r *http.Request, token string) *stream {
	t.streams.mu.Lock()
	s := t.streams.streams[token]
	t.streams.mu.Unlock()
	if s == nil || s.owner != t.owner(r.Context()) {
		WriteError(w, r, http.StatusNotFound, CodeNotFound,
			"no event stream is reserved under this token (it ended, or was never made): reserve one with PUT")
		return nil
	}
	return s
}

// single answers a GET or POST carrying a reservation token: the stream's connection (a GET
// preferring text/event-stream), or an operation to run on it.
func (t *Transport) single(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor, token string) {
	s := t.lookup(w, r, token)
	if s == nil {
		return
	}
	accept := r.Header.Values("Accept")
	if r.Method == http.MethodGet && Negotiate(accept, answerTypes...) == EventStream {
		s.connect(w, r)
		return
	}
	want := Negotiate(accept, JSON, GraphQLResponse)
	if want == "" {
		WriteError(w, r, http.StatusNotAcceptable, CodeBadUserInput,
			"an operation on a stream is answered with JSON (its results go to the stream): accept application/json")
		return
	}
	params, refusal := readParams(r)
	if refusal != nil {
		refusal.Write(w, r)
		return
	}
	id, _ := params.Extensions["operationId"].(string)
	if id == "" {
		WriteError(w, r, http.StatusBadRequest, CodeBadUserInput, `an operation on a stream needs its id in extensions.operationId`)
		return
	}
	s.run(w, r, exec, params, id, want)
}

// connect serves the stream's connection until it ends.
func (s *stream) connect(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.ew != nil || s.ops == nil {
		s.mu.Unlock()
		WriteError(w, r, http.StatusConflict, CodeConflict, "this reservation already has its event stream: only one may be connected")
		return
	}
	s.expire.Stop()
	s.ew = openEvents(w, s.t.opts.Heartbeat)
	s.mu.Unlock()
	close(s.connected)
	var expired <-chan time.Time
	if s.t.opts.ExpiresFunc != nil {
		if at := s.t.opts.ExpiresFunc(r.Context()); !at.IsZero() {
			timer := time.NewTimer(time.Until(at))
			defer timer.Stop()
			expired = timer.C
		}
	}
	select {
	case <-r.Context().Done():
	case <-s.ended:
	case <-expired:
	}
	s.end()
}

// end ends the stream and its operations, once: no event is written after it, the token is
// forgotten and the slot given back.
func (s *stream) end() {
	s.endOnce.Do(func() {
		s.t.streams.mu.Lock()
		delete(s.t.streams.streams, s.token)
		s.t.streams.mu.Unlock()
		s.mu.Lock()
		ops, ew := s.ops, s.ew
		s.ops = nil
		s.mu.Unlock()
		close(s.ended)
		for _, op := range ops {
			op.cancel()
		}
		if ew != nil {
			ew.close()
		}
		s.expire.Stop()
		s.release()
	})
}

// run starts an operation on the stream: a request error is answered at once, as to any
// GraphQL request; otherwise 202, and the results go to the stream.
func (s *stream) run(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor, params *graphql.RawParams, id, want string) {
	// The operation outlives this request (its results go to the stream), with its values: the
	// principal that sent it, which authorizes it and ends it when its credentials expire.
	opCtx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	op := &singleOp{cancel: cancel}
	s.mu.Lock()
	switch {
	case s.ops == nil:
		s.mu.Unlock()
		cancel()
		WriteError(w, r, http.StatusNotFound, CodeNotFound, "the event stream of this token has ended: reserve a new one with PUT")
		return
	case s.ops[id] != nil:
		s.mu.Unlock()
		cancel()
		WriteError(w, r, http.StatusConflict, CodeConflict, fmt.Sprintf("operation id %q is already in use on this stream", id))
		return
	case s.t.opts.MaxOperations > 0 && len(s.ops) >= s.t.opts.MaxOperations:
		s.mu.Unlock()
		cancel()
		WriteError(w, r, http.StatusBadRequest, CodeBadUserInput, fmt.Sprintf(
			"this stream already has %d active operations, the most allowed; complete one or reserve another stream", s.t.opts.MaxOperations))
		return
	}
	s.ops[id] = op
	s.mu.Unlock()

	ctx, h := withHint(context.WithValue(opCtx, methodKey{}, r.Method))
	rc, errs := exec.CreateOperationContext(ctx, params)
	if errs == nil && r.Method == http.MethodGet && rc.Operation.Operation == ast.Mutation {
		errs = gqlerror.List{mutationOverGET(ctx)}
	}
	if errs != nil {
		s.forget(id, op)
		resp := exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		writeResponse(w, want, resp, h)
		return
	}
	w.WriteHeader(http.StatusAccepted)
	// Past this request, a status asked for changes nothing: the answer is sent.
	go s.execute(context.WithValue(ctx, hintKey{}, (*hint)(nil)), exec, rc, id, op)
}

// execute runs the operation and sends its results, once the stream is connected, as next
// events carrying its id, then complete, unless it was stopped (DELETE, or the stream ended).
// It runs at once, as a POST asks: a mutation is not held until the stream connects, only its
// result is.
func (s *stream) execute(ctx context.Context, exec graphql.GraphExecutor, rc *graphql.OperationContext, id string, op *singleOp) {
	defer s.forget(id, op)
	defer op.cancel()
	responses, ctx := exec.DispatchOperation(ctx, rc)
	first := true
	for {
		resp := responses(ctx)
		if resp == nil {
			break
		}
		if s.send(ctx, "next", streamEvent{ID: id, Payload: payload(resp, first, rc.Operation.Operation)}) != nil {
			return
		}
		first = false
	}
	if ctx.Err() == nil {
		_ = s.send(ctx, "complete", streamEvent{ID: id})
	}
}

// streamEvent is the data of an event on a single connection stream.
type streamEvent struct {
	ID      string `json:"id"`
	Payload any    `json:"payload,omitempty"`
}

// send writes an event once the stream is connected.
func (s *stream) send(ctx context.Context, name string, ev streamEvent) error {
	select {
	case <-s.connected:
	case <-s.ended:
		return errStreamClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	ew := s.ew
	s.mu.Unlock()
	return ew.event(name, marshal(ev))
}

// forget removes operation id, if it is still op.
func (s *stream) forget(id string, op *singleOp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops != nil && s.ops[id] == op {
		delete(s.ops, id)
	}
}

// stop answers a DELETE: the operation named by ?operationId= on the stream of the token
// stops, and sends nothing more (200 whether it was still running or not).
func (t *Transport) stop(w http.ResponseWriter, r *http.Request) {
	token := streamToken(r)
	if token == "" {
		WriteError(w, r, http.StatusBadRequest, CodeBadUserInput,
			"DELETE stops an operation of a single connection stream: send the stream's token in "+TokenHeader)
		return
	}
	s := t.lookup(w, r, token)
	if s == nil {
		return
	}
	id := r.URL.Query().Get("operationId")
	if id == "" {
		WriteError(w, r, http.StatusBadRequest, CodeBadUserInput, "name the operation to stop with ?operationId=")
		return
	}
	s.mu.Lock()
	op := s.ops[id]
	if op != nil {
		delete(s.ops, id)
	}
	s.mu.Unlock()
	if op != nil {
		op.cancel()
	}
	w.WriteHeader(http.StatusOK)
}
