package agent

import "errors"

// Suspend returns the error a tool returns to hold the run until a person resumes it with data.
// The payload is shown to the person (and must be JSON-encodable).
func (c *Call) Suspend(payload any) error { return &suspension{payload: payload} }

type suspension struct{ payload any }

func (s *suspension) Error() string { return "tool suspended" }

// IsSuspension reports whether err is what Call.Suspend returns: a tool waiting for a person,
// not a failure. Code that wraps ExecuteFunc (tracing, the metrics of tool errors) tells the
// two apart with it.
func IsSuspension(err error) bool { return errors.As(err, new(*suspension)) }
