package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
// for resume data or is a question asked in the middle of its call, or the toolCallId is
// ambiguous or unknown.
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
// agent.DeclinedMessage when reason is empty); the run continues. On a question its tool asked
// in the middle of its call (midcall.go) the tool is answered "declined" instead, and its call
// goes on: its result is the call's. Errors as Approve.
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

// decide checks the decision against the run as read (checkDecision), then stores it with the
// store's compare-and-set (commitDecision): the run moves from SUSPENDED at the version read to
// RUNNING leased by this instance, the call is marked decided, the snapshot holds the decision
// and the events are appended, in one transaction. When anything moved since the read, someone
// else decided first: CONFLICT (lostRace says who). Only after the commit does it tell
// subscribers and continue the run.
//
// On a call whose tool needs several approvals (quorum.go), an approval that does not meet the
// quorum is recorded and the run stays SUSPENDED (recordApproval); a decision that lost the
// compare-and-set is checked again on the run as it is now, and stored if it still stands.
func (s *Service) decide(ctx context.Context, p DecideParams, d agent.Decision) (*runtype.Run, error) {
	var seen string // a quorum's: the arguments being approved when first checked
	for attempt := 0; ; attempt++ {
		dec, repeated, err := s.checkDecision(ctx, p, d)
		if err != nil || repeated != nil {
			return repeated, err
		}
		if err := s.checkQuorum(ctx, dec, &seen); err != nil {
			return nil, err
		}
		var w DecisionWrite
		var run *runtype.Run
		if dec.quorum != nil && !dec.quorum.met() {
			run, err = s.recordApproval(ctx, dec)
		} else {
			w, err = s.commitDecision(ctx, dec)
		}
		switch {
		case errors.Is(err, ErrStale) && dec.quorum != nil && attempt < quorumRetries:
			continue // another approval moved the run: check again on the run as it is now
		case errors.Is(err, ErrStale) && dec.quorum == nil && attempt < 3 && s.onlyNoticed(ctx, dec):
			// A reminder, escalation or warning appended its event meanwhile (followup.go): check
			// and make the decision again, on the run as it is now.
			continue
		case errors.Is(err, ErrStale) && dec.quorum != nil && !dec.quorum.met():
			return nil, quorumStale(dec)
		case errors.Is(err, ErrStale):
			return s.lostRace(ctx, dec, w)
		case errors.Is(err, ErrDuplicateApproval):
			return nil, duplicateApproval(dec)
		case err != nil:
			return nil, err
		case run != nil:
			return run, nil
		}
		return s.decidedRun(ctx, dec, w), nil
	}
}

// checkDecision checks decision d, asked by the principal of ctx on p's call, against the run as
// stored, and returns the decision to commit — or, for a retry of a decision already stored
// (repeat.go), the run as it is now, to answer with instead.
//
// It reads the run's record once, snapshot included: the checks and the write are made from
// that one read, and the write's compare-and-set on its version makes sure that nothing moved
// in between (a sub-agent's run that holds the call is read too, innermost).
func (s *Service) checkDecision(ctx context.Context, p DecideParams, d agent.Decision) (*decision, *runtype.Run, error) {
	if err := mayDecide(ctx); err != nil {
		return nil, nil, err
	}
	// Who decides is who authenticated; nobody for the server's own principals (mayDecide
	// refused a context without one).
	var by string
	if who := runtype.PrincipalFrom(ctx).Recorded(); who != nil {
		by = *who
	}
	top, err := s.store.GetRecord(ctx, p.RunID)
	if err != nil {
		return nil, nil, err
	}
	if top == nil || !visible(ctx, top.ResourceID) {
		return nil, nil, notFound(p.RunID)
	}
	if repeatedDecision(&top.Run, p.ToolCallID, d, by) != nil {
		return nil, &top.Run, nil
	}
	if top.Status != runtype.StatusSuspended {
		return nil, nil, notWaiting(&top.Run, p.ToolCallID)
	}
	call, err := pickCall(&top.Run, p.ToolCallID)
	if err != nil {
		return nil, nil, err
	}
	dec := &decision{top: top, run: top, call: call, d: d, by: by, cause: CauseDecision}
	if err := s.findHolder(ctx, dec); err != nil {
		return nil, nil, err
	}
	if dec.agent = s.agents.Get(dec.run.AgentID); dec.agent == nil {
		// Its approver roles and tools are the agent's: without them nothing can be checked or
		// continued, so nothing is decided (a rolling deploy's other instances may serve it).
		return nil, nil, runtype.Errorf(runtype.CodeConflict, "run %s belongs to agent %q, which this server's config does not have: it can be decided where the agent is served, or once it is back in the config", dec.run.ID, dec.run.AgentID)
	}
	if err := s.authorizeDecision(ctx, &top.Run, &dec.run.Run, dec.call, dec.agent.Tool(dec.call.ToolName), d); err != nil {
		return nil, nil, err
	}
	if err := s.refuseExpired(ctx, dec.run, dec.call); err != nil {
		return nil, nil, err
	}
	if dec.snap, err = snapshotOf(dec.run); err != nil {
		return nil, nil, err
	}
	if err := checkKind(dec.call, askedMidCall(dec.snap, dec.call.ToolCallID), d.Kind); err != nil {
		return nil, nil, err
	}
	if err := checkValues(dec, d); err != nil {
		return nil, nil, err
	}
	return dec, nil, nil
}

