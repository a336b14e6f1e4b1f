package gormstore

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// InsertRun implements runs.Store. Its run's claims of its idempotency key and its thread are
// made with those of the runs inserted with it, together (claim.go): a claim costs the group
// four statements however many runs it holds, not four per run. A refused claim writes nothing
// (the key's or the thread's row was there already, and the run's rows are not added), so it does
// not fail the group the write shares (groupcommit.go): the others commit together, and only
// the refused run gets its answer (*runs.DuplicateRequest, ErrThreadOwned). Failing the group
// instead would make every other write of it again alone, which a client could set off at will
// by naming other resources' threads. A key claimed now by a run whose thread is then refused
// is given back in the same transaction.
func (s *Store) InsertRun(ctx context.Context, n runs.NewRun) error {
	if n.External != nil {
		return s.insertRequest(ctx, n)
	}
	var refusal error // set by the last attempt (a group's write may be made again alone)
	err := s.group.do(ctx, "insert run", func(tx *gorm.DB, rows *groupRows) error {
		refusal = nil
		rows.claims = append(rows.claims, &claim{n: n, refuse: func(err error) { refusal = err }})
		return nil
	})
	if err == nil && refusal != nil {
		return refusal
	}
	return err
}

// insertRun inserts a new RUNNING run and its first events in the caller's transaction.
func (s *Store) insertRun(tx *gorm.DB, n runs.NewRun) error {
	return s.writeIn(tx, func(_ *gorm.DB, rows *groupRows) error { return s.addRun(rows, n) })
}

// addRun adds the row of a new RUNNING run and its first events to rows.
func (s *Store) addRun(rows *groupRows, n runs.NewRun) error {
	r := n.Run
	rows.runs = append(rows.runs, map[string]any{
		"id": r.ID, "agent_id": r.AgentID, "parent_run_id": r.ParentRunID, "thread_id": r.ThreadID,
		"resource_id": r.ResourceID, "started_by": r.StartedBy, "prompt": r.Prompt, "require_tool_approval": r.RequireToolApproval,
		"status": string(runtype.StatusRunning), "snapshot": n.Snapshot, "created_at": runtype.StoredTime(r.CreatedAt),
		"updated_at": runtype.StoredTime(r.UpdatedAt), "last_seq": int64(len(n.Events)), "lease_owner": n.Lease,
		"lease_until": s.dbNowPlus(n.TTL), "version": 0, "recovery_attempts": 0, "context": r.Context,
	})
	return rows.addEvents(r.ID, 0, r.CreatedAt, n.Events, n.Outbox)
}

// insertRequest is InsertRun of an external agent's approval request (n.External), in a
// transaction of its own: the idempotency key and the thread are claimed as for any run, then
// the run's row (SUSPENDED without a lease, or COMPLETED without a snapshot) is inserted, and
// after it, since they read it, the call's row, the suspended-set change and its count, and the
// events with their outbox rows.
func (s *Store) insertRequest(ctx context.Context, n runs.NewRun) error {
	var refusal error
	err := s.tx(ctx, func(tx *gorm.DB) error {
		refusal = nil
		r, x := n.Run, n.External
		ok, err := s.claimAll(tx, []*claim{{n: n, refuse: func(err error) { refusal = err }}})
		if err != nil || len(ok) == 0 {
			return err
		}
		row := map[string]any{
			"id": r.ID, "agent_id": r.AgentID, "parent_run_id": nil, "thread_id": r.ThreadID,
			"resource_id": r.ResourceID, "started_by": r.StartedBy, "prompt": r.Prompt, "require_tool_approval": r.RequireToolApproval,
			"status": string(r.Status), "snapshot": nil, "created_at": runtype.StoredTime(r.CreatedAt), "updated_at": runtype.StoredTime(r.UpdatedAt),
			"suspended_at": nil, "last_seq": int64(len(n.Events)), "lease_owner": nil, "lease_until": nil,
			"version": 0, "recovery_attempts": 0, "context": r.Context,
		}
		call := pendingRow(r.ID, x.Call.ToolCallID, x.Call, r.CreatedAt)
		if d := x.Decision; d != nil {
			call.State, call.DecidedBy, call.DecidedAt, call.Reason = string(d.Kind), d.DecidedBy, msOrNil(&d.DecidedAt), d.Reason
			call.Receipt, call.GrantID, call.PolicyRevision = d.Receipt, d.GrantID, d.PolicyRevision
			if d.GrantID != nil {
				// A grant let the call through: one of its uses is consumed here, in the
				// transaction that records the decision, or nothing is stored.
				if err := useGrant(tx, *d.GrantID, d.DecidedAt); err != nil {
					return err
				}
			}
			if n.Lease != "" {
				// A forwarded call (agent.Agent.Forwards): RUNNING, leased to the instance
				// that runs it, with the snapshot its execution starts from.
				row["snapshot"], row["lease_owner"], row["lease_until"] = n.Snapshot, n.Lease, s.dbNowPlus(n.TTL)
			}
		} else {
			row["snapshot"], row["suspended_at"] = n.Snapshot, msOrNil(r.SuspendedAt)
		}
		if err := tx.Model(&Run{}).Create(row).Error; err != nil {
			return fmt.Errorf("insert run %s: %w", r.ID, err)
		}
		if err := tx.Create(&call).Error; err != nil {
			return fmt.Errorf("insert the tool call of run %s: %w", r.ID, err)
		}
		if x.Decision == nil {
			if err := recordChange(tx, r.ID, runs.ChangeSuspended, x.InstanceID, r.CreatedAt); err != nil {
				return err
			}
		}
		return s.appendEvents(tx, r.ID, 0, r.CreatedAt, n.Events, n.Outbox)
	})
	if err == nil && refusal != nil {
		return refusal
	}
	return err
}

