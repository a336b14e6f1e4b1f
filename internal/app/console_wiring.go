package app

import (
	"encoding/json"
	"net/http"

	"interlock/auth"
	"interlock/httpguard"
	"interlock/web"
)

// consoleConfig is GET /console.json: what the console reads before it signs in. Public (it
// holds no secret: an OIDC client id and issuer are visible in every sign-in redirect), so it
// is served without authentication. {"oidc": {"issuer", "clientID", "scopes"}} with auth.oidc
// configured; {} otherwise, and the console keeps its pasted-token and printed-link sign-in.
func (a *App) consoleConfig() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body := struct {
			OIDC *auth.ConsoleOIDC `json:"oidc,omitempty"`
		}{OIDC: a.authn.ConsoleOIDC()} // nil-safe: authentication off has no OIDC
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(body)
	})
}

// console serves the console's files with its security headers; its connect-src allows the
// OIDC provider's origins when auth.oidc is configured.
func (a *App) console() http.Handler {
	return httpguard.ConsoleConnecting(web.Handler(), a.authn.ConnectOrigins)
}
