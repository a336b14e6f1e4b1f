package runs

// Status is where a run stands.
//
//	                 ┌────────── approve / decline / resume (compare-and-set) ◀────────┐
//	                 ▼                                                                   │
//	startRun ──▶ RUNNING ──(a call needs approval, or a tool calls suspend())──▶ SUSPENDED
//	             │  ▲  │                                                              ▲
//	             │  │  └──(lease expired: the instance died, or handed the run over ──┘
//	             │  │      while its tool was executing → the call is interrupted)
//	             │  └──(lease expired at any other point: another instance claims it and
//	             │       repeats the model call in progress, after MODEL_CALL_RETRIED)
//	             ├──(final text)──▶ COMPLETED
//	             └──(model error, no answer within the steps, a panic, or recovery gave up
//	                  after MaxRecoveryAttempts)──▶ FAILED
//
// A storage error does not fail a run: the instance gives its lease up and recovery continues
// the run from its last checkpoint. COMPLETED and FAILED are final: the snapshot is deleted and
// the row stays as history until retention removes it.
type Status string

// The statuses of a run.
const (
	// StatusRunning: an instance holds the run's lease and executes its loop (or the lease
	// expired and the run waits for recovery).
	StatusRunning Status = "RUNNING"
	// StatusSuspended: the run waits for a person; its state is only in storage.
	StatusSuspended Status = "SUSPENDED"
	// StatusCompleted: the model gave its final text (Run.Output).
	StatusCompleted Status = "COMPLETED"
	// StatusFailed: the run could not go on (Run.Error, Run.ErrorCode).
	StatusFailed Status = "FAILED"
)

// Finished reports whether s is final.
// AllStatuses lists every status, for queries about runs in any state.
var AllStatuses = []Status{StatusRunning, StatusSuspended, StatusCompleted, StatusFailed}

func (s Status) Finished() bool { return s == StatusCompleted || s == StatusFailed }
