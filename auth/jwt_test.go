package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"interlock/auth"
	"interlock/runtype"
)

const (
	issuer   = "https://idp.test/"
	audience = "interlock"
)

// key is a signing key of the test identity provider.
type key struct {
	kid    string
	method jwt.SigningMethod
	alg    jwkset.ALG
	priv   crypto.Signer
}

func ecKey(t *testing.T, kid string) key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key{kid: kid, method: jwt.SigningMethodES256, alg: jwkset.AlgES256, priv: priv}
}

func rsaKey(t *testing.T, kid string) key {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key{kid: kid, method: jwt.SigningMethodRS256, alg: jwkset.AlgRS256, priv: priv}
}

func (k key) sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(k.method, claims)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// idp serves a JWKS over real HTTP; serve replaces the keys it publishes (a rotation).
type idp struct {
	srv     *httptest.Server
	jwks    atomic.Pointer[[]byte]
	fetches atomic.Int32
	delay   atomic.Int64 // each answer waits this long (a provider across a network)
}

func newIDP(t *testing.T, keys ...key) *idp {
	t.Helper()
	i := &idp{}
	i.serve(t, keys...)
	i.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.fetches.Add(1)
		time.Sleep(time.Duration(i.delay.Load()))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*i.jwks.Load())
	}))
	t.Cleanup(i.srv.Close)
	return i
}

func (i *idp) serve(t *testing.T, keys ...key) {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.priv.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg, USE: jwkset.UseSig},
		})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	raw, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	i.jwks.Store(&raw)
}

func (i *idp) authenticator(t *testing.T, claims auth.Claims) *auth.Authenticator {
	t.Helper()
	return setup(t, &auth.Config{JWT: &auth.JWT{
		JWKSURL: i.srv.URL + "/jwks.json", Issuer: issuer, Audience: audience, Claims: claims,
	}}, auth.Options{Client: i.srv.Client()})
}

// claims are a valid token's, changed by edits (a nil value deletes the claim).
func claims(edits jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss": issuer, "aud": audience, "sub": "carol",
		"exp": time.Now().Add(time.Hour).Unix(), "roles": []string{"approver"},
	}
	for k, v := range edits {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func TestJWKS(t *testing.T) {
	t.Parallel()
	a, stranger := ecKey(t, "a"), ecKey(t, "a") // stranger: another key under a's kid
	r := rsaKey(t, "r")
	i := newIDP(t, a, r)
	authn := i.authenticator(t, auth.Claims{})

	pubDER, err := x509.MarshalPKIXPublicKey(r.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hmacWith := func(secret []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil))
		tok.Header["kid"] = r.kid
		s, err := tok.SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, token string
		want        string // the error; "" for success
		roles       []runtype.Role
	}{
		{"EC key", a.sign(t, claims(nil)), "", []runtype.Role{runtype.RoleApprover}},
		{"RSA key", r.sign(t, claims(nil)), "", []runtype.Role{runtype.RoleApprover}},
		{"role as a string", a.sign(t, claims(jwt.MapClaims{"roles": "refunds"})), "", []runtype.Role{"refunds"}},
		{"several audiences", a.sign(t, claims(jwt.MapClaims{"aud": []string{"other", audience}})), "", []runtype.Role{runtype.RoleApprover}},
		{"no roles", a.sign(t, claims(jwt.MapClaims{"roles": nil})), "", nil},
		{"expired within the leeway", a.sign(t, claims(jwt.MapClaims{"exp": time.Now().Add(-10 * time.Second).Unix()})), "", []runtype.Role{runtype.RoleApprover}},
		{"expired", a.sign(t, claims(jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()})), "token expired", nil},
		{"no expiry", a.sign(t, claims(jwt.MapClaims{"exp": nil})), "token has no expiry (exp)", nil},
		{"not valid yet", a.sign(t, claims(jwt.MapClaims{"nbf": time.Now().Add(time.Hour).Unix()})), "token is not valid yet", nil},
		{"issued in the future", a.sign(t, claims(jwt.MapClaims{"iat": time.Now().Add(time.Hour).Unix()})), "token is issued in the future (iat)", nil},
		{"issued within the leeway", a.sign(t, claims(jwt.MapClaims{"iat": time.Now().Add(10 * time.Second).Unix()})), "", []runtype.Role{runtype.RoleApprover}},
		{"issued in the past", a.sign(t, claims(jwt.MapClaims{"iat": time.Now().Add(-time.Minute).Unix()})), "", []runtype.Role{runtype.RoleApprover}},
		{"wrong audience", a.sign(t, claims(jwt.MapClaims{"aud": "billing"})), "token has the wrong audience", nil},
		{"no audience", a.sign(t, claims(jwt.MapClaims{"aud": nil})), "token has the wrong audience", nil},
		{"wrong issuer", a.sign(t, claims(jwt.MapClaims{"iss": "https://evil.test/"})), "token issuer is not trusted", nil},
		{"no issuer", a.sign(t, claims(jwt.MapClaims{"iss": nil})), "token issuer is not trusted", nil},
		{"issuer and expiry wrong", a.sign(t, claims(jwt.MapClaims{"iss": "https://evil.test/", "exp": time.Now().Add(-time.Hour).Unix()})), "token issuer is not trusted", nil},
		{"no subject", a.sign(t, claims(jwt.MapClaims{"sub": nil})), `token has no subject (claim "sub")`, nil},
		{"roles of the wrong type", a.sign(t, claims(jwt.MapClaims{"roles": []any{"approver", 7}})), `token claim "roles" must be a role or a list of roles`, nil},
		{"signed by another key", stranger.sign(t, claims(nil)), "token signature is invalid", nil},
		{"tampered claims", tamper(t, a.sign(t, claims(nil))), "token signature is invalid", nil},
		{"unknown kid", ecKey(t, "z").sign(t, claims(nil)), "token is signed by an unknown key", nil},
		{"HS256 with the RSA public key as secret", hmacWith(pubPEM), "token signing algorithm is not accepted", nil},
		{"HS256 with the RSA public key DER as secret", hmacWith(pubDER), "token signing algorithm is not accepted", nil},
		{"alg none", none, "token signing algorithm is not accepted", nil},
		{"malformed", "a.b.c", "token is malformed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := authn.Authenticate(context.Background(), "Bearer "+tc.token)
			if tc.want != "" {
				if p != nil {
					t.Fatalf("authenticated as %+v", p)
				}
				authError(t, err, tc.want, tc.token)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Subject != "carol" || !slices.Equal(p.Roles, tc.roles) || p.Resources != nil {
				t.Fatalf("got %+v", p)
			}
		})
	}
}

