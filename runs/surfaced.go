package runs

import (
	"context"
	"slices"
	"strings"

	"interlock/runtype"
)

// showInnerApprovals gives each call of r that shows a sub-agent's call (a surfacedID, such as
// tc_1/tc_2) whose tool needs several approvals the approvals recorded on the sub-agent's run,
// with how many are required: a person deciding on the supervisor's run sees "approvals 1 of 2"
// there too, not an Approve that seems to have done nothing. The approvals stay stored on the
// sub-agent's run only. Best effort: a read that fails leaves the call as it was (logged).
func (s *Service) showInnerApprovals(ctx context.Context, r *runtype.Run) {
	if r == nil || r.Status != runtype.StatusSuspended {
		return
	}
	var rec *Record
	for i := range r.ToolCalls {
		c := &r.ToolCalls[i]
		if !c.RequiresApproval || c.Approvals != nil || !strings.Contains(c.ToolCallID, "/") {
			continue
		}
		if rec == nil {
			var err error
			if rec, err = s.store.GetRecord(ctx, r.ID); err != nil || rec == nil {
				s.cfg.Logger.Warn("show sub-agent approvals: load run", "run", r.ID, "err", err)
				return
			}
		}
		inner, innerID, _, err := s.innermost(ctx, rec, c.ToolCallID)
		if err != nil || inner == rec {
			continue
		}
		ag := s.agents.Get(inner.AgentID)
		if ag == nil {
			continue
		}
		for _, ic := range inner.ToolCalls {
			if ic.ToolCallID != innerID && (innerID != "" || len(inner.ToolCalls) != 1) {
				continue
			}
			need := ag.Tool(ic.ToolName).Quorum()
			if need < 2 {
				break
			}
			a := &runtype.Approvals{Args: ic.Args, By: []runtype.Approval{}}
			if ic.Approvals != nil {
				cp := *ic.Approvals
				cp.By, cp.Superseded = slices.Clone(cp.By), slices.Clone(cp.Superseded)
				a = &cp
			}
			a.Required = need
			c.Approvals = a
			break
		}
	}
}

// quorumState says, for a call just approved in run (callID, or the run's one waiting call when
// nil), whether the approval was recorded without running the tool (the call still waits for
// more approvals of a quorum), and the quorum's count and size (0, 0 when the call's tool needs
// one approval).
func (s *Service) quorumState(run *runtype.Run, callID *string) (recorded bool, count, required int) {
	if run == nil {
		return false, 0, 0
	}
	if run.Status == runtype.StatusSuspended {
		for _, c := range run.ToolCalls {
			if (callID == nil || *callID == "") && len(run.ToolCalls) != 1 {
				break
			}
			if callID != nil && *callID != "" && c.ToolCallID != *callID {
				continue
			}
			if c.RequiresApproval && c.Approvals != nil && c.Approvals.Count() > 0 {
				need := c.Approvals.Required
				if need == 0 {
					need = s.quorumOf(run.AgentID, c.ToolName)
				}
				if need > 1 {
					return c.Approvals.Count() < need, c.Approvals.Count(), need
				}
			}
			return false, 0, 0
		}
	}
	if d := decisionOn(run, callID); d != nil && d.Approvals != nil {
		need := d.Approvals.Required
		if need == 0 {
			need = s.quorumOf(run.AgentID, d.ToolName)
		}
		return false, d.Approvals.Count(), need
	}
	return false, 0, 0
}

// quorumOf is how many approvals agentID's tool needs (1 when the agent or tool is not served).
func (s *Service) quorumOf(agentID, toolName string) int {
	if ag := s.agents.Get(agentID); ag != nil {
		return ag.Tool(toolName).Quorum()
	}
	return 1
}