// checkpointSet is what every lease holder's write sets: the new last seq, the time, a renewed
// lease, and the end of any count of failed recoveries (the run made progress).
func (s *Store) checkpointSet(c runs.Checkpoint) map[string]any {
	set := map[string]any{
		"last_seq": c.After + int64(len(c.Events)), "updated_at": runtype.StoredTime(c.At),
		"lease_until": s.dbNowPlus(c.TTL), "recovery_attempts": 0, "recover_after": nil,
	}
	if c.Snapshot != nil {
		set["snapshot"] = *c.Snapshot
	}
	return set
}

// Checkpoint implements runs.Store.
func (s *Store) Checkpoint(ctx context.Context, c runs.Checkpoint) error {
	return s.group.do(ctx, "checkpoint", func(tx *gorm.DB, rows *groupRows) error {
		// The lease check comes first: it locks the run row, so every writer of a run's events
		// queues on that row lock, in one order.
		if err := leaseUpdate(tx, c.RunID, c.Lease, s.checkpointSet(c)); err != nil {
			return err
		}
		rows.addAutoApproved(c)
		return rows.addEvents(c.RunID, c.After, c.At, c.Events, c.Outbox)
	})
}

// autoApprovedRow is the row of a call a policy let through: decided when it is stored.
func autoApprovedRow(d runtype.Decision, at time.Time) ToolCall {
	row := pendingRow(d.RunID, d.ToolCallID, runtype.ToolCall{ToolCallID: d.ToolCallID, ToolName: d.ToolName, Args: d.Args}, at)
	row.State, row.DecidedBy, row.DecidedAt, row.Reason = string(d.Kind), d.DecidedBy, msOrNil(&d.DecidedAt), d.Reason
	row.Receipt, row.PolicyRevision = d.Receipt, d.PolicyRevision
	return row
}

// Suspend implements runs.Store.
func (s *Store) Suspend(ctx context.Context, p runs.Suspension) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		set := s.checkpointSet(p.Checkpoint)
		set["status"], set["suspended_at"], set["version"] = runtype.StatusSuspended, runtype.StoredTime(p.At), gorm.Expr("version + 1")
		if !p.KeepLease {
			set["lease_owner"], set["lease_until"] = nil, nil
		}
		if err := leaseUpdate(tx, p.RunID, p.Lease, set); err != nil {
			return err
		}
		if len(p.Calls) == 0 {
			return fmt.Errorf("suspend run %s: no call to wait on", p.RunID)
		}
		rows := make([]ToolCall, len(p.Calls), len(p.Calls)+len(p.AutoApproved))
		for i, c := range p.Calls {
			rows[i] = pendingRow(p.RunID, c.ToolCallID, c, p.At)
		}
		for _, d := range p.AutoApproved {
			rows = append(rows, autoApprovedRow(d, p.At))
		}
		if err := tx.Create(&rows).Error; err != nil {
			return fmt.Errorf("insert pending tool calls: %w", err)
		}
		if err := recordChange(tx, p.RunID, runs.ChangeSuspended, p.InstanceID, p.At); err != nil {
			return err
		}
		if err := s.appendEvents(tx, p.RunID, p.After, p.At, p.Events, p.Outbox); err != nil {
			return err
		}
		return s.suspendAncestors(tx, p)
	})
}

