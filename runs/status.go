package runs

// Status is where a run stands.
//
//	             ┌──────────── approve / decline / resume ◀───────┐
//	             ▼                                                 │
//	startRun ─▶ RUNNING ──(call needs approval, or suspend())──▶ SUSPENDED
//	             │
//	             ├──(final text)──▶ COMPLETED
//	             └──(model or storage error)──▶ FAILED
//
// COMPLETED and FAILED are final: the snapshot is deleted and the row stays as history.
type Status string

// The statuses of a run.
const (
	// StatusRunning: an instance holds the run's lease and executes its loop.
	StatusRunning Status = "RUNNING"
	// StatusSuspended: the run waits for a person; its state is only in storage.
	StatusSuspended Status = "SUSPENDED"
	// StatusCompleted: the model gave its final text (Run.Output).
	StatusCompleted Status = "COMPLETED"
	// StatusFailed: the run could not go on (Run.Error).
	StatusFailed Status = "FAILED"
)

// Finished reports whether s is final.
func (s Status) Finished() bool { return s == StatusCompleted || s == StatusFailed }
