package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"interlock/runtype"
)

// OIDC signs staff into the console with an OpenID Connect provider (Keycloak, Okta, Entra ID,
// Google, …). The console runs Authorization Code + PKCE itself, as a public client holding no
// secret, and sends the ID token it gets as "Authorization: Bearer <token>" on every transport;
// the server verifies it against the provider's discovery document and keys (go-oidc).
type OIDC struct {
	// Issuer is the provider's issuer URL, exactly as its discovery document
	// (<issuer>/.well-known/openid-configuration) and its tokens' iss say. Required; https, or
	// http on a loopback host (a provider on this machine).
	Issuer string `yaml:"issuer"`
	// ClientID is the console's client at the provider (a public client: no secret, PKCE);
	// its ID tokens name it as their audience. Required.
	ClientID string `yaml:"clientID"`
	// Scopes the console asks for. Default: openid profile email offline_access (the last for a
	// refresh token, so that the console renews its sign-in without leaving the page). Must
	// hold openid.
	Scopes []string `yaml:"scopes"`
	// Claims names the ID token's claims the principal is read from: subject (default sub; email
	// is refused when the token says email_verified false), roles (default roles), and
	// optionally resources and agents, as for auth.jwt.
	Claims Claims `yaml:"claims"`
	// DefaultRole is the role (or roles) of a token without the roles claim. Default: none, and
	// such a token is refused (UNAUTHENTICATED) rather than let in with a guessed role. A token
	// whose roles claim is present but empty holds no role: every operation is forbidden.
	DefaultRole Roles `yaml:"defaultRole"`
}

// DefaultScopes are the scopes the console asks for when auth.oidc.scopes is not set.
var DefaultScopes = []string{"openid", "profile", "email", "offline_access"}

// WithDefaults returns o with the default scopes and claim names filled in.
func (o OIDC) WithDefaults() OIDC {
	if len(o.Scopes) == 0 {
		o.Scopes = slices.Clone(DefaultScopes)
	}
	o.Claims = o.Claims.WithDefaults()
	return o
}

