package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"interlock/agent"
	"interlock/runtype"
)

// DecideParams name the call a decision is about. Who takes it is the principal of the context,
// never something the caller says.
type DecideParams struct {
	RunID string
	// ToolCallID may be nil when exactly one call is pending.
	ToolCallID *string
}

// Approve lets the held tool call run; the run continues on this instance. It returns the run as
// stored right after the decision (RUNNING).
// Errors: NOT_FOUND for an unknown run; CONFLICT when the run is not suspended or the call was
// already decided (of racing decisions exactly one wins; the message says who decided and when),
// or expired (its tool's approvalTimeout passed: the message says so) — a toolCallId names one
// call for ever, so a stale decision never lands on another; BAD_USER_INPUT when the call waits
// for resume data, or the toolCallId is ambiguous or unknown.
func (s *Service) Approve(ctx context.Context, p DecideParams) (*runtype.Run, error) {
	return s.decide(ctx, p, agent.Decision{Kind: agent.CallApproved})
}

// EditAndApprove approves the held call with arguments a person edited: they must match the
// tool's input schema and be canonical JSON (agent.CanonicalJSON: no key twice in an object, at
// most agent.MaxJSONDepth levels deep) — BAD_USER_INPUT otherwise, and the run stays suspended; the tool runs with
// them, the model is told they changed, and the decision keeps both. Errors as Approve.
func (s *Service) EditAndApprove(ctx context.Context, p DecideParams, args json.RawMessage) (*runtype.Run, error) {
	args, err := agent.CanonicalJSON(args)
	if err != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args: %v", err)
	}
	if len(args) == 0 || args[0] != '{' {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "args must be a JSON object of the tool's arguments")
	}
	return s.decide(ctx, p, agent.Decision{Kind: agent.CallApproved, Args: args})
}

// Decline answers the held call with the reason instead of running it (or with
// agent.DeclinedMessage when reason is empty); the run continues. Errors as Approve.
func (s *Service) Decline(ctx context.Context, p DecideParams, reason string) (*runtype.Run, error) {
	return s.decide(ctx, p, agent.Decision{Kind: agent.CallDeclined, Reason: reason})
}

// Resume runs a suspended tool again with resumeData. resumeData is checked first (at most
// agent.MaxJSONDepth levels deep, no key twice in an object), then against the tool's
// resumeSchema: when it does not match, the error is BAD_USER_INPUT and the run stays
// suspended. Other errors as Approve, with BAD_USER_INPUT for a call that waits for approval.
func (s *Service) Resume(ctx context.Context, p DecideParams, resumeData json.RawMessage) (*runtype.Run, error) {
	if len(resumeData) == 0 {
		resumeData = json.RawMessage("null")
	}
	resumeData, err := agent.CanonicalJSON(resumeData)
	if err != nil {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "resumeData: %v", err)
	}
	return s.decide(ctx, p, agent.Decision{Kind: agent.CallResumed, ResumeData: resumeData})
}

