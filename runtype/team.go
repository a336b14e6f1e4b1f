package runtype

import "time"

// RunClaim is a person's "I'm on it" on a suspended run: a mark, shown to the others who see
// the run, that someone is looking at it. It decides nothing and reserves nothing: any eligible
// approver may still decide the run. A claim lapses at ExpiresAt unless its holder renews it
// (runs.ClaimTTL).
type RunClaim struct {
	RunID string
	// Subject is who claimed it (the principal's subject).
	Subject string
	// Since is when the claim began; renewals keep it.
	Since time.Time
	// ExpiresAt is when the claim lapses without renewal.
	ExpiresAt time.Time
}

// SavedView is a person's named set of inbox or history filters: the console's URL query
// string (for example "q=deploy&agentId=ops"), reopened as it was saved.
type SavedView struct {
	ID      string
	Subject string
	// Name is unique per subject.
	Name      string
	Query     string
	CreatedAt time.Time
}
