package runs

import (
	"context"
	"encoding/json"

	"fmt"
	"time"

	"interlock/runtype"
)

// Forwarded calls. The requests of an agent that Forwards (agent.Agent.Forwards: the MCP
// gateway's) are approval requests whose call Interlock runs itself once it may: an approval
// (or the policy, for a tool that needs none) continues the request as a run that executes its
// one call, under a lease, exactly as any run executes a tool — so a call whose outcome is
// unknown (its instance died mid-call, its server did not answer) is never sent again without
// a person. Its caller does not run the tool; it waits for the outcome (AwaitOutcome).
//
//	requestApproval ──▶ SUSPENDED ──approve──▶ RUNNING (the call executes) ──▶ COMPLETED
//	        │                └──decline / expiry──────────────────────────────▶ COMPLETED
//	        └──(no approval needed)──▶ RUNNING ──▶ COMPLETED

// OutcomeKind says how a forwarded call stands for its caller.
type OutcomeKind string

const (
	// OutcomePending: the call waits for a person, or runs.
	OutcomePending OutcomeKind = "PENDING"
	// OutcomeRan: the tool ran; Result (or, when it failed, Error) is what it answered.
	OutcomeRan OutcomeKind = "RAN"
	// OutcomeDeclined and OutcomeExpired: the tool did not run; Decision says who and why.
	OutcomeDeclined OutcomeKind = "DECLINED"
	OutcomeExpired  OutcomeKind = "EXPIRED"
	// OutcomeFailed: the run ended on an error of Interlock's (Run.Error says which).
	OutcomeFailed OutcomeKind = "FAILED"
)

// CallOutcome is a forwarded call as its caller is answered.
type CallOutcome struct {
	Kind OutcomeKind
	Run  *runtype.Run
	// Decision is the last decision on the call (nil while none was taken).
	Decision *runtype.Decision
	// Result is the tool's JSON result, Error its error text, when it ran.
	Result json.RawMessage
	Error  string
	// Interrupted says the call was sent to its tool once with an outcome nobody knows (its
	// instance died, its server did not answer): it waits for a person to approve it again,
	// or, declined or expired since, did not run again — but may have taken effect that once.
	Interrupted bool
}

// AwaitOutcome returns a forwarded request's outcome once its call has run or was declined or
// expired, or as it stands (OutcomePending) when wait passes first, at once when wait is 0. It
// waits as AwaitApproval does (on the run's stream: no query per waiting call), and ends when
// ctx ends, with ctx's error. Who may call, and errors: as AwaitApproval; BAD_USER_INPUT for a
// run whose agent does not forward its calls.
func (s *Service) AwaitOutcome(ctx context.Context, runID string, wait time.Duration) (*CallOutcome, error) {
	if r, err := s.request(ctx, runID); err != nil {
		return nil, err
	} else if a := s.agents.Get(r.AgentID); a == nil || !a.Forwards {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "run %s is a request of agent %s, which does not forward its calls: read its decision with AwaitApproval", runID, r.AgentID)
	}
	r, err := s.await(ctx, runID, wait, func(st runtype.Status) bool {
		return st != runtype.StatusSuspended && st != runtype.StatusRunning
	})
	if err != nil {
		return nil, err
	}
	return s.outcome(ctx, r)
}

// outcome reads how finished run r ended for its caller: the tool's result event, or else the
// decision that kept the tool from running.
func (s *Service) outcome(ctx context.Context, r *runtype.Run) (*CallOutcome, error) {
	o := &CallOutcome{Kind: OutcomePending, Run: r}
	if n := len(r.Decisions); n > 0 {
		o.Decision = &r.Decisions[n-1]
	}
	switch r.Status {
	case runtype.StatusSuspended, runtype.StatusRunning:
		o.Interrupted = len(r.ToolCalls) > 0 && r.ToolCalls[0].Interrupted
		return o, nil
	case runtype.StatusFailed:
		o.Kind = OutcomeFailed
		return o, nil
	}
	evs, err := s.store.Events(ctx, r.ID, 0, int(r.LastSeq))
	if err != nil {
		return nil, fmt.Errorf("read the outcome of run %s: %w", r.ID, err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		switch evs[i].Type {
		case runtype.EventToolResult:
			o.Kind, o.Result, o.Error = OutcomeRan, evs[i].Result, evs[i].Error
			return o, nil
		case runtype.EventToolCallInterrupted:
			o.Interrupted = true
		}
	}
	switch {
	case o.Decision != nil && o.Decision.Kind == runtype.DecisionDeclined:
		o.Kind = OutcomeDeclined
	case o.Decision != nil && o.Decision.Kind == runtype.DecisionExpired:
		o.Kind = OutcomeExpired
	default:
		return nil, fmt.Errorf("run %s is %s with neither a result nor a decision that stopped its call", r.ID, r.Status)
	}
	return o, nil
}

// Stopped is closed once the service stops (Shutdown, Close): a wait on a run ends then, with
// the run as it stands, so an entry point that holds a caller answers it and lets it go.
func (s *Service) Stopped() <-chan struct{} { return s.ctx.Done() }

// ReleaseKey gives up the idempotency key the principal of ctx made run runID with, once the
// caller has been told the run's outcome: the same key then makes a new request. For keys
// derived from what a call looks like (the MCP gateway's: a retry of the same call joins the
// request until its outcome is delivered, and the call after that is a new one). A key that
// names another run by now is left alone. Errors: BAD_USER_INPUT for a malformed key;
// UNAVAILABLE when storage cannot be reached.
func (s *Service) ReleaseKey(ctx context.Context, runID, key string) error {
	k, err := idempotency(ctx, &key, nil)
	if err != nil {
		return err
	}
	if err := s.store.ReleaseKey(ctx, k.KeyHash, runID); err != nil {
		return fmt.Errorf("release the idempotency key of run %s: %w", runID, err)
	}
	return nil
}

// await reads request runID until settled says its status is final, wait passes, the service
// stops (the run as it is then) or ctx ends (ctx's error). It subscribes to the run's stream
// before each read, so that no change stored meanwhile is missed: woken at once by a change
// on this instance, within the poll interval by one on another (one query for every followed
// run, notify.go).
func (s *Service) await(ctx context.Context, runID string, wait time.Duration, settled func(runtype.Status) bool) (*runtype.Run, error) {
	if wait < 0 {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "wait must be 0 or more, not %s", wait)
	}
	r, err := s.request(ctx, runID)
	if err != nil || settled(r.Status) || wait == 0 {
		return r, err
	}
	woke := make(chan struct{}, 1)
	sub := s.runHub.SubscribeFunc(runID, func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	})
	defer sub.Close()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if r, err = s.request(ctx, runID); err != nil || settled(r.Status) {
			if err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return r, err
		}
		select {
		case <-woke:
		case <-timer.C:
			return r, nil
		case <-s.ctx.Done():
			return r, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
