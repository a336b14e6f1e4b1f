package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"interlock/agent"
	"interlock/notify"
	"interlock/runtype"
)

// Delegation is a supervisor's run starting a sub-agent's run: the supervisor's checkpoint (it
// becomes WAITING, unleased) and the new run.
type Delegation struct {
	Checkpoint
	Child NewRun
}

// AncestorWrite is the change of a supervisor run above a run that suspends or is decided,
// made in the same transaction: compare-and-set on Version and After (its last seq), the
// Events after it, and the supervisor's delegate call ToolCallID, shown as Call.
type AncestorWrite struct {
	RunID      string
	Version    int64
	After      int64
	ToolCallID string
	Call       runtype.ToolCall
	Events     []runtype.Event
	// Outbox are the webhooks' rows announcing Events (Announce), written with them.
	Outbox []Announcement
}

// Handoff continues the WAITING supervisor run of a finishing sub-agent run: compare-and-set on
// Version and After, it becomes RUNNING under Lease with Snapshot, which holds the outcome.
type Handoff struct {
	RunID    string
	Version  int64
	After    int64
	Snapshot string
	Lease    string
	TTL      time.Duration
}

// maxDepth bounds the walk of a chain of delegations (the configuration forbids cycles; this is
// a guard against a corrupt chain).
const maxDepth = 32

// delegationNS is the namespace of sub-agent run ids.
var delegationNS = uuid.MustParse("5b0c7a4e-1f0e-4d52-9c1a-6f3b0e8a2d71")

// childRunID is the id of the run a delegate call starts, derived from the call's id (its
// CallID: the model's in runs stored before the server assigned ids, so theirs stay the same),
// so that the run of one call is one run whoever starts it.
func childRunID(parentRunID, toolCallID string) string {
	return uuid.NewSHA1(delegationNS, []byte(parentRunID+"\x00"+toolCallID)).String()
}

