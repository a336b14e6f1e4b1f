package gormstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"interlock/runs"
	"interlock/runtype"
)

// claim is a new run's claims of its idempotency key and its thread, made in its transaction
// with those of the runs inserted with it (group commit), and where its refusal goes.
type claim struct {
	n runs.NewRun
	// refuse is told why the run is not stored (a *runs.DuplicateRequest or
	// runs.ErrThreadOwned); it is not called when the run is stored.
	refuse func(error)
	// keyed: the run holds its key (claimed, or taken over), to be given back if its thread
	// is refused.
	keyed bool
	// why is the refusal (nil: none), told to refuse once the claims are settled.
	why error
	// dupOf is the claim of the same group whose run the key names, when that is why the run
	// is refused: if that run is refused in turn, its key is given back, and this run claims
	// it again (claimAll).
	dupOf *claim
}

// refused reports whether c's run is refused.
func (c *claim) refused() bool { return c.why != nil }

// claimAll makes the claims of cs in tx, in their order, and returns those whose runs may be
// stored. Whatever the number of runs, it is four statements: one INSERT of every key not yet
// claimed and one locking read of all of them, then the same for the threads. Each claim is the
// compare-and-set claimKey and claimThread describe; made together they answer what they would
// have answered one after the other in cs's order (a key or thread new to the database goes to
// the first run that names it). Keys, then threads, are inserted and locked in the order of
// their ids, so that concurrent transactions on MySQL take their locks in one order and do not
// deadlock on each other.
//
// A run refused nothing is claimed for in vain: its key is given back when its thread is
// refused, in the same transaction, and a thread is inserted only for the runs whose keys held.
//
// A run refused its key because it names another run of cs which is then refused its thread
// (and gives the key back) claims again, with the others so refused, in a round of their own:
// as if it had come after that run, one after the other, it finds the key free. Only then is
// each refused run told why.
func (s *Store) claimAll(tx *gorm.DB, cs []*claim) ([]*claim, error) {
	for round := cs; len(round) > 0; {
		if err := s.claimKeys(tx, round); err != nil {
			return nil, err
		}
		if err := s.claimThreads(tx, round); err != nil {
			return nil, err
		}
		var again []*claim
		for _, c := range round {
			if c.dupOf != nil && c.dupOf.refused() && !c.dupOf.keyed {
				c.why, c.dupOf = nil, nil
				again = append(again, c)
			}
		}
		round = again
	}
	var out []*claim
	for _, c := range cs {
		if c.refused() {
			c.refuse(c.why)
		} else {
			out = append(out, c)
		}
	}
	return out, nil
}

// heldKey is an idempotency key's row as a claim reads it, with the status of the run it names.
type heldKey struct {
	KeyHash     string
	RunID       string
	RequestHash string
	Status      *string
}

