package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"interlock/agent"
	"interlock/runtype"
)

// Claims ("I'm on it"): a person marks a suspended run as being looked at, so that the others
// who see the inbox do not all open the same run. A claim is only a mark: it reserves nothing,
// and any eligible approver may still decide the run (deciding is never refused because of a
// claim). Several people may be on the same run at once; each holds at most one claim per run.
//
// A claim lapses ClaimTTL after it was last renewed. It is renewed by the claimer's claimRun
// again; the console renews it while the claimer has the run's view open (every minute), so a
// claim lasts while someone actually looks and disappears a few minutes after they leave.
// Claims are announced through the suspended-set change feed (a CHANGED change, recorded in
// the claim's transaction), which every instance polls: the inbox and run view of every
// browser, on any instance, read the run again when someone claims or releases it. A lapse is
// not announced: readers leave out claims past their expiresAt (the console hides a badge
// when its expiresAt passes).

// ClaimTTL is how long a claim lasts without renewal.
const ClaimTTL = 3 * time.Minute

// TeamStore is the storage of claims and saved views, part of Store (runs/storetest checks
// it on both dialects).
type TeamStore interface {
	// Claim records (or renews) w.Subject's claim on run w.RunID, in one transaction: only
	// while the run is SUSPENDED (else ErrStale, with nothing stored). A new claim (none of
	// that subject, or only a lapsed one) starts at w.At, and a suspended-set change
	// (CHANGED, for w.InstanceID) is recorded with it; a renewal keeps its start and only
	// moves its expiry to w.ExpiresAt. Claims lapsed at w.At, of any run, are deleted. It
	// reports whether the claim is new.
	Claim(ctx context.Context, w ClaimWrite) (bool, error)
	// ReleaseClaim deletes subject's claim on the run, recording a suspended-set change
	// (CHANGED, for instanceID, at at) when there was an unlapsed one. It reports whether it did.
	ReleaseClaim(ctx context.Context, runID, subject, instanceID string, at time.Time) (bool, error)
	// Claims returns the claims unlapsed at now of the runs ids (all runs when ids is nil, up
	// to limit claims; limit 0: no bound), by run, each run's oldest first (then by subject).
	Claims(ctx context.Context, ids []string, now time.Time, limit int) (map[string][]runtype.RunClaim, error)

	// SavedViews returns subject's saved views, by name.
	SavedViews(ctx context.Context, subject string) ([]runtype.SavedView, error)
	// CountSavedViews counts subject's saved views.
	CountSavedViews(ctx context.Context, subject string) (int64, error)
	// SaveView stores a new view; ErrDuplicateView, with nothing stored, when its subject has
	// a view of that name already (the database's unique key decides between racing saves).
	SaveView(ctx context.Context, v runtype.SavedView) error
	// DeleteSavedView deletes subject's view id and reports whether there was one (another
	// subject's view of that id is left alone).
	DeleteSavedView(ctx context.Context, subject, id string) (bool, error)
}

// ClaimWrite is a claim to record (TeamStore.Claim).
type ClaimWrite struct {
	RunID      string
	Subject    string
	At         time.Time
	ExpiresAt  time.Time
	InstanceID string
}

// ErrDuplicateView means a person already has a saved view of that name.
var ErrDuplicateView = errors.New("saved view name taken")

