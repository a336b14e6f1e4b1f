package approvals

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"time"

	"interlock/runtype"
)

// What /approvals and the hooks do alike before and after asking the run service.

// readJSON reads a POST's body, what it is ("the request", "the hook's input") naming it in
// the errors: 415 unless its Content-Type is application/json (an absent one passes unless
// typeRequired), 413 above MaxBodyBytes, 400 when it cannot be read. It answers the error
// itself and returns false then.
func (o Options) readJSON(w http.ResponseWriter, r *http.Request, what string, typeRequired bool) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" || typeRequired {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, string(runtype.CodeBadUserInput), "send "+what+" as Content-Type: application/json")
			return nil, false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, o.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, string(runtype.CodeBadUserInput), fmt.Sprintf("%s is larger than %d bytes", what, o.MaxBodyBytes))
			return nil, false
		}
		writeError(w, http.StatusBadRequest, string(runtype.CodeBadUserInput), what+" could not be read")
		return nil, false
	}
	return body, true
}

// rateLimited answers 429 with Retry-After, and returns true, when the client of r is over its
// mutation rate (RateFunc); hint is added to the message (how to retry).
func (o Options) rateLimited(w http.ResponseWriter, r *http.Request, hint string) bool {
	if o.RateFunc == nil {
		return false
	}
	d := o.RateFunc(r.Context())
	if d <= 0 {
		return false
	}
	secs := max(1, int(math.Ceil(d.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests, CodeRateLimited, fmt.Sprintf("too many requests: retry in %d seconds%s", secs, hint))
	return true
}

// CodeTooManyConnections refuses a request that would wait while its client already holds
// the most connections allowed: gqlguard's code for a WebSocket or event stream over the cap.
const CodeTooManyConnections = "TOO_MANY_CONNECTIONS"

// slotRetryAfter is the Retry-After of a request refused for its client's connections, in
// seconds: a slot frees only when one of the client's own waits or sockets ends, which the
// server cannot foresee; a pace for a client that retries (gqlguard's for streams).
const slotRetryAfter = 5

// slot takes a connection slot of r's client for a request held for wait (none when wait is 0,
// or without SlotFunc). It returns the func that gives it back, or answers 429
// TOO_MANY_CONNECTIONS with Retry-After itself and returns false.
func (o Options) slot(w http.ResponseWriter, r *http.Request, wait time.Duration) (release func(), ok bool) {
	if o.SlotFunc == nil || wait <= 0 {
		return func() {}, true
	}
	release, err := o.SlotFunc(r.Context())
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(slotRetryAfter))
		writeError(w, http.StatusTooManyRequests, CodeTooManyConnections, err.Error())
		return nil, false
	}
	return release, true
}

// fail answers err: an application error with its code and status; a request its client
// abandoned as CANCELLED (499, logged at INFO); anything else as INTERNAL (logged, never shown).
func (o Options) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := runtype.CodeInternal, "internal error"
	var app *runtype.Error
	switch {
	case errors.As(err, &app):
		code, msg = app.Code, app.Message // the application's words, never what it wraps
	case errors.Is(err, context.Canceled) || errors.Is(r.Context().Err(), context.Canceled):
		// The client went away: nobody reads this, and the server did nothing wrong.
		code, msg = runtype.CodeCancelled, "the request was cancelled by its client"
		o.Logger.Info("approvals: request cancelled by its client", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	status := statusOf[code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	switch code {
	case runtype.CodeInternal:
		o.Logger.Error("approvals: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error"
	case runtype.CodeUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(runtype.RetryAfter))
	}
	writeError(w, status, string(code), msg)
}
