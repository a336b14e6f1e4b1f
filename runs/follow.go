package runs

import (
	"context"
	"errors"
	"sync"

	"interlock/fanout"
	"interlock/runtype"
)

const followBatch = 500

// Follow streams a run's events with seq > after: the stored ones first, then new ones as they
// are stored, each exactly once and in seq order. The channel closes after RUN_FINISHED or
// RUN_FAILED, at once when the run is finished and nothing after `after` remains, when the run
// finishes while the stream waits beyond its last event, or when ctx ends.
// Who may call: a viewer, of the run's resource; a requester, of the approval requests it made.
// Errors: UNAUTHENTICATED, FORBIDDEN (neither role); NOT_FOUND for an unknown run or one the
// principal may not read; BAD_USER_INPUT for a negative after, or an after beyond
// the last event of a finished run (there will never be such an event); UNAVAILABLE when storage
// could not be reached. A stream that breaks later (storage fails while it reads) just closes:
// FollowAs tells its caller why.
//
// Events are always read from storage; the hub only wakes the reader (at once for events stored
// here, from the instance's notify loop for events stored elsewhere). So a slow reader never
// loses an event.
func (s *Service) Follow(ctx context.Context, runID string, after int64) (<-chan runtype.Event, error) {
	return FollowAs(s, ctx, runID, after, func(_ context.Context, ev runtype.Event) (runtype.Event, error) { return ev, nil }, nil)
}

// FollowAs is Follow with each event turned into what the caller streams by conv, in the
// stream's own goroutine: a transport needs no goroutine of its own to translate the events,
// and at ten thousand open subscriptions one goroutine less each is some 70 MiB. conv gets the
// stream's context (ended when the client goes or the service closes); an error from it ends
// the stream, as a failed read of the events does.
//
// A stream that ends for a failure — a read of storage (UNAVAILABLE when storage could not be
// reached) or conv — rather than because the run finished or ctx ended, calls failed (when not
// nil) with the error just before its channel closes, in the stream's goroutine: the transport
// then tells the client it must resubscribe with after: its last seq, instead of letting a bare
// end of the stream pass for the end of the run.
func FollowAs[T any](s *Service, ctx context.Context, runID string, after int64, conv func(context.Context, runtype.Event) (T, error), failed func(error)) (<-chan T, error) {
	if err := mayFollow(s, ctx, runID); err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "after must be 0 or more, not %d", after)
	}
	// Subscribed before reading where the run stands, so that no wake-up is missed; busy until
	// the stream is set up, so that one arriving meanwhile only asks for another read.
	st := &stream[T]{s: s, runID: runID, last: after, conv: conv, failed: failed, busy: true}
	st.sub = s.runHub.SubscribeFunc(runID, st.wake)
	progress, err := s.store.Progress(ctx, []string{runID})
	p, found := progress[runID]
	if err != nil || !found || !visible(ctx, p.ResourceID) {
		st.sub.Close()
		if err == nil {
			err = notFound(runID)
		}
		return nil, err
	}
	if p.Status.Finished() && after > p.LastSeq {
		st.sub.Close()
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "after is %d, beyond the last event (%d) of run %s, which has finished", after, p.LastSeq, runID)
	}
	st.known, st.finished = p.LastSeq, p.Status.Finished() && p.LastSeq <= after
	st.ctx, st.cancel = s.streamContext(ctx)
	st.out = make(chan T)
	st.stopWake = context.AfterFunc(st.ctx, st.wake) // an ended stream closes at once
	go st.drain()
	return st.out, nil
}

// mayFollow checks that the principal of ctx may follow the run: a viewer any run it sees (the
// resource is checked with the run's progress), a requester the requests it made, as it may
// read them (Get: NOT_FOUND for any other run, as for an unknown one).
func mayFollow(s *Service, ctx context.Context, runID string) error {
	if p := runtype.PrincipalFrom(ctx); p != nil && !p.Has(runtype.RoleViewer) && p.Has(runtype.RoleRequester) {
		_, err := s.Get(ctx, runID)
		return err
	}
	return require(ctx, runtype.RoleViewer, "following runs")
}

