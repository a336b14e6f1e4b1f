package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"interlock/agent"
	"interlock/policy"
	"interlock/runtype"
)

// The judgement of a call: does a person decide whether it runs, or does the policy let it
// through, and why. Every call is judged here, once, when it is stored — a model's call in a run
// Interlock executes (execution.ToolCalls), an external agent's request (RequestApproval: the
// REST long-poll, the coding-agent hooks, the MCP gateway's forwarded calls) — so the same
// requireApproval means the same thing on every path, and the judgement is stored with the call
// (agent.PendingCall.Gate): a run continued later follows the decision on record.
//
// A call the judgement lets through is recorded as a decision of kind AUTO_APPROVED, by nobody,
// with the rule as its reason, the policy's revision and a receipt, like any approval: every call
// that runs has a decision on record, automatic or human. A call it asks about waits with the
// rule, or the error, as its approvalReason.
//
// The order: the run's requireToolApproval, then the agent's, ask for every call; else the tool's
// requireApproval — true asks, false lets through, an expression asks when it is true and lets
// through when it is false. An expression that cannot be evaluated (an error, a missing field, a
// value of the wrong type, its cost limit or deadline exceeded) asks a person: a policy never
// lets a call through because it failed.

// judgeCall is what a call is judged on.
type judgeCall struct {
	agent *agent.Agent
	tool  *agent.Tool
	// args are the call's arguments in canonical form.
	args json.RawMessage
	// runAsks is the run's requireToolApproval.
	runAsks bool
	// threadID, resourceID and startedBy are the run's (nil: none).
	threadID, resourceID, startedBy *string
	// asker is who asks for the call (the caller of a request); nil when nobody does (a model's
	// call in a run Interlock executes).
	asker *runtype.Principal
}

// judge says whether call c waits for a person, and why. It is the one place that decides it;
// what else may let a call through without asking (a grant a person gave) belongs here, after
// the policy asked.
func (s *Service) judge(ctx context.Context, c judgeCall) agent.Gate {
	return policyGate(ctx, c)
}

// policyGate is the judgement of the configuration: the run's and the agent's
// requireToolApproval, then the tool's requireApproval.
func policyGate(ctx context.Context, c judgeCall) agent.Gate {
	switch {
	case c.runAsks:
		return agent.Gate{Ask: true, Reason: "the run was started with requireToolApproval: every call waits for a person"}
	case c.agent.RequireToolApproval:
		return agent.Gate{Ask: true, Reason: fmt.Sprintf("agent %s has requireToolApproval: every call waits for a person", c.agent.ID)}
	}
	p := c.tool.Policy
	if p == nil {
		if c.tool.RequireApproval {
			return agent.Gate{Ask: true, Reason: "requireApproval is true: every call of the tool waits for a person", Revision: policy.Revision("true")}
		}
		return agent.Gate{Reason: "policy: requireApproval is false (the tool needs no approval)", Revision: policy.Revision("false")}
	}
	ask, err := p.Evaluate(ctx, policyInput(c))
	rule := quoteRule(p.Source())
	switch {
	case err != nil:
		return agent.Gate{Ask: true, Reason: fmt.Sprintf("policy %s could not be evaluated, so a person decides: %v", rule, err), Revision: p.Revision()}
	case ask:
		return agent.Gate{Ask: true, Reason: fmt.Sprintf("policy %s is true for this call", rule), Revision: p.Revision()}
	}
	return agent.Gate{Reason: fmt.Sprintf("policy: %s is false for this call", rule), Revision: p.Revision()}
}

// policyInput is what an expression reads of call c.
func policyInput(c judgeCall) policy.Input {
	in := policy.Input{Args: c.args, Tool: c.tool.Name, Agent: c.agent.ID,
		ThreadID: deref(c.threadID), ResourceID: deref(c.resourceID), StartedBy: deref(c.startedBy)}
	if p := c.asker; p != nil && p.Recorded() != nil {
		// The server's own principals (System, Anonymous) are nobody a rule can name.
		in.Principal = &policy.Principal{Subject: p.Subject, Resources: p.Resources}
		for _, r := range p.Roles {
			in.Principal.Roles = append(in.Principal.Roles, string(r))
		}
	}
	return in
}

// maxRuleInReason is how much of an expression a reason quotes.
const maxRuleInReason = 200

// quoteRule is an expression as a reason quotes it: in quotes, cut at maxRuleInReason characters
// (the revision names it whole).
func quoteRule(src string) string {
	src = strings.Join(strings.Fields(src), " ")
	if r := []rune(src); len(r) > maxRuleInReason {
		src = string(r[:maxRuleInReason]) + "…"
	}
	return "requireApproval \"" + src + "\""
}

// autoApproved is the decision recorded for a call the judgement let through: AUTO_APPROVED by
// nobody at at, its reason the rule, with the policy's revision and the receipt.
func autoApproved(runID string, c runtype.ToolCall, gate agent.Gate, receipt *string, at time.Time) runtype.Decision {
	reason := gate.Reason
	return runtype.Decision{RunID: runID, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Kind: runtype.DecisionAutoApproved,
		DecidedAt: at, Reason: &reason, Args: c.Args, Receipt: receipt, PolicyRevision: emptyToNil(&gate.Revision)}
}