// tamper changes a signed token's claims, keeping its header and signature.
func tamper(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	body, err := json.Marshal(claims(jwt.MapClaims{"roles": []string{"admin"}}))
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(body)
	return strings.Join(parts, ".")
}

// TestJWKSRotation: once the identity provider publishes a new key, tokens signed with it
// verify without restarting the authenticator, and the withdrawn key no longer does — also
// when the provider takes a while to answer (the refresh once had a 1 ms deadline).
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	a, b := ecKey(t, "key-a"), ecKey(t, "key-b")
	i := newIDP(t, a)
	authn := i.authenticator(t, auth.Claims{})
	if _, err := authn.Authenticate(context.Background(), "Bearer "+a.sign(t, claims(nil))); err != nil {
		t.Fatal(err)
	}
	if n := i.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches of the JWKS, want 1 at start", n)
	}

	i.serve(t, b)
	i.delay.Store(int64(50 * time.Millisecond))
	p, err := authn.Authenticate(context.Background(), "Bearer "+b.sign(t, claims(nil)))
	if err != nil {
		t.Fatalf("a token signed with the new key: %v", err)
	}
	if p.Subject != "carol" {
		t.Fatalf("got %+v", p)
	}
	if n := i.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches of the JWKS, want 2", n)
	}
	_, err = authn.Authenticate(context.Background(), "Bearer "+a.sign(t, claims(nil)))
	authError(t, err, "token is signed by an unknown key", "")
	if n := i.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches of the JWKS after a withdrawn key's token, want still 2 (refreshes are limited to one a minute)", n)
	}
}

func TestJWKSUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	_, err := auth.New(context.Background(), &auth.Config{JWT: &auth.JWT{
		JWKSURL: srv.URL + "/jwks.json", Issuer: issuer, Audience: audience,
	}}, auth.Options{Client: srv.Client()})
	if err == nil || !strings.Contains(err.Error(), "auth.jwt.jwksURL: cannot fetch the key set") {
		t.Fatalf("got %v", err)
	}
}