// delegate stores the run as WAITING on its delegate call and the sub-agent's run, RUNNING and
// leased here, in one transaction, then executes the sub-agent's run.
func (e *execution) delegate(ctx context.Context, snap *agent.Snapshot, held *agent.PendingCall) error {
	tool := e.agent.Tool(held.Name)
	if tool == nil || tool.SubAgent == nil {
		return fmt.Errorf("run %s: %s is not a delegate tool", e.run.ID, held.Name)
	}
	task, err := agent.Task(held.Args)
	if err != nil {
		return err
	}
	c := snap.Delegated()
	if c == nil || c.CallID() != held.CallID() {
		return fmt.Errorf("run %s: call %s is not delegated", e.run.ID, held.CallID())
	}
	c.ChildRunID = childRunID(e.run.ID, c.CallID())
	childSnap := agent.NewSnapshot(nil, task, snap.RequireToolApproval)
	childSnap.Seq = 1
	childEncoded, err := childSnap.Encode()
	if err != nil {
		return err
	}
	now := e.s.now()
	lease, taken := e.s.newLease(), time.Now()
	parentID := e.run.ID
	child := runtype.Run{
		ID: c.ChildRunID, AgentID: tool.SubAgent.ID, ParentRunID: &parentID, ThreadID: e.run.ThreadID, ResourceID: e.run.ResourceID, StartedBy: e.run.StartedBy,
		Prompt: task, RequireToolApproval: snap.RequireToolApproval, Status: runtype.StatusRunning,
		CreatedAt: now, UpdatedAt: now, LastSeq: 1,
		ToolCalls: []runtype.ToolCall{}, Decisions: []runtype.Decision{},
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var evs []runtype.Event
	if e.text.Len() > 0 {
		evs = append(evs, runtype.Event{Type: runtype.EventTextDelta, Text: e.text.String()})
	}
	seq := e.seq + int64(len(evs))
	snap.Seq = seq
	encoded, err := snap.Encode()
	if err != nil {
		return err
	}
	err = e.s.store.Delegate(ctx, Delegation{
		Checkpoint: Checkpoint{RunID: e.run.ID, Lease: e.owner, TTL: e.s.cfg.LeaseTTL, After: e.seq, At: now, Events: evs, Snapshot: &encoded},
		Child: NewRun{Run: child, Snapshot: childEncoded, Lease: lease, TTL: e.s.cfg.LeaseTTL,
			Events: []runtype.Event{{Type: runtype.EventRunStarted, Status: string(runtype.StatusRunning)}}},
	})
	if err != nil {
		return stored(ctx, err)
	}
	e.seq, e.ended = seq, true
	e.text.Reset()
	e.s.runHub.Publish(e.run.ID, struct{}{})
	e.s.execute(tool.SubAgent, &child, lease, childSnap, taken, causedBy(ctx, CauseDelegation))
	return nil
}

// ancestor is a supervisor run above a run, and the id of its call that waits on the run below.
type ancestor struct {
	run    *Record
	callID string
}

// ancestors walks up from run through the supervisor runs whose delegated call waits on the run
// below, innermost first. A supervisor among read (records the caller has just read, which a
// decision was checked against) is not read again: the writes of the ancestors compare-and-set
// on the version read, so a supervisor that moved since makes the write stale either way.
func (s *Service) ancestors(ctx context.Context, r *runtype.Run, read []*Record) ([]ancestor, error) {
	var out []ancestor
	below, parent := r.ID, r.ParentRunID
	for parent != nil {
		if len(out) >= maxDepth {
			return nil, fmt.Errorf("run %s: delegation chain deeper than %d", r.ID, maxDepth)
		}
		p, err := s.supervisor(ctx, *parent, read)
		if err != nil {
			return nil, err
		}
		if p == nil || p.Snapshot == nil {
			break
		}
		snap, err := agent.DecodeSnapshot(*p.Snapshot)
		if err != nil {
			return nil, err
		}
		c := snap.Delegated()
		if c == nil || c.ChildRunID != below {
			break
		}
		out = append(out, ancestor{run: p, callID: c.CallID()})
		below, parent = p.ID, p.ParentRunID
	}
	return out, nil
}

// supervisor is the record of supervisor run id: the one among read, or else as stored now.
func (s *Service) supervisor(ctx context.Context, id string, read []*Record) (*Record, error) {
	if i := slices.IndexFunc(read, func(r *Record) bool { return r.ID == id }); i >= 0 {
		return read[i], nil
	}
	p, err := s.store.GetRecord(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("load supervisor run %s: %w", id, err)
	}
	return p, nil
}

// surfacedID is the id under which a supervisor run shows the call innerID of the sub-agent run
// its delegate call delegateID waits on: tc_1/tc_2 is call tc_2 of the run that call tc_1
// started. It is unique within the supervisor's run (one delegate call starts one run) and
// names that inner call only, so a decision on what a person was shown never reaches a later
// call of the same sub-agent run.
func surfacedID(delegateID, innerID string) string { return delegateID + "/" + innerID }

// shows reports whether id, a call of a supervisor run waiting on delegate call c, is a
// sub-agent's call shown there: under a surfacedID, or (stored before calls had server ids)
// under c's own id.
func shows(c *agent.PendingCall, id string) bool {
	return c != nil && (id == c.CallID() || strings.HasPrefix(id, c.CallID()+"/"))
}

// surfaceSuspension is what the supervisors above a suspending run store with its suspension:
// each is SUSPENDED on a call that shows the inner call's tool, args and payload under a
// surfacedID, with the webhooks' rows its events announce (at: the suspension's time).
func (s *Service) surfaceSuspension(ctx context.Context, r *runtype.Run, inner runtype.ToolCall, evType runtype.EventType, at time.Time) ([]AncestorWrite, error) {
	list, err := s.ancestors(ctx, r, nil)
	if err != nil {
		return nil, err
	}
	out := make([]AncestorWrite, len(list))
	id, was := inner.ToolCallID, inner.InterruptedToolCallID
	for i, a := range list {
		call := inner
		id = surfacedID(a.callID, id)
		call.ToolCallID = id
		if was != "" {
			// The id the inner call executed under, shown the way its new one is.
			was = surfacedID(a.callID, was)
			call.InterruptedToolCallID = was
		}
		out[i] = AncestorWrite{
			RunID: a.run.ID, Version: a.run.Version, After: a.run.LastSeq, ToolCallID: id, Call: call,
			Events: []runtype.Event{{Type: evType, ToolCall: &call}, {Type: runtype.EventRunSuspended, Status: string(runtype.StatusSuspended)}},
		}
		if out[i].Outbox, err = s.announce(&a.run.Run, a.run.LastSeq, at, out[i].Events, notify.Call{}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// surfaceDecision is what the supervisors above a run decided on its call innerID store with the
// decision: each goes back to WAITING, the call that shows innerID decided the same way. read
// are the supervisors' records as the decision was checked against them (ancestors).
func (s *Service) surfaceDecision(ctx context.Context, r *runtype.Run, read []*Record, innerID string, d agent.Decision, by string, at time.Time) ([]AncestorWrite, error) {
	list, err := s.ancestors(ctx, r, read)
	if err != nil {
		return nil, err
	}
	out := make([]AncestorWrite, 0, len(list))
	id := innerID
	for _, a := range list {
		if a.run.Status != runtype.StatusSuspended {
			return nil, runtype.Errorf(runtype.CodeConflict, "supervisor run %s is %s, not SUSPENDED: it was already decided", a.run.ID, a.run.Status)
		}
		id = surfacedID(a.callID, id)
		call := waitingCall(&a.run.Run, id)
		if call == nil {
			// Suspended before calls had server ids: the inner call is shown under the
			// delegate call's own id.
			call = waitingCall(&a.run.Run, a.callID)
		}
		if call == nil {
			return nil, runtype.Errorf(runtype.CodeConflict, "supervisor run %s does not wait on %s", a.run.ID, id)
		}
		w := AncestorWrite{
			RunID: a.run.ID, Version: a.run.Version, After: a.run.LastSeq, ToolCallID: call.ToolCallID, Call: *call,
			Events: decisionEvents(call, d, by, false),
		}
		if w.Outbox, err = s.announce(&a.run.Run, w.After, at, w.Events, decidedCall(*call, decisionKind[d.Kind], d.Args)); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// innermost follows a suspended supervisor run's call callID, which shows a sub-agent's call,
// down to the suspended run that holds that call, and returns that run and the call's id there
// (run itself and callID when the call is run's own). A supervisor suspended before calls had
// server ids shows the inner call under its delegate call's own id: then the id returned is ""
// (the sub-agent run's one waiting call), as it was decided then. above are the runs it went
// through, r first (none when the call is r's own).
func (s *Service) innermost(ctx context.Context, r *Record, callID string) (inner *Record, innerID string, above []*Record, err error) {
	cur, id := r, callID
	for depth := 0; ; depth++ {
		if cur.Snapshot == nil || depth > maxDepth {
			return cur, id, above, nil
		}
		snap, err := agent.DecodeSnapshot(*cur.Snapshot)
		if err != nil {
			return nil, "", nil, err
		}
		c := snap.Delegated()
		var rest string
		switch {
		case c == nil:
			return cur, id, above, nil
		case strings.HasPrefix(id, c.CallID()+"/"):
			rest = id[len(c.CallID())+1:]
		case id == c.CallID(), id == "" && cur != r:
			rest = "" // the old form, at every level
		default:
			return cur, id, above, nil
		}
		child, err := s.store.GetRecord(ctx, c.ChildRunID)
		if err != nil {
			return nil, "", nil, fmt.Errorf("load sub-agent run %s: %w", c.ChildRunID, err)
		}
		if child == nil {
			return nil, "", nil, fmt.Errorf("run %s: sub-agent run %s is missing", cur.ID, c.ChildRunID)
		}
		if child.Status != runtype.StatusSuspended {
			return nil, "", nil, runtype.Errorf(runtype.CodeConflict, "run %s waits on sub-agent run %s, which is %s: it was already decided", r.ID, child.ID, child.Status.Public())
		}
		above = append(above, cur)
		cur, id = child, rest
	}
}

// handoff prepares, for a finishing sub-agent run, the continuation of the supervisor run that
// waits on it: the outcome goes into the supervisor's snapshot as the delegate call's result.
// It returns nil when the run has no waiting supervisor. start executes the supervisor here
// once the finish is committed.
func (s *Service) handoff(ctx context.Context, r *runtype.Run, output *string, errMsg *string) (h *Handoff, start func(), err error) {
	if r.ParentRunID == nil {
		return nil, nil, nil
	}
	p, err := s.store.GetRecord(ctx, *r.ParentRunID)
	if err != nil {
		return nil, nil, fmt.Errorf("load supervisor run %s: %w", *r.ParentRunID, err)
	}
	if p == nil || p.Status != runtype.StatusWaiting || p.Snapshot == nil {
		s.cfg.Logger.Warn("run: sub-agent run finished, but its supervisor does not wait on it", "run", r.ID, "supervisor", *r.ParentRunID)
		return nil, nil, nil
	}
	snap, err := agent.DecodeSnapshot(*p.Snapshot)
	if err != nil {
		return nil, nil, err
	}
	var result json.RawMessage
	var failure string
	if errMsg != nil {
		failure = fmt.Sprintf("sub-agent %s failed: %s", r.AgentID, *errMsg)
	} else {
		if result, err = json.Marshal(deref(output)); err != nil {
			return nil, nil, fmt.Errorf("encode sub-agent output: %w", err)
		}
	}
	if err := snap.Return(r.ID, result, failure); err != nil {
		if errors.Is(err, agent.ErrUnknownCall) {
			s.cfg.Logger.Warn("run: supervisor waits on another run", "run", r.ID, "supervisor", p.ID)
			return nil, nil, nil
		}
		return nil, nil, err
	}
	snap.Seq = p.LastSeq
	encoded, err := snap.Encode()
	if err != nil {
		return nil, nil, err
	}
	lease, taken := s.newLease(), time.Now()
	h = &Handoff{RunID: p.ID, Version: p.Version, After: p.LastSeq, Snapshot: encoded, Lease: lease, TTL: s.cfg.LeaseTTL}
	start = func() {
		p.Status, p.LeaseOwner, p.Version, p.Snapshot = runtype.StatusRunning, &lease, p.Version+1, &encoded
		a := s.agents.Get(p.AgentID)
		if a == nil {
			// Another instance may serve it: let recovery find it at once.
			if err := s.store.ReleaseLease(context.WithoutCancel(ctx), p.ID, lease); err != nil {
				s.cfg.Logger.Warn("run: release supervisor run", "run", p.ID, "err", err)
			}
			return
		}
		s.execute(a, &p.Run, lease, snap, taken, causedBy(ctx, CauseHandoff))
	}
	return h, start, nil
}