// findHolder moves dec from the run a decision was asked on to the run that holds its call: a
// supervisor's run suspended on a sub-agent's call shows it, and the decision is the inner
// run's, on the very call the supervisor's shows (never a later one of the same sub-agent run).
func (s *Service) findHolder(ctx context.Context, dec *decision) error {
	inner, innerID, above, err := s.innermost(ctx, dec.top, dec.call.ToolCallID)
	if err != nil || inner == dec.top {
		return err
	}
	call, err := pickCall(&inner.Run, &innerID)
	if err != nil {
		return err
	}
	dec.run, dec.call, dec.above = inner, call, above
	return nil
}

// notWaiting is the CONFLICT of a decision on a run that no longer waits (or never did): who
// decided the named call and when, that it expired, or else the run's status.
func notWaiting(r *runtype.Run, toolCallID *string) error {
	if toolCallID != nil && *toolCallID != "" {
		if err := alreadyDecided(r, *toolCallID); err != nil {
			return err
		}
	}
	if err := expiredConflict(r, toolCallID); err != nil {
		return err
	}
	return runtype.Errorf(runtype.CodeConflict, "run %s is %s, not SUSPENDED: it was already decided or has not suspended", r.ID, r.Status)
}

// checkValues checks what a person sent with decision d against the tool's schemas: edited
// arguments against its inputSchema, resume data against its resumeSchema (BAD_USER_INPUT, and
// the run stays suspended).
func checkValues(dec *decision, d agent.Decision) error {
	if d.Args == nil && d.Kind != agent.CallResumed {
		return nil
	}
	tool := dec.agent.Tool(dec.call.ToolName)
	if tool == nil {
		return fmt.Errorf("run %s: agent %q has no tool %q", dec.run.ID, dec.run.AgentID, dec.call.ToolName)
	}
	if d.Args != nil {
		if err := tool.ValidateInput(d.Args); err != nil {
			return runtype.Errorf(runtype.CodeBadUserInput, "args do not match the inputSchema of %s: %v", dec.call.ToolName, err)
		}
	}
	if d.Kind == agent.CallResumed {
		if c := dec.call; len(c.ResumeSchema) > 0 {
			// The call asked for data of its own shape (agent.Call.SuspendFor), stored with it.
			schema, err := agent.CompileSchema(dec.run.ID+"/"+c.ToolCallID+"/resume", c.ResumeSchema)
			if err != nil {
				return fmt.Errorf("run %s: the resumeSchema of call %s: %w", dec.run.ID, c.ToolCallID, err)
			}
			if err := schema.Validate(d.ResumeData); err != nil {
				return runtype.Errorf(runtype.CodeBadUserInput, "resumeData does not match the resumeSchema of call %s: %v", c.ToolCallID, err)
			}
			return nil
		}
		if err := tool.ValidateResume(d.ResumeData); err != nil {
			return runtype.Errorf(runtype.CodeBadUserInput, "resumeData does not match the resumeSchema of %s: %v", dec.call.ToolName, err)
		}
	}
	return nil
}

// snapshotOf decodes the agent loop's state of a suspended run, which a decision goes into.
func snapshotOf(r *Record) (*agent.Snapshot, error) {
	if r.Snapshot == nil {
		return nil, fmt.Errorf("run %s is suspended without a snapshot", r.ID)
	}
	return agent.DecodeSnapshot(*r.Snapshot)
}