// decide checks the decision against the run as read, then stores it with the store's
// compare-and-set: the run moves from SUSPENDED at the version read to RUNNING leased by this
// instance, the call is marked decided, the snapshot holds the decision and the events are
// appended, in one transaction. When anything moved since the read, someone else decided
// first: CONFLICT. Only after the commit does it tell subscribers and continue the run.
func (s *Service) decide(ctx context.Context, p DecideParams, d agent.Decision) (*runtype.Run, error) {
	if err := mayDecide(ctx); err != nil {
		return nil, err
	}
	// Who decides is who authenticated; nobody for the server's own principals (mayDecide
	// refused a context without one).
	var by string
	if who := runtype.PrincipalFrom(ctx).Recorded(); who != nil {
		by = *who
	}
	r, err := s.store.GetRun(ctx, p.RunID)
	if err != nil {
		return nil, err
	}
	if r == nil || !visible(ctx, r.ResourceID) {
		return nil, notFound(p.RunID)
	}
	if repeatedDecision(r, p.ToolCallID, d, by) != nil {
		return asDecided(r), nil // a retry of a decision already stored (repeat.go)
	}
	if r.Status != runtype.StatusSuspended {
		if p.ToolCallID != nil && *p.ToolCallID != "" {
			if err := alreadyDecided(r, *p.ToolCallID); err != nil {
				return nil, err
			}
		}
		if err := expiredConflict(r, p.ToolCallID); err != nil {
			return nil, err
		}
		return nil, runtype.Errorf(runtype.CodeConflict, "run %s is %s, not SUSPENDED: it was already decided or has not suspended", r.ID, r.Status)
	}
	call, err := pickCall(r, p.ToolCallID)
	if err != nil {
		return nil, err
	}
	// A supervisor's run suspended on a sub-agent's call: the decision is the inner run's, on
	// the very call the supervisor's shows (never a later one of the same sub-agent run).
	target := r
	var innerID string
	if r, innerID, err = s.innermost(ctx, r, call.ToolCallID); err != nil {
		return nil, err
	}
	if r != target {
		if call, err = pickCall(r, &innerID); err != nil {
			return nil, err
		}
	}
	a := s.agents.Get(r.AgentID)
	if a == nil {
		// Its approver roles and tools are the agent's: without them nothing can be checked or
		// continued, so nothing is decided (a rolling deploy's other instances may serve it).
		return nil, runtype.Errorf(runtype.CodeConflict, "run %s belongs to agent %q, which this server's config does not have: it can be decided where the agent is served, or once it is back in the config", r.ID, r.AgentID)
	}
	if err := s.authorizeDecision(ctx, target, r, call.ToolName, a.Tool(call.ToolName), d); err != nil {
		return nil, err
	}
	if err := s.refuseExpired(ctx, r, call); err != nil {
		return nil, err
	}
	if err := checkKind(call, d.Kind); err != nil {
		return nil, err
	}
	if d.Args != nil {
		tool := a.Tool(call.ToolName)
		if tool == nil {
			return nil, fmt.Errorf("run %s: agent %q has no tool %q", r.ID, r.AgentID, call.ToolName)
		}
		if err := tool.ValidateInput(d.Args); err != nil {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "args do not match the inputSchema of %s: %v", call.ToolName, err)
		}
	}
	if d.Kind == agent.CallResumed {
		tool := a.Tool(call.ToolName)
		if tool == nil {
			return nil, fmt.Errorf("run %s: agent %q has no tool %q", r.ID, r.AgentID, call.ToolName)
		}
		if err := tool.ValidateResume(d.ResumeData); err != nil {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "resumeData does not match the resumeSchema of %s: %v", call.ToolName, err)
		}
	}
	if r.Snapshot == nil {
		return nil, fmt.Errorf("run %s is suspended without a snapshot", r.ID)
	}
	snap, err := agent.DecodeSnapshot(*r.Snapshot)
	if err != nil {
		return nil, err
	}
	w, err := s.commitDecision(ctx, a, r, call, snap, d, by, CauseDecision)
	if err != nil {
		if errors.Is(err, ErrStale) {
			if err := pastDeadline(r, call, w.At); err != nil {
				return nil, err
			}
			if again, gerr := s.store.GetRun(ctx, r.ID); gerr == nil && again != nil {
				if repeatedDecision(again, &call.ToolCallID, d, by) != nil {
					// The same decision by the same principal won the race (a client that
					// sent it twice at once): this one is answered as that one.
					if target == r {
						return asDecided(again), nil
					}
					if top, terr := s.store.GetRun(ctx, target.ID); terr == nil && top != nil {
						return asDecided(top), nil
					}
				}
				if err := alreadyDecided(again, call.ToolCallID); err != nil {
					return nil, err // who won, and when
				}
			}
			return nil, runtype.Errorf(runtype.CodeConflict, "run %s was decided by someone else first", r.ID)
		}
		return nil, err
	}
	if target != r {
		return s.decidedSupervisor(ctx, target, w.Ancestors, w, call), nil
	}
	// The decision is committed: a failure to read the audit trail back must not turn it into
	// an error, so the decision is then shown as taken, without its stored id.
	out := *r
	out.LeaseOwner = nil
	if again, err := s.store.GetRun(context.WithoutCancel(ctx), r.ID); err == nil && again != nil {
		out.Decisions = again.Decisions
	} else {
		s.cfg.Logger.Warn("decide: load decisions", "run", r.ID, "err", err)
		out.Decisions = append(out.Decisions, runtype.Decision{RunID: r.ID, ToolCallID: call.ToolCallID, ToolName: call.ToolName,
			Kind: w.Kind, DecidedBy: w.DecidedBy, DecidedAt: w.At, Reason: w.Reason, ResumeData: d.ResumeData, Args: call.Args, EditedArgs: d.Args, Receipt: w.Receipt})
	}
	return &out, nil
}