// ClaimRun marks the run as being looked at by the principal of ctx, or renews their claim,
// and returns the run as it is now. Who may call: a principal who may decide some call the
// run waits on (an approver, or a role a waiting call's tool names in approverRoles, or one
// it is escalated to) and sees the run. Errors: NOT_FOUND when there is no such run or the
// principal may not see it; FORBIDDEN for a principal who may decide none of its calls;
// CONFLICT when the run does not wait for a decision (not SUSPENDED).
func (s *Service) ClaimRun(ctx context.Context, runID string) (*runtype.Run, error) {
	if err := mayDecide(ctx); err != nil {
		return nil, err
	}
	r, err := s.visible(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.Status != runtype.StatusSuspended {
		return nil, notClaimable(r)
	}
	if err := s.mayDecideSome(ctx, r); err != nil {
		return nil, err
	}
	p := runtype.PrincipalFrom(ctx)
	now := s.now()
	fresh, err := s.store.Claim(ctx, ClaimWrite{RunID: r.ID, Subject: p.Subject, At: now, ExpiresAt: now.Add(ClaimTTL), InstanceID: s.cfg.InstanceID})
	if errors.Is(err, ErrStale) {
		return nil, runtype.Errorf(runtype.CodeConflict, "run %s was decided meanwhile: there is nothing left to look at", r.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("claim run %s: %w", r.ID, err)
	}
	if fresh {
		s.changes.Publish(changesTopic, Change{Kind: ChangeChanged, RunID: r.ID})
	}
	return r, nil
}

// ReleaseClaim ends the principal's own claim on the run (a person cannot end another's: it
// lapses by itself) and returns the run as it is now. Releasing a claim one does not hold
// changes nothing. Who may call: whoever may read the run. Errors: NOT_FOUND when there is no
// such run or the principal may not see it.
func (s *Service) ReleaseClaim(ctx context.Context, runID string) (*runtype.Run, error) {
	if err := mayGet(ctx); err != nil {
		return nil, err
	}
	r, err := s.visible(ctx, runID)
	if err != nil {
		return nil, err
	}
	released, err := s.store.ReleaseClaim(ctx, r.ID, runtype.PrincipalFrom(ctx).Subject, s.cfg.InstanceID, s.now())
	if err != nil {
		return nil, fmt.Errorf("release claim on run %s: %w", r.ID, err)
	}
	if released {
		s.changes.Publish(changesTopic, Change{Kind: ChangeChanged, RunID: r.ID})
	}
	return r, nil
}

// activeClaimsLimit bounds ActiveClaims: past it, a request reads claims run by run.
const activeClaimsLimit = 5000

// RunClaims returns the unlapsed claims of the run runID in status, a run the caller has read
// through the service (so the principal sees it); none unless it is SUSPENDED: a decided run is
// no longer looked at, and its claims lapse by themselves.
func (s *Service) RunClaims(ctx context.Context, runID string, status runtype.Status) ([]runtype.RunClaim, error) {
	if status != runtype.StatusSuspended {
		return []runtype.RunClaim{}, nil
	}
	m, err := s.store.Claims(ctx, []string{runID}, s.now(), 0)
	if err != nil {
		return nil, fmt.Errorf("read claims of run %s: %w", runID, err)
	}
	return orEmpty(m[runID]), nil
}

// ActiveClaims returns every unlapsed claim, by run, and whether that is all of them (false
// past activeClaimsLimit): one read that answers the claims of every run of a page, the
// claims in force being few (people times the runs they have open). The caller shows a claim
// only with a run it read through the service.
func (s *Service) ActiveClaims(ctx context.Context) (map[string][]runtype.RunClaim, bool, error) {
	m, err := s.store.Claims(ctx, nil, s.now(), activeClaimsLimit+1)
	if err != nil {
		return nil, false, fmt.Errorf("read claims: %w", err)
	}
	n := 0
	for _, l := range m {
		n += len(l)
	}
	return m, n <= activeClaimsLimit, nil
}

func orEmpty(l []runtype.RunClaim) []runtype.RunClaim {
	if l == nil {
		return []runtype.RunClaim{}
	}
	return l
}

// notClaimable is the CONFLICT of a claim on a run that does not wait for a decision.
func notClaimable(r *runtype.Run) error {
	return runtype.Errorf(runtype.CodeConflict, "run %s is %s: only a run waiting for a decision (SUSPENDED) can be claimed", r.ID, r.Status)
}

// mayDecideSome answers FORBIDDEN unless the principal of ctx may decide at least one of the
// calls suspended run r waits on (authorizeDecision, a decline: separation of duties, which
// only refuses approvals, does not keep a person from looking).
func (s *Service) mayDecideSome(ctx context.Context, r *runtype.Run) error {
	var first error
	for i := range r.ToolCalls {
		holder, call, err := s.holderOf(ctx, r, &r.ToolCalls[i])
		if err != nil {
			return err
		}
		var tool *agent.Tool
		if a := s.agents.Get(holder.AgentID); a != nil {
			tool = a.Tool(call.ToolName)
		}
		err = s.authorizeDecision(ctx, r, holder, call, tool, agent.Decision{Kind: agent.CallDeclined})
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		return mayDecide(ctx)
	}
	return first
}

// holderOf is the run that holds call of r and the call there: r itself, or, for a sub-agent's
// call a supervisor's run shows, the sub-agent's run, whose tool's approverRoles decide it (as
// findHolder moves a decision).
func (s *Service) holderOf(ctx context.Context, r *runtype.Run, call *runtype.ToolCall) (*runtype.Run, *runtype.ToolCall, error) {
	if !strings.Contains(call.ToolCallID, "/") {
		return r, call, nil
	}
	rec, err := s.store.GetRecord(ctx, r.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("load run %s: %w", r.ID, err)
	}
	if rec == nil {
		return nil, nil, notFound(r.ID)
	}
	inner, innerID, _, err := s.innermost(ctx, rec, call.ToolCallID)
	if err != nil {
		return nil, nil, err
	}
	if inner == rec {
		return r, call, nil
	}
	innerCall, err := pickCall(&inner.Run, &innerID)
	if err != nil {
		return nil, nil, err
	}
	return &inner.Run, innerCall, nil
}
