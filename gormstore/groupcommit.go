package gormstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm"

	"interlock/events"
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
// a grouped transaction fails for any reason (a lost lease, a deadlock past its retries), it is
// rolled back whole and every write in it is made again alone, so each caller gets exactly the
// answer it would have had without the grouping.
type groupCommit struct {
	s        *Store
	inflight int

	mu      sync.Mutex
	queue   []*groupWrite
	running int // transactions being committed
}

// groupWrite is one caller's write: it adds its statements to tx and its rows to rows.
type groupWrite struct {
	ctx   context.Context
	write func(tx *gorm.DB, rows *groupRows) error
	done  chan error
}

// maxGroup bounds the writes of one transaction, so that its statement stays a sensible size.
const maxGroup = 64

func newGroupCommit(s *Store, inflight int) *groupCommit {
	return &groupCommit{s: s, inflight: inflight}
}

// do makes write, with writes of other callers when they come at the same moment.
func (g *groupCommit) do(ctx context.Context, write func(tx *gorm.DB, rows *groupRows) error) error {
	w := &groupWrite{ctx: ctx, write: write, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if g.running < g.inflight {
		g.running++
		go g.commitQueued()
	}
	g.mu.Unlock()
	return <-w.done
}

// commitQueued commits what waits, a group at a time, until nothing does.
func (g *groupCommit) commitQueued() {
	for {
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		if n == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		group := g.queue[:n:n]
		g.queue = append([]*groupWrite(nil), g.queue[n:]...)
		g.mu.Unlock()
		g.commit(group)
	}
}

// commit makes the writes of group in one transaction or, when that fails, each alone.
func (g *groupCommit) commit(group []*groupWrite) {
	live := group[:0]
	for _, w := range group {
		if err := w.ctx.Err(); err != nil {
			w.done <- err // its caller gave up before anything was written
			continue
		}
		live = append(live, w)
	}
	if len(live) > 1 {
		// No caller's cancellation may roll back the others' writes.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), 30*time.Second)
		err := g.s.tx(ctx, func(tx *gorm.DB) error {
			var rows groupRows
			for _, w := range live {
				if err := w.write(tx, &rows); err != nil {
					return err
				}
			}
			return rows.insert(tx)
		})
		cancel()
		if err == nil {
			for _, w := range live {
				w.done <- nil
			}
			return
		}
	}
	for _, w := range live {
		w.done <- g.s.alone(w.ctx, w.write)
	}
}

// alone makes write in a transaction of its own.
func (s *Store) alone(ctx context.Context, write func(tx *gorm.DB, rows *groupRows) error) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		var rows groupRows
		if err := write(tx, &rows); err != nil {
			return err
		}
		return rows.insert(tx)
	})
}

// groupRows are the rows of the writes of one transaction, inserted at its end, each table's
// in one statement: the new runs, then the events, then the outbox rows of what they announce.
type groupRows struct {
	runs   []map[string]any
	events []Event
	outbox []announced
}

// announced is one write's events, for its outbox rows (notify).
type announced struct {
	runID string
	last  int64
	at    time.Time
	evs   []events.Event
}

// addEvents adds evs as the events after seq last of run runID.
func (r *groupRows) addEvents(runID string, last int64, at time.Time, evs []events.Event) error {
	if len(evs) == 0 {
		return nil
	}
	rows, err := eventRows(runID, last, at, evs)
	if err != nil {
		return err
	}
	r.events = append(r.events, rows...)
	r.outbox = append(r.outbox, announced{runID, last, at, evs})
	return nil
}

func (r *groupRows) insert(tx *gorm.DB) error {
	if len(r.runs) > 0 {
		if err := tx.Model(&Run{}).Create(r.runs).Error; err != nil {
			return fmt.Errorf("insert %d runs: %w", len(r.runs), err)
		}
	}
	if len(r.events) > 0 {
		if err := tx.Create(&r.events).Error; err != nil {
			return fmt.Errorf("append %d events: %w", len(r.events), err)
		}
	}
	for _, a := range r.outbox {
		if err := writeOutbox(tx, a.runID, a.last, a.at, a.evs); err != nil {
			return err
		}
	}
	return nil
}
