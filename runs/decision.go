package runs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"interlock/agent"
	"interlock/runtype"
)

// decision is a decision checked and ready to store: what was checked against the run as read
// (checkDecision for a person's, the expiry loop and Abandon for the server's) is what
// commitDecision writes, in one place, so that between the check and the compare-and-set
// nothing is read again and no argument can be passed in the wrong order.
type decision struct {
	// top is the run the decision was asked on; run is the run that holds the call decided.
	// They differ when a supervisor's run shows a sub-agent's call: the decision is the inner
	// run's, and the supervisors above move with it (surfaceDecision).
	top, run *Record
	// above are the supervisors' records between top and run, top first, as the decision was
	// checked against them: their writes are made from these reads (surfaceDecision), not
	// from new ones.
	above []*Record
	// call is the decided call as run waits on it; snap is run's snapshot, which the decision
	// goes into.
	call *runtype.ToolCall
	snap *agent.Snapshot
	// agent is run's agent, which continues the run (or, when it is external, whose request
	// the decision ends).
	agent *agent.Agent
	d     agent.Decision
	// by is who decides: the principal's subject; "" for nobody (an expiry).
	by string
	// cause says, to tracing, why the run executes again.
	cause Cause
	// grant, with an approval, is the grant its approver asked to remember (grant.go), stored
	// in the decision's compare-and-set.
	grant *runtype.Grant
	// abandoned marks an expiry that stands before the call's deadline: its asker stopped
	// waiting (DecisionWrite.Abandoned).
	abandoned bool
	// quorum is set on a decision on a call whose tool needs several approvals (quorum.go).
	quorum *quorum
}

// write is the compare-and-set of the decision at at, without its events, snapshot or lease
// (commitDecision and finishExternal add them).
func (dec *decision) write(instanceID string, at time.Time) DecisionWrite {
	r, d := dec.run, dec.d
	return DecisionWrite{RunID: r.ID, Version: r.Version, After: r.LastSeq, ToolCallID: dec.call.ToolCallID,
		Kind: decisionKind[d.Kind], DecidedBy: emptyToNil(&dec.by), Reason: emptyToNil(&d.Reason), ResumeData: d.ResumeData,
		EditedArgs: d.Args, At: at, InstanceID: instanceID, Hold: len(r.ToolCalls) > 1, Grant: dec.grant, Abandoned: dec.abandoned, Approval: dec.approvalAt(at)}
}

// taken is the decision as w stored it on call callID of run runID (the decided call itself, or
// the delegate call of a supervisor that shows it), without the id the database gave it: what a
// run shows of it when it cannot be read back.
func (dec *decision) taken(runID, callID string, w DecisionWrite) runtype.Decision {
	return runtype.Decision{RunID: runID, ToolCallID: callID, ToolName: dec.call.ToolName, Kind: w.Kind, DecidedBy: w.DecidedBy,
		DecidedAt: w.At, Reason: w.Reason, ResumeData: w.ResumeData, Args: dec.call.Args, EditedArgs: w.EditedArgs, Receipt: w.Receipt}
}

// commitDecision stores dec with the store's compare-and-set, and only then tells subscribers.
// When it was the last call of the step waiting, the run continues here, leased to this
// instance; otherwise it stays SUSPENDED on the others. dec.run is updated to what was stored.
// The write is returned, with At set, also when the store found the run changed (ErrStale).
func (s *Service) commitDecision(ctx context.Context, dec *decision) (DecisionWrite, error) {
	w := dec.write(s.cfg.InstanceID, s.now())
	d := dec.d
	if d.Kind == agent.CallApproved {
		args := dec.call.Args
		if d.Args != nil {
			args = d.Args // the receipt binds what runs
		}
		var err error
		if w.Receipt, err = s.receiptFor(ctx, dec.run.ID, dec.call.ToolCallID, dec.run.AgentID, dec.call.ToolName, args, w.DecidedBy, w.At); err != nil {
			return w, err
		}
		d.Receipt = deref(w.Receipt) // the execution hands it to the tool (agent.Call.Receipt)
	}
	// A question asked in the middle of a call (midcall.go): the instance executing the call
	// holds the run's lease and goes on with it, the decision being the answer.
	midCall := askedMidCall(dec.snap, dec.call.ToolCallID)
	if err := dec.snap.Decide(dec.call.ToolCallID, d); err != nil {
		return w, fmt.Errorf("run %s: snapshot does not wait on %s: %w", dec.run.ID, dec.call.ToolCallID, err)
	}
	if midCall {
		executingAgain(dec.snap)
		w.Hold, w.KeepLease = false, true
	}
	if !midCall && (dec.snap.Request || dec.agent.External) && !(dec.snap.Forward && (d.Kind == agent.CallApproved || d.Kind == agent.CallResumed)) {
		// An approval request (approval.go): the decision ends it; its caller runs the tool.
		// The snapshot says so even when the config has given its agent a model since. A
		// forwarded request's approval, and the answer to its tool's question, go on below:
		// this instance runs its call.
		return w, s.finishExternal(ctx, dec, w)
	}
	w.Events = append(dec.recorded(w.At), decisionEvents(dec.call, d, dec.by, w.Hold)...)
	var err error
	if w.Ancestors, err = s.surfaceDecision(ctx, &dec.run.Run, dec.above, dec.call.ToolCallID, d, dec.by, w.At); err != nil {
		return w, err
	}
	if w.Outbox, err = s.announce(&dec.run.Run, w.After, w.At, w.Events, decidedCall(*dec.call, w.Kind, w.EditedArgs)); err != nil {
		return w, err
	}
	dec.snap.Seq = dec.run.LastSeq + int64(len(w.Events))
	if w.Snapshot, err = dec.snap.Encode(); err != nil {
		return w, err
	}
	var taken time.Time // when the write that leases the run was sent, at the latest
	if !w.Hold && !w.KeepLease {
		w.Lease, w.TTL = s.newLease(), s.cfg.LeaseTTL
		taken = time.Now()
	}
	if err := s.store.Decide(ctx, w); err != nil {
		return w, err
	}
	s.afterDecision(ctx, dec, w, taken)
	return w, nil
}

