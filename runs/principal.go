package runs

import (
	"context"
	"slices"
	"time"
)

// Role names what a principal may do. The four built-in roles are ordered, each including the
// ones before it; any other name is a custom role, which lets its holders read and decide the
// calls of tools whose approverRoles name it (a tool's `approverRoles: [refunds]`).
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
)

// rank orders the built-in roles; custom roles rank as viewers.
var rank = map[Role]int{RoleViewer: 1, RoleOperator: 2, RoleApprover: 3, RoleAdmin: 4}

// Principal is who a request acts for, as authentication established it. The service checks
// every operation against the principal in the request's context; a context without one
// (authentication off, or the server's own work) is not restricted.
type Principal struct {
	// Subject names the person or client; decisions record it as decidedBy, runs as startedBy.
	Subject string
	// Roles are the principal's roles, built-in or custom.
	Roles []Role
	// Resources, when not nil, are the only resources whose runs the principal may see, start
	// or decide; runs of any other resource, and runs without one, do not exist for it.
	Resources []string
	// Expires is when the credentials the principal was established by stop being valid (a
	// JWT's exp); zero for tokens that do not expire. A WebSocket ends then.
	Expires time.Time
}

// Has reports whether the principal holds role r, directly or through a higher built-in role.
// Holding any role, custom ones included, grants RoleViewer.
func (p *Principal) Has(r Role) bool {
	need, builtin := rank[r]
	for _, held := range p.Roles {
		if held == r {
			return true
		}
		if !builtin {
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

type principalKey struct{}

// WithPrincipal returns ctx acting for p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal ctx acts for, or nil when it acts for nobody in particular
// (authentication off, or the server's own work).
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