// commitDecision stores decision d, taken by by (empty: by nobody, an expiry), on run's waiting
// call with the store's compare-and-set, and only then tells subscribers. When it was the last
// call of the step waiting, the run continues here, leased to this instance; otherwise it stays
// SUSPENDED on the others. cause says, to tracing, why the run executes again. run is updated to what was stored (without its snapshot). The write
// is returned, with At set, also when the store found the run changed (ErrStale).
func (s *Service) commitDecision(ctx context.Context, a *agent.Agent, r *runtype.Run, call *runtype.ToolCall, snap *agent.Snapshot, d agent.Decision, by string, cause Cause) (DecisionWrite, error) {
	w := s.decisionWrite(r, call, d, by, s.now())
	if d.Kind == agent.CallApproved {
		args := call.Args
		if d.Args != nil {
			args = d.Args // the receipt binds what runs
		}
		var err error
		if w.Receipt, err = s.receiptFor(ctx, r.ID, call.ToolCallID, r.AgentID, call.ToolName, args, w.DecidedBy, w.At); err != nil {
			return w, err
		}
		d.Receipt = deref(w.Receipt) // the execution hands it to the tool (agent.Call.Receipt)
	}
	if err := snap.Decide(call.ToolCallID, d); err != nil {
		return w, fmt.Errorf("run %s: snapshot does not wait on %s: %w", r.ID, call.ToolCallID, err)
	}
	if snap.Request || a.External {
		// An approval request (approval.go): the decision ends it; its caller runs the tool.
		// The snapshot says so even when the config has given its agent a model since.
		return w, s.finishExternal(ctx, r, call, d, by, w)
	}
	w.Events = decisionEvents(call, d, by, w.Hold)
	var err error
	if w.Ancestors, err = s.surfaceDecision(ctx, r, call.ToolCallID, d, by, w.At); err != nil {
		return w, err
	}
	if w.Outbox, err = s.announce(r, w.After, w.At, w.Events, decidedCall(*call, w.Kind, w.EditedArgs)); err != nil {
		return w, err
	}
	seq := r.LastSeq + int64(len(w.Events))
	snap.Seq = seq
	if w.Snapshot, err = snap.Encode(); err != nil {
		return w, err
	}
	var taken time.Time // when the write that leases the run was sent, at the latest
	if !w.Hold {
		w.Lease, w.TTL = s.newLease(), s.cfg.LeaseTTL
		taken = time.Now()
	}
	if err := s.store.Decide(ctx, w); err != nil {
		return w, err
	}
	s.decided(w.Kind, r.SuspendedAt, w.At) // metrics (observe hook)
	s.runHub.Publish(r.ID, struct{}{})
	r.Version, r.UpdatedAt, r.LastSeq, r.Snapshot = r.Version+1, w.At, seq, nil
	if w.Hold {
		// Still waiting, on the other calls: watchers of the suspended set get the changed run.
		s.changes.Publish(changesTopic, Change{Kind: ChangeChanged, RunID: r.ID})
		r.ToolCalls = slices.DeleteFunc(slices.Clone(r.ToolCalls), func(c runtype.ToolCall) bool { return c.ToolCallID == call.ToolCallID })
		return w, nil
	}
	s.changes.Publish(changesTopic, Change{Kind: ChangeLeft, RunID: r.ID})
	for _, anc := range w.Ancestors {
		s.runHub.Publish(anc.RunID, struct{}{})
		s.changes.Publish(changesTopic, Change{Kind: ChangeLeft, RunID: anc.RunID})
	}
	lease := w.Lease
	r.Status, r.LeaseOwner, r.SuspendedAt, r.ToolCalls = runtype.StatusRunning, &lease, nil, []runtype.ToolCall{}
	s.execute(a, r, snap, taken, causedBy(ctx, cause)) // its span links to what caused it (trace.go)
	return w, nil
}

// decisionWrite is the compare-and-set of decision d on run's waiting call, taken by by (empty:
// nobody) at at, without its events, snapshot or lease (commitDecision, finishExternal).
func (s *Service) decisionWrite(r *runtype.Run, call *runtype.ToolCall, d agent.Decision, by string, at time.Time) DecisionWrite {
	return DecisionWrite{RunID: r.ID, Version: r.Version, After: r.LastSeq, ToolCallID: call.ToolCallID,
		Kind: decisionKind[d.Kind], DecidedBy: emptyToNil(&by), Reason: emptyToNil(&d.Reason), ResumeData: d.ResumeData,
		EditedArgs: d.Args, At: at, InstanceID: s.cfg.InstanceID, Hold: len(r.ToolCalls) > 1}
}

var decisionKind = map[agent.CallState]runtype.DecisionKind{
	agent.CallApproved: runtype.DecisionApproved, agent.CallDeclined: runtype.DecisionDeclined, agent.CallResumed: runtype.DecisionResumed,
	agent.CallExpired: runtype.DecisionExpired,
}

// pickCall finds the pending call a decision is about.
func pickCall(r *runtype.Run, toolCallID *string) (*runtype.ToolCall, error) {
	pending := r.ToolCalls
	if toolCallID == nil || *toolCallID == "" {
		switch len(pending) {
		case 0:
			return nil, runtype.Errorf(runtype.CodeConflict, "run %s has no pending tool call", r.ID)
		case 1:
			return &pending[0], nil
		default:
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "run %s has %d pending tool calls: pass toolCallId", r.ID, len(pending))
		}
	}
	for i := range pending {
		if pending[i].ToolCallID == *toolCallID {
			return &pending[i], nil
		}
	}
	if err := alreadyDecided(r, *toolCallID); err != nil {
		return nil, err
	}
	return nil, runtype.Errorf(runtype.CodeBadUserInput, "run %s has no tool call %q waiting", r.ID, *toolCallID)
}