// pendingRow is the row of a call a run waits on, stored under id (a supervisor's delegate call
// shows its sub-agent's call under its own id).
func pendingRow(runID, id string, c runtype.ToolCall, at time.Time) ToolCall {
	args := string(c.Args)
	return ToolCall{
		RunID: runID, ToolCallID: id, ToolName: c.ToolName, Args: &args,
		RequiresApproval: c.RequiresApproval, SuspendPayload: strOrNil(c.SuspendPayload), ResumeSchema: strOrNil(c.ResumeSchema), AskedMidCall: c.AskedMidCall,
		Interrupted: c.Interrupted, InterruptedToolCallID: strOrEmpty(c.InterruptedToolCallID),
		State: ToolCallPending, CreatedAt: runtype.StoredTime(at), ExpiresAt: msOrNil(c.ExpiresAt),
		RemindAt: msOrNil(c.RemindAt), EscalateAt: msOrNil(c.EscalateAt), ExpiringAt: msOrNil(c.ExpiringAt),
		EscalateTo:     rolesJSON(c.EscalateTo),
		ApprovalReason: strOrEmpty(c.ApprovalReason), PolicyRevision: strOrEmpty(c.PolicyRevision),
	}
}

// Finish implements runs.Store.
func (s *Store) Finish(ctx context.Context, f runs.Finish) error {
	write := func(tx *gorm.DB, rows *groupRows) error {
		set := s.checkpointSet(f.Checkpoint)
		set["status"], set["snapshot"], set["output"], set["error"], set["error_code"] = f.Status, nil, f.Output, f.Error, f.ErrorCode
		set["lease_owner"], set["lease_until"], set["version"] = nil, nil, gorm.Expr("version + 1")
		if err := leaseUpdate(tx, f.RunID, f.Lease, set); err != nil {
			return err
		}
		rows.addAutoApproved(f.Checkpoint)
		if err := rows.addEvents(f.RunID, f.After, f.At, f.Events, f.Outbox); err != nil {
			return err
		}
		if err := s.continueParent(tx, f.Parent, f.At); err != nil {
			return err
		}
		if f.ThreadID == nil || len(f.Memory) == 0 {
			return nil
		}
		for _, m := range f.Memory {
			rows.messages = append(rows.messages, Message{ThreadID: *f.ThreadID, ResourceID: f.ResourceID, RunID: f.RunID, Role: string(m.Role), Content: m.Content, CreatedAt: runtype.StoredTime(f.At)})
		}
		return nil
	}
	if f.Parent != nil {
		// A sub-agent's finish continues its WAITING supervisor, whose row it checks and
		// updates: alone, so that a stale handoff fails this write only, and two children of
		// one supervisor never meet in one transaction.
		return s.alone(ctx, write)
	}
	return s.group.do(ctx, "finish", write)
}

// RenewLease implements runs.Store. A SUSPENDED run has a lease owner only when its holder
// kept it (runs.Suspension.KeepLease), so matching the owner is enough to renew that one too.
func (s *Store) RenewLease(ctx context.Context, runID, lease string, ttl time.Duration) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&Run{}).Where("id = ? AND status IN ? AND lease_owner = ?", runID, []runtype.Status{runtype.StatusRunning, runtype.StatusSuspended}, lease).
			Updates(map[string]any{"lease_until": s.dbNowPlus(ttl)})
		if res.Error != nil {
			return fmt.Errorf("update run %s: %w", runID, res.Error)
		}
		if res.RowsAffected == 0 {
			return runs.ErrLeaseLost
		}
		return nil
	})
}

// ReleaseLease implements runs.Store.
func (s *Store) ReleaseLease(ctx context.Context, runID, lease string) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		return leaseUpdate(tx, runID, lease, map[string]any{"lease_owner": nil, "lease_until": nil})
	})
}

