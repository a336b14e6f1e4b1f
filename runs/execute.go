package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/events"
	"interlock/gormstore"
)

// execution is one stretch of a run's loop on this instance, from a start or a decision until the
// run suspends or finishes. It is the agent.Host: every event it reports is appended, with the
// snapshot it goes with, in one transaction guarded by the lease.
type execution struct {
	s     *Service
	agent *agent.Agent
	run   gormstore.Run // id, agent, thread, resource and prompt; other fields are not kept current
	seq   int64      // last seq written; only the lease holder writes, so this is the truth
	owner string     // the lease token of this execution: every write checks it
}

var _ agent.Host = (*execution)(nil)

// execute continues a run this instance has just leased (row.LastSeq is its last event), in the
// background, renewing the lease while it runs. A snapshot with a call that was executing when
// its previous owner died is not run: the call goes back to a person (see recover.go).
func (s *Service) execute(a *agent.Agent, row *gormstore.Run, snap *agent.Snapshot) {
	e := &execution{s: s, agent: a, run: *row, seq: row.LastSeq, owner: deref(row.LeaseOwner)}
	s.mu.Lock()
	if s.closing {
		// This instance is stopping: hand the run to another instance at once.
		s.mu.Unlock()
		e.release()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		renewed := make(chan struct{})
		go func() { defer close(renewed); e.renewLease(ctx, cancel) }()
		defer func() { <-renewed }()
		defer cancel()
		if c := snap.Executing(); c != nil {
			e.interrupted(ctx, snap, c)
			return
		}
		e.loop(ctx, snap)
	}()
}

func (e *execution) loop(ctx context.Context, snap *agent.Snapshot) {
	out, err := e.agent.Run(ctx, snap, e)
	switch {
	case err == nil && out.Held != nil:
		err = e.suspend(ctx, snap, out.Held)
	case err == nil:
		err = e.complete(ctx, out.Text)
	case errors.Is(err, errLeaseLost):
		// Another instance owns the run now.
		return
	case errors.As(err, new(*storageError)):
		// Storage failed (a deadlock, a lost connection): not the run's fault. Give the lease up;
		// recovery continues the run from its last stored checkpoint.
		e.s.cfg.Logger.Error("run: storage error; handing the run over", "run", e.run.ID, "err", err)
		e.release()
		return
	case errors.Is(err, errHandover), ctx.Err() != nil:
		// This instance is stopping: let another take the run over at once.
		e.release()
		return
	default:
		e.s.cfg.Logger.Warn("run failed", "run", e.run.ID, "err", err)
		err = e.fail(ctx, err)
	}
	if err != nil && !errors.Is(err, errLeaseLost) && ctx.Err() == nil {
		e.s.cfg.Logger.Error("run: cannot store outcome", "run", e.run.ID, "err", err)
	}
}

// errHandover stops an execution at a checkpoint while the instance shuts down.
var errHandover = errors.New("instance is shutting down: run handed over")

// renewLease extends the lease every third of its TTL until ctx ends. When the lease is lost
// (another instance recovered the run), or renewals keep failing until the lease is about to
// expire, it cancels the execution: past its lease, another instance may be running the run.
func (e *execution) renewLease(ctx context.Context, cancel context.CancelFunc) {
	t := time.NewTicker(e.s.cfg.LeaseTTL / 3)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := e.s.store.tx(ctx, func(tx *gorm.DB) error {
			return leaseUpdate(tx, e.run.ID, e.owner, map[string]any{"lease_until": e.s.now().Add(e.s.cfg.LeaseTTL)})
		})
		switch {
		case err == nil:
			renewed = time.Now()
		case errors.Is(err, errLeaseLost):
			e.s.cfg.Logger.Warn("run: lease lost; stopping", "run", e.run.ID)
			cancel()
			return
		case time.Since(renewed) > e.s.cfg.LeaseTTL*2/3:
			e.s.cfg.Logger.Error("run: cannot renew the lease; stopping", "run", e.run.ID, "err", err)
			cancel()
			return
		}
	}
}

