package runs

import (
	"context"

	"interlock/agent"
)

// Tracer follows executions for a tracing backend, which shows each as one span: the agent loop
// runs in the background, after the request that caused it has been answered, so its work would
// otherwise belong to no trace. The run service knows nothing of the backend; Config.Tracer is
// nil when tracing is off, and then none of this costs anything.
type Tracer interface {
	// StartExecution is called as an execution begins, on its own goroutine. It returns the
	// context the execution runs in (carrying its span, so that model, tool and SQL spans nest
	// under it) and the function to call once, with how it ended, when it is over.
	StartExecution(ctx context.Context, x Execution) (context.Context, func(ExecutionEnd))
}

// Execution is one stretch of a run's loop on this instance, as a Tracer sees it.
type Execution struct {
	RunID   string
	AgentID string
	// ParentRunID is set for a sub-agent's run.
	ParentRunID *string
	// Cause is why the run executes now (CauseStart, CauseDecision, …); empty when unknown.
	Cause Cause
	// CausedBy is the context of what caused it: the request that started or decided the run, or
	// the execution that delegated to it; its span is the one the execution's span links to.
	// Nil when nothing traced caused it (recovery, expiry).
	CausedBy context.Context
}

// Cause is why a run executes now.
type Cause string

// The causes of an execution.
const (
	CauseStart      Cause = "start"      // startRun
	CauseDecision   Cause = "decision"   // approve, decline or resume
	CauseExpiry     Cause = "expiry"     // a waiting call's approval timeout passed
	CauseRecovery   Cause = "recovery"   // its lease expired and this instance took it over
	CauseDelegation Cause = "delegation" // a supervisor's run handed a task to this sub-agent's run
	CauseHandoff    Cause = "handoff"    // the sub-agent's run below finished; the supervisor goes on
)

// ExecutionEnd is how an execution ended.
type ExecutionEnd string

// The ends of an execution.
const (
	EndSuspended ExecutionEnd = "suspended" // stored as SUSPENDED, waiting for a person
	EndDelegated ExecutionEnd = "delegated" // waiting for a sub-agent's run
	EndFinished  ExecutionEnd = "finished"  // stored as COMPLETED or FAILED
	EndStopped   ExecutionEnd = "stopped"   // handed over, lease lost or storage failed: another execution goes on
)

// origin is why an execution starts and from which context: what every caller of execute hands
// it, so that the execution's span links to the request (or execution) that caused it.
type origin struct {
	cause Cause
	ctx   context.Context
	// recoveredFrom is, for a recovery, the lease the run was taken over from: it names the
	// instance that was executing the run, for the reason of an interrupted call. It is never
	// stored.
	recoveredFrom string
}

// causedBy is the origin of an execution that cause starts from ctx. The context is kept
// without its cancellation: the request that caused the execution is often answered long
// before the execution ends.
func causedBy(ctx context.Context, cause Cause) origin {
	return origin{cause: cause, ctx: context.WithoutCancel(ctx)}
}

// traceExecution starts the span of execution e, which why started (see Tracer), and returns
// its context and the function that ends it; without a Tracer it returns ctx and a no-op.
func (s *Service) traceExecution(ctx context.Context, e *execution, snap *agent.Snapshot, why origin) (context.Context, func()) {
	if s.cfg.Tracer == nil {
		return ctx, func() {}
	}
	ctx, end := s.cfg.Tracer.StartExecution(ctx, Execution{
		RunID: e.run.ID, AgentID: e.run.AgentID, ParentRunID: e.run.ParentRunID, Cause: why.cause, CausedBy: why.ctx,
	})
	return ctx, func() { end(executionEnd(e, snap)) }
}

// executionEnd tells how e ended from what it left: a run that ended its lease by design
// suspended (a call is held), delegated, or finished.
func executionEnd(e *execution, snap *agent.Snapshot) ExecutionEnd {
	e.mu.Lock()
	ended := e.ended
	e.mu.Unlock()
	if !ended {
		return EndStopped
	}
	for _, c := range snap.Pending {
		switch c.State {
		case agent.CallDelegated:
			return EndDelegated
		case agent.CallAwaitingApproval, agent.CallSuspended:
			return EndSuspended
		}
	}
	return EndFinished
}