// stream is one Follow. It has a goroutine only while it has something to do — catching up,
// handing an event to a slow reader, ending — not while it waits for the next event: a wake-up
// of the run's hub starts one. Ten thousand subscriptions waiting on quiet runs thus hold no
// stack of their own (the transport's goroutine per subscription remains).
type stream[T any] struct {
	s        *Service
	runID    string
	conv     func(context.Context, runtype.Event) (T, error)
	failed   func(error)
	sub      *fanout.Sub[struct{}]
	ctx      context.Context
	cancel   context.CancelFunc
	stopWake func() bool
	out      chan T

	// Read and written by the one goroutine that drains (busy says there is one).
	last     int64 // the seq of the last event sent
	known    int64 // the run's last seq when the stream began
	finished bool  // nothing more will come: end
	err      error // why the stream ends early, for failed

	mu    sync.Mutex
	busy  bool // a goroutine drains (or the stream is being set up)
	again bool // woken while busy: read once more before going idle
	ended bool
}

// wake asks for the stored events to be read: by a new goroutine when none drains, or by the
// one that does, once more, when it is done. It never blocks: the hub calls it as it publishes.
func (st *stream[T]) wake() {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.ended:
	case st.busy:
		st.again = true
	default:
		st.busy = true
		go st.drain()
	}
}

// drain sends what is stored after the last event sent until nothing more is, then goes idle
// (or ends the stream).
func (st *stream[T]) drain() {
	for {
		if st.step() {
			st.end()
			return
		}
		st.mu.Lock()
		if !st.again {
			st.busy = false
			st.mu.Unlock()
			return
		}
		st.again = false
		st.mu.Unlock()
	}
}

// step reads and sends the stored events after the last one sent, and reports whether the
// stream is over.
func (st *stream[T]) step() (over bool) {
	ctx, s := st.ctx, st.s
	for {
		if st.finished || ctx.Err() != nil {
			return true
		}
		evs, err := s.store.Events(ctx, st.runID, st.last, followBatch)
		if err != nil {
			st.fail("follow run: read events", err, "seq", st.last)
			return true
		}
		for _, ev := range evs {
			v, err := st.conv(ctx, ev)
			if err != nil {
				st.fail("follow run: convert event", err, "seq", ev.Seq)
				return true
			}
			select {
			case st.out <- v:
			case <-ctx.Done():
				return true
			}
			st.last = ev.Seq
			if ev.Type.Terminal() {
				return true
			}
		}
		if len(evs) == followBatch {
			continue
		}
		if len(evs) == 0 && st.last > st.known {
			// Waiting beyond the last event: the run may have finished meanwhile.
			finished, err := s.finishedBefore(ctx, st.runID, st.last)
			if err != nil {
				st.fail("follow run: read progress", err, "seq", st.last)
				return true
			}
			return finished
		}
		return false
	}
}

// fail records why the stream ends early, unless it ends because its context did. An internal
// error is logged; storage being unavailable is not, once per stream: the service logs the
// outage itself (health.go), and the client is told.
func (st *stream[T]) fail(msg string, err error, args ...any) {
	if st.ctx.Err() != nil {
		return
	}
	st.err = err
	if !errors.Is(err, runtype.ErrUnavailable) {
		st.s.cfg.Logger.Error(msg, append([]any{"run", st.runID, "err", err}, args...)...)
	}
}

// end closes the stream; only the draining goroutine calls it, once.
func (st *stream[T]) end() {
	st.mu.Lock()
	st.ended = true
	st.mu.Unlock()
	st.stopWake()
	st.sub.Close()
	if st.err != nil && st.failed != nil && st.ctx.Err() == nil {
		st.failed(st.err)
	}
	st.cancel()
	close(st.out)
}

// finishedBefore reports whether the run has finished with its last event at or before seq.
func (s *Service) finishedBefore(ctx context.Context, runID string, seq int64) (bool, error) {
	progress, err := s.store.Progress(ctx, []string{runID})
	if err != nil {
		return false, err
	}
	p, found := progress[runID]
	return !found || p.Status.Finished() && p.LastSeq <= seq, nil
}

// WatchFilter selects the runs WatchSuspended reports, with the meaning of ListSuspendedParams.
type WatchFilter struct {
	AgentID    *string
	ThreadID   *string
	ResourceID *string
	// External, when not nil, keeps only runs of external agents (true) or of the others.
	External *bool
}

