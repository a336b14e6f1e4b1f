package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"interlock/auth"
	"interlock/auth/oidctest"
	"interlock/runtype"
)

func oidcConfig(p *oidctest.Provider) *auth.OIDC {
	return &auth.OIDC{Issuer: p.Issuer, ClientID: p.ClientID()}
}

func bearerOf(tok string) string { return "Bearer " + tok }

// wantRefused asserts that header is refused with a message holding want.
func wantRefused(t *testing.T, a *auth.Authenticator, header, want string) {
	t.Helper()
	p, err := a.Authenticate(context.Background(), header)
	if err == nil {
		t.Fatalf("accepted as %+v, want refused (%s)", p, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("refused with %q, want %q", err, want)
	}
}

func TestOIDCIDTokens(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{})
	t.Cleanup(idp.Close)
	other := oidctest.Start(oidctest.Options{ClientID: idp.ClientID()}) // another provider, same client id
	t.Cleanup(other.Close)
	a := setup(t, &auth.Config{OIDC: oidcConfig(idp)}, auth.Options{})

	p, err := a.Authenticate(context.Background(), bearerOf(idp.IDToken(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "u-1" || len(p.Roles) != 1 || p.Roles[0] != runtype.RoleApprover {
		t.Fatalf("principal %+v, want u-1 with approver", p)
	}
	if until := time.Until(p.Expires); until < 4*time.Minute || until > 6*time.Minute {
		t.Fatalf("expires in %s, want the token's exp (5 min) plus the leeway", until)
	}

	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})), "token expired")
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"aud": "another-app"})), "wrong audience")
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"iss": "https://elsewhere.test"})), "issuer is not trusted")
	wantRefused(t, a, bearerOf(other.IDToken(map[string]any{"iss": idp.Issuer})), "signature") // right iss, foreign key
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"roles": nil})), `no roles claim "roles"`)
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"sub": nil})), "no subject")
	// Another client's token that lists this client in its audience too; a Keycloak access token.
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"aud": []any{"other-app", idp.ClientID()}, "azp": "other-app"})), "another client")
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"aud": []any{"other-app", idp.ClientID()}})), "another client")
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"azp": "other-app"})), "another client")
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"typ": "Bearer"})), "not an ID token")
	if _, err := a.Authenticate(context.Background(), bearerOf(idp.IDToken(map[string]any{"aud": []any{"other-app", idp.ClientID()}, "azp": idp.ClientID(), "typ": "ID"}))); err != nil {
		t.Fatalf("this client's ID token with another audience beside it: %v", err)
	}
	// alg none, the signature stripped
	tok := idp.IDToken(nil)
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": idp.Issuer, "aud": idp.ClientID(), "sub": "u-1",
		"exp": time.Now().Add(time.Hour).Unix(), "roles": "admin"}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	wantRefused(t, a, bearerOf(none), "malformed")
	wantRefused(t, a, bearerOf(tok[:strings.LastIndex(tok, ".")]+".AAAA"), "signature")
}

func TestOIDCClaimsAndDefaultRole(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{})
	t.Cleanup(idp.Close)
	cfg := oidcConfig(idp)
	cfg.Claims = auth.Claims{Subject: "email", Roles: "groups"}
	cfg.DefaultRole = auth.Roles{runtype.RoleViewer}
	a := setup(t, &auth.Config{OIDC: cfg}, auth.Options{})

	p, err := a.Authenticate(context.Background(), bearerOf(idp.IDToken(map[string]any{"groups": []any{"admin"}})))
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "ada@example.com" || len(p.Roles) != 1 || p.Roles[0] != runtype.RoleAdmin {
		t.Fatalf("principal %+v, want ada@example.com with admin (from groups)", p)
	}
	p, err = a.Authenticate(context.Background(), bearerOf(idp.IDToken(nil))) // no groups claim
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Roles) != 1 || p.Roles[0] != runtype.RoleViewer {
		t.Fatalf("roles %v, want the default role viewer", p.Roles)
	}
	p, err = a.Authenticate(context.Background(), bearerOf(idp.IDToken(map[string]any{"groups": []any{}})))
	if err != nil || len(p.Roles) != 0 {
		t.Fatalf("an empty roles claim: %+v, %v; want no role at all, not the default", p, err)
	}
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"email_verified": false})), "not verified")
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"email_verified": nil})), "not verified")
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"email_verified": "false"})), "not verified")
	if _, err := a.Authenticate(context.Background(), bearerOf(idp.IDToken(map[string]any{"email_verified": "true"}))); err != nil {
		t.Fatalf("email_verified as the string true: %v", err)
	}
}

