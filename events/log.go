package events

import (
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
)

// Append stores evs as the events after seq `last` of a run, all at instant at, inside the caller's
// transaction (so they commit with the state they describe). It returns the new last seq. The
// (run_id, seq) primary key makes a second writer of the same seq fail instead of forking the log.
func Append(tx *gorm.DB, runID string, last int64, at time.Time, evs ...Event) (int64, error) {
	if len(evs) == 0 {
		return last, nil
	}
	rows := make([]gormstore.Event, len(evs))
	for i, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			return last, fmt.Errorf("encode %s event: %w", ev.Type, err)
		}
		rows[i] = gormstore.Event{RunID: runID, Seq: last + int64(i) + 1, Type: string(ev.Type), Data: string(data), CreatedAt: at}
	}
	if err := tx.Create(&rows).Error; err != nil {
		return last, fmt.Errorf("append events of run %s: %w", runID, err)
	}
	return last + int64(len(evs)), nil
}

// List returns up to limit stored events of a run with seq > after, in seq order.
func List(db *gorm.DB, runID string, after int64, limit int) ([]Event, error) {
	var rows []gormstore.Event
	err := db.Where("run_id = ? AND seq > ?", runID, after).Order("seq").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, err)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		if err := json.Unmarshal([]byte(r.Data), &out[i]); err != nil {
			return nil, fmt.Errorf("decode event %s/%d: %w", runID, r.Seq, err)
		}
		out[i].RunID, out[i].Seq, out[i].Type, out[i].At = r.RunID, r.Seq, Type(r.Type), r.CreatedAt.UTC()
	}
	return out, nil
}