// release gives the lease up (expired now) so that any instance recovers the run at once.
func (e *execution) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := e.s.store.tx(ctx, func(tx *gorm.DB) error {
		return leaseUpdate(tx, e.run.ID, e.owner, map[string]any{"lease_owner": nil, "lease_until": e.s.now()})
	})
	if err != nil && !errors.Is(err, errLeaseLost) {
		e.s.cfg.Logger.Warn("run: release lease", "run", e.run.ID, "err", err)
	}
}

// checkpoint is emit at a point where no tool is executing; while the instance shuts down it
// stops the execution there, after storing, so the run is handed over cleanly.
func (e *execution) checkpoint(ctx context.Context, snap *agent.Snapshot, evs ...events.Event) error {
	if err := e.emit(ctx, snap, evs...); err != nil {
		return err
	}
	if e.s.draining.Load() {
		return errHandover
	}
	return nil
}

// emit appends evs and, when snap is not nil, stores it, renewing the lease; then wakes followers.
func (e *execution) emit(ctx context.Context, snap *agent.Snapshot, evs ...events.Event) error {
	now := e.s.now()
	seq := e.seq + int64(len(evs))
	err := e.s.store.tx(ctx, func(tx *gorm.DB) error {
		set := map[string]any{"last_seq": seq, "updated_at": now, "lease_until": now.Add(e.s.cfg.LeaseTTL)}
		if snap != nil {
			set["snapshot"] = snap.Encode()
		}
		// The lease check comes first: it locks the run row, so every writer of a run's events
		// queues on that row lock, in one order.
		if err := leaseUpdate(tx, e.run.ID, e.owner, set); err != nil {
			return err
		}
		_, err := events.Append(tx, e.run.ID, e.seq, now, evs...)
		return err
	})
	if err != nil {
		return err
	}
	e.seq = seq
	e.s.runHub.Publish(e.run.ID, struct{}{})
	return nil
}

// TextDelta appends a TEXT_DELTA event.
func (e *execution) TextDelta(ctx context.Context, text string) error {
	return e.emit(ctx, nil, events.Event{Type: events.TextDelta, Text: text})
}

// ToolCalls appends one TOOL_CALL event per call, with the snapshot holding them.
func (e *execution) ToolCalls(ctx context.Context, snap *agent.Snapshot, calls []agent.PendingCall) error {
	evs := make([]events.Event, len(calls))
	for i, c := range calls {
		evs[i] = events.Event{Type: events.ToolCallRequested, ToolCall: e.eventCall(snap, c)}
	}
	return e.checkpoint(ctx, snap, evs...)
}

// ToolStarted stores the snapshot with the call marked executing (no event).
func (e *execution) ToolStarted(ctx context.Context, snap *agent.Snapshot, c agent.PendingCall) error {
	return e.emit(ctx, snap)
}

// ToolResult appends TOOL_RESULT with the snapshot that holds the result.
func (e *execution) ToolResult(ctx context.Context, snap *agent.Snapshot, c agent.PendingCall, result json.RawMessage, errMsg string) error {
	return e.checkpoint(ctx, snap, events.Event{Type: events.ToolResult, ToolCall: e.eventCall(snap, c), Result: result, Error: errMsg})
}

// StepFinished appends STEP_FINISHED with the snapshot of the finished step.
func (e *execution) StepFinished(ctx context.Context, snap *agent.Snapshot) error {
	return e.checkpoint(ctx, snap, events.Event{Type: events.StepFinished})
}

func (e *execution) eventCall(snap *agent.Snapshot, c agent.PendingCall) *events.ToolCall {
	return &events.ToolCall{
		ToolCallID: c.ID, ToolName: c.Name, Args: c.Args,
		RequiresApproval: e.needsApproval(snap, c) && c.State != agent.CallSuspended,
		SuspendPayload:   c.SuspendPayload, Interrupted: c.Interrupted,
	}
}

func (e *execution) needsApproval(snap *agent.Snapshot, c agent.PendingCall) bool {
	t := e.agent.Tool(c.Name)
	return t != nil && (t.RequireApproval || snap.RequireToolApproval)
}

