// Package approvals serves approval requests over plain HTTP, for scripts and languages without a
// GraphQL client: an agent that runs elsewhere POSTs the call it wants to make and long-polls for
// the decision. It is a thin layer over the run service (runs.Service.RequestApproval and
// AwaitApproval), as the GraphQL resolvers are; the wiring puts the same authentication, body
// limit, CORS and mutation rate in front of it as in front of /graphql.
//
//	POST /approvals?wait=DURATION      {agentId, toolName, args, threadId, resourceId, context, idempotencyKey}
//	GET  /approvals/{runId}?wait=DURATION
//
// Both answer the request's state, once it is decided or wait has passed:
//
//	{"runId", "status": "PENDING"|"APPROVED"|"DECLINED"|"EXPIRED", "args", "reason",
//	 "decidedBy", "decidedAt", "expiresAt", "url"}
//
// and every error as {"error": {"code", "message"}} with its HTTP status: 400 BAD_USER_INPUT,
// 401 UNAUTHENTICATED, 403 FORBIDDEN, 404 NOT_FOUND, 405, 409 CONFLICT, 413, 415, 429
// RATE_LIMITED or TOO_MANY_CONNECTIONS, 503 UNAVAILABLE (with Retry-After), 500 INTERNAL.
//
// A request that waits (wait > 0, and every hook) holds a connection slot of its client while
// it is held (SlotFunc), as a WebSocket does; a POST and a GET that waits take a token of the
// mutation rate (RateFunc).
package approvals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"interlock/auth"
	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// DefaultMaxWait is the longest wait a request may ask for by default (--max-approval-wait).
const DefaultMaxWait = 10 * time.Minute

// CodeRateLimited is the code of a POST refused because its client is over the mutation rate.
const CodeRateLimited = "RATE_LIMITED"

// Options configure the handlers of /approvals and of the hooks. Service is required; zero
// fields take the defaults given.
type Options struct {
	Service *runs.Service
	// MaxWait caps the wait a request asks for: a longer one waits MaxWait (not an error), and
	// the answer is PENDING if nothing was decided by then. 0 answers at once (the server's
	// setting defaults to DefaultMaxWait).
	MaxWait time.Duration
	// MaxBodyBytes bounds a POST's body (413 above it). Default 1 MiB, as /graphql's.
	MaxBodyBytes int64
	// RateFunc, when set, is asked before each POST (which creates work) and each GET that
	// waits whether the client of ctx is within its mutation rate: 0, or how long until it is
	// (429 with Retry-After).
	RateFunc func(ctx context.Context) time.Duration
	// SlotFunc, when set, takes one of the connections the client of ctx may hold at once
	// (--max-connections-per-principal, the count WebSockets and event streams take from) for a
	// request held while it waits: a POST or GET with a wait, a hook. It returns the func that
	// gives the slot back, or an error when the client holds all its slots: the request is
	// refused with 429 at once, before anything is stored.
	SlotFunc func(ctx context.Context) (release func(), err error)
	// ConsoleURL is the console's base URL for the answers' url (--console-url, else
	// notifications.consoleURL); empty: the server's own address, the one the request's
	// connection arrived at — never the request's Host header, which the client writes. (The
	// hooks' answers carry no url.)
	ConsoleURL string
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
}

// Handler serves /approvals and /approvals/{runId}.
type Handler struct{ o Options }

// New returns the handler of o.
func New(o Options) *Handler { return &Handler{o: o.withDefaults()} }

