package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"interlock/auth"
	"interlock/runs"
	"interlock/runtype"
)

// Decisions is what the handler asks of the run service (runs.Service.AuditDecisions).
type Decisions interface {
	AuditDecisions(ctx context.Context, from, to time.Time, each func(runs.DecisionRecord) error) error
}

var _ Decisions = (*runs.Service)(nil)

// Options configure the handler of GET /audit. Service is required.
type Options struct {
	Service Decisions
	// WriteTimeout is how long the client may take to read each part of the export: the
	// server's write deadline is moved this far ahead as the export goes on, so that a long
	// export that is read is not cut, and one that is not read is. Zero: no deadline is moved.
	WriteTimeout time.Duration
	Logger       *slog.Logger
	// NowFunc is the clock of the header's exportedAt. Default time.Now.
	NowFunc func() time.Time
}

// Handler serves GET /audit?from=&to=[&format=ndjson|csv]: the decisions taken in [from, to)
// on runs the request's principal may read (runs.Service.AuditDecisions: the viewer role, its
// resources), streamed as they are read. The wiring puts authentication in front
// (auth.Require, answering with Unauthorized).
type Handler struct{ o Options }

// New returns the handler of /audit.
func New(o Options) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.NowFunc == nil {
		o.NowFunc = time.Now
	}
	return &Handler{o: o}
}

// Unauthorized answers a request that failed authentication: 401 with the bearer challenge,
// in the route's error format.
func Unauthorized(w http.ResponseWriter, _ *http.Request, err error) {
	writeError(w, http.StatusUnauthorized, runtype.CodeUnauthenticated, auth.Challenge(w, err))
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, runtype.CodeBadUserInput, "the audit export is read with GET /audit?from=…&to=…")
		return
	}
	q := r.URL.Query()
	from, err := parseTime(q, "from")
	if err == nil {
		var to time.Time
		if to, err = parseTime(q, "to"); err == nil {
			var enc Encoding
			if enc, err = encodingOf(r); err == nil {
				h.export(w, r, from, to, enc)
				return
			}
		}
	}
	writeError(w, http.StatusBadRequest, runtype.CodeBadUserInput, err.Error())
}

// export streams the decisions. The header is written with the first decision (or at the end):
// until then a refusal (FORBIDDEN, BAD_USER_INPUT, UNAVAILABLE) is answered with its status.
// An error after the first line can only end the stream: the file then has no end line, which
// `interlock audit verify` reports as cut short.
func (h *Handler) export(w http.ResponseWriter, r *http.Request, from, to time.Time, enc Encoding) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	out := NewWriter(w, enc)
	started, moved := false, time.Time{}
	begin := func() error {
		from, to, _ := runs.Period(from, to) // checked by the service before any decision
		w.Header().Set("Content-Type", contentType[enc])
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="interlock-audit-%s-%s.%s"`,
			from.UTC().Format("20060102T150405Z"), to.UTC().Format("20060102T150405Z"), extension[enc]))
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		started = true
		var by *string
		if p := runtype.PrincipalFrom(ctx); p != nil && p.Authenticated() {
			by = &p.Subject
		}
		return out.Begin(Header{From: from, To: to, ExportedAt: h.o.NowFunc(), ExportedBy: by})
	}
	err := h.o.Service.AuditDecisions(ctx, from, to, func(d runs.DecisionRecord) error {
		if !started {
			if err := begin(); err != nil {
				return err
			}
		}
		if h.o.WriteTimeout > 0 && time.Since(moved) > time.Second {
			moved = time.Now()
			_ = rc.SetWriteDeadline(moved.Add(h.o.WriteTimeout))
		}
		return out.Decision(d)
	})
	if err == nil && !started {
		err = begin()
	}
	if err == nil {
		err = out.End()
	}
	if err == nil {
		return
	}
	if started {
		// Nothing can be said to the client any more but the missing end line.
		_ = out.Flush()
		if ctx.Err() == nil {
			h.o.Logger.Error("audit: export cut short", "err", err)
		}
		return
	}
	h.fail(w, r, err)
}

// fail answers an error before the export started: an application error with its code and
// status; anything else INTERNAL (logged, never shown).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var app *runtype.Error
	if !errors.As(err, &app) {
		if r.Context().Err() == nil {
			h.o.Logger.Error("audit: internal error", "err", err)
		}
		writeError(w, http.StatusInternalServerError, runtype.CodeInternal, "internal error")
		return
	}
	status := map[runtype.Code]int{
		runtype.CodeBadUserInput: http.StatusBadRequest, runtype.CodeUnauthenticated: http.StatusUnauthorized,
		runtype.CodeForbidden: http.StatusForbidden, runtype.CodeUnavailable: http.StatusServiceUnavailable,
	}[app.Code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if app.Code == runtype.CodeUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(runtype.RetryAfter))
	}
	writeError(w, status, app.Code, app.Message)
}

var contentType = map[Encoding]string{NDJSON: "application/x-ndjson", CSV: "text/csv; charset=utf-8"}
var extension = map[Encoding]string{NDJSON: "ndjson", CSV: "csv"}

// encodingOf is the encoding a request asks for: ?format=ndjson|csv, else CSV when its Accept
// names text/csv before any NDJSON type, else NDJSON.
func encodingOf(r *http.Request) (Encoding, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "ndjson":
		return NDJSON, nil
	case "csv":
		return CSV, nil
	case "":
	default:
		return 0, fmt.Errorf("format %q is not one the export writes: use format=ndjson or format=csv", f)
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil || params["q"] == "0" || params["q"] == "0.0" {
			continue
		}
		switch mt {
		case "text/csv":
			return CSV, nil
		case "application/x-ndjson", "application/ndjson", "application/jsonl":
			return NDJSON, nil
		}
	}
	return NDJSON, nil
}

// parseTime reads the query parameter name: RFC 3339, or a day (2026-12-01: midnight UTC).
func parseTime(q map[string][]string, name string) (time.Time, error) {
	vals := q[name]
	if len(vals) == 0 || vals[0] == "" {
		return time.Time{}, fmt.Errorf("%s is required: a time in RFC 3339 (2026-12-01T00:00:00Z) or a day (2026-12-01, midnight UTC)", name)
	}
	if len(vals) > 1 {
		return time.Time{}, fmt.Errorf("%s is given %d times: give it once", name, len(vals))
	}
	v := vals[0]
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s %q is not a time: write RFC 3339 (2026-12-01T00:00:00Z) or a day (2026-12-01, midnight UTC)", name, v)
}

// writeError writes {"error": {"code", "message"}} with status, as /approvals does.
func writeError(w http.ResponseWriter, status int, code runtype.Code, message string) {
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b.Error.Code, b.Error.Message = string(code), message
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}
