// Package oidctest is an OpenID Connect provider for tests, speaking the real wire format on a
// local port: the discovery document, a JSON Web Key Set (one RS256 key), an authorization
// endpoint that signs in a configured user without asking (Authorization Code with PKCE S256
// only), a token endpoint (authorization_code with code_verifier, refresh_token with rotation),
// and an end_session endpoint. Token lifetimes are short when asked, for renewal tests. It is a
// test double: it checks what a real provider checks on these flows, no more.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Options configure a Provider. The zero value is usable.
type Options struct {
	// ClientID is the one public client the provider knows (default "interlock-console").
	ClientID string
	// User holds the claims of the person the authorization endpoint signs in (default
	// sub "u-1", email "ada@example.com", name "Ada Lovelace", roles ["approver"]).
	User map[string]any
	// Lifetime is how long ID and access tokens last (default 5 minutes).
	Lifetime time.Duration
	// NoRefresh makes the token endpoint issue no refresh token (no offline access).
	NoRefresh bool
}

// Provider is a running test provider. Its methods are safe for concurrent use.
type Provider struct {
	// Issuer is the provider's issuer URL (http://127.0.0.1:port).
	Issuer string

	srv  *httptest.Server
	key  *rsa.PrivateKey
	opts Options

	mu        sync.Mutex
	down      bool
	nonce     *string
	codes     map[string]grant
	refresh   map[string]grant
	refreshes int
	logouts   int
	issued    []string
}

// grant is what a code or a refresh token stands for.
type grant struct {
	clientID, redirectURI, challenge, nonce, scope string
}

// Start starts a provider on a local port; Close stops it.
func Start(opts Options) *Provider {
	if opts.ClientID == "" {
		opts.ClientID = "interlock-console"
	}
	if opts.User == nil {
		opts.User = map[string]any{"sub": "u-1", "email": "ada@example.com", "email_verified": true,
			"name": "Ada Lovelace", "roles": []any{"approver"}}
	}
	if opts.Lifetime == 0 {
		opts.Lifetime = 5 * time.Minute
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	p := &Provider{key: key, opts: opts, codes: map[string]grant{}, refresh: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("/jwks", p.jwks)
	mux.HandleFunc("/authorize", p.authorize)
	mux.HandleFunc("/token", p.token)
	mux.HandleFunc("/logout", p.logout)
	p.srv = httptest.NewServer(cors(mux))
	p.Issuer = p.srv.URL
	return p
}

// Close stops the provider.
func (p *Provider) Close() { p.srv.Close() }

// ClientID is the client the provider knows.
func (p *Provider) ClientID() string { return p.opts.ClientID }

// SetDown makes the discovery document and key set answer 503 (down) or serve again.
func (p *Provider) SetDown(down bool) { p.mu.Lock(); p.down = down; p.mu.Unlock() }

// SetNonce makes the ID tokens of the next code exchanges carry nonce instead of the sign-in's:
// a token of another sign-in, which the console must refuse. nil restores the real one.
func (p *Provider) SetNonce(nonce *string) { p.mu.Lock(); p.nonce = nonce; p.mu.Unlock() }

// SetUser replaces the claims of the person signed in from now on.
func (p *Provider) SetUser(claims map[string]any) { p.mu.Lock(); p.opts.User = claims; p.mu.Unlock() }

// Refreshes is how many refresh_token grants the provider has answered.
func (p *Provider) Refreshes() int { p.mu.Lock(); defer p.mu.Unlock(); return p.refreshes }

// Logouts is how many times the end_session endpoint was visited.
func (p *Provider) Logouts() int { p.mu.Lock(); defer p.mu.Unlock(); return p.logouts }

// Issued are the ID tokens the token endpoint has issued, oldest first.
func (p *Provider) Issued() []string { p.mu.Lock(); defer p.mu.Unlock(); return slices.Clone(p.issued) }

// IDToken signs an ID token: iss, aud (the client id), iat, exp (now plus the lifetime) and
// the user's claims, then claims over them (a nil value removes the claim). Tests make expired,
// foreign or misdirected tokens with it.
func (p *Provider) IDToken(claims map[string]any) string {
	p.mu.Lock()
	user := maps.Clone(p.opts.User)
	p.mu.Unlock()
	now := time.Now()
	c := jwt.MapClaims{"iss": p.Issuer, "aud": p.opts.ClientID, "iat": now.Unix(), "exp": now.Add(p.opts.Lifetime).Unix(),
		"auth_time": now.Unix()}
	maps.Copy(c, user)
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(p.key)
	if err != nil {
		panic(err)
	}
	return s
}

// cors lets the console's pages (another origin) read discovery, the keys and token answers,
// as real providers do for public clients.
func cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Provider) isDown(w http.ResponseWriter) bool {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}
	return down
}

