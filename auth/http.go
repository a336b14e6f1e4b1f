package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"interlock/gqlhttp"
	"interlock/runtype"
)

// Middleware authenticates each request's Authorization header and serves it acting for the
// principal (runtype.WithPrincipal). A request that fails is answered 401 with a GraphQL error
// whose extensions.code is UNAUTHENTICATED and a WWW-Authenticate challenge (RFC 6750).
//
// Only a real WebSocket opening handshake (IsHandshake) without an Authorization header goes
// through unauthenticated: browsers cannot set headers on a WebSocket, so it authenticates in its
// connection_init payload (FromInitPayload), and until then it acts for nobody, which every rule
// refuses. Any other request, whatever its Upgrade or Accept headers say, needs a token.
//
// A request whose token was valid when it arrived is answered in full; a subscription ends when
// its token expires (Operations), a WebSocket closes then.
func Middleware(a *Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header := r.Header.Get("Authorization")
		if header == "" && IsHandshake(r) {
			next.ServeHTTP(w, r)
			return
		}
		p, err := a.Authenticate(r.Context(), header)
		if err != nil {
			Unauthorized(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(runtype.WithPrincipal(r.Context(), p)))
	})
}

// Require is Middleware for routes that are not GraphQL (POST /approvals): every request needs
// a token, WebSocket handshakes included, and a request that fails is answered by refuse (which
// should call Challenge) in the route's own format.
func Require(a *Authenticator, next http.Handler, refuse func(w http.ResponseWriter, r *http.Request, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r.Context(), r.Header.Get("Authorization"))
		if err != nil {
			refuse(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(runtype.WithPrincipal(r.Context(), p)))
	})
}

// Anonymous serves every request acting for runtype.Anonymous: the server's handler when
// authentication is off, so that even then no request acts for nobody.
func Anonymous(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(runtype.WithPrincipal(r.Context(), runtype.Anonymous())))
	})
}

// IsHandshake reports whether r is a WebSocket opening handshake (RFC 6455 4.1): a GET whose
// Connection header holds "upgrade", whose Upgrade header holds "websocket", with a
// Sec-WebSocket-Key. A POST, or a GET lacking any of them, is not one, whatever else it says.
func IsHandshake(r *http.Request) bool {
	return r.Method == http.MethodGet && hasToken(r.Header, "Connection", "upgrade") &&
		hasToken(r.Header, "Upgrade", "websocket") && r.Header.Get("Sec-WebSocket-Key") != ""
}

// hasToken reports whether the comma-separated values of header name hold token, in any case.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Unauthorized writes the 401 answer to request r that failed authentication with err, in the
// JSON media type r prefers (application/graphql-response+json or application/json) and without
// a data key, as any request refused before it ran; an error that is not an *Error is shown as
// "unauthenticated", its text withheld.
func Unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	gqlhttp.WriteError(w, r, http.StatusUnauthorized, "UNAUTHENTICATED", Challenge(w, err))
}

// Challenge sets the WWW-Authenticate challenge (RFC 6750) of the 401 answer to a request that
// failed authentication with err, and returns the message to show: an error that is not an
// *Error is shown as "unauthenticated", its text withheld.
func Challenge(w http.ResponseWriter, err error) string {
	msg, missing := "unauthenticated", false
	var ae *Error
	if errors.As(err, &ae) {
		msg, missing = ae.Message, ae.Missing
	}
	challenge := `Bearer realm="interlock"`
	if !missing {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	return msg
}

// FromInitPayload authenticates a WebSocket's connection_init payload, whose "authorization"
// (or "Authorization") is a string like the header: "Bearer <token>". Failures are *Error.
func (a *Authenticator) FromInitPayload(ctx context.Context, payload map[string]any) (*runtype.Principal, error) {
	v, ok := payload["authorization"]
	if !ok {
		v, ok = payload["Authorization"]
	}
	if !ok || v == nil {
		return nil, &Error{Message: msgMissing, Missing: true}
	}
	s, ok := v.(string)
	if !ok {
		return nil, fail(`malformed authorization in connection_init: expected "Bearer <token>"`)
	}
	return a.Authenticate(ctx, s)
}
