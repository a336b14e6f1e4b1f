package runs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"interlock/runtype"
)

// MaxDecisionBatch is how many decisions one DecideMany takes: a page of the console's inbox
// (at most 500 runs) ticked with "select all". A larger batch is BAD_USER_INPUT, decides
// nothing, and is to be split.
const MaxDecisionBatch = 500

// BatchKind is what one item of a batch decides: approve (with edited arguments or not) or
// decline. Resume data is not taken in bulk: each answer is a person's own.
type BatchKind string

// The kinds of a batch item.
const (
	BatchApprove BatchKind = "APPROVE"
	BatchDecline BatchKind = "DECLINE"
)

// BatchDecision is one item of DecideMany.
type BatchDecision struct {
	DecideParams
	Kind BatchKind
	// Reason goes with a decline (the model sees it); ignored for an approval.
	Reason string
	// Args, when set, approve the call with these arguments (EditAndApprove); BAD_USER_INPUT
	// on a decline.
	Args json.RawMessage
}

// BatchOutcome is the result of one item of DecideMany: Run set when it was decided (or was the
// same decision repeated), else Code and Message say why not. For a CONFLICT on a call someone
// else decided, DecidedBy (nil when unnamed) and DecidedAt say who and when.
type BatchOutcome struct {
	Run       *runtype.Run
	Code      runtype.Code
	Message   string
	DecidedBy *string
	DecidedAt *time.Time
	// Recorded is set on an approval of a call whose tool needs several approvals (a quorum)
	// that was recorded without meeting it: the call still waits, the tool has not run.
	// ApprovalsCount and ApprovalsRequired are the quorum's count after the item and its size
	// (0 and 0 on a call that needs one approval).
	Recorded          bool
	ApprovalsCount    int
	ApprovalsRequired int
}

// OK says whether the item was decided.
func (o BatchOutcome) OK() bool { return o.Run != nil }

// DecideMany takes each decision of items as Approve, EditAndApprove or Decline would, one
// compare-and-set each, in order, and returns one outcome per item in input order: a failure
// of one item (CONFLICT, FORBIDDEN, NOT_FOUND, BAD_USER_INPUT, …) never stops the others. The
// only error of the whole is BAD_USER_INPUT for more than MaxDecisionBatch items (nothing is
// decided then); an empty batch returns no outcomes. Internal errors of an item are logged and
// reported as INTERNAL with a plain message, as the API does for a single decision.
func (s *Service) DecideMany(ctx context.Context, items []BatchDecision) ([]BatchOutcome, error) {
	if len(items) > MaxDecisionBatch {
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "%d decisions in one batch, more than the %d allowed: split it into batches of at most %d", len(items), MaxDecisionBatch, MaxDecisionBatch)
	}
	out := make([]BatchOutcome, len(items))
	for i, it := range items {
		if err := ctx.Err(); err != nil {
			out[i] = BatchOutcome{Code: runtype.CodeCancelled, Message: "not decided: the request was cancelled"}
			continue
		}
		run, err := s.decideItem(ctx, it)
		if err == nil {
			out[i] = BatchOutcome{Run: run}
			if it.Kind == BatchApprove {
				out[i].Recorded, out[i].ApprovalsCount, out[i].ApprovalsRequired = s.quorumState(run, it.ToolCallID)
			}
			continue
		}
		out[i] = s.failedItem(ctx, it, err)
	}
	return out, nil
}

func (s *Service) decideItem(ctx context.Context, it BatchDecision) (*runtype.Run, error) {
	switch it.Kind {
	case BatchApprove:
		if it.Args != nil {
			return s.EditAndApprove(ctx, it.DecideParams, it.Args)
		}
		return s.Approve(ctx, it.DecideParams)
	case BatchDecline:
		if it.Args != nil {
			return nil, runtype.Errorf(runtype.CodeBadUserInput, "args go with APPROVE (edit and approve), not with DECLINE")
		}
		return s.Decline(ctx, it.DecideParams, it.Reason)
	default:
		return nil, runtype.Errorf(runtype.CodeBadUserInput, "kind %q: use APPROVE or DECLINE", it.Kind)
	}
}

// failedItem is the outcome of an item whose decision failed with err. A CONFLICT on a call
// someone else decided names them and when, read from the run's decisions (a call decided
// once is decided for ever, so the read cannot name the wrong decision).
func (s *Service) failedItem(ctx context.Context, it BatchDecision, err error) BatchOutcome {
	var appErr *runtype.Error
	if !errors.As(err, &appErr) || appErr.Code == runtype.CodeInternal {
		s.cfg.Logger.Error("decideToolCalls: item failed", "run", it.RunID, "err", err)
		return BatchOutcome{Code: runtype.CodeInternal, Message: "the decision failed on the server; try again, or decide this call on its own"}
	}
	o := BatchOutcome{Code: appErr.Code, Message: appErr.Message}
	if appErr.Code != runtype.CodeConflict {
		return o
	}
	run, gerr := s.Get(ctx, it.RunID)
	if gerr != nil || run == nil {
		return o
	}
	if d := decisionOn(run, it.ToolCallID); d != nil {
		at := d.DecidedAt
		o.DecidedBy, o.DecidedAt = d.DecidedBy, &at
	}
	return o
}

// decisionOn is the decision on run's call callID (the latest decision when callID is unset:
// the call the single-call form named), or nil.
func decisionOn(run *runtype.Run, callID *string) *runtype.Decision {
	for i := len(run.Decisions) - 1; i >= 0; i-- {
		d := &run.Decisions[i]
		if d.Kind == runtype.DecisionAutoApproved {
			continue // nobody's: a call a policy or a grant let through is not the one in conflict
		}
		if callID == nil || *callID == "" || d.ToolCallID == *callID {
			return d
		}
	}
	return nil
}