// TestOIDCBesideTokensAndJWT: static tokens, auth.jwt's tokens and the provider's ID tokens
// are all accepted by one authenticator, each checked by its own rules; a provider's subject
// that is a static token's is refused.
func TestOIDCBesideTokensAndJWT(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{})
	t.Cleanup(idp.Close)
	k := rsaKey(t, "j1")
	jw := newIDP(t, k)
	sum := sha256.Sum256([]byte("static-secret-token"))
	a := setup(t, &auth.Config{
		Tokens: []auth.Token{{Subject: "bot", Role: auth.Roles{runtype.RoleOperator}, SHA256: hex.EncodeToString(sum[:])}},
		JWT:    &auth.JWT{JWKSURL: jw.srv.URL + "/jwks.json", Issuer: issuer, Audience: audience},
		OIDC:   oidcConfig(idp),
	}, auth.Options{Client: jw.srv.Client()})

	for header, want := range map[string]string{
		"Bearer static-secret-token":     "bot",
		bearerOf(k.sign(t, claims(nil))): "carol",
		bearerOf(idp.IDToken(nil)):       "u-1",
	} {
		p, err := a.Authenticate(context.Background(), header)
		if err != nil || p.Subject != want {
			t.Fatalf("%s…: %+v, %v; want %s", header[:12], p, err, want)
		}
	}
	// An ID token is not a JWT of auth.jwt (its audience), nor the reverse.
	wantRefused(t, a, bearerOf(k.sign(t, claims(jwt.MapClaims{"iss": idp.Issuer}))), "signature")
	wantRefused(t, a, bearerOf(idp.IDToken(map[string]any{"sub": "BOT"})), "subject of a configured API token")
	if a.PrincipalOf("u-1") != nil {
		t.Fatal("PrincipalOf an OIDC subject: want nil (only its next token says its roles)")
	}
}

// TestOIDCProviderDownAtStart: the server starts, its static tokens work, the provider's tokens
// are refused with a message saying why, and once the provider answers they are accepted,
// without a restart.
func TestOIDCProviderDownAtStart(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{})
	t.Cleanup(idp.Close)
	idp.SetDown(true)
	sum := sha256.Sum256([]byte("static-secret-token"))
	a, err := auth.New(context.Background(), &auth.Config{
		Tokens: []auth.Token{{Subject: "bot", Role: auth.Roles{runtype.RoleOperator}, SHA256: hex.EncodeToString(sum[:])}},
		OIDC:   oidcConfig(idp),
	}, auth.Options{})
	if err != nil {
		t.Fatalf("New with the provider down: %v; want it to start", err)
	}
	t.Cleanup(a.Close)
	if _, err := a.Authenticate(context.Background(), "Bearer static-secret-token"); err != nil {
		t.Fatal(err)
	}
	tok := idp.IDToken(nil)
	wantRefused(t, a, bearerOf(tok), "has not been reached yet")
	if got := a.ConsoleOIDC(); got == nil || got.Issuer != idp.Issuer || strings.Join(got.Scopes, " ") != "openid profile email offline_access" {
		t.Fatalf("ConsoleOIDC %+v: the console must be told how to sign in even while the provider is down", got)
	}
	idp.SetDown(false)
	deadline := time.Now().Add(30 * time.Second) // the retry waits at most 1+2+4+8+16 s
	for {
		_, err := a.Authenticate(context.Background(), bearerOf(tok))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused after the provider came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if o := a.ConnectOrigins(); len(o) != 1 || o[0] != idp.Issuer {
		t.Fatalf("ConnectOrigins %v, want the issuer's origin", o)
	}
}

func TestOIDCConfigProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		oidc auth.OIDC
		want string
	}{
		{auth.OIDC{ClientID: "c"}, "auth.oidc.issuer: is required"},
		{auth.OIDC{Issuer: "http://idp.example.com", ClientID: "c"}, "auth.oidc.issuer: \"http://idp.example.com\" must be an https URL"},
		{auth.OIDC{Issuer: "https://idp.example.com"}, "auth.oidc.clientID: is required"},
		{auth.OIDC{Issuer: "https://idp.example.com", ClientID: "c", Scopes: []string{"profile"}}, "auth.oidc.scopes: must hold openid"},
		{auth.OIDC{Issuer: "https://idp.example.com", ClientID: "c", Scopes: []string{"openid", "a b"}}, "auth.oidc.scopes[1]:"},
		{auth.OIDC{Issuer: "https://idp.example.com", ClientID: "c", DefaultRole: auth.Roles{""}}, "auth.oidc.defaultRole[0]: is empty"},
	} {
		got := strings.Join((&auth.Config{OIDC: &tc.oidc}).Problems("auth"), "; ")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%+v: problems %q, want %q", tc.oidc, got, tc.want)
		}
	}
	if p := (&auth.Config{OIDC: &auth.OIDC{Issuer: "http://127.0.0.1:5556/dex", ClientID: "c"}}).Problems("auth"); len(p) != 0 {
		t.Errorf("a loopback http issuer: %v, want accepted", p)
	}
}
