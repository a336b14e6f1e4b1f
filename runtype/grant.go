package runtype

import (
	"encoding/json"
	"time"
)

// GrantScope says how far a grant reaches beyond the call whose approval created it.
type GrantScope string

// The scopes of a grant.
const (
	// GrantScopeThread lets through calls of runs in the approved run's thread only.
	GrantScopeThread GrantScope = "THREAD"
	// GrantScopeResource lets through calls of runs of the approved run's resource.
	GrantScopeResource GrantScope = "RESOURCE"
	// GrantScopeAgent lets through calls of any run of the agent that its creator may decide
	// (the resources the creator sees).
	GrantScopeAgent GrantScope = "AGENT"
)

// Valid reports whether s is one of the three scopes.
func (s GrantScope) Valid() bool {
	return s == GrantScopeThread || s == GrantScopeResource || s == GrantScopeAgent
}

// Grant is a remembered approval: "approve, and allow similar". A person who approves a call
// may let later calls of the same agent's same tool through without being asked, within a
// scope (the thread, the resource, or the agent), while their arguments match ArgsMatch,
// until ExpiresAt, at most MaxUses times, and only while the creator could still approve them
// (runs/grant.go holds the rules). Every call a grant lets through is recorded as an
// AUTO_APPROVED decision naming it (Decision.GrantID).
//
//	approveToolCall(remember) ──▶ live ──(expiresAt passes / uses reach maxUses)──▶ spent
//	                                └──revokeGrant──▶ revoked
type Grant struct {
	ID       string
	AgentID  string
	ToolName string
	Scope    GrantScope
	// ScopeValue is the thread id (THREAD) or the resource id (RESOURCE); nil for AGENT.
	ScopeValue *string
	// ResourceID is the resource of the run whose approval created the grant: who sees that
	// run sees the grant.
	ResourceID *string
	// ArgsMatch constrains the arguments of the calls let through (canonical JSON; nil: any):
	// {"/json/pointer": {"eq": value, "lte": number, "gte": number}, …}.
	ArgsMatch json.RawMessage
	// ExpiresAt is when the grant stops applying (nil: never).
	ExpiresAt *time.Time
	// MaxUses is how many calls it may let through (nil: no limit); Uses how many it did.
	MaxUses *int
	Uses    int
	// CreatedBy is the subject of the person who created it (nil for the server's own
	// principals, when authentication is off).
	CreatedBy *string
	// CreatorRoles and CreatorResources are the creator's roles and resources (nil: every
	// resource) when it created the grant: what it may let through is bounded by them.
	CreatorRoles     []Role
	CreatorResources []string
	CreatedAt        time.Time
	// FromRunID and FromToolCallID name the approval that created the grant.
	FromRunID      string
	FromToolCallID string
	RevokedAt      *time.Time
	RevokedBy      *string
}

// Live reports whether the grant may still let a call through at now, as far as the grant
// alone says (not revoked, not expired, uses left); whether its creator still may is the run
// service's rule.
func (g *Grant) Live(now time.Time) bool {
	return g.RevokedAt == nil && (g.ExpiresAt == nil || g.ExpiresAt.After(now)) && (g.MaxUses == nil || g.Uses < *g.MaxUses)
}
