package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"interlock/agent"
	"interlock/notify"
	"interlock/receipt"
	"interlock/runtype"
)

// Quorum: a tool whose calls need several people's approval (agent.Tool.RequiredApprovals,
// config approvals.required).
//
//   - Each approval from a distinct eligible principal is recorded (Store.RecordApproval, the
//     run's compare-and-set at its version: the run stays SUSPENDED, the call pending) with the
//     event TOOL_CALL_APPROVAL_RECORDED. The approval that meets the quorum is today's approval
//     (commitDecision: the tool runs once, with a receipt), recorded among the others in the
//     same compare-and-set (DecisionWrite.Approval), its events TOOL_CALL_APPROVAL_RECORDED then
//     TOOL_CALL_APPROVED.
//   - Eligible: who may decide the tool's calls (approverRoles, or approver; admin), narrowed to
//     holders of approvals.roles (or admin) when set; an authenticated principal (nobody in
//     particular cannot be told from a second person); never the run's starter, whatever
//     separation of duties says for other tools.
//   - The same person approving twice in a round is CONFLICT (the database's key on run, call,
//     round and subject decides, beside the check on the run as read).
//   - Any eligible decline declines at once (today's decline).
//   - An approval with edited arguments other than those the round approves starts a new round:
//     the earlier approvals no longer count (they approved other arguments) and the call waits
//     for `required` approvals of the new ones. Once the round's arguments are not the model's,
//     an approval must name them (args): one without is CONFLICT, so that nobody approves
//     arguments they have not seen. The final approval runs the tool with the round's arguments
//     (the decision's editedArgs when they are not the model's).
//
// Racing approvals serialise on the run's version. One that lost to another approval that did
// not decide the call is checked again on the run as it is now and recorded if it still
// stands: a person's approval is not dropped because someone else's landed first. It is
// CONFLICT if the call was decided meanwhile (who, when), if the person's own approval landed
// first (a double click), or if the arguments being approved changed since it was first read.
// So 30 racing approvals from 3 people record exactly 2 and run the tool once.

// quorumRetries bounds how often a decision on a quorum's call that lost the compare-and-set
// to another approval is checked and tried again: each loss means the run moved, and it moves
// at most once per approval.
const quorumRetries = 8

// quorum is what a decision on a call whose tool needs several approvals knows of the count.
type quorum struct {
	required int
	// after are the call's approvals once this one is recorded (Required set); approval is
	// this one in them (nil for a decline), without its time, which the write sets.
	after    runtype.Approvals
	approval *runtype.Approval
}

// met reports whether the approval meets the quorum: the call is decided with it.
func (q *quorum) met() bool { return q.approval == nil || len(q.after.By) >= q.required }