// suspend stores the run as SUSPENDED on the held call, with the call's row and the events that
// announce it, in one transaction, and only then tells anyone. The lease is released.
func (e *execution) suspend(ctx context.Context, snap *agent.Snapshot, held *agent.PendingCall, prelude ...events.Event) error {
	now := e.s.now()
	approval := held.State == agent.CallAwaitingApproval
	evCall := &events.ToolCall{ToolCallID: held.ID, ToolName: held.Name, Args: held.Args, RequiresApproval: approval, SuspendPayload: held.SuspendPayload, Interrupted: held.Interrupted}
	first := events.Event{Type: events.ToolCallApproval, ToolCall: evCall}
	if !approval {
		first.Type = events.ToolCallSuspended
	}
	evs := append(prelude, first, events.Event{Type: events.RunSuspended, Status: string(StatusSuspended)})
	seq := e.seq + int64(len(evs))
	err := e.s.store.tx(ctx, func(tx *gorm.DB) error {
		err := leaseUpdate(tx, e.run.ID, e.owner, map[string]any{
			"status": StatusSuspended, "snapshot": snap.Encode(), "suspended_at": now, "updated_at": now,
			"last_seq": seq, "lease_owner": nil, "lease_until": nil, "version": gorm.Expr("version + 1"),
		})
		if err != nil {
			return err
		}
		args := string(held.Args)
		row := gormstore.ToolCall{
			RunID: e.run.ID, ToolCallID: held.ID, ToolName: held.Name, Args: &args,
			RequiresApproval: approval, SuspendPayload: strOrNil(held.SuspendPayload),
			Interrupted: held.Interrupted, State: gormstore.ToolCallPending, CreatedAt: now,
		}
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("insert pending tool call: %w", err)
		}
		if err := e.s.recordChange(tx, e.run.ID, ChangeSuspended, now); err != nil {
			return fmt.Errorf("record change: %w", err)
		}
		_, err = events.Append(tx, e.run.ID, e.seq, now, evs...)
		return err
	})
	if err != nil {
		return err
	}
	e.seq = seq
	e.s.runHub.Publish(e.run.ID, struct{}{})
	e.s.changes.Publish(changesTopic, Change{Kind: ChangeSuspended, RunID: e.run.ID})
	return nil
}

// complete stores the final text, removes the snapshot, appends RUN_FINISHED and records the
// exchange in the run's memory thread.
func (e *execution) complete(ctx context.Context, text string) error {
	return e.finish(ctx, StatusCompleted, map[string]any{"output": text},
		events.Event{Type: events.RunFinished, Status: string(StatusCompleted)},
		func(tx *gorm.DB, now time.Time) error {
			if e.run.ThreadID == nil {
				return nil
			}
			msgs := []gormstore.Message{
				{ThreadID: *e.run.ThreadID, ResourceID: e.run.ResourceID, RunID: e.run.ID, Role: "user", Content: e.run.Prompt, CreatedAt: now},
				{ThreadID: *e.run.ThreadID, ResourceID: e.run.ResourceID, RunID: e.run.ID, Role: "assistant", Content: text, CreatedAt: now},
			}
			if err := tx.Create(&msgs).Error; err != nil {
				return fmt.Errorf("store thread messages: %w", err)
			}
			return nil
		})
}

// fail stores the run as FAILED with a message for the person reading it.
func (e *execution) fail(ctx context.Context, cause error) error {
	msg := cause.Error()
	return e.finish(ctx, StatusFailed, map[string]any{"error": msg},
		events.Event{Type: events.RunFailed, Status: string(StatusFailed), Error: msg}, nil)
}

func (e *execution) finish(ctx context.Context, status Status, set map[string]any, ev events.Event, also func(tx *gorm.DB, now time.Time) error) error {
	now := e.s.now()
	seq := e.seq + 1
	err := e.s.store.tx(ctx, func(tx *gorm.DB) error {
		set["status"], set["snapshot"], set["updated_at"], set["last_seq"] = status, nil, now, seq
		set["lease_owner"], set["lease_until"], set["version"] = nil, nil, gorm.Expr("version + 1")
		if err := leaseUpdate(tx, e.run.ID, e.owner, set); err != nil {
			return err
		}
		if _, err := events.Append(tx, e.run.ID, e.seq, now, ev); err != nil {
			return err
		}
		if also != nil {
			return also(tx, now)
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.seq = seq
	e.s.runHub.Publish(e.run.ID, struct{}{})
	return nil
}

const changesTopic = "suspended"