// RunChange is a change of the suspended set with the run as it is now.
type RunChange struct {
	Kind ChangeKind
	Run  *runtype.Run
}

// WatchSuspended reports runs entering (SUSPENDED) and leaving (LEFT) the set of suspended runs
// that match f, until ctx ends. A watcher that falls far behind is ended (its channel closes);
// it subscribes again and lists the suspended runs to catch up.
func (s *Service) WatchSuspended(ctx context.Context, f WatchFilter) (<-chan RunChange, error) {
	if err := require(ctx, runtype.RoleViewer, "watching runs"); err != nil {
		return nil, err
	}
	principal := runtype.PrincipalFrom(ctx)
	sub := s.watched.Subscribe(changesTopic)
	ctx, cancel := s.streamContext(ctx)
	out := make(chan RunChange)
	go func() {
		defer close(out)
		defer cancel()
		defer sub.Close()
		for {
			var ch RunChange
			var ok bool
			select {
			case <-ctx.Done():
				return
			case ch, ok = <-sub.C:
				if !ok {
					return
				}
			}
			if !f.matches(ch.Run, s.isExternal) || !principal.Sees(ch.Run.ResourceID) {
				continue
			}
			select {
			case out <- ch:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// watchLoop reads the run of each suspended-set change once, however many watchers this
// instance has, and hands it to all of them.
// It starts subscribed (Start subscribes it before starting it), so no change is missed.
func (s *Service) watchLoop(sub *fanout.Sub[Change]) {
	defer s.loops.Done()
	for {
		s.watch(sub)
		sub.Close()
		if s.ctx.Err() != nil {
			return
		}
		sub = s.changes.Subscribe(changesTopic)
	}
}

func (s *Service) watch(sub *fanout.Sub[Change]) {
	for {
		var ch Change
		var ok bool
		select {
		case <-s.ctx.Done():
			return
		case ch, ok = <-sub.C:
			if !ok {
				// Fell behind: the watchers' view may have holes, so end them; they resync.
				s.cfg.Logger.Warn("watch: too many suspended-set changes at once; watchers resubscribe")
				s.watched.CloseAll(changesTopic)
				return
			}
		}
		if s.watched.Count(changesTopic) == 0 {
			continue
		}
		r, err := s.store.GetRun(s.ctx, ch.RunID)
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			// A change that cannot be shown must not be lost in silence (a watcher's count
			// would stay wrong until the next change): end the watchers, as when they fall
			// behind, so that they subscribe again and re-read what they show.
			s.cfg.Logger.Warn("watch: read run; watchers resubscribe", "run", ch.RunID, "err", err)
			s.watched.CloseAll(changesTopic)
			continue
		}
		if r == nil {
			continue // purged since: there is nothing left to show
		}
		if ch.Kind != ChangeLeft && r.Status != runtype.StatusSuspended {
			continue // a suspension already decided is not news; its LEFT follows
		}
		s.watched.Publish(changesTopic, RunChange{Kind: ch.Kind, Run: r})
	}
}

func (f WatchFilter) matches(r *runtype.Run, external func(agentID string) bool) bool {
	if f.External != nil && external(r.AgentID) != *f.External {
		return false
	}
	if f.AgentID != nil {
		if r.AgentID != *f.AgentID {
			return false
		}
	} else if r.ParentRunID != nil {
		return false
	}
	if f.ThreadID != nil && (r.ThreadID == nil || *r.ThreadID != *f.ThreadID) {
		return false
	}
	if f.ResourceID != nil && (r.ResourceID == nil || *r.ResourceID != *f.ResourceID) {
		return false
	}
	return true
}

// streamContext ends a stream when its client goes (ctx) or when the service closes, so that a
// stopping server completes its subscriptions instead of leaving them hanging.
func (s *Service) streamContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// Followers returns how many streams of this instance follow the run (for leak checks).
func (s *Service) Followers(runID string) int { return s.runHub.Count(runID) }

// Watchers is how many WatchSuspended streams this instance is serving (tests wait on it
// rather than sleep until a subscription is active).
func (s *Service) Watchers() int { return s.watched.Count(changesTopic) }
