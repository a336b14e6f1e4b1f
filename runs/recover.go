package runs

import (
	"context"
	"fmt"

	"interlock/agent"
	"interlock/events"
	"interlock/gormstore"
)

// RecoverExpired claims up to 50 runs whose lease has expired, each with a compare-and-set on its
// version (so of several instances exactly one recovers a run), and continues them here: a model
// call in progress is repeated; a tool that was executing is not run again, the run suspends with
// that call awaiting approval, marked interrupted. It returns how many runs it claimed.
func (s *Service) RecoverExpired(ctx context.Context) (int, error) {
	now := s.now()
	var expired []gormstore.Run
	err := s.store.db.WithContext(ctx).
		Where("status = ? AND (lease_until IS NULL OR lease_until < ?)", StatusRunning, now).
		Limit(50).Find(&expired).Error
	if err != nil {
		return 0, fmt.Errorf("find expired leases: %w", err)
	}
	n := 0
	for i := range expired {
		row := &expired[i]
		a := s.agents.Get(row.AgentID)
		if a == nil || row.Snapshot == nil {
			continue // another instance may serve this agent
		}
		snap, err := agent.DecodeSnapshot(*row.Snapshot)
		if err != nil {
			s.cfg.Logger.Error("recovery: bad snapshot", "run", row.ID, "err", err)
			continue
		}
		until := now.Add(s.cfg.LeaseTTL)
		owner := s.newLease()
		// The claim holds only if nothing moved since the read: still expired (the owner did not
		// renew) and no event written (the snapshot read is the latest).
		res := s.store.db.WithContext(ctx).Model(&gormstore.Run{}).
			Where("id = ? AND status = ? AND version = ? AND last_seq = ? AND (lease_until IS NULL OR lease_until < ?)", row.ID, StatusRunning, row.Version, row.LastSeq, now).
			Updates(map[string]any{"lease_owner": owner, "lease_until": until, "version": row.Version + 1})
		if res.Error != nil {
			return n, fmt.Errorf("claim run %s: %w", row.ID, res.Error)
		}
		if res.RowsAffected == 0 {
			continue // another instance claimed it first
		}
		s.cfg.Logger.Info("recovering run", "run", row.ID, "previous_owner", deref(row.LeaseOwner))
		row.LeaseOwner, row.LeaseUntil, row.Version = &owner, &until, row.Version+1
		s.execute(a, row, snap)
		n++
	}
	return n, nil
}

// interrupted suspends a recovered run on the call that was executing when its owner died: its
// outcome is unknown, so a person decides whether it runs again.
func (e *execution) interrupted(ctx context.Context, snap *agent.Snapshot, c *agent.PendingCall) {
	c.State, c.Interrupted = agent.CallAwaitingApproval, true
	why := events.Event{
		Type:     events.ToolCallInterrupted,
		ToolCall: &events.ToolCall{ToolCallID: c.ID, ToolName: c.Name, Args: c.Args, RequiresApproval: true, Interrupted: true},
		Reason:   fmt.Sprintf("the server executing %s stopped before it finished, so whether it took effect is unknown; approve to run it again or decline", c.Name),
	}
	if err := e.suspend(ctx, snap, c, why); err != nil && ctx.Err() == nil {
		e.s.cfg.Logger.Error("recovery: suspend interrupted run", "run", e.run.ID, "err", err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