// problems returns what is wrong with the auth.oidc section, paths starting with at.
func (o *OIDC) problems(at string) []string {
	var p []string
	add := func(path, msg string) { p = append(p, path+": "+msg) }
	if o.Issuer == "" {
		add(at+".issuer", "is required: the provider's issuer URL, as its discovery document says")
	} else if u, err := url.Parse(o.Issuer); err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" ||
		!(u.Scheme == "https" || (u.Scheme == "http" && isLoopback(u.Hostname()))) {
		add(at+".issuer", fmt.Sprintf("%q must be an https URL without query or fragment (http only for localhost)", o.Issuer))
	}
	if strings.TrimSpace(o.ClientID) == "" {
		add(at+".clientID", "is required: the console's client id at the provider (a public client with PKCE)")
	}
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		add(at+".scopes", "must hold openid, or the provider issues no ID token")
	}
	for i, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\n") {
			add(fmt.Sprintf("%s.scopes[%d]", at, i), fmt.Sprintf("%q is not one scope", s))
		}
	}
	for j, r := range o.DefaultRole {
		switch {
		case r == badRole:
			add(at+".defaultRole", "must be a role name or a list of role names")
		case strings.TrimSpace(string(r)) == "":
			add(fmt.Sprintf("%s.defaultRole[%d]", at, j), "is empty")
		case strings.TrimSpace(string(r)) != string(r):
			add(fmt.Sprintf("%s.defaultRole[%d]", at, j), fmt.Sprintf("%q has spaces around it", r))
		}
	}
	return p
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ConsoleOIDC is what the console needs to sign in (GET /console.json): public values only.
type ConsoleOIDC struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"clientID"`
	Scopes   []string `json:"scopes"`
}

const (
	// discoveryTimeout bounds one fetch of the discovery document.
	discoveryTimeout = 10 * time.Second
	// discoveryRetryMax is the longest wait between two tries to reach a provider that was down.
	discoveryRetryMax = 30 * time.Second
)

// oidcVerifier verifies the provider's ID tokens. Until the discovery document has been read
// (the provider may be down when the server starts), its tokens are refused and discovery is
// tried again in the background, every second at first and then at most every 30 s.
type oidcVerifier struct {
	cfg    OIDC
	roles  []runtype.Role
	now    func() time.Time
	logger *slog.Logger

	mu       sync.RWMutex
	verifier *oidc.IDTokenVerifier // nil until discovery succeeded
	origins  []string              // origins of the discovered endpoints the browser calls
}

func newOIDCVerifier(ctx context.Context, c *OIDC, opts Options) *oidcVerifier {
	v := &oidcVerifier{cfg: c.WithDefaults(), roles: slices.Clone([]runtype.Role(c.DefaultRole)), now: opts.NowFunc, logger: opts.Logger}
	if v.now == nil {
		v.now = time.Now
	}
	if v.logger == nil {
		v.logger = slog.Default()
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Timeout: discoveryTimeout}
	}
	// The key set go-oidc makes keeps this context for its fetches: it must live as long as
	// the authenticator (ctx ends with Close), not as long as one attempt.
	ctx = oidc.ClientContext(ctx, client)
	if err := v.discover(ctx); err != nil {
		v.logger.Warn("auth: cannot read the OIDC provider's discovery document; its tokens are refused until it answers, trying again in the background",
			"issuer", c.Issuer, "error", err)
		go v.retry(ctx)
	}
	return v
}

// discover reads the discovery document and makes the verifier of its keys.
func (v *oidcVerifier) discover(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	p, err := oidc.NewProvider(actx, v.cfg.Issuer)
	if err != nil {
		return err
	}
	var doc struct {
		Token    string `json:"token_endpoint"`
		UserInfo string `json:"userinfo_endpoint"`
		Revoke   string `json:"revocation_endpoint"`
	}
	_ = p.Claims(&doc)
	var origins []string
	for _, e := range []string{doc.Token, doc.UserInfo, doc.Revoke} {
		if o := origin(e); o != "" && !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	iv := p.VerifierContext(ctx, &oidc.Config{
		ClientID: v.cfg.ClientID,
		// The same leeway for clock skew as auth.jwt: accepted until exp plus leeway.
		Now: func() time.Time { return v.now().Add(-leeway) },
	})
	v.mu.Lock()
	v.verifier, v.origins = iv, origins
	v.mu.Unlock()
	return nil
}

// retry tries discovery again until it succeeds or ctx ends, waiting 1 s, 2 s, 4 s, … up to 30 s.
func (v *oidcVerifier) retry(ctx context.Context) {
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := v.discover(ctx)
		if err == nil {
			v.logger.Info("auth: the OIDC provider answered; its tokens are accepted now", "issuer", v.cfg.Issuer)
			return
		}
		if ctx.Err() != nil {
			return
		}
		v.logger.Warn("auth: the OIDC provider still does not answer", "issuer", v.cfg.Issuer, "error", err, "retryIn", wait)
		wait = min(wait*2, discoveryRetryMax)
	}
}

func (v *oidcVerifier) current() *oidc.IDTokenVerifier {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.verifier
}

// verify checks an ID token's signature, issuer, audience (the client id) and expiry, and
// reads its principal.
func (v *oidcVerifier) verify(ctx context.Context, raw string) (*runtype.Principal, error) {
	iv := v.current()
	if iv == nil {
		return nil, fail("the identity provider (auth.oidc.issuer) has not been reached yet; try again shortly")
	}
	tok, err := iv.Verify(ctx, raw)
	if err != nil {
		return nil, explainOIDC(err)
	}
	claims := map[string]any{}
	if err := tok.Claims(&claims); err != nil {
		return nil, &Error{Message: "token claims are invalid", cause: err}
	}
	names := v.cfg.Claims
	p := &runtype.Principal{Expires: tok.Expiry.Add(leeway)}
	sub, _ := claims[names.Subject].(string)
	if strings.TrimSpace(sub) == "" {
		return nil, fail(fmt.Sprintf("token has no subject (claim %q)", names.Subject))
	}
	// An email names a person only when the provider vouches for it: a missing email_verified
	// (some providers never send it) is not a yes.
	if names.Subject == "email" {
		if verified := claims["email_verified"]; verified != true && verified != "true" {
			return nil, fail("token's email is not verified (email_verified is not true), so it cannot name the subject; use another claims.subject, such as sub")
		}
	}
	// A token the provider issued to another client that also lists this one in its audience
	// (Keycloak adds a client to aud when the user holds its roles) is that client's, not a
	// sign-in to the console: the authorized party, when named or needed, must be this client.
	azp, _ := claims["azp"].(string)
	if (azp != "" && azp != v.cfg.ClientID) || (azp == "" && len(tok.Audience) > 1) {
		return nil, fail(fmt.Sprintf("token was issued to another client (azp %q), not to auth.oidc.clientID", azp))
	}
	if typ, ok := claims["typ"].(string); ok && !strings.EqualFold(typ, "ID") {
		return nil, fail(fmt.Sprintf("token is a %q token, not an ID token", typ))
	}
	p.Subject = sub
	if claims[names.Roles] == nil {
		if len(v.roles) == 0 {
			return nil, fail(fmt.Sprintf("token has no roles claim %q and auth.oidc.defaultRole is not set", names.Roles))
		}
		p.Roles = slices.Clone(v.roles)
	} else {
		roles, ok := stringClaim(claims, names.Roles)
		if !ok {
			return nil, fail(fmt.Sprintf("token claim %q must be a role or a list of roles", names.Roles))
		}
		for _, r := range roles {
			p.Roles = append(p.Roles, runtype.Role(r))
		}
	}
	if names.Resources != "" {
		res, ok := stringClaim(claims, names.Resources)
		if !ok {
			return nil, fail(fmt.Sprintf("token claim %q must be a resource id or a list of them", names.Resources))
		}
		p.Resources = append([]string{}, res...)
	}
	if names.Agents != "" {
		ids, ok := stringClaim(claims, names.Agents)
		if !ok {
			return nil, fail(fmt.Sprintf("token claim %q must be an agent id or a list of them", names.Agents))
		}
		p.Agents = append([]string{}, ids...)
	}
	return p, nil
}

// explainOIDC turns go-oidc's error into one a client may read. go-oidc has a type for an
// expired token only; the others are told apart by their (stable) wording.
func explainOIDC(err error) *Error {
	e := func(msg string) *Error { return &Error{Message: msg, cause: err} }
	var expired *oidc.TokenExpiredError
	s := err.Error()
	switch {
	case errors.As(err, &expired):
		return e("token expired")
	case strings.Contains(s, "issued by a different provider"):
		return e("token issuer is not trusted")
	case strings.Contains(s, "expected audience"):
		return e("token has the wrong audience")
	case strings.Contains(s, "malformed jwt"):
		return e("token is malformed")
	case strings.Contains(s, "signature"):
		return e("token signature is invalid")
	case strings.Contains(s, "nbf"):
		return e("token is not valid yet")
	}
	return e("token is invalid")
}

// unverifiedIssuer reads a JWT's iss claim without verifying anything: only to choose which
// verifier checks it.
func unverifiedIssuer(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return ""
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Iss
}

// origin returns the scheme://host[:port] of an http(s) URL, "" for anything else.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// ConsoleOIDC returns what the console needs to sign in with OIDC, nil without auth.oidc.
func (a *Authenticator) ConsoleOIDC() *ConsoleOIDC {
	if a == nil || a.oidc == nil {
		return nil
	}
	c := a.oidc.cfg
	return &ConsoleOIDC{Issuer: c.Issuer, ClientID: c.ClientID, Scopes: slices.Clone(c.Scopes)}
}

// ConnectOrigins are the origins the console's pages must be allowed to fetch from (its
// Content-Security-Policy connect-src): the issuer's, and those of the token, userinfo and
// revocation endpoints once discovery has read them. None without auth.oidc.
func (a *Authenticator) ConnectOrigins() []string {
	if a == nil || a.oidc == nil {
		return nil
	}
	out := []string{origin(a.oidc.cfg.Issuer)}
	a.oidc.mu.RLock()
	defer a.oidc.mu.RUnlock()
	for _, o := range a.oidc.origins {
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}
