package gormstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"gorm.io/gorm"

	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// groupCommit writes the run writes that callers make at the same moment — new runs,
// checkpoints, finishes of different runs — in one transaction, with one multi-row INSERT of
// all their runs and one of all their events. Each run's writes are made by its lease holder
// one at a time, so concurrent writes are of different runs, and most of a write's cost is
// round trips (BEGIN, each statement, COMMIT) rather than work: sharing them is what lets one
// instance start and finish runs faster than one transaction each would allow.
//
// A write waits only while the transactions allowed at once are busy (inflight; one on SQLite,
// whose single writer connection would make more queue anyway): alone, it commits at once. When
// a grouped transaction fails before its COMMIT (a lost lease, a deadlock past its retries), it
// is rolled back whole and every caller makes its write again alone, at the same time as the
// others, so each gets exactly the answer it would have had without the grouping.
type groupCommit struct {
	s        *Store
	inflight int
	max      int // at most this many writes share one transaction: maxGroup (1 under NoGrouping)

	mu      sync.Mutex
	queue   []*groupWrite
	running int // transactions being committed

	tracer GroupTracer // nil: shared transactions are not traced

	// beforeCommit, when set (by tests only), runs in a group's transaction after its writes,
	// just before its COMMIT: the one place a test can make a COMMIT fail.
	beforeCommit func(tx *gorm.DB)
}

// GroupTracer follows, for a tracing backend, the transactions that group commit shares
// between the writes of several callers: their statements belong to no one caller's trace.
// A write committed alone needs none of it: its statements run in its caller's context.
type GroupTracer interface {
	// StartGroup is called as a shared transaction begins, with base (which carries the values
	// of the first caller's context but none of their deadlines) and the callers' writes. It
	// returns the context the transaction's statements run in and the function to call once,
	// when the transaction is over.
	StartGroup(base context.Context, members []GroupMember) (context.Context, func(GroupEnd))
}

// GroupMember is one caller's write in a shared transaction.
type GroupMember struct {
	Ctx    context.Context // the caller's
	Write  string          // what it writes: "insert run", "checkpoint" or "finish"
	Queued time.Time       // when it joined the queue: it waited from then until the group began
}

// GroupEnd is how a shared transaction ended.
type GroupEnd struct {
	// Err is the transaction's error, nil when it committed.
	Err error
	// Alone: it failed before its COMMIT and was rolled back whole, and each write is made
	// again in a transaction of its own, so Err is not the members' answer (theirs come from
	// those). Otherwise Err, or its absence, is every member's answer.
	Alone bool
}

// TraceGroups makes the shared transactions of s known to t (nil: to nobody); it returns s.
// Set it before the store is used.
func (s *Store) TraceGroups(t GroupTracer) *Store {
	s.group.tracer = t
	return s
}

// groupWrite is one caller's write: it adds its statements to tx and its rows to rows.
type groupWrite struct {
	ctx    context.Context
	what   string // for GroupMember.Write
	queued time.Time
	write  func(tx *gorm.DB, rows *groupRows) error
	done   chan error
	taken  bool // by a committer, under groupCommit.mu: the answer will come on done
}

// maxGroup bounds the writes of one transaction, so that its statement stays a sensible size.
const maxGroup = 64

// errAlone answers the writes of a group that failed before its COMMIT: each caller makes its
// write again alone, in its own goroutine and with its own context.
var errAlone = errors.New("the group's transaction failed: write alone")

func newGroupCommit(s *Store, inflight int) *groupCommit {
	return &groupCommit{s: s, inflight: inflight, max: maxGroup}
}