// lostRace answers a decision whose compare-and-set found the run moved since it was read (w
// is the write that lost): CONFLICT saying the deadline passed, or who decided first and when —
// unless the decision that won is this very one, by the same principal (a client that sent it
// twice at once), which is then answered as that one was.
//
// It reads the run again, as clients see it: what won is in its decisions, and nothing of the
// record (the snapshot) is needed to tell.
func (s *Service) lostRace(ctx context.Context, dec *decision, w DecisionWrite) (*runtype.Run, error) {
	if err := pastDeadline(&dec.run.Run, dec.call, w.At); err != nil {
		return nil, err
	}
	if again, err := s.store.GetRun(ctx, dec.run.ID); err == nil && again != nil {
		if repeatedDecision(again, &dec.call.ToolCallID, dec.d, dec.by) != nil {
			if dec.top == dec.run {
				return again, nil
			}
			if top, err := s.store.GetRun(ctx, dec.top.ID); err == nil && top != nil {
				return top, nil
			}
		}
		if err := alreadyDecided(again, dec.call.ToolCallID); err != nil {
			return nil, err // who won, and when
		}
	}
	return nil, runtype.Errorf(runtype.CodeConflict, "run %s was decided by someone else first", dec.run.ID)
}

// decidedRun is the answer to a committed decision: the run as stored right after it.
//
// The run as it moved is known (commitDecision updated it) but for the decision's id, which the
// database gave it in the write: the run is read again for its decisions, as clients see it —
// not its record, whose snapshot the answer has no use for. The decision is committed: a failure
// of that read must not turn it into an error, so the decision is then shown as taken, without
// its stored id.
func (s *Service) decidedRun(ctx context.Context, dec *decision, w DecisionWrite) *runtype.Run {
	if dec.top != dec.run {
		return s.decidedSupervisor(ctx, dec, w)
	}
	out := dec.run.Run
	if again, err := s.store.GetRun(context.WithoutCancel(ctx), out.ID); err == nil && again != nil {
		out.Decisions = again.Decisions
	} else {
		s.cfg.Logger.Warn("decide: load decisions", "run", out.ID, "err", err)
		out.Decisions = append(out.Decisions, dec.taken(out.ID, dec.call.ToolCallID, w))
	}
	return &out
}

// decidedSupervisor is the supervisor's run a decision was taken on, as stored right after it:
// WAITING (RUNNING to clients: its sub-agent's run continues), its call gone. As decidedRun,
// the run is known from what was checked and written, but for the decisions' stored ids, which
// are read back; the rest is not, since by then the sub-agent may have finished and the
// supervisor with it, and the answer is the state the decision made, not a later one. When the
// read fails, the decision is shown as taken, on its delegate call.
func (s *Service) decidedSupervisor(ctx context.Context, dec *decision, w DecisionWrite) *runtype.Run {
	out := dec.top.Run
	out.Status, out.SuspendedAt, out.ToolCalls, out.UpdatedAt = runtype.StatusWaiting, nil, []runtype.ToolCall{}, runtype.StoredTime(w.At)
	var mine []AncestorWrite
	for _, a := range w.Ancestors {
		if a.RunID == out.ID {
			out.LastSeq = a.After + int64(len(a.Events))
			mine = append(mine, a)
		}
	}
	again, err := s.store.GetRun(context.WithoutCancel(ctx), out.ID)
	if err == nil && again != nil {
		out.Decisions = again.Decisions
		return &out
	}
	s.cfg.Logger.Warn("decide: load supervisor run", "run", out.ID, "err", err)
	for _, a := range mine {
		out.Decisions = append(out.Decisions, dec.taken(out.ID, a.ToolCallID, w))
	}
	return &out
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
		if d.Kind == runtype.DecisionAutoApproved {
			by = "by its policy, without asking anyone,"
		}
		if d.DecidedBy != nil && *d.DecidedBy != "" {
			by = "by " + *d.DecidedBy
		}
		return runtype.Errorf(runtype.CodeConflict, "tool call %s (%s) of run %s was already %s %s at %s: it can no longer be decided",
			d.ToolCallID, d.ToolName, r.ID, strings.ReplaceAll(strings.ToLower(string(d.Kind)), "_", "-"), by, d.DecidedAt.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	return nil
}

// checkKind refuses a decision of a kind call does not wait for: resume data for a call that
// waits for approval, approval for one that waits for data. A question its tool asked in the
// middle of its call (midCall, midcall.go) is answered with data or declined — the decline is
// the tool's answer, and its call goes on — never approved: nothing waits to run.
func checkKind(call *runtype.ToolCall, midCall bool, kind agent.CallState) error {
	if midCall || call.AskedMidCall {
		if kind == agent.CallApproved {
			return runtype.Errorf(runtype.CodeBadUserInput, "tool call %s (%s) is a question its tool asked in the middle of its call, which is running: answer it with resumeRun, or decline it with declineToolCall", call.ToolCallID, call.ToolName)
		}
		return nil
	}
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