// Decide implements runs.Store.
func (s *Store) Decide(ctx context.Context, d runs.DecisionWrite) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		r := map[string]any{
			"version": d.Version + 1, "snapshot": d.Snapshot,
			"updated_at": runtype.StoredTime(d.At), "last_seq": d.After + int64(len(d.Events)),
		}
		switch {
		case d.Finish:
			// An external agent's request: the decision is its end.
			r["status"], r["snapshot"], r["lease_owner"], r["lease_until"] = runtype.StatusCompleted, nil, nil, nil
			r["suspended_at"], r["recovery_attempts"], r["recover_after"] = nil, 0, nil
		case d.KeepLease:
			// The holder of the kept lease goes on with its call: the lease stays as it is.
			r["status"], r["suspended_at"], r["recovery_attempts"], r["recover_after"] = runtype.StatusRunning, nil, 0, nil
		case !d.Hold:
			r["status"], r["lease_owner"], r["lease_until"] = runtype.StatusRunning, d.Lease, s.dbNowPlus(d.TTL)
			r["suspended_at"], r["recovery_attempts"], r["recover_after"] = nil, 0, nil
		}
		q := tx.Model(&Run{}).
			Where("id = ? AND status = ? AND version = ? AND last_seq = ?", d.RunID, runtype.StatusSuspended, d.Version, d.After)
		if d.KeepLease {
			q = q.Where("lease_owner IS NOT NULL AND lease_until >= ?", s.dbNow())
		}
		res := q.Updates(r)
		if res.Error != nil {
			return fmt.Errorf("decide run %s: %w", d.RunID, res.Error)
		}
		if res.RowsAffected == 0 {
			return runs.ErrStale
		}
		if d.Approval != nil { // the approval that met the call's quorum, recorded with the others
			if err := insertApproval(tx, d.RunID, d.ToolCallID, *d.Approval); err != nil {
				return err
			}
		}
		set := map[string]any{"state": string(d.Kind), "decided_at": runtype.StoredTime(d.At), "decided_by": d.DecidedBy, "reason": d.Reason}
		if d.ResumeData != nil {
			set["resume_data"] = string(d.ResumeData)
		}
		if d.EditedArgs != nil {
			set["edited_args"] = string(d.EditedArgs)
		}
		if d.Receipt != nil {
			set["receipt"] = *d.Receipt
		}
		call := tx.Model(&ToolCall{}).Where("run_id = ? AND tool_call_id = ? AND state = ?", d.RunID, d.ToolCallID, ToolCallPending)
		// The deadline decides between a person and the expiry: a person's decision until the
		// call expires, an expiry from then on. A request its asker abandoned ends then,
		// deadline or not (the run's compare-and-set above decides between it and a person).
		switch {
		case d.Abandoned && d.Kind == runtype.DecisionExpired:
		case d.Kind == runtype.DecisionExpired:
			call = call.Where("expires_at IS NOT NULL AND expires_at <= ?", runtype.StoredTime(d.At))
		default:
			call = call.Where("(expires_at IS NULL OR expires_at > ?)", runtype.StoredTime(d.At))
		}
		res = call.Updates(set)
		if res.Error != nil {
			return fmt.Errorf("record decision: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return runs.ErrStale
		}
		if d.Grant != nil {
			if err := insertGrant(tx, *d.Grant); err != nil {
				return err
			}
		}
		if err := s.appendEvents(tx, d.RunID, d.After, d.At, d.Events, d.Outbox); err != nil {
			return err
		}
		if err := s.decideAncestors(tx, d, set); err != nil {
			return err
		}
		if d.Hold {
			// Still in the suspended set, with one call fewer.
			return recordChange(tx, d.RunID, runs.ChangeChanged, d.InstanceID, d.At)
		}
		return recordChange(tx, d.RunID, runs.ChangeLeft, d.InstanceID, d.At)
	})
}

// DueExpiries implements runs.Store.
func (s *Store) DueExpiries(ctx context.Context, now time.Time, limit int) ([]runs.DueCall, error) {
	var rows []ToolCall
	err := s.db.WithContext(ctx).Model(&ToolCall{}).
		Select("run_tool_calls.run_id", "run_tool_calls.tool_call_id", "run_tool_calls.expires_at").
		Joins("JOIN agent_runs ON agent_runs.id = run_tool_calls.run_id").
		Where("run_tool_calls.state = ? AND run_tool_calls.expires_at <= ? AND agent_runs.status = ?", ToolCallPending, runtype.StoredTime(now), runtype.StatusSuspended).
		Order("run_tool_calls.expires_at").Order("run_tool_calls.id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("find due tool calls: %w", err)
	}
	out := make([]runs.DueCall, 0, len(rows))
	for _, r := range rows {
		if r.ExpiresAt != nil {
			out = append(out, runs.DueCall{RunID: r.RunID, ToolCallID: r.ToolCallID, ExpiresAt: r.ExpiresAt.UTC()})
		}
	}
	return out, nil
}