// alreadyDecided is the CONFLICT of a decision on run's call callID once it no longer waits: a
// toolCallId names one call for ever, so the answer says who decided that call and when (or
// when it expired), and never decides another. nil when run has no decision on that call.
func alreadyDecided(r *runtype.Run, callID string) error {
	for i := len(r.Decisions) - 1; i >= 0; i-- {
		d := r.Decisions[i]
		if d.ToolCallID != callID {
			continue
		}
		if d.Kind == runtype.DecisionExpired {
			return expiredAt(r.ID, d.ToolCallID, d.DecidedAt, d.Reason)
		}
		by := "by someone unnamed"
		if d.DecidedBy != nil && *d.DecidedBy != "" {
			by = "by " + *d.DecidedBy
		}
		return runtype.Errorf(runtype.CodeConflict, "tool call %s (%s) of run %s was already %s %s at %s: it can no longer be decided",
			d.ToolCallID, d.ToolName, r.ID, strings.ToLower(string(d.Kind)), by, d.DecidedAt.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	return nil
}

func checkKind(call *runtype.ToolCall, kind agent.CallState) error {
	if kind == agent.CallResumed && call.RequiresApproval {
		return runtype.Errorf(runtype.CodeBadUserInput, "tool call %s (%s) waits for approval, not resume data: use approveToolCall or declineToolCall", call.ToolCallID, call.ToolName)
	}
	if kind != agent.CallResumed && !call.RequiresApproval {
		return runtype.Errorf(runtype.CodeBadUserInput, "tool call %s (%s) waits for resume data, not approval: use resumeRun", call.ToolCallID, call.ToolName)
	}
	return nil
}

// decisionEvents are the events of a decision on call: what was decided, then RUN_RESUMED, but
// not while the run holds on other calls (hold). A resume has no event of its own: its
// RUN_RESUMED says who resumed (and a run that waits on input waits on nothing else).
func decisionEvents(call *runtype.ToolCall, d agent.Decision, by string, hold bool) []runtype.Event {
	ev := *call
	var out []runtype.Event
	switch d.Kind {
	case agent.CallApproved:
		if d.Args != nil {
			ev.Args = d.Args // the arguments the tool will run with
		}
		out = []runtype.Event{{Type: runtype.EventToolCallApproved, ToolCall: &ev, DecidedBy: by}}
	case agent.CallDeclined:
		out = []runtype.Event{{Type: runtype.EventToolCallDeclined, ToolCall: &ev, Reason: d.Reason, DecidedBy: by}}
	case agent.CallExpired:
		out = []runtype.Event{{Type: runtype.EventToolCallExpired, ToolCall: &ev, Reason: d.Reason}}
	}
	if hold {
		return out
	}
	return append(out, runtype.Event{Type: runtype.EventRunResumed, Status: string(runtype.StatusRunning), DecidedBy: by})
}

// decidedSupervisor is the supervisor's run a decision was taken on, as stored right after it
// (RUNNING to clients: its sub-agent's run continues). When it cannot be read back, it is shown
// from what was read before, with the decision on its delegate call.
func (s *Service) decidedSupervisor(ctx context.Context, target *runtype.Run, ancestors []AncestorWrite, w DecisionWrite, inner *runtype.ToolCall) *runtype.Run {
	if again, err := s.store.GetRun(context.WithoutCancel(ctx), target.ID); err == nil && again != nil {
		again.Snapshot, again.LeaseOwner = nil, nil
		return again
	} else {
		s.cfg.Logger.Warn("decide: load supervisor run", "run", target.ID, "err", err)
	}
	out := *target
	out.Status, out.SuspendedAt, out.Snapshot, out.LeaseOwner, out.ToolCalls = runtype.StatusWaiting, nil, nil, nil, []runtype.ToolCall{}
	for _, a := range ancestors {
		if a.RunID == target.ID {
			out.Version, out.LastSeq = a.Version+1, a.After+int64(len(a.Events))
			out.Decisions = append(out.Decisions, runtype.Decision{RunID: target.ID, ToolCallID: a.ToolCallID, ToolName: inner.ToolName,
				Kind: w.Kind, DecidedBy: w.DecidedBy, DecidedAt: w.At, Reason: w.Reason, ResumeData: w.ResumeData, Args: inner.Args, EditedArgs: w.EditedArgs, Receipt: w.Receipt})
		}
	}
	return &out
}