// afterDecision tells subscribers of a decision w just committed, updates dec.run to what was
// stored and, unless the run holds on other calls, continues it here under w's lease, taken by
// a write sent at `taken` at the latest.
func (s *Service) afterDecision(ctx context.Context, dec *decision, w DecisionWrite, taken time.Time) {
	r := dec.run
	s.decided(w.Kind, dec.call.ToolName, r.SuspendedAt, w.At) // metrics (observe hook)
	s.runHub.Publish(r.ID, struct{}{})
	r.Version, r.UpdatedAt, r.LastSeq, r.Snapshot = r.Version+1, w.At, dec.snap.Seq, &w.Snapshot
	if w.Hold {
		// Still waiting, on the other calls: watchers of the suspended set get the changed run.
		s.changes.Publish(changesTopic, Change{Kind: ChangeChanged, RunID: r.ID})
		r.ToolCalls = slices.DeleteFunc(slices.Clone(r.ToolCalls), func(c runtype.ToolCall) bool { return c.ToolCallID == dec.call.ToolCallID })
		return
	}
	s.changes.Publish(changesTopic, Change{Kind: ChangeLeft, RunID: r.ID})
	for _, anc := range w.Ancestors {
		s.runHub.Publish(anc.RunID, struct{}{})
		s.changes.Publish(changesTopic, Change{Kind: ChangeLeft, RunID: anc.RunID})
	}
	if w.KeepLease {
		// The instance holding the call answers its tool, woken by the run's stream (midcall.go).
		r.Status, r.SuspendedAt, r.ToolCalls = runtype.StatusRunning, nil, []runtype.ToolCall{}
		return
	}
	lease := w.Lease
	r.Status, r.LeaseOwner, r.SuspendedAt, r.ToolCalls = runtype.StatusRunning, &lease, nil, []runtype.ToolCall{}
	s.execute(dec.agent, &r.Run, lease, dec.snap, taken, causedBy(ctx, dec.cause)) // its span links to what caused it (trace.go)
}

// finishExternal stores decision dec, whose write w commitDecision (or Abandon) prepared, on an
// external agent's request: its events, then RUN_FINISHED, with the run COMPLETED in the same
// compare-and-set, and only then tells subscribers. dec.run is updated to what was stored.
func (s *Service) finishExternal(ctx context.Context, dec *decision, w DecisionWrite) error {
	w.Hold, w.Finish, w.Snapshot = false, true, ""
	w.Events = finishRequest(append(dec.recorded(w.At), decisionEvents(dec.call, dec.d, dec.by, true)...))
	var err error
	if w.Outbox, err = s.announce(&dec.run.Run, w.After, w.At, w.Events, decidedCall(*dec.call, w.Kind, w.EditedArgs)); err != nil {
		return err
	}
	if err := s.store.Decide(ctx, w); err != nil {
		return err
	}
	r := dec.run
	s.decided(w.Kind, dec.call.ToolName, r.SuspendedAt, w.At) // metrics (observe hook)
	s.runHub.Publish(r.ID, struct{}{})
	s.changes.Publish(changesTopic, Change{Kind: ChangeLeft, RunID: r.ID})
	r.Version, r.UpdatedAt, r.LastSeq, r.Snapshot = r.Version+1, w.At, r.LastSeq+int64(len(w.Events)), nil
	r.Status, r.LeaseOwner, r.SuspendedAt, r.ToolCalls = runtype.StatusCompleted, nil, nil, []runtype.ToolCall{}
	return nil
}