// claimKeys is the compare-and-set of the idempotency keys of cs: each key's row is inserted
// naming its run when there is none, then all are read under a lock. A run whose key names
// another run is refused with that run (*runs.DuplicateRequest). Racing claims queue on the
// row's key as a thread's do (claimThreads). A key claimed WhilePending is read with the status
// of its run (a locking read too, after the keys', so that on MySQL both are the latest
// committed, whatever snapshot the transaction took before), and when that run no longer waits
// the row is moved to the claiming run: the claim is one lookup however many runs held the key
// before.
func (s *Store) claimKeys(tx *gorm.DB, cs []*claim) error {
	var rows []IdempotencyKey
	seen := map[string]bool{}
	for _, c := range cs {
		k := c.n.Idempotency
		if k == nil || seen[k.KeyHash] {
			continue
		}
		seen[k.KeyHash] = true
		rows = append(rows, IdempotencyKey{KeyHash: k.KeyHash, RunID: c.n.Run.ID, RequestHash: k.RequestHash, CreatedAt: runtype.StoredTime(c.n.Run.CreatedAt)})
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(a, b IdempotencyKey) int { return cmp.Compare(a.KeyHash, b.KeyHash) })
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error; err != nil {
		return fmt.Errorf("claim idempotency keys: %w", err)
	}
	hashes := make([]string, len(rows))
	for i, r := range rows {
		hashes[i] = r.KeyHash
	}
	q := tx.Table("idempotency_keys").Select("key_hash, run_id, request_hash").Where("key_hash IN ?", hashes).Order("key_hash")
	if s.mysql {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var got []heldKey
	if err := q.Find(&got).Error; err != nil {
		return fmt.Errorf("read idempotency keys: %w", err)
	}
	// The status of the runs the keys name, read apart and only for runs other than this
	// group's: a locking read of a run not inserted yet (a key this group just claimed names its
	// own new run) would lock the gap where every new run goes, and concurrent claims deadlock on
	// it. The runs read are stored ones: their rows alone are locked.
	mine := make(map[string]bool, len(cs))
	for _, c := range cs {
		mine[c.n.Run.ID] = true
	}
	var others []string
	for _, h := range got {
		if !mine[h.RunID] {
			others = append(others, h.RunID)
		}
	}
	if len(others) > 0 {
		slices.Sort(others)
		rq := tx.Table("agent_runs").Select("id, status").Where("id IN ?", others).Order("id")
		if s.mysql {
			rq = rq.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		var statuses []struct {
			ID     string
			Status string
		}
		if err := rq.Find(&statuses).Error; err != nil {
			return fmt.Errorf("read the runs of idempotency keys: %w", err)
		}
		byID := make(map[string]string, len(statuses))
		for _, st := range statuses {
			byID[st.ID] = st.Status
		}
		for i := range got {
			if st, ok := byID[got[i].RunID]; ok {
				got[i].Status = &st
			}
		}
	}
	held := make(map[string]heldKey, len(got))
	for _, h := range got {
		held[h.KeyHash] = h
	}
	byRun := make(map[string]*claim, len(cs))
	for _, c := range cs {
		byRun[c.n.Run.ID] = c
	}
	for _, c := range cs {
		k, r := c.n.Idempotency, c.n.Run
		if k == nil {
			continue
		}
		h, ok := held[k.KeyHash]
		switch {
		case !ok:
			return fmt.Errorf("claim idempotency key: no row after inserting it")
		case h.RunID == r.ID:
			c.keyed = true
		case k.WhilePending && (h.Status == nil || *h.Status != string(runtype.StatusSuspended)):
			// The run it named no longer waits: the key is free, and r takes it over.
			err := tx.Model(&IdempotencyKey{}).Where("key_hash = ? AND run_id = ?", k.KeyHash, h.RunID).
				Updates(map[string]any{"run_id": r.ID, "request_hash": k.RequestHash, "created_at": runtype.StoredTime(r.CreatedAt)}).Error
			if err != nil {
				return fmt.Errorf("take over idempotency key: %w", err)
			}
			c.keyed = true
			held[k.KeyHash] = heldKey{KeyHash: k.KeyHash, RunID: r.ID, RequestHash: k.RequestHash} // not stored yet: no status
		default:
			c.why = &runs.DuplicateRequest{RunID: h.RunID, SameRequest: h.RequestHash == k.RequestHash}
			c.dupOf = byRun[h.RunID] // nil: a run stored before
		}
	}
	return nil
}

// claimThreads is the compare-and-set of the threads' owners for the runs of cs not refused
// yet: the row of each thread is inserted when there is none (its first run's resource, nil
// too, becomes the owner), then all are read under a lock and compared with each run's
// resource; a run whose resource is not its thread's owner is refused (runs.ErrThreadOwned),
// and the key it claimed is given back. Racing first runs queue on the row's key: on MySQL the
// second INSERT waits for the first transaction and then finds its row (or, if it rolled back,
// inserts its own); SQLite has one writer. The read is a locking one on MySQL so that it sees
// the row committed by another transaction, whatever snapshot an earlier read of the same
// (grouped) transaction took.
func (s *Store) claimThreads(tx *gorm.DB, cs []*claim) error {
	var rows []Thread
	seen := map[string]bool{}
	for _, c := range cs {
		r := c.n.Run
		if c.refused() || r.ThreadID == nil || seen[*r.ThreadID] {
			continue
		}
		seen[*r.ThreadID] = true
		rows = append(rows, Thread{ID: *r.ThreadID, ResourceID: r.ResourceID, CreatedAt: runtype.StoredTime(r.CreatedAt)})
	}
	if len(rows) == 0 {
		return nil
	}
	slices.SortFunc(rows, func(a, b Thread) int { return cmp.Compare(a.ID, b.ID) })
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error; err != nil {
		return fmt.Errorf("claim %s: %w", threadNames(rows), err)
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	q := tx.Model(&Thread{}).Where("id IN ?", ids).Order("id")
	if s.mysql {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var owners []Thread
	if err := q.Find(&owners).Error; err != nil {
		return fmt.Errorf("read the owners of %s: %w", threadNames(rows), err)
	}
	owner := make(map[string]*string, len(owners))
	for _, o := range owners {
		owner[o.ID] = o.ResourceID
	}
	for _, c := range cs {
		r := c.n.Run
		if c.refused() || r.ThreadID == nil {
			continue
		}
		o, ok := owner[*r.ThreadID]
		if !ok {
			return fmt.Errorf("claim thread %s: no row after inserting it", *r.ThreadID)
		}
		if sameResource(o, r.ResourceID) {
			continue
		}
		c.why = runs.ErrThreadOwned
		if c.keyed {
			if err := tx.Where("key_hash = ? AND run_id = ?", c.n.Idempotency.KeyHash, r.ID).Delete(&IdempotencyKey{}).Error; err != nil {
				return fmt.Errorf("give back the idempotency key of run %s: %w", r.ID, err)
			}
			c.keyed = false
		}
	}
	return nil
}

// threadNames names threads in an error: "thread ID" for one, else how many.
func threadNames(rows []Thread) string {
	if len(rows) == 1 {
		return "thread " + rows[0].ID
	}
	return fmt.Sprintf("%d threads", len(rows))
}

// sameResource reports whether a and b are the same resource, or both none.
func sameResource(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// ReleaseKey implements runs.Store: one DELETE, conditioned on the run the key names, so that
// a release racing a claim that moved the key to another run never frees that run's key.
func (s *Store) ReleaseKey(ctx context.Context, keyHash, runID string) error {
	err := s.db.WithContext(ctx).Where("key_hash = ? AND run_id = ?", keyHash, runID).Delete(&IdempotencyKey{}).Error
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}
