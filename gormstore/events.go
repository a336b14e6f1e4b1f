package gormstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"

	"interlock/runs"
	"interlock/runtype"
)

// appendEvents stores evs as the events after seq `last` of a run, all at instant at, inside the
// caller's transaction, so they commit with the state they describe. The (run_id, seq) primary
// key makes a second writer of the same seq fail instead of forking the log. The outbox rows
// that announce them are written with them.
func (s *Store) appendEvents(tx *gorm.DB, runID string, last int64, at time.Time, evs []runtype.Event, outbox []runs.Announcement) error {
	return s.writeIn(tx, func(_ *gorm.DB, rows *groupRows) error { return rows.addEvents(runID, last, at, evs, outbox) })
}

// eventRows encodes evs as the rows after seq last of run runID.
func eventRows(runID string, last int64, at time.Time, evs []runtype.Event) ([]Event, error) {
	rows := make([]Event, len(evs))
	for i, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("encode %s event: %w", ev.Type, err)
		}
		rows[i] = Event{RunID: runID, Seq: last + int64(i) + 1, Type: string(ev.Type), Data: string(data), CreatedAt: runtype.StoredTime(at)}
	}
	return rows, nil
}

// Events implements runs.Store.
func (s *Store) Events(ctx context.Context, runID string, after int64, limit int) ([]runtype.Event, error) {
	var rows []Event
	err := s.db.WithContext(ctx).Where("run_id = ? AND seq > ?", runID, after).Order("seq").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list events of run %s: %w", runID, err)
	}
	out := make([]runtype.Event, len(rows))
	for i, r := range rows {
		if err := json.Unmarshal([]byte(r.Data), &out[i]); err != nil {
			return nil, fmt.Errorf("decode event %s/%d: %w", runID, r.Seq, err)
		}
		out[i].RunID, out[i].Seq, out[i].Type, out[i].At = r.RunID, r.Seq, runtype.EventType(r.Type), r.CreatedAt.UTC()
	}
	return out, nil
}
