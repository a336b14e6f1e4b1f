package httpguard

import (
	"net/http"
	"strings"
)

// ConsoleCSP is the console's Content-Security-Policy: its scripts, styles and images come from
// this server only (no inline script or style), it talks to this server's GraphQL over fetch and
// WebSocket only, and no other site may frame it (clickjacking an Approve button).
const ConsoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// ConsoleCSPConnecting is ConsoleCSP whose connect-src also allows origins (an OIDC provider's,
// whose discovery document and token endpoint the console fetches to sign in).
func ConsoleCSPConnecting(origins []string) string {
	if len(origins) == 0 {
		return ConsoleCSP
	}
	return strings.Replace(ConsoleCSP, "connect-src 'self' ws: wss:", "connect-src 'self' ws: wss: "+strings.Join(origins, " "), 1)
}

// ConsoleConnecting is Console with ConsoleCSPConnecting(origins()), asked on every answer
// (what an OIDC provider's discovery document names is known only once it has been read).
func ConsoleConnecting(next http.Handler, origins func() []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", ConsoleCSPConnecting(origins()))
		noFraming(w.Header())
		next.ServeHTTP(w, r)
	})
}

// Console adds the console's security headers to every answer of next: ConsoleCSP,
// X-Frame-Options DENY (for browsers without frame-ancestors), X-Content-Type-Options nosniff
// and Referrer-Policy no-referrer (run ids in URLs stay on this site).
func Console(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", ConsoleCSP)
		noFraming(w.Header())
		next.ServeHTTP(w, r)
	})
}

// NoFraming adds the headers of Console except the Content-Security-Policy, for pages that set
// a policy of their own (the Playground: GraphiQL needs inline styles) but must not be framed
// either.
func NoFraming(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		noFraming(w.Header())
		next.ServeHTTP(w, r)
	})
}

func noFraming(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
}
