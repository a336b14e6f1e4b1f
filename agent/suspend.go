package agent

import (
	"encoding/json"
	"errors"
)

// Suspend returns the error a tool returns to hold the run until a person resumes it with data.
// The payload is shown to the person (and must be JSON-encodable).
func (c *Call) Suspend(payload any) error { return &suspension{payload: payload} }

// SuspendFor is Suspend for a call whose resume data has a schema of its own (not the tool's
// ResumeSchema): an upstream MCP server's request for input names what it wants per call. The
// person's resumeData must match resumeSchema (PendingCall.ResumeSchema).
func (c *Call) SuspendFor(payload any, resumeSchema json.RawMessage) error {
	return &suspension{payload: payload, schema: resumeSchema}
}

type suspension struct {
	payload any
	schema  json.RawMessage
}

func (s *suspension) Error() string { return "tool suspended" }

// IsSuspension reports whether err is what Call.Suspend returns: a tool waiting for a person,
// not a failure. Code that wraps ExecuteFunc (tracing, the metrics of tool errors) tells the
// two apart with it.
func IsSuspension(err error) bool { return errors.As(err, new(*suspension)) }
