package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"interlock/receipt"
)

// Signer signs the receipt of a decision that lets a call run (receipt.Signer: a compact JWS
// over the run, the call, the agent, the tool and the digest of the arguments that run).
type Signer interface {
	Sign(ctx context.Context, d receipt.Decision) (string, error)
}

// receiptFor signs the receipt of an approval of agentID's call of tool in run runID, to run
// with args, decided by by (nil: by nobody — a policy, or a server without authentication) at
// at; nil without a Signer. It is signed before the decision is stored and stored in its
// transaction (DecisionWrite.Receipt, the call's row and snapshot), so that every reader — the
// API, the long-poll, the tool's execution on any instance — gives the same receipt, and a
// decision that loses its compare-and-set leaves no receipt anywhere. A failure to sign fails
// the decision, with nothing stored: a call never runs on an approval without its receipt.
func (s *Service) receiptFor(ctx context.Context, runID, callID, agentID, tool string, args json.RawMessage, by *string, at time.Time) (*string, error) {
	if s.cfg.Receipts == nil {
		return nil, nil
	}
	jws, err := s.cfg.Receipts.Sign(ctx, receipt.Decision{RunID: runID, ToolCallID: callID, AgentID: agentID, Tool: tool,
		Args: args, DecidedBy: by, DecidedAt: at})
	if err != nil {
		return nil, fmt.Errorf("receipt of run %s call %s: %w", runID, callID, err)
	}
	return &jws, nil
}
