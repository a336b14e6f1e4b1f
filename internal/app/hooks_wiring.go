package app

import (
	"context"
	"net/http"
	"time"

	"interlock/approvals"
	"interlock/auth"
	"interlock/gqlguard"
)

// hooks is the handler of the coding-agent permission hooks (/hooks/claude-code/{agentId},
// /hooks/codex/{agentId}) behind authentication, as /approvals: the same bearer tokens (a
// requester's, typically), body limit, --max-approval-wait and mutation rate (rate, when not
// nil: each hook stores a request). No CORS: coding agents call it, not browsers.
func (a *App) hooks(rate *gqlguard.MutationRate) http.Handler {
	o := approvals.HookOptions{Service: a.Service, MaxWait: a.cfg.MaxApprovalWait, MaxBodyBytes: maxBodyBytes, Logger: a.log}
	if rate != nil {
		o.RateFunc = func(ctx context.Context) time.Duration { return rate.Take(ctx, 1) }
	}
	var h http.Handler = approvals.NewHooks(o)
	if a.authn != nil {
		h = auth.Require(a.authn, h, approvals.Unauthorized)
	} else {
		h = auth.Anonymous(h)
	}
	return gqlguard.Middleware(h) // the client's address, for the rate without authentication
}
