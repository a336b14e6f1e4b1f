package runs

import "interlock/runtype"

// Record is a run as the store keeps it: the run clients see, plus what only the run service's
// rules read and write. It never leaves the service: the service answers with the Run inside,
// so a lease token or an agent loop's state cannot reach a client by a field someone forgot to
// blank — the API's type does not have them.
//
// Store methods that feed a rule (a decision's compare-and-set, a recovery's claim, an
// expiry, a handoff) return records; the API's reads (GetRun, ListSuspended, ListRecent)
// return runtype.Run and do not read these columns at all.
type Record struct {
	runtype.Run

	// Version counts the run's status changes and claims; compare-and-sets check it.
	Version int64
	// Snapshot is the agent loop's state while the run is not finished (nil once it is).
	Snapshot *string
	// LeaseOwner is the lease token of the instance executing a RUNNING run.
	LeaseOwner *string
	// RecoveryAttempts counts claims and deferred recoveries since the run's last checkpoint.
	RecoveryAttempts int
}
