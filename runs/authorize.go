package runs

import (
	"context"
	"fmt"
	"strings"

	"interlock/agent"
	"interlock/runtype"
)

// The authorization rules. Every entry point of the service checks the principal of its context
// (PrincipalFrom) here: the role an operation needs, and the resources a scoped principal may
// reach. A run outside a principal's scope does not exist for it: reads leave it out or answer
// NOT_FOUND, never FORBIDDEN, so that a principal learns nothing about other resources' runs.
//
// Every rule fails closed: a context without a principal is UNAUTHENTICATED (the entry points)
// or sees nothing (the helpers below them). The server's own work acts for System, and a server
// with authentication off serves every request as Anonymous: both are principals that hold
// every role, so "unrestricted" is always given, never an absence.

// errUnauthenticated is the answer of every rule to a context that acts for nobody.
func errUnauthenticated(what string) error {
	return runtype.Errorf(runtype.CodeUnauthenticated, "%s needs credentials: send Authorization: Bearer <token>", what)
}

// require answers FORBIDDEN unless the principal of ctx holds role (UNAUTHENTICATED without a
// principal). what names the operation.
func require(ctx context.Context, role runtype.Role, what string) error {
	p := runtype.PrincipalFrom(ctx)
	if p == nil {
		return errUnauthenticated(what)
	}
	if p.Has(role) {
		return nil
	}
	return runtype.Errorf(runtype.CodeForbidden, "%s needs the %s role; %s has %s", what, role, p.Subject, roleList(p.Roles))
}

// Authorize answers FORBIDDEN unless the principal of ctx may read: for the entry points whose
// data is not a run's (the agents and their tools).
func Authorize(ctx context.Context) error { return require(ctx, runtype.RoleViewer, "reading") }

// mayDecide answers FORBIDDEN unless the principal of ctx may decide some tool calls: an
// approver, or the holder of a custom role (which tools' approverRoles may name). It is checked
// before anything about the run is read, so that a principal who may not decide learns nothing
// from trying, and changes nothing.
func mayDecide(ctx context.Context) error {
	p := runtype.PrincipalFrom(ctx)
	if p == nil {
		return errUnauthenticated("deciding a tool call")
	}
	if p.Has(runtype.RoleApprover) {
		return nil
	}
	for _, r := range p.Roles {
		if !r.Builtin() {
			return nil
		}
	}
	return runtype.Errorf(runtype.CodeForbidden, "deciding a tool call needs the approver role; %s has %s", p.Subject, roleList(p.Roles))
}

// scope narrows a listing to the principal's resources. requested is the resourceId filter the
// client gave. It returns the resources to admit (nil: any) and whether nothing can match:
// nothing does without a principal.
func scope(ctx context.Context, requested *string) (resources []string, none bool) {
	p := runtype.PrincipalFrom(ctx)
	if p == nil {
		return nil, true
	}
	if p.Resources == nil {
		return nil, false
	}
	if requested != nil {
		return nil, !p.Sees(requested) // the filter itself already narrows to one resource
	}
	return p.Resources, len(p.Resources) == 0
}

// visible reports whether the principal of ctx may see runs of the resource (nothing is visible
// without a principal).
func visible(ctx context.Context, resourceID *string) bool {
	p := runtype.PrincipalFrom(ctx)
	return p != nil && p.Sees(resourceID)
}

// notFound is the answer about a run that does not exist, or that the principal may not see.
func notFound(runID string) error {
	return runtype.Errorf(runtype.CodeNotFound, "no run with id %q", runID)
}

// authorizeStart checks that the principal may start a run of the resource.
func authorizeStart(ctx context.Context, resourceID *string) error {
	if err := require(ctx, runtype.RoleOperator, "starting a run"); err != nil {
		return err
	}
	return authorizeResource(ctx, resourceID, "start runs")
}

