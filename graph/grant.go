package graph

import (
	"time"

	"interlock/graph/model"
	"interlock/runs"
	"interlock/runtype"
)

// grantInput parses approveToolCall's remember: ttl is whole seconds (at least 1).
func grantInput(in *model.GrantInput) (runs.GrantInput, error) {
	out := runs.GrantInput{Scope: runtype.GrantScope(in.Scope), MaxUses: in.MaxUses, ArgsMatch: in.ArgsMatch}
	if in.TTL != nil {
		if *in.TTL < 1 || time.Duration(*in.TTL)*time.Second > runs.MaxGrantTTL {
			return out, runtype.Errorf(runtype.CodeBadUserInput, "ttl must be between 1 and %d seconds (366 days)", int64(runs.MaxGrantTTL/time.Second))
		}
		out.TTL = time.Duration(*in.TTL) * time.Second
	}
	return out, nil
}

func toGrant(g *runs.GrantView) *model.Grant {
	return &model.Grant{
		ID: g.ID, AgentID: g.AgentID, ToolName: g.ToolName, Scope: model.GrantScope(g.Scope), ScopeValue: g.ScopeValue,
		ResourceID: g.ResourceID, ArgsMatch: g.ArgsMatch, ExpiresAt: g.ExpiresAt, MaxUses: g.MaxUses, Uses: g.Uses,
		Active: g.Active, CreatedBy: g.CreatedBy, CreatedAt: g.CreatedAt, FromRunID: g.FromRunID, FromToolCallID: g.FromToolCallID,
		RevokedAt: g.RevokedAt, RevokedBy: g.RevokedBy,
	}
}
