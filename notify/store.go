package notify

import (
	"context"
	"encoding/json"
	"time"
)

// Target is a webhook as the outbox knows it: one outbox row is written per event and target
// that takes the event's kind.
type Target struct {
	Name   string
	Events []Kind
}

// Takes reports whether t is sent events of kind k.
func (t Target) Takes(k Kind) bool {
	for _, e := range t.Events {
		if e == k {
			return true
		}
	}
	return false
}

// State is where a delivery is:
//
//	PENDING ──POST answered 2xx──▶ DELIVERED
//	   │ ▲
//	   └─┘ failed, attempts left: retried after a backoff
//	   │
//	   └──failed, no attempts left (or its webhook is gone)──▶ FAILED
type State string

// The delivery states.
const (
	StatePending   State = "PENDING"
	StateDelivered State = "DELIVERED"
	StateFailed    State = "FAILED"
)

// Delivery is one outbox row: one event for one webhook.
type Delivery struct {
	ID      int64
	EventID string
	Target  string
	Kind    Kind
	RunID   string
	// Payload is the Event as JSON, without URL.
	Payload       json.RawMessage
	State         State
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreatedAt     time.Time
	DeliveredAt   *time.Time
}

// Outcome is what one attempt of a claimed delivery came to.
type Outcome struct {
	// Delivered: the receiver answered 2xx.
	Delivered bool
	// Error is why it failed (no secrets, no URL).
	Error string
	// RetryAfter is how long until the next attempt; zero when the delivery is given up.
	RetryAfter time.Duration
}

// Store is the outbox, implemented in gormstore next to runs.Store. Rows are written by the
// run store's own transactions (whatever appends a run's events), as the run service hands them
// over (runs.Announce, for Config.Targets): this interface only delivers them.
type Store interface {
	// ClaimDeliveries leases up to limit PENDING deliveries that are due and not leased (or
	// whose lease expired), to owner for ttl by the database's clock, oldest first. Two
	// claimers never both get a row while its lease holds.
	ClaimDeliveries(ctx context.Context, owner string, ttl time.Duration, limit int) ([]Delivery, error)
	// CompleteDelivery records the outcome of an attempt of a delivery claimed by owner,
	// counting the attempt, and releases the lease. It returns false when owner no longer
	// holds the lease (another claimer took the row over): the outcome is not recorded.
	CompleteDelivery(ctx context.Context, id int64, owner string, o Outcome) (bool, error)
	// Deliveries lists the deliveries of a run's events, oldest first: the visible state.
	Deliveries(ctx context.Context, runID string) ([]Delivery, error)
	// PurgeDeliveries deletes DELIVERED and FAILED rows created before cutoff, at most limit,
	// and returns how many.
	PurgeDeliveries(ctx context.Context, cutoff time.Time, limit int) (int64, error)
}