func TestResourcesClaim(t *testing.T) {
	t.Parallel()
	a := ecKey(t, "a")
	i := newIDP(t, a)
	authn := i.authenticator(t, auth.Claims{Subject: "email", Roles: "groups", Resources: "tenants"})
	for _, tc := range []struct {
		name      string
		edits     jwt.MapClaims
		resources []string
		want      string
	}{
		{"list", jwt.MapClaims{"tenants": []string{"customer-1", "customer-2"}}, []string{"customer-1", "customer-2"}, ""},
		{"one", jwt.MapClaims{"tenants": "customer-1"}, []string{"customer-1"}, ""},
		{"none listed", jwt.MapClaims{"tenants": []string{}}, []string{}, ""},
		{"claim absent: nothing visible", nil, []string{}, ""},
		{"wrong type", jwt.MapClaims{"tenants": map[string]any{"a": 1}}, nil, `token claim "tenants" must be a resource id or a list of them`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claims(jwt.MapClaims{"sub": nil, "email": "dave@example.com", "roles": nil, "groups": []string{"viewer", "refunds"}})
			for k, v := range tc.edits {
				c[k] = v
			}
			p, err := authn.Authenticate(context.Background(), "Bearer "+a.sign(t, c))
			if tc.want != "" {
				authError(t, err, tc.want, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Subject != "dave@example.com" || !slices.Equal(p.Roles, []runtype.Role{runtype.RoleViewer, "refunds"}) {
				t.Fatalf("got %+v", p)
			}
			if p.Resources == nil || !slices.Equal(p.Resources, tc.resources) {
				t.Fatalf("resources %#v, want %#v (never nil when the claim is configured)", p.Resources, tc.resources)
			}
		})
	}
}

func TestHS256(t *testing.T) {
	const env = "INTERLOCK_TEST_JWT_SECRET"
	secret := "0123456789abcdef0123456789abcdef-secret"
	cfg := &auth.Config{JWT: &auth.JWT{HS256SecretEnv: env, Issuer: issuer, Audience: audience}}

	t.Setenv(env, "")
	_, err := auth.New(context.Background(), cfg, auth.Options{})
	if err == nil || !strings.Contains(err.Error(), "the environment variable "+env+" is not set") {
		t.Fatalf("unset secret: %v", err)
	}
	t.Setenv(env, "short-secret")
	_, err = auth.New(context.Background(), cfg, auth.Options{})
	if err == nil || !strings.Contains(err.Error(), env) || strings.Contains(err.Error(), "short-secret") {
		t.Fatalf("short secret: %v", err)
	}

	t.Setenv(env, secret)
	authn := setup(t, cfg, auth.Options{})
	hs := func(secret string, c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	p, err := authn.Authenticate(context.Background(), "Bearer "+hs(secret, claims(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "carol" || !slices.Equal(p.Roles, []runtype.Role{runtype.RoleApprover}) {
		t.Fatalf("got %+v", p)
	}
	for name, tc := range map[string]struct{ token, want string }{
		"other secret": {hs(secret+"x", claims(nil)), "token signature is invalid"},
		"expired":      {hs(secret, claims(jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()})), "token expired"},
		"ES256":        {ecKey(t, "a").sign(t, claims(nil)), "token signing algorithm is not accepted"},
	} {
		_, err := authn.Authenticate(context.Background(), "Bearer "+tc.token)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		authError(t, err, tc.want, tc.token)
	}
}

// TestClock: the injected clock decides expiry, with 30s of leeway.
func TestClock(t *testing.T) {
	const env = "INTERLOCK_TEST_JWT_CLOCK_SECRET"
	secret := strings.Repeat("k", 32)
	t.Setenv(env, secret)
	now := time.Now().Add(24 * time.Hour)
	authn := setup(t, &auth.Config{JWT: &auth.JWT{HS256SecretEnv: env, Issuer: issuer, Audience: audience}},
		auth.Options{NowFunc: func() time.Time { return now }})
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(jwt.MapClaims{"exp": now.Add(-20 * time.Second).Unix()})).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authn.Authenticate(context.Background(), "Bearer "+tok); err != nil {
		t.Fatalf("20s past expiry: %v", err)
	}
	now = now.Add(time.Minute)
	_, err = authn.Authenticate(context.Background(), "Bearer "+tok)
	authError(t, err, "token expired", tok)
}

// TestJWTSubjectOfAStaticToken: a JWT whose subject is a configured API token's is refused, so
// that one subject is one principal — for decidedBy, startedBy, separation of duties, the owner
// of idempotency keys and retried decisions.
func TestJWTSubjectOfAStaticToken(t *testing.T) {
	const env = "INTERLOCK_TEST_JWT_SECRET"
	secret := "0123456789abcdef0123456789abcdef-secret"
	t.Setenv(env, secret)
	sum := sha256.Sum256([]byte("carols-api-token"))
	cfg := &auth.Config{
		Tokens: []auth.Token{{Subject: "carol", Role: auth.Roles{runtype.RoleApprover}, SHA256: hex.EncodeToString(sum[:])}},
		JWT:    &auth.JWT{HS256SecretEnv: env, Issuer: issuer, Audience: audience},
	}
	authn := setup(t, cfg, auth.Options{})
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil)).SignedString([]byte(secret)) // sub: carol
	if err != nil {
		t.Fatal(err)
	}
	_, err = authn.Authenticate(context.Background(), "Bearer "+tok)
	authError(t, err, `token subject "carol" is the subject of a configured API token; the identity provider's subjects must differ from them`, tok)
	// A subject that differs only by case or by spaces around it reads as the same one.
	for _, sub := range []string{"Carol", "CAROL", " carol", "carol ", "\tcarol\n", "\u00a0Carol"} {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(jwt.MapClaims{"sub": sub})).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		_, err = authn.Authenticate(context.Background(), "Bearer "+tok)
		authError(t, err, fmt.Sprintf("token subject %q is the subject of a configured API token; the identity provider's subjects must differ from them", sub), tok)
	}
	if p, err := authn.Authenticate(context.Background(), "Bearer "+must(jwt.NewWithClaims(jwt.SigningMethodHS256, claims(jwt.MapClaims{"sub": "carola"})).SignedString([]byte(secret)))); err != nil || p.Subject != "carola" {
		t.Fatalf("another subject: %+v, %v", p, err)
	}
	if p, err := authn.Authenticate(context.Background(), "Bearer carols-api-token"); err != nil || p.Subject != "carol" {
		t.Fatalf("the API token itself: %+v, %v", p, err)
	}
}

