package runs

import (
	"context"

	"interlock/runtype"
)

// ModelCallRetried stores MODEL_CALL_RETRIED: the model call in progress is made again because
// its answer was cut off, so followers drop the text of the step so far. Text not stored yet is
// dropped here; the repeated call streams its own.
func (e *execution) ModelCallRetried(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.text.Reset()
	return e.writeLocked(ctx, nil, []runtype.Event{{Type: runtype.EventModelCallRetried}})
}
