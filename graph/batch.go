package graph

import (
	"interlock/graph/model"
	"interlock/runs"
)

// toDecisionResults maps the outcomes of decideToolCalls to its results, item by item in input
// order: ok with the run, or the code and message of the item's failure (and who decided first,
// for a CONFLICT on a call someone else decided).
func toDecisionResults(items []runs.BatchDecision, out []runs.BatchOutcome) []*model.DecisionResult {
	res := make([]*model.DecisionResult, len(out))
	for i, o := range out {
		r := &model.DecisionResult{RunID: items[i].RunID, ToolCallID: items[i].ToolCallID, Ok: o.OK()}
		if o.OK() {
			r.Run = toRun(o.Run)
			r.Recorded = o.Recorded
			if o.ApprovalsRequired > 1 {
				count, required := o.ApprovalsCount, o.ApprovalsRequired
				r.ApprovalsCount, r.ApprovalsRequired = &count, &required
			}
		} else {
			code, msg := string(o.Code), o.Message
			r.Code, r.Message = &code, &msg
			r.DecidedBy, r.DecidedAt = o.DecidedBy, o.DecidedAt
		}
		res[i] = r
	}
	return res
}
