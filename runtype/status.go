package runtype

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
// A tool whose server asks a question in the middle of its call (an MCP server's
// elicitation/create) suspends the run while the call goes on: the instance executing the call
// keeps the run's lease while it is SUSPENDED, and the decision (or the expiry, or the call's end
// taking the question back) moves it back to RUNNING under that same lease; should that
// instance die, the run is recovered with the call interrupted (runs/midcall.go):
//
//	RUNNING (call executing) ──(question)──▶ SUSPENDED, lease kept ──resume / expiry / taken back──▶ RUNNING, same lease
//	                                              └──(lease expired)──▶ RUNNING (claimed) ──▶ SUSPENDED, the call interrupted
//
// A supervisor's run that delegates a task is WAITING while its sub-agent's run goes on; it is
// SUSPENDED (on the inner call) while that run, or one it delegated to, is; and RUNNING again,
// leased by the instance that finished the sub-agent's run, with that run's outcome:
//
//	RUNNING ──(delegate call)──▶ WAITING ◀──(inner decision)──▶ SUSPENDED
//	   ▲                            │       (inner suspension)
//	   └──(sub-agent run finished)──┘
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
	// StatusSuspended: the run waits for a person; its state is only in storage — but for a
	// question asked in the middle of a call, whose instance keeps the lease and the call open.
	StatusSuspended Status = "SUSPENDED"
	// StatusWaiting: the run waits on the run of a sub-agent it delegated to; no instance holds
	// it, and the API shows it as RUNNING (the work goes on). Only its sub-agent run's finish
	// continues it.
	StatusWaiting Status = "WAITING"
	// StatusCompleted: the model gave its final text (Run.Output).
	StatusCompleted Status = "COMPLETED"
	// StatusFailed: the run could not go on (Run.Error, Run.ErrorCode).
	StatusFailed Status = "FAILED"
)

// AllStatuses lists every status, for queries about runs in any state.
var AllStatuses = []Status{StatusRunning, StatusWaiting, StatusSuspended, StatusCompleted, StatusFailed}

// Finished reports whether s is final.
func (s Status) Finished() bool { return s == StatusCompleted || s == StatusFailed }

// Public is the status as the API shows it: a WAITING run is RUNNING to its clients (its work
// goes on in a sub-agent's run).
func (s Status) Public() Status {
	if s == StatusWaiting {
		return StatusRunning
	}
	return s
}