// checkQuorum checks decision dec (checked by checkDecision) against its tool's quorum and
// sets dec.quorum, or leaves it nil for a tool that needs one approval. seen holds the digest
// of the arguments the round approved when the decision was first checked ("" before): a
// decision checked again after losing a race is CONFLICT when they changed.
func (s *Service) checkQuorum(ctx context.Context, dec *decision, seen *string) error {
	d := dec.d
	if d.Kind != agent.CallApproved && d.Kind != agent.CallDeclined {
		return nil
	}
	tool := dec.agent.Tool(dec.call.ToolName)
	required := tool.Quorum()
	if required <= 1 {
		return nil
	}
	p := runtype.PrincipalFrom(ctx)
	if len(tool.ApprovalRoles) > 0 {
		roles := make([]runtype.Role, len(tool.ApprovalRoles))
		for i, r := range tool.ApprovalRoles {
			roles[i] = runtype.Role(r)
		}
		if !p.Has(runtype.RoleAdmin) && !p.HasAny(roles) {
			return runtype.Errorf(runtype.CodeForbidden, "only %s may decide %s calls (it needs %d approvals); %s has %s", roleList(roles), dec.call.ToolName, required, p.Subject, roleList(p.Roles))
		}
	}
	if d.Kind == agent.CallDeclined {
		dec.quorum = &quorum{required: required} // a decline that lost to an approval is tried again
		if a := dec.call.Approvals; a != nil {
			shown := *a // its event's call says of how many the approvals it had were
			shown.Required = required
			dec.call.Approvals = &shown
		}
		return nil
	}
	if dec.by == "" {
		return runtype.Errorf(runtype.CodeForbidden, "%s calls need %d approvals from distinct people: approving one needs an authenticated principal, which authentication being off does not give", dec.call.ToolName, required)
	}
	for _, r := range []*runtype.Run{&dec.top.Run, &dec.run.Run} {
		if r.StartedBy != nil && *r.StartedBy == dec.by {
			return runtype.Errorf(runtype.CodeForbidden, "%s started run %s: %s calls need %d approvals from people other than the run's starter (you may still decline)", dec.by, dec.top.ID, dec.call.ToolName, required)
		}
	}
	cur := dec.call.Approvals
	if cur == nil {
		cur = &runtype.Approvals{Args: dec.call.Args, By: []runtype.Approval{}}
	}
	roundArgs := cur.Args
	if roundArgs == nil {
		roundArgs = dec.call.Args
	}
	roundDigest, err := digestOf(roundArgs)
	if err != nil {
		return err
	}
	if *seen == "" {
		*seen = roundDigest
	} else if d.Args == nil && *seen != roundDigest {
		return runtype.Errorf(runtype.CodeConflict, "the arguments of tool call %s (%s) being approved changed while your approval was recorded (%s): read the call again and approve what it shows", dec.call.ToolCallID, dec.call.ToolName, whoEdited(cur))
	}
	q := &quorum{required: required, after: runtype.Approvals{Required: required, Round: cur.Round, Args: roundArgs,
		By: slices.Clone(cur.By), Superseded: slices.Clone(cur.Superseded)}}
	mine := runtype.Approval{Subject: dec.by, Round: cur.Round, ArgsDigest: roundDigest}
	edited := false
	if d.Args != nil {
		digest, err := digestOf(d.Args)
		if err != nil {
			return err
		}
		if edited = digest != roundDigest; edited {
			// Other arguments: a new round, in which only approvals of these count.
			if dec.call.Approvals != nil {
				q.after.Round++
			}
			q.after.Superseded = append(q.after.Superseded, q.after.By...)
			q.after.By, q.after.Args = []runtype.Approval{}, d.Args
			mine = runtype.Approval{Subject: dec.by, Round: q.after.Round, ArgsDigest: digest, EditedArgs: d.Args}
		}
	}
	if !edited {
		if d.Args == nil && !sameJSON(roundArgs, dec.call.Args) {
			return runtype.Errorf(runtype.CodeConflict, "the arguments of tool call %s (%s) being approved are not the model's (%s): approve them by sending them as args, after reading them", dec.call.ToolCallID, dec.call.ToolName, whoEdited(cur))
		}
		for _, a := range cur.By {
			if a.Subject == dec.by {
				return alreadyApproved(dec, a, required, len(cur.By))
			}
		}
	}
	q.after.By = append(q.after.By, mine)
	q.approval = &q.after.By[len(q.after.By)-1]
	dec.quorum = q
	if q.met() {
		// The decision runs the tool with the round's arguments (the model's, or edited ones).
		dec.d.Args = nil
		if !sameJSON(q.after.Args, dec.call.Args) {
			dec.d.Args = q.after.Args
		}
	}
	return nil
}

// alreadyApproved is the CONFLICT of a person approving a call a second time in a round.
func alreadyApproved(dec *decision, a runtype.Approval, required, count int) error {
	return runtype.Errorf(runtype.CodeConflict, "%s already approved tool call %s (%s) of run %s at %s: approvals %d of %d; the same person counts once",
		a.Subject, dec.call.ToolCallID, dec.call.ToolName, dec.run.ID, a.At.UTC().Format("2006-01-02T15:04:05.000Z"), count, required)
}

// whoEdited says who made the round's arguments what they are.
func whoEdited(a *runtype.Approvals) string {
	if a == nil || len(a.By) == 0 || a.By[0].EditedArgs == nil {
		return "the model's"
	}
	return fmt.Sprintf("edited by %s at %s", a.By[0].Subject, a.By[0].At.UTC().Format("2006-01-02T15:04:05.000Z"))
}