// do makes write (what names it, for traces), with writes of other callers when they come at the same moment. A caller
// whose ctx ends while its write still waits in the queue leaves at once with ctx.Err().
func (g *groupCommit) do(ctx context.Context, what string, write func(tx *gorm.DB, rows *groupRows) error) error {
	w := &groupWrite{ctx: ctx, what: what, queued: time.Now(), write: write, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if g.running < g.inflight {
		g.running++
		go g.commitQueued()
	}
	g.mu.Unlock()
	var err error
	select {
	case err = <-w.done:
	case <-ctx.Done():
		g.mu.Lock()
		if !w.taken {
			g.queue = slices.DeleteFunc(g.queue, func(q *groupWrite) bool { return q == w })
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Unlock()
		err = <-w.done
	}
	if errors.Is(err, errAlone) {
		return g.s.alone(ctx, write)
	}
	return err
}

// commitQueued commits what waits, a group at a time, until nothing does.
func (g *groupCommit) commitQueued() {
	for {
		g.mu.Lock()
		n := min(len(g.queue), g.max)
		if n == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		group := g.queue[:n:n]
		for _, w := range group {
			w.taken = true
		}
		g.queue = append([]*groupWrite(nil), g.queue[n:]...)
		g.mu.Unlock()
		g.commit(group)
	}
}

// commit makes the writes of group in one transaction. When that fails before its COMMIT, it
// was rolled back whole, and each caller makes its write again alone (errAlone). When the
// COMMIT itself fails, the database may have committed it: every caller gets that error, as a
// write of its own would.
func (g *groupCommit) commit(group []*groupWrite) {
	live := group[:0]
	for _, w := range group {
		if err := w.ctx.Err(); err != nil {
			w.done <- err // its caller gave up before anything was written
			continue
		}
		live = append(live, w)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		live[0].done <- g.s.alone(live[0].ctx, live[0].write)
		return
	}
	// No caller's cancellation may roll back the others' writes.
	base, traced := context.WithoutCancel(live[0].ctx), func(GroupEnd) {}
	if g.tracer != nil {
		members := make([]GroupMember, len(live))
		for i, w := range live {
			members[i] = GroupMember{Ctx: w.ctx, Write: w.what, Queued: w.queued}
		}
		base, traced = g.tracer.StartGroup(base, members)
	}
	ctx, cancel := context.WithTimeout(base, 30*time.Second)
	defer cancel()
	committing := false
	writes := make([]func(*gorm.DB, *groupRows) error, len(live))
	for i, w := range live {
		writes[i] = w.write
	}
	err := g.s.tx(ctx, func(tx *gorm.DB) error {
		err := g.s.writeIn(tx, writes...)
		committing = err == nil
		if committing && g.beforeCommit != nil {
			g.beforeCommit(tx)
		}
		return err
	})
	if err != nil && committing {
		err = fmt.Errorf("commit the writes of %d runs made together (they may or may not be stored): %w", len(live), err)
	}
	alone := err != nil && !committing
	traced(GroupEnd{Err: err, Alone: alone})
	if !alone {
		for _, w := range live {
			w.done <- err
		}
		return
	}
	for _, w := range live {
		w.done <- errAlone
	}
}

// alone makes write in a transaction of its own.
func (s *Store) alone(ctx context.Context, write func(tx *gorm.DB, rows *groupRows) error) error {
	return s.tx(ctx, func(tx *gorm.DB) error { return s.writeIn(tx, write) })
}

// writeIn makes writes in tx, then inserts the rows they added.
func (s *Store) writeIn(tx *gorm.DB, writes ...func(tx *gorm.DB, rows *groupRows) error) error {
	var rows groupRows
	for _, w := range writes {
		if err := w(tx, &rows); err != nil {
			return err
		}
	}
	return s.insertRows(tx, &rows)
}

// groupRows are the rows of the writes of one transaction, inserted at its end, each table's
// in one statement: the new runs, then the events, then the outbox rows that announce them,
// then the memory messages of finished runs.
type groupRows struct {
	// claims are the new runs whose idempotency keys and threads are claimed first, together
	// (claim.go): the run and its events are added for those whose claims held.
	claims   []*claim
	runs     []map[string]any
	events   []Event
	outbox   []Notification
	messages []Message
	// calls are the rows of calls a policy let through (Checkpoint.AutoApproved).
	calls []ToolCall
}

// addAutoApproved adds the rows of the calls c's policy let through.
func (r *groupRows) addAutoApproved(c runs.Checkpoint) {
	for _, d := range c.AutoApproved {
		r.calls = append(r.calls, autoApprovedRow(d, c.At))
	}
}

// addEvents adds evs as the events after seq last of run runID, with the outbox rows that
// announce them (as the service gave them: the store decides nothing of what is announced).
func (r *groupRows) addEvents(runID string, last int64, at time.Time, evs []runtype.Event, outbox []runs.Announcement) error {
	if len(evs) > 0 {
		rows, err := eventRows(runID, last, at, evs)
		if err != nil {
			return err
		}
		r.events = append(r.events, rows...)
	}
	for _, a := range outbox {
		r.outbox = append(r.outbox, Notification{
			EventID: a.EventID, Target: a.Target, Kind: string(a.Kind), RunID: a.RunID, Payload: string(a.Payload),
			State: string(notify.StatePending), NextAttemptAt: runtype.StoredTime(a.At), CreatedAt: runtype.StoredTime(a.At),
		})
	}
	return nil
}

// insertRows makes the claims of r's new runs, then inserts the rows in tx, and the outbox rows
// of their events.
func (s *Store) insertRows(tx *gorm.DB, r *groupRows) error {
	if len(r.claims) > 0 {
		held, err := s.claimAll(tx, r.claims)
		if err != nil {
			return err
		}
		for _, c := range held {
			if err := s.addRun(r, c.n); err != nil {
				return err
			}
		}
	}
	if len(r.runs) > 0 {
		if err := tx.Model(&Run{}).Create(r.runs).Error; err != nil {
			return fmt.Errorf("insert %s: %w", r.whose(func(i int) string { return r.runs[i]["id"].(string) }, len(r.runs)), err)
		}
	}
	if len(r.events) > 0 {
		if err := tx.Create(&r.events).Error; err != nil {
			return fmt.Errorf("append events of %s: %w", r.whose(func(i int) string { return r.events[i].RunID }, len(r.events)), err)
		}
	}
	if len(r.calls) > 0 {
		if err := tx.Create(&r.calls).Error; err != nil {
			return fmt.Errorf("record the calls policies let through of %s: %w", r.whose(func(i int) string { return r.calls[i].RunID }, len(r.calls)), err)
		}
	}
	if len(r.outbox) > 0 {
		if err := tx.Create(&r.outbox).Error; err != nil {
			return fmt.Errorf("write the notifications of %s: %w", r.whose(func(i int) string { return r.outbox[i].RunID }, len(r.outbox)), err)
		}
	}
	if len(r.messages) > 0 {
		if err := tx.Create(&r.messages).Error; err != nil {
			return fmt.Errorf("store the thread messages of %s: %w", r.whose(func(i int) string { return r.messages[i].RunID }, len(r.messages)), err)
		}
	}
	return nil
}

// whose names the run of n rows (id(i) is the run of row i) in an error: "run ID" when they
// are all of one run, else how many runs.
func (r *groupRows) whose(id func(i int) string, n int) string {
	seen := map[string]bool{}
	for i := range n {
		seen[id(i)] = true
	}
	if len(seen) == 1 {
		return "run " + id(0)
	}
	return fmt.Sprintf("%d runs", len(seen))
}
