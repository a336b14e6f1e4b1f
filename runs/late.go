package runs

import (
	"context"
	"errors"
	"interlock/runtype"
	"time"
)

// ErrNoSuchCall is RecordLateResult's answer for a call the run never had (or a run that is not
// stored): a late result is never recorded for a call it is not the outcome of.
var ErrNoSuchCall = errors.New("the run has no such tool call")

// lateBackoffMax bounds the pause between two tries to record a late result (from resultBackoff,
// doubling): an outage of minutes costs a try every few seconds per result held, and the result
// is recorded within seconds of the database's return.
var lateBackoffMax = 5 * time.Second

// keepLate keeps the outcome of a tool call that ran but could not be stored with its run (why),
// and records it as the call's late result as soon as storage takes it, trying again with
// backoff until it is recorded or the service closes (then once more: lastTry). Recording it never touches the run, whose
// lease may be another instance's by then: the result goes beside the run, where recovery's
// reason, the API (lateResult) and the console find it. It runs in the background, beside the
// executions: the execution that held the result has ended by the time the database answers.
//
// Called from an execution only (ToolResult, and outcome for a tool that suspended), which Close waits for before it waits for the
// background loops, so the loop count is never raised after Close stopped waiting for it.
func (s *Service) keepLate(l runtype.LateResult, why error) {
	s.cfg.Logger.Warn("run: a tool ran but its result could not be stored with the run; keeping it to record as the call's late result",
		"run", l.RunID, "tool", l.ToolName, "tool_call", l.ToolCallID, "err", why)
	key := lateKey{l.RunID, l.ToolCallID}
	s.held.Store(key, l)
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		defer s.held.Delete(key)
		wait := resultBackoff
		for try := 1; ; try++ {
			ctx, cancel := context.WithTimeout(s.ctx, s.cfg.LeaseTTL/3)
			l.RecordedAt = s.now()
			stored, err := s.store.RecordLateResult(ctx, l)
			cancel()
			switch {
			case err == nil && stored:
				s.cfg.Logger.Info("run: a tool's result is recorded as the call's late result", "run", l.RunID, "tool", l.ToolName, "tool_call", l.ToolCallID, "tries", try)
				return
			case err == nil:
				s.cfg.Logger.Info("run: a tool's late result is not needed: the run stored the call's result after all, or its late result was recorded before",
					"run", l.RunID, "tool_call", l.ToolCallID)
				return
			case errors.Is(err, ErrNoSuchCall):
				s.unstored(l, err) // the run is gone (retention removed it): the log is all that is left
				return
			case try == 1:
				s.cfg.Logger.Warn("run: recording a late result failed; trying again until it is recorded or the instance stops",
					"run", l.RunID, "tool_call", l.ToolCallID, "err", err)
			}
			select {
			case <-time.After(wait):
			case <-s.ctx.Done():
				s.lastTry(l, err)
				return
			}
			wait = min(2*wait, lateBackoffMax)
		}
	}()
}

// lastTryTimeout bounds lastTry's one write: a closing instance does not wait long for a database
// that has not answered.
const lastTryTimeout = 5 * time.Second

// lastTry records l, a tool's answer this instance holds (why: the last reason it could not be
// stored), as the call's late result once more while the service closes (a graceful stop's
// deadline passed, or Close), within min(LeaseTTL/3, lastTryTimeout) of its own: the answer is
// kept, not cut. Only if that fails too is the log the one place that holds it (unstored).
func (s *Service) lastTry(l runtype.LateResult, why error) {
	defer s.held.Delete(lateKey{l.RunID, l.ToolCallID})
	ctx, cancel := context.WithTimeout(context.Background(), min(s.cfg.LeaseTTL/3, lastTryTimeout))
	defer cancel()
	l.RecordedAt = s.now()
	stored, err := s.store.RecordLateResult(ctx, l)
	switch {
	case err != nil:
		s.unstored(l, errors.Join(why, err))
	case stored:
		s.cfg.Logger.Info("run: a tool's result is recorded as the call's late result as the instance stops", "run", l.RunID, "tool", l.ToolName, "tool_call", l.ToolCallID)
	}
}

// lateKey names a call's result in Service.held.
type lateKey struct{ runID, callID string }

// recordedLate returns the late result of the run's call callID, for recovery's reason, nil when
// none is recorded (or it cannot be read now: the reason then says one may come, which stays
// true). When this instance is the one holding it (it gave the run up and now recovers it
// itself, as a lone instance does), it records it first, so that the reason can say what it is
// rather than that it may come.
func (s *Service) recordedLate(ctx context.Context, runID, callID string) *runtype.LateResult {
	if v, ok := s.held.Load(lateKey{runID, callID}); ok {
		l := v.(runtype.LateResult)
		l.RecordedAt = s.now()
		if _, err := s.store.RecordLateResult(ctx, l); err != nil {
			s.cfg.Logger.Warn("recovery: cannot record the late result this instance holds; it goes on trying", "run", runID, "tool_call", callID, "err", err)
		}
	}
	list, err := s.store.LateResults(ctx, runID)
	if err != nil {
		s.cfg.Logger.Warn("recovery: cannot read late results; the reason says one may come", "run", runID, "err", err)
		return nil
	}
	for i := range list {
		if list[i].ToolCallID == callID {
			return &list[i]
		}
	}
	return nil
}

// unstored logs the outcome of a tool that ran but could be stored neither with its run nor as
// its late result (the database did not answer before the service closed, or the run is gone), so that whoever is asked to
// approve the interrupted call again can still find what it returned, in this instance's log.
func (s *Service) unstored(l runtype.LateResult, err error) {
	const most = 4096
	res := string(l.Result)
	if len(res) > most {
		res = res[:most] + "…"
	}
	s.cfg.Logger.Error("run: a tool ran but its result could not be stored", "run", l.RunID, "tool", l.ToolName, "tool_call", l.ToolCallID,
		"instance", s.cfg.InstanceID, "result", res, "suspend_payload", clip(string(l.SuspendPayload), most), "tool_error", deref(l.Error), "err", err)
}
