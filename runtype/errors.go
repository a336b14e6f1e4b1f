package runtype

import (
	"errors"
	"fmt"
)

// Code classifies an Error for clients; the API sends it as extensions.code.
type Code string

// The error codes of the API.
const (
	CodeBadUserInput    Code = "BAD_USER_INPUT"
	CodeNotFound        Code = "NOT_FOUND"
	CodeConflict        Code = "CONFLICT"
	CodeUnauthenticated Code = "UNAUTHENTICATED"
	CodeForbidden       Code = "FORBIDDEN"
	CodeInternal        Code = "INTERNAL"
	// CodeUnavailable: storage could not be reached (the database is down, restarting, or
	// unreachable). Nothing was decided by the request's failure: the client retries the same
	// request after a pause (HTTP 503 with Retry-After on plain requests), or resubscribes with
	// after: its last seq.
	CodeUnavailable Code = "UNAVAILABLE"
	// CodeCancelled: the request's client gave up (closed the connection, or cancelled the
	// request) before it was answered, so nobody reads the answer. It is no error of the server's
	// and says nothing of what the request did: a mutation may have been stored or not; its
	// retry with the same idempotency key tells. Logged at INFO and counted apart, never as
	// INTERNAL.
	CodeCancelled Code = "CANCELLED"
)

// RetryAfter is the pause, in seconds, an UNAVAILABLE answer suggests before retrying: long
// enough for a database failover or restart to make progress, short enough that a person does
// not notice it much.
const RetryAfter = 2

// ErrUnavailable is the application error of a storage failure that retrying may cure: the store
// wraps its driver's error with it (errors.Is finds it, and errors.As finds this *Error with
// code UNAVAILABLE), so that the service and the API tell "storage is down" from "no such run"
// and from a bug without knowing any driver.
var ErrUnavailable = &Error{Code: CodeUnavailable, Message: "storage is unavailable; retry in a few seconds"}

// Unavailable wraps err, a storage error that retrying may cure, with ErrUnavailable.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Error is the one application error: a code and a message written for the person who sent the
// request. Every other error is internal; its text is logged, never shown to clients.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Errorf builds an application error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of an application error, or CodeInternal for any other error.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