// withDefaults is o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	o.MaxWait = max(o.MaxWait, 0)
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Request is the body of POST /approvals: the fields of GraphQL's ApprovalRequestInput.
type Request struct {
	AgentID        string          `json:"agentId"`
	ToolName       string          `json:"toolName"`
	Args           json.RawMessage `json:"args"`
	ThreadID       string          `json:"threadId,omitempty"`
	ResourceID     string          `json:"resourceId,omitempty"`
	Context        string          `json:"context,omitempty"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
}

// Answer is the state of an approval request, as both routes answer it.
type Answer struct {
	RunID string `json:"runId"`
	// Status is PENDING while nobody decided, else the decision: APPROVED, DECLINED, EXPIRED.
	Status string `json:"status"`
	// Args are the arguments to run the tool with: a person's edited ones when they edited
	// them, else those of the request.
	Args json.RawMessage `json:"args"`
	// Reason is a decline's reason, what an expiry says, or the rule of the policy that let
	// the call through (autoApproved); null otherwise.
	Reason    *string    `json:"reason"`
	DecidedBy *string    `json:"decidedBy"`
	DecidedAt *time.Time `json:"decidedAt"`
	// ExpiresAt is when a pending request expires without a decision (null: never, or decided).
	ExpiresAt *time.Time `json:"expiresAt"`
	// URL opens the request in the console.
	URL string `json:"url"`
	// Receipt is the signed receipt of an approval (a compact JWS, package receipt): the
	// caller hands it to the tool's service, which verifies that exactly these args were
	// approved. Null unless APPROVED.
	Receipt *string `json:"receipt"`
	// AutoApproved says an APPROVED call was let through by its tool's policy, nobody asked
	// (the decision AUTO_APPROVED); PolicyRevision names that policy (also on a decision a
	// person took on a call a policy held). Omitted otherwise.
	AutoApproved   bool    `json:"autoApproved,omitempty"`
	PolicyRevision *string `json:"policyRevision,omitempty"`
}

// The answer's statuses.
const (
	StatusPending  = "PENDING"
	StatusApproved = "APPROVED"
	StatusDeclined = "DECLINED"
	StatusExpired  = "EXPIRED"
)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case r.URL.Path == "/approvals":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "POST an approval request to /approvals; GET /approvals/{runId} reads one")
			return
		}
		h.post(w, r)
	case strings.HasPrefix(r.URL.Path, "/approvals/"):
		id := strings.TrimPrefix(r.URL.Path, "/approvals/")
		if id == "" || strings.Contains(id, "/") {
			writeError(w, http.StatusNotFound, string(runtype.CodeNotFound), "not found: use GET /approvals/{runId}")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "GET /approvals/{runId} reads an approval request; decide it with approveToolCall or declineToolCall (/graphql) or in the console")
			return
		}
		h.get(w, r, id)
	default:
		writeError(w, http.StatusNotFound, string(runtype.CodeNotFound), "not found")
	}
}

// post stores the request, then waits for its decision.
func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	wait, ok := h.wait(w, r)
	if !ok {
		return
	}
	body, ok := h.o.readJSON(w, r, "the request", true)
	if !ok {
		return
	}
	req, msg := decode(body)
	if msg != "" {
		writeError(w, http.StatusBadRequest, string(runtype.CodeBadUserInput), msg)
		return
	}
	release, ok := h.o.slot(w, r, wait)
	if !ok {
		return
	}
	defer release()
	if h.o.rateLimited(w, r, " (with the same idempotencyKey)") {
		return
	}
	rn, err := h.o.Service.RequestApproval(r.Context(), runs.ApprovalParams{
		AgentID: req.AgentID, ToolName: req.ToolName, Args: req.Args, ThreadID: req.ThreadID,
		ResourceID: req.ResourceID, Context: req.Context, IdempotencyKey: req.IdempotencyKey,
	})
	if err != nil {
		h.o.fail(w, r, err)
		return
	}
	h.answer(w, r, rn.ID, rn, wait)
}

// get answers the state of a request, after waiting for its decision.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, runID string) {
	wait, ok := h.wait(w, r)
	if !ok {
		return
	}
	release, ok := h.o.slot(w, r, wait)
	if !ok {
		return
	}
	defer release()
	// A GET that waits holds the server's resources as long as a POST does: it takes a token
	// of the same rate, so that a client cannot cycle short waits without end.
	if wait > 0 && h.o.rateLimited(w, r, "") {
		return
	}
	h.answer(w, r, runID, nil, wait)
}

// answer waits up to wait for the decision of the request runID (rn: as just stored, when it
// was), then writes its state. A client that goes away ends the wait, and nothing is written.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, runID string, rn *runtype.Run, wait time.Duration) {
	if rn == nil || (rn.Status == runtype.StatusSuspended && wait > 0) {
		if wait > 0 {
			// The server's deadlines were set for a request answered at once: a wait outlives
			// them. The read deadline goes (the body is read; the connection's read now only
			// watches for the client going away, which ends ctx), the write one moves past it.
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Time{})
			_ = rc.SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
		}
		var err error
		if rn, err = h.o.Service.AwaitApproval(r.Context(), runID, wait); err != nil {
			if r.Context().Err() != nil {
				return // the client went away: nobody to answer
			}
			h.o.fail(w, r, err)
			return
		}
	}
	a := h.state(r, rn)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_ = json.NewEncoder(w).Encode(a)
	}
}

// state is the answer about run rn.
func (h *Handler) state(r *http.Request, rn *runtype.Run) Answer {
	a := Answer{RunID: rn.ID, Status: StatusPending, URL: h.runURL(r, rn.ID)}
	if rn.Status == runtype.StatusSuspended && len(rn.ToolCalls) > 0 {
		c := rn.ToolCalls[0]
		a.Args, a.ExpiresAt = c.Args, c.ExpiresAt
		return a
	}
	if len(rn.Decisions) == 0 {
		return a // not decided, and not waiting (it cannot be, for a request): shown as pending
	}
	d := rn.Decisions[len(rn.Decisions)-1]
	a.Args, a.Reason, a.DecidedBy = d.Args, d.Reason, d.DecidedBy
	if d.EditedArgs != nil {
		a.Args = d.EditedArgs
	}
	at := d.DecidedAt
	a.DecidedAt, a.PolicyRevision = &at, d.PolicyRevision
	switch d.Kind {
	case runtype.DecisionApproved, runtype.DecisionAutoApproved:
		a.Status, a.Receipt, a.AutoApproved = StatusApproved, d.Receipt, d.Kind == runtype.DecisionAutoApproved
	case runtype.DecisionDeclined:
		a.Status = StatusDeclined
	case runtype.DecisionExpired:
		a.Status = StatusExpired
	default:
		a.Status = string(d.Kind)
	}
	return a
}

// runURL is the request's page in the console: under ConsoleURL, or else the server's own
// address as the request reached it (notify.ServerBase, never the Host header).
func (h *Handler) runURL(r *http.Request, runID string) string {
	base := h.o.ConsoleURL
	if base == "" {
		base = notify.ServerBase(r)
	}
	return notify.RunURL(base, runID)
}

// wait reads the wait parameter of /approvals; absent, 0 (parseWait).
func (h *Handler) wait(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	return parseWait(w, r, 0, h.o.MaxWait, "30 or 30s, 10m")
}

// parseWait reads ?wait=: a Go duration or a number of seconds (examples, for the error
// message); absent, def. Longer than maxWait is capped to it. It answers 400 itself when the
// value is bad (not a number, NaN, infinite, negative).
func parseWait(w http.ResponseWriter, r *http.Request, def, maxWait time.Duration, examples string) (time.Duration, bool) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return min(def, maxWait), true
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, serr := strconv.ParseFloat(v, 64)
		if serr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
			writeError(w, http.StatusBadRequest, string(runtype.CodeBadUserInput), fmt.Sprintf("wait=%q is not a duration: give seconds or a duration (%s)", v, examples))
			return 0, false
		}
		d = time.Duration(min(secs, maxWait.Seconds()+1) * float64(time.Second))
	}
	if d < 0 {
		writeError(w, http.StatusBadRequest, string(runtype.CodeBadUserInput), fmt.Sprintf("wait=%q is negative", v))
		return 0, false
	}
	return min(d, maxWait), true
}

// decode reads a POST's body: a JSON object of Request's fields, nothing else. It returns the
// problem in words a client can act on, or "".
func decode(body []byte) (Request, string) {
	var req Request
	if len(bytes.TrimSpace(body)) == 0 {
		return req, "the request body is empty: send a JSON object with agentId, toolName and args"
	}
	if msg := checkFields(body); msg != "" {
		return req, msg
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr) && typeErr.Field != "":
			return req, fmt.Sprintf("%q must be a string", typeErr.Field)
		case errors.As(err, &typeErr):
			return req, "the request body must be a JSON object with agentId, toolName and args"
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return req, fmt.Sprintf("the request has an unknown field %s: the fields are agentId, toolName, args, threadId, resourceId, context and idempotencyKey", strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return req, "the request body is not valid JSON"
		}
	}
	if dec.More() {
		return req, "the request body holds more than one JSON value"
	}
	switch {
	case req.AgentID == "":
		return req, "agentId is required"
	case req.ToolName == "":
		return req, "toolName is required"
	case len(req.Args) == 0 || string(req.Args) == "null":
		return req, "args is required: a JSON object of the tool's arguments"
	}
	return req, ""
}

// requestFields are the names of Request's fields, as they must be spelled.
var requestFields = map[string]bool{"agentId": true, "toolName": true, "args": true, "threadId": true, "resourceId": true, "context": true, "idempotencyKey": true}

// checkFields reads the names of a body's top-level fields, when it is an object, and says which
// one is not a field of Request as spelled, or is given twice ("" when none): encoding/json
// matches names regardless of case and keeps the last of a repeated one, so that a body read one
// way by whatever passed it on would be read another way here.
func checkFields(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "" // not an object: decode says what is wrong
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return ""
		}
		switch {
		case !requestFields[name]:
			return fmt.Sprintf("the request has an unknown field %q: the fields are agentId, toolName, args, threadId, resourceId, context and idempotencyKey", name)
		case seen[name]:
			return fmt.Sprintf("the request has the field %q twice", name)
		}
		seen[name] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

var statusOf = map[runtype.Code]int{
	runtype.CodeBadUserInput:    http.StatusBadRequest,
	runtype.CodeUnauthenticated: http.StatusUnauthorized,
	runtype.CodeForbidden:       http.StatusForbidden,
	runtype.CodeNotFound:        http.StatusNotFound,
	runtype.CodeConflict:        http.StatusConflict,
	runtype.CodeUnavailable:     http.StatusServiceUnavailable,
	runtype.CodeInternal:        http.StatusInternalServerError,
	runtype.CodeCancelled:       499, // client closed request (nginx's code): nobody reads it
}

// Unauthorized answers a request that failed authentication with err: 401 with the bearer
// challenge, as /graphql does, in this route's error format.
func Unauthorized(w http.ResponseWriter, _ *http.Request, err error) {
	writeError(w, http.StatusUnauthorized, string(runtype.CodeUnauthenticated), auth.Challenge(w, err))
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError writes {"error": {"code", "message"}} with status.
func writeError(w http.ResponseWriter, status int, code, message string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, message
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}