// expired narrows a query to RUNNING runs whose lease has expired by the database's clock, and
// SUSPENDED runs whose holder kept their lease (runs.Suspension.KeepLease) past its expiry.
func (s *Store) expired(q *gorm.DB) *gorm.DB {
	now := s.dbNow()
	return q.Where("(status = ? AND (lease_until IS NULL OR lease_until < ?)) OR (status = ? AND lease_owner IS NOT NULL AND lease_until < ?)",
		runtype.StatusRunning, now, runtype.StatusSuspended, now)
}

// ExpiredRuns implements runs.Store.
func (s *Store) ExpiredRuns(ctx context.Context, limit int) ([]*runs.Record, error) {
	var rows []Run
	q := s.expired(s.db.WithContext(ctx).Model(&Run{})).Where("recover_after IS NULL OR recover_after <= ?", s.dbNow())
	if err := q.Order("lease_until").Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("find expired leases: %w", err)
	}
	out := make([]*runs.Record, len(rows))
	for i := range rows {
		out[i] = recordOf(&rows[i], runFromRow(&rows[i], nil))
	}
	return out, nil
}

// ClaimExpired implements runs.Store.
func (s *Store) ClaimExpired(ctx context.Context, c runs.Claim) (bool, error) {
	var claimed bool
	err := s.tx(ctx, func(tx *gorm.DB) error {
		status := runtype.StatusRunning
		set := map[string]any{
			"lease_owner": c.Lease, "lease_until": s.dbNowPlus(c.TTL), "version": c.Version + 1,
			"recovery_attempts": gorm.Expr("recovery_attempts + 1"), "recover_after": nil,
		}
		if c.Suspended {
			// A holder that kept its lease while SUSPENDED died: the run goes back to RUNNING
			// for the claimer, which finds its call executing.
			status, set["status"], set["suspended_at"] = runtype.StatusSuspended, runtype.StatusRunning, nil
		}
		res := s.expired(tx.Model(&Run{})).Where("id = ? AND status = ? AND version = ? AND last_seq = ?", c.RunID, status, c.Version, c.LastSeq).
			Updates(set)
		if res.Error != nil {
			return fmt.Errorf("claim run %s: %w", c.RunID, res.Error)
		}
		claimed = res.RowsAffected == 1
		if !claimed || !c.Suspended {
			return nil
		}
		err := tx.Model(&ToolCall{}).Where("run_id = ? AND state = ?", c.RunID, ToolCallPending).
			Updates(map[string]any{"state": string(runtype.DecisionExpired), "decided_at": runtype.StoredTime(c.At), "reason": c.Reason}).Error
		if err != nil {
			return fmt.Errorf("close the waiting calls of run %s: %w", c.RunID, err)
		}
		return recordChange(tx, c.RunID, runs.ChangeLeft, c.InstanceID, c.At)
	})
	return claimed, err
}

// DeferRecovery implements runs.Store.
func (s *Store) DeferRecovery(ctx context.Context, runID string, version int64, backoff time.Duration) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		err := s.expired(tx.Model(&Run{})).Where("id = ? AND version = ?", runID, version).
			Updates(map[string]any{"recovery_attempts": gorm.Expr("recovery_attempts + 1"), "recover_after": s.dbNowPlus(backoff)}).Error
		if err != nil {
			return fmt.Errorf("defer recovery of run %s: %w", runID, err)
		}
		return nil
	})
}

// recordChange writes a suspended-set change in the caller's transaction.
func recordChange(tx *gorm.DB, runID string, kind runs.ChangeKind, instance string, at time.Time) error {
	if err := tx.Create(&RunChange{RunID: runID, Kind: string(kind), InstanceID: instance, CreatedAt: runtype.StoredTime(at)}).Error; err != nil {
		return fmt.Errorf("record change: %w", err)
	}
	return countChange(tx, runID, kind) // perf: the maintained count of suspendedRuns' total (counts.go)
}