// TestJWTAgentsClaim: claims.agents names the claim of the agents a principal may request
// approvals for; without the claim a token may request for none, and without claims.agents
// every token may request for any agent.
func TestJWTAgentsClaim(t *testing.T) {
	const env = "INTERLOCK_TEST_JWT_AGENTS_SECRET"
	secret := strings.Repeat("a", 32)
	t.Setenv(env, secret)
	sign := func(c jwt.MapClaims) string {
		return must(jwt.NewWithClaims(jwt.SigningMethodHS256, claims(c)).SignedString([]byte(secret)))
	}
	bound := setup(t, &auth.Config{JWT: &auth.JWT{HS256SecretEnv: env, Issuer: issuer, Audience: audience,
		Claims: auth.Claims{Agents: "https://interlock.test/agents"}}}, auth.Options{})
	free := setup(t, &auth.Config{JWT: &auth.JWT{HS256SecretEnv: env, Issuer: issuer, Audience: audience}}, auth.Options{})
	for _, tc := range []struct {
		name   string
		authn  *auth.Authenticator
		claim  any
		want   []string // nil: any agent
		reject string
	}{
		{"a list", bound, []string{"deploy-bot", "", "coding"}, []string{"deploy-bot", "coding"}, ""},
		{"one id", bound, "deploy-bot", []string{"deploy-bot"}, ""},
		{"no claim: no agent", bound, nil, []string{}, ""},
		{"the wrong shape", bound, []any{"a", 1}, nil, `token claim "https://interlock.test/agents" must be an agent id or a list of them`},
		{"not configured", free, []string{"deploy-bot"}, nil, ""},
	} {
		tok := sign(jwt.MapClaims{"https://interlock.test/agents": tc.claim})
		p, err := tc.authn.Authenticate(context.Background(), "Bearer "+tok)
		if tc.reject != "" {
			authError(t, err, tc.reject, tok)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(p.Agents, tc.want) || (p.Agents == nil) != (tc.want == nil) {
			t.Errorf("%s: agents %#v, want %#v", tc.name, p.Agents, tc.want)
		}
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}
