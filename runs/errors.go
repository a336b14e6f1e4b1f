package runs

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
)

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
