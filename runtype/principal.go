package runtype

import (
	"context"
	"slices"
	"time"
)

// Role names what a principal may do. Four of the built-in roles are ordered, each including
// the ones before it (viewer, operator, approver, admin); the fifth, requester, stands beside
// them: its holders ask for approvals and read their own requests, nothing else, and operators
// and above hold it too. Any other name is a custom role, which lets its holders read and decide
// the calls of tools whose approverRoles name it (a tool's `approverRoles: [refunds]`).
type Role string

// The built-in roles.
const (
	// RoleViewer reads runs and subscribes to them.
	RoleViewer Role = "viewer"
	// RoleOperator also starts runs.
	RoleOperator Role = "operator"
	// RoleApprover also decides tool calls.
	RoleApprover Role = "approver"
	// RoleAdmin may do everything, whatever a tool's approverRoles say.
	RoleAdmin Role = "admin"
	// RoleRequester asks a person to decide tool calls of external agents (requestApproval,
	// POST /approvals) and reads the requests it made itself (its startedBy), nothing else: it
	// lists no runs and decides nothing. It is for the agents that run elsewhere; an operator
	// (and every role above) holds it too.
	RoleRequester Role = "requester"
)

// rank orders the built-in roles; custom roles rank as viewers. The requester is outside the
// order (see RoleRequester).
var rank = map[Role]int{RoleViewer: 1, RoleOperator: 2, RoleApprover: 3, RoleAdmin: 4}

// Builtin reports whether r is one of the five built-in roles, not a custom one.
func (r Role) Builtin() bool {
	_, ok := rank[r]
	return ok || r == RoleRequester
}

// Principal is who a request acts for, as authentication established it. The run service checks
// every operation against the principal in the request's context (its rules are in
// runs/authorize.go), and fails closed: a context without one is UNAUTHENTICATED at every rule,
// never "unrestricted". The server's own work acts for System, and every request of a server
// with authentication off for Anonymous, so that being unrestricted is always a principal someone
// chose to give, never an absence.
type Principal struct {
	// Subject names the person or client; decisions record it as decidedBy, runs as startedBy.
	Subject string
	// Roles are the principal's roles, built-in or custom.
	Roles []Role
	// Resources, when not nil, are the only resources whose runs the principal may see, start
	// or decide; runs of any other resource, and runs without one, do not exist for it.
	Resources []string
	// Agents, when not nil, are the only agents the principal may request approvals for
	// (requestApproval, POST /approvals, the hooks): a requester token given to one external
	// agent cannot ask, and be told the policy's answers, as another. Nil: any agent.
	Agents []string
	// Expires is when the credentials the principal was established by stop being valid (a
	// JWT's exp); zero for tokens that do not expire. A WebSocket ends then.
	Expires time.Time

	// kind tells the server's own principals (System, Anonymous) from authenticated ones; it is
	// unexported so that no token, whatever its subject, can be taken for one of them.
	kind principalKind
}

type principalKind uint8

const (
	authenticated principalKind = iota
	anonymous
	system
)

// System returns the principal of the server's own work: recovery, expiry, retention, and the
// runs a supervisor starts for its sub-agents. It may do everything, and is recorded as nobody:
// an expiry's decidedBy is null, a sub-agent's run has its supervisor's startedBy.
func System() *Principal {
	return &Principal{Subject: "system", Roles: []Role{RoleAdmin}, kind: system}
}

// Anonymous returns who every request acts for when authentication is off: anyone who reaches
// the server, unrestricted, recorded as nobody (startedBy and decidedBy null).
func Anonymous() *Principal {
	return &Principal{Subject: "anonymous", Roles: []Role{RoleAdmin}, kind: anonymous}
}

// Authenticated reports whether the principal was established by credentials, not one of the
// server's own (System, Anonymous).
func (p *Principal) Authenticated() bool { return p.kind == authenticated }

// Recorded returns the subject to store as startedBy or decidedBy: nil for System and Anonymous,
// which stand for nobody in particular, and for no principal (p nil).
func (p *Principal) Recorded() *string {
	if p == nil || !p.Authenticated() {
		return nil
	}
	s := p.Subject
	return &s
}

// Has reports whether the principal holds role r, directly or through a higher built-in role.
// Holding any role but the requester, custom ones included, grants RoleViewer; operators and
// above hold RoleRequester.
func (p *Principal) Has(r Role) bool {
	need, builtin := rank[r]
	for _, held := range p.Roles {
		if held == r {
			return true
		}
		if r == RoleRequester {
			if got, ok := rank[held]; ok && got >= rank[RoleOperator] {
				return true
			}
			continue
		}
		if !builtin || held == RoleRequester {
			continue
		}
		if got, ok := rank[held]; (ok && got >= need) || (!ok && need == rank[RoleViewer]) {
			return true
		}
	}
	return false
}

// HasAny reports whether the principal holds one of roles.
func (p *Principal) HasAny(roles []Role) bool {
	return slices.ContainsFunc(roles, p.Has)
}

// Sees reports whether runs of the resource (nil: none) are visible to the principal.
func (p *Principal) Sees(resourceID *string) bool {
	if p.Resources == nil {
		return true
	}
	return resourceID != nil && slices.Contains(p.Resources, *resourceID)
}

// RequestsFor reports whether the principal may request approvals for the agent of that id.
func (p *Principal) RequestsFor(agentID string) bool {
	return p.Agents == nil || slices.Contains(p.Agents, agentID)
}

type principalKey struct{}

// WithPrincipal returns ctx acting for p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// WithSystem returns ctx acting for the server itself (System).
func WithSystem(ctx context.Context) context.Context { return WithPrincipal(ctx, System()) }

// PrincipalFrom returns the principal ctx acts for, or nil when no one authenticated: every rule
// then answers UNAUTHENTICATED.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