func (p *Provider) discovery(w http.ResponseWriter, r *http.Request) {
	if p.isDown(w) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.Issuer,
		"authorization_endpoint":                p.Issuer + "/authorize",
		"token_endpoint":                        p.Issuer + "/token",
		"jwks_uri":                              p.Issuer + "/jwks",
		"end_session_endpoint":                  p.Issuer + "/logout",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"scopes_supported":                      []string{"openid", "profile", "email", "offline_access"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, r *http.Request) {
	if p.isDown(w) {
		return
	}
	pub := p.key.PublicKey
	writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]any{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "k1",
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// authorize signs the configured user in at once and sends the browser back with a code.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	bad := func(msg string) { http.Error(w, "oidctest: "+msg, http.StatusBadRequest) }
	switch {
	case q.Get("client_id") != p.opts.ClientID:
		bad("unknown client_id")
		return
	case q.Get("response_type") != "code":
		bad("response_type must be code")
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		bad("PKCE with S256 is required")
		return
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		bad("scope must hold openid")
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Scheme == "" || redirect.Host == "" {
		bad("redirect_uri must be an absolute URL")
		return
	}
	code := random()
	p.mu.Lock()
	p.codes[code] = grant{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
		nonce: q.Get("nonce"), scope: q.Get("scope")}
	p.mu.Unlock()
	v := redirect.Query()
	v.Set("code", code)
	if s := q.Get("state"); s != "" {
		v.Set("state", s)
	}
	redirect.RawQuery = v.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token answers the authorization_code and refresh_token grants.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if p.isDown(w) {
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	refuse := func(code, desc string) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": code, "error_description": desc})
	}
	if r.PostForm.Get("client_id") != p.opts.ClientID {
		refuse("invalid_client", "unknown client_id")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var g grant
	nonce := ""
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		var ok bool
		g, ok = p.codes[r.PostForm.Get("code")]
		delete(p.codes, r.PostForm.Get("code")) // one use
		if !ok {
			refuse("invalid_grant", "unknown or used code")
			return
		}
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			refuse("invalid_grant", "code_verifier does not match code_challenge")
			return
		}
		if r.PostForm.Get("redirect_uri") != g.redirectURI {
			refuse("invalid_grant", "redirect_uri differs from the authorization request's")
			return
		}
		nonce = g.nonce
		if p.nonce != nil {
			nonce = *p.nonce
		}
	case "refresh_token":
		var ok bool
		g, ok = p.refresh[r.PostForm.Get("refresh_token")]
		delete(p.refresh, r.PostForm.Get("refresh_token")) // rotated
		if !ok {
			refuse("invalid_grant", "unknown or used refresh token")
			return
		}
		p.refreshes++
	default:
		refuse("unsupported_grant_type", "authorization_code or refresh_token")
		return
	}
	now := time.Now()
	c := jwt.MapClaims{"iss": p.Issuer, "aud": p.opts.ClientID, "iat": now.Unix(), "exp": now.Add(p.opts.Lifetime).Unix(),
		"auth_time": now.Unix()}
	maps.Copy(c, p.opts.User)
	if nonce != "" {
		c["nonce"] = nonce
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = "k1"
	id, err := tok.SignedString(p.key)
	if err != nil {
		panic(err)
	}
	p.issued = append(p.issued, id)
	answer := map[string]any{"access_token": random(), "token_type": "Bearer", "id_token": id,
		"expires_in": int(p.opts.Lifetime / time.Second), "scope": g.scope}
	if !p.opts.NoRefresh && slices.Contains(strings.Fields(g.scope), "offline_access") {
		rt := random()
		p.refresh[rt] = g
		answer["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, answer)
}

// logout ends the session and sends the browser to post_logout_redirect_uri when given.
func (p *Provider) logout(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.logouts++
	p.mu.Unlock()
	to := r.URL.Query().Get("post_logout_redirect_uri")
	if to == "" {
		fmt.Fprintln(w, "signed out")
		return
	}
	http.Redirect(w, r, to, http.StatusFound)
}