func digestOf(args json.RawMessage) (string, error) {
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	return receipt.ArgsDigest(args)
}

// approvalAt is the approval that meets dec's quorum, at `at`, to record with the decision;
// nil when the decision is not one.
func (dec *decision) approvalAt(at time.Time) *runtype.Approval {
	if dec.quorum == nil || dec.quorum.approval == nil {
		return nil
	}
	a := *dec.quorum.approval
	a.At = at
	return &a
}

// recorded is the TOOL_CALL_APPROVAL_RECORDED event of dec's approval at `at` (none for a
// decision without a quorum's approval): the call with its approvals, this one included.
func (dec *decision) recorded(at time.Time) []runtype.Event {
	if dec.quorum == nil || dec.quorum.approval == nil {
		return nil
	}
	dec.quorum.approval.At = at
	after := dec.quorum.after
	after.By, after.Superseded = slices.Clone(after.By), slices.Clone(after.Superseded)
	dec.call.Approvals = &after // the events that follow (TOOL_CALL_APPROVED) show them too
	call := *dec.call
	return []runtype.Event{{Type: runtype.EventToolCallApprovalRecorded, ToolCall: &call, DecidedBy: dec.by}}
}

// recordApproval stores dec's approval, which does not meet its call's quorum: the run stays
// SUSPENDED on the call at its next version (Store.RecordApproval), and only then are
// subscribers told. It returns the run as stored right after; ErrStale when the run moved
// since it was read.
func (s *Service) recordApproval(ctx context.Context, dec *decision) (*runtype.Run, error) {
	r, at := dec.run, s.now()
	evs := dec.recorded(at)
	w := ApprovalWrite{RunID: r.ID, Version: r.Version, After: r.LastSeq, ToolCallID: dec.call.ToolCallID,
		Approval: *dec.approvalAt(at), At: at, Events: evs, InstanceID: s.cfg.InstanceID}
	dec.snap.Seq = r.LastSeq + int64(len(evs))
	var err error
	if w.Snapshot, err = dec.snap.Encode(); err != nil {
		return nil, err
	}
	if w.Outbox, err = s.announce(&r.Run, w.After, at, evs, notify.Call{}); err != nil {
		return nil, err
	}
	if err := s.store.RecordApproval(ctx, w); err != nil {
		return nil, err
	}
	s.runHub.Publish(r.ID, struct{}{})
	s.changes.Publish(changesTopic, Change{Kind: ChangeChanged, RunID: r.ID})
	if again, err := s.store.GetRun(context.WithoutCancel(ctx), dec.top.ID); err == nil && again != nil {
		s.showInnerApprovals(context.WithoutCancel(ctx), again) // a supervisor's run shows the count too
		return again, nil
	} else if err != nil {
		s.cfg.Logger.Warn("approve: load run", "run", dec.top.ID, "err", err)
	}
	out := dec.top.Run
	if dec.top == dec.run {
		out.LastSeq, out.UpdatedAt = w.After+int64(len(evs)), runtype.StoredTime(at)
		out.ToolCalls = slices.Clone(out.ToolCalls)
		for i := range out.ToolCalls {
			if out.ToolCalls[i].ToolCallID == dec.call.ToolCallID {
				out.ToolCalls[i].Approvals = evs[0].ToolCall.Approvals
			}
		}
	}
	return &out, nil
}

// duplicateApproval is the CONFLICT of an approval the database refused as the same person's
// second in the round (ErrDuplicateApproval): two of their clicks racing.
func duplicateApproval(dec *decision) error {
	return runtype.Errorf(runtype.CodeConflict, "%s already approved tool call %s (%s) of run %s: the same person counts once", dec.by, dec.call.ToolCallID, dec.call.ToolName, dec.run.ID)
}

// quorumStale answers a decision on a quorum's call that kept losing the compare-and-set.
func quorumStale(dec *decision) error {
	return runtype.Errorf(runtype.CodeConflict, "tool call %s (%s) of run %s kept changing while your decision was stored (other approvals landing): read it again and decide", dec.call.ToolCallID, dec.call.ToolName, dec.run.ID)
}
