package agent

import "errors"

// IsSuspend reports whether err is what Call.Suspend returns: a tool waiting for a person,
// not a failure (for metrics that count tool errors).
func IsSuspend(err error) bool {
	var s *suspension
	return errors.As(err, &s)
}