// authorizeResource checks that the principal of ctx (checked for its role before) may create
// runs of the resource: what names the act, "start runs".
func authorizeResource(ctx context.Context, resourceID *string, what string) error {
	p := runtype.PrincipalFrom(ctx)
	if p == nil {
		return errUnauthenticated(what)
	}
	if p.Sees(resourceID) {
		return nil
	}
	if resourceID == nil {
		return runtype.Errorf(runtype.CodeForbidden, "%s may %s only of its resources (%s): pass resourceId", p.Subject, what, strings.Join(p.Resources, ", "))
	}
	return runtype.Errorf(runtype.CodeForbidden, "%s may not %s of resource %q, only of %s", p.Subject, what, *resourceID, strings.Join(p.Resources, ", "))
}

// authorizeAgent checks that the principal of ctx (checked for its role before) may request
// approvals for the agent of that id: a principal bound to agents (a token's agents, a JWT's
// claims.agents) only for those, so that a token given to one agent's pipeline cannot ask as
// another and be told the policy's answers meant for it.
func authorizeAgent(ctx context.Context, agentID string) error {
	p := runtype.PrincipalFrom(ctx)
	if p == nil {
		return errUnauthenticated("requesting an approval")
	}
	switch {
	case p.RequestsFor(agentID):
		return nil
	case len(p.Agents) == 0:
		return runtype.Errorf(runtype.CodeForbidden, "%s may request approvals for no agent", p.Subject)
	}
	return runtype.Errorf(runtype.CodeForbidden, "%s may request approvals only for %s, not for %q", p.Subject, strings.Join(p.Agents, ", "), agentID)
}

// mayRead reports whether the principal of ctx (not nil) may read run r, whose resource it
// sees: a viewer reads every run, a requester only the approval requests it made (its
// startedBy; not runs of agents Interlock runs, which the same subject may have started when
// it held the operator role).
func (s *Service) mayRead(p *runtype.Principal, r *runtype.Run) bool {
	if p.Has(runtype.RoleViewer) {
		return true
	}
	return p.Has(runtype.RoleRequester) && p.Authenticated() && r.StartedBy != nil && *r.StartedBy == p.Subject && s.isExternal(r.AgentID)
}

// authorizeDecision checks that the principal may take decision d on call (of tool, nil when the
// agent no longer has it) of run, which top is the run the decision was addressed to (a
// supervisor's, or run itself). Visibility was checked on top when it was read. From the call's
// escalation on, the roles it is escalated to may decide it too (escalatedTo, followup.go).
func (s *Service) authorizeDecision(ctx context.Context, top, rn *runtype.Run, call *runtype.ToolCall, tool *agent.Tool, d agent.Decision) error {
	p := runtype.PrincipalFrom(ctx)
	if p == nil {
		return errUnauthenticated("deciding a tool call")
	}
	escalated := p.HasAny(escalatedTo(call, s.now()))
	if tool != nil && len(tool.ApproverRoles) > 0 {
		roles := make([]runtype.Role, len(tool.ApproverRoles))
		for i, r := range tool.ApproverRoles {
			roles[i] = runtype.Role(r)
		}
		if !p.Has(runtype.RoleAdmin) && !p.HasAny(roles) && !escalated {
			return runtype.Errorf(runtype.CodeForbidden, "only %s may decide %s calls; %s has %s%s", roleList(roles), call.ToolName, p.Subject, roleList(p.Roles), escalationNote(call))
		}
	} else if !escalated {
		if err := require(ctx, runtype.RoleApprover, "deciding a tool call"); err != nil {
			return runtype.Errorf(runtype.CodeForbidden, "%s%s", err.Error(), escalationNote(call))
		}
	}
	if s.cfg.SeparationOfDuties && d.Kind == agent.CallApproved {
		for _, r := range []*runtype.Run{top, rn} {
			if r.StartedBy != nil && p.Authenticated() && *r.StartedBy == p.Subject {
				return runtype.Errorf(runtype.CodeForbidden, "%s started run %s: with separation of duties someone else must approve its tool calls (you may still decline them)", p.Subject, top.ID)
			}
		}
	}
	return nil
}

func roleList(roles []runtype.Role) string {
	if len(roles) == 0 {
		return "no role"
	}
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	if len(names) == 1 {
		return "role " + names[0]
	}
	return fmt.Sprintf("roles %s", strings.Join(names, ", "))
}
