package runs

import (
	"context"
	"errors"
	"time"

	"interlock/agent"
	"interlock/notify"
	"interlock/runtype"
)

// Where grants let calls through: the two points where a call would wait for a person — an
// execution about to suspend on calls that need approval (letThrough), and an external agent's
// request about to be stored SUSPENDED (storeApproval, with requestGrants). Each tries the
// matching grants (grantsFor) in turn; the write that lets the call through consumes a use,
// and ErrGrantSpent (revoked, expired or used up since the read, on any instance) moves on to
// the next grant, then to a person. Webhooks are told of a call a grant let through as of a
// person's approval (decided, approved), with the grant's reason and no decidedBy.

// letThrough lets through, on a live grant each, the calls of snap that wait for approval, and
// returns the call the run still waits on: held when none was let through, another waiting
// call when some were, nil when no call waits any more (the loop goes on). Each call let
// through is stored by one UseGrant — its AUTO_APPROVED decision with its grant and receipt,
// TOOL_CALL_APPROVED naming the grant, the snapshot with the call approved — under the lease.
// It is not tried again on a storage failure: the error hands the run over, and whoever
// recovers it reads from the stored snapshot whether the call was let through, so that a use
// is never consumed twice for one call.
func (e *execution) letThrough(ctx context.Context, snap *agent.Snapshot, held *agent.PendingCall) (*agent.PendingCall, error) {
	let := false
	for i := range snap.Pending {
		c := &snap.Pending[i]
		if c.State != agent.CallAwaitingApproval {
			continue
		}
		site := callSite{run: &e.run, tool: e.agent.Tool(c.Name), name: c.Name, args: c.Args, interrupted: c.Interrupted}
		grants, err := e.s.grantsFor(ctx, site)
		if err != nil {
			return nil, stored(ctx, err)
		}
		for _, g := range grants {
			ok, err := e.useGrant(ctx, snap, i, &g)
			if err != nil {
				return nil, err
			}
			if ok {
				let = true
				break
			}
		}
	}
	if !let {
		return held, nil
	}
	if w := snap.WaitingCalls(); len(w) > 0 {
		return &w[0], nil
	}
	return nil, nil
}

// useGrant stores call i of snap as let through by grant g (see letThrough). It reports false,
// with snap as it was, when the grant was spent by the time the write ran.
func (e *execution) useGrant(ctx context.Context, snap *agent.Snapshot, i int, g *runtype.Grant) (bool, error) {
	before := snap.Pending[i]
	c := before
	now := e.s.now()
	receipt, err := e.s.receiptFor(ctx, e.run.ID, c.CallID(), e.run.AgentID, c.Name, c.Args, nil, now)
	if err != nil {
		return false, err
	}
	if err := snap.Decide(c.CallID(), agent.Decision{Kind: agent.CallApproved, Receipt: deref(receipt)}); err != nil {
		return false, err
	}
	reason := grantReason(g)
	call := e.eventCall(snap, before)
	call.RequiresApproval = true
	evs := []runtype.Event{{Type: runtype.EventToolCallApproved, ToolCall: call, Reason: reason, GrantID: g.ID}}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.text.Len() > 0 {
		evs = append([]runtype.Event{{Type: runtype.EventTextDelta, Text: e.text.String()}}, evs...)
	}
	seq := e.seq + int64(len(evs))
	snap.Seq = seq
	encoded, err := snap.Encode()
	if err != nil {
		snap.Pending[i] = before
		return false, err
	}
	outbox, err := e.s.announce(&e.run, e.seq, now, evs, notify.Call{})
	if err != nil {
		snap.Pending[i] = before
		return false, err
	}
	id := g.ID
	u := GrantUse{
		Checkpoint: Checkpoint{RunID: e.run.ID, Lease: e.owner, TTL: e.s.cfg.LeaseTTL, After: e.seq, At: now, Events: evs, Snapshot: &encoded, Outbox: outbox},
		GrantID:    g.ID,
		Decision: runtype.Decision{RunID: e.run.ID, ToolCallID: c.CallID(), ToolName: c.Name, Kind: runtype.DecisionAutoApproved,
			DecidedAt: now, Reason: &reason, Args: c.Args, Receipt: receipt, GrantID: &id},
	}
	if before.Gate != nil {
		// The policy that asked, as a person's decision keeps it.
		u.Decision.PolicyRevision = emptyToNil(&before.Gate.Revision)
	}
	sent := time.Now()
	err = e.s.store.UseGrant(ctx, u)
	if errors.Is(err, ErrGrantSpent) {
		snap.Pending[i], snap.Seq = before, e.seq
		return false, nil
	}
	if err != nil {
		snap.Pending[i] = before
		return false, stored(ctx, err)
	}
	e.renewed(sent) // the write renewed the lease
	e.seq = seq
	e.text.Reset()
	if e.flush != nil {
		e.flush.Stop()
		e.flush = nil
	}
	e.s.runHub.Publish(e.run.ID, struct{}{})
	e.s.cfg.Logger.Info("tool call auto-approved by grant", "run", e.run.ID, "tool", c.Name, "tool_call", c.CallID(), "grant", g.ID)
	return true, nil
}

// requestGrants are the grants that would let an external agent's request through instead of
// asking a person (grantsFor), for storeApproval to try in turn.
func (s *Service) requestGrants(ctx context.Context, req *approvalRequest) ([]runtype.Grant, error) {
	if !req.gate.Ask {
		return nil, nil
	}
	r := &runtype.Run{AgentID: req.agent.ID, ThreadID: req.threadID, ResourceID: req.resourceID, StartedBy: startedBy(ctx)}
	return s.grantsFor(ctx, callSite{run: r, tool: req.tool, name: req.tool.Name, args: req.args})
}
