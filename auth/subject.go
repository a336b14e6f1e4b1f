package auth

import (
	"slices"

	"interlock/runtype"
)

// PrincipalOf returns the principal a subject stands for now, as far as the configuration says
// without a request: the first static token of that subject; with no such token and neither JWTs
// nor OIDC configured, a principal without roles (its token was removed: it may do nothing now);
// nil when JWTs or OIDC are configured and no static token has it (a JWT's subject: only its next token
// says its roles). The run service asks it whether the creator of a grant may still approve
// what the grant lets through (runs.Config.PrincipalOf).
func (a *Authenticator) PrincipalOf(subject string) *runtype.Principal {
	for i := range a.tokens {
		if p := a.tokens[i].principal; p.Subject == subject {
			return &runtype.Principal{Subject: p.Subject, Roles: slices.Clone(p.Roles), Resources: slices.Clone(p.Resources), Agents: slices.Clone(p.Agents)}
		}
	}
	if a.jwt == nil && a.oidc == nil {
		return &runtype.Principal{Subject: subject, Resources: []string{}}
	}
	return nil
}
