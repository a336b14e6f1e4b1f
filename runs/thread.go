package runs

import (
	"context"
	"time"

	"interlock/llm"
	"interlock/runtype"
)

// Thread is a memory thread: the messages its runs exchanged, which each new run of the thread
// is given (the last HistoryMessages of them).
//
// Thread ids are global, chosen by clients: a thread belongs to the resource of its first run
// (ResourceID; nil is an owner too, "no resource"), and StartRun refuses a run that names it
// with another resource. So a thread's messages are all of one resource, and a reader sees a
// thread only under that resource's label.
type Thread struct {
	ID         string
	ResourceID *string
	// Messages are the newest messages asked for, oldest first; MessageCount counts them all.
	Messages     []ThreadMessage
	MessageCount int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// ThreadMessage is one message of a thread and the run that wrote it.
type ThreadMessage struct {
	ID        int64
	RunID     string
	Role      llm.Role
	Content   string
	CreatedAt time.Time
}

// ThreadsParams select a page of threads, most recently active first.
type ThreadsParams struct {
	ResourceID *string
	// Resources as in ListSuspendedParams.
	Resources []string
	Page      int
	PerPage   int
}

// Thread returns a thread with its owner resource and its last `last` messages (the newest
// MaxPerPage when last is 0; more is BAD_USER_INPUT, so one request cannot load a whole long
// thread), or nil when no run ever used that thread id, or its owner is a resource the principal
// does not see. A thread whose first run has not finished has no messages yet.
func (s *Service) Thread(ctx context.Context, id string, last int) (*Thread, error) {
	if err := require(ctx, runtype.RoleViewer, "reading threads"); err != nil {
		return nil, err
	}
	switch {
	case last == 0:
		last = s.cfg.MaxPerPage
	case last < 0 || last > s.cfg.MaxPerPage:
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "last must be between 1 and %d, not %d", s.cfg.MaxPerPage, last)
	}
	resources, none := scope(ctx, nil)
	if none {
		return nil, nil
	}
	return s.store.Thread(ctx, id, resources, last)
}

// Threads returns a page of threads with messages (without the messages), most recently active
// first, and how many there are.
func (s *Service) Threads(ctx context.Context, p ThreadsParams) ([]*Thread, int64, error) {
	if err := require(ctx, runtype.RoleViewer, "listing threads"); err != nil {
		return nil, 0, err
	}
	if p.Page < 0 {
		return nil, 0, runtype.Errorf(runtype.CodeBadUserInput, "page must be 0 or more (pages are zero-based), not %d", p.Page)
	}
	if p.PerPage < 1 || p.PerPage > s.cfg.MaxPerPage {
		return nil, 0, runtype.Errorf(runtype.CodeBadUserInput, "perPage must be between 1 and %d, not %d", s.cfg.MaxPerPage, p.PerPage)
	}
	var none bool
	if p.Resources, none = scope(ctx, p.ResourceID); none {
		return []*Thread{}, 0, nil
	}
	return s.store.Threads(ctx, p)
}
