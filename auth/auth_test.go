package auth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"interlock/auth"
	"interlock/runtype"
)

// TestMain fails the package if anything, such as a JWKS refresh goroutine that Close should
// have stopped, outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// staticConfig has one token per shape: a role as a string, roles as a list, resources set,
// resources empty.
func staticConfig() *auth.Config {
	return &auth.Config{Tokens: []auth.Token{
		{Subject: "alice", Role: auth.Roles{runtype.RoleApprover}, SHA256: digest("alice-token")},
		{Subject: "bob", Role: auth.Roles{runtype.RoleApprover, "refunds"}, SHA256: strings.ToUpper(digest("bob-token"))},
		{Subject: "portal", Role: auth.Roles{runtype.RoleViewer}, SHA256: digest("portal-token"), Resources: []string{"customer-1", "customer-2"}},
		{Subject: "nobody", Role: auth.Roles{runtype.RoleViewer}, SHA256: digest("nobody-token"), Resources: []string{}},
		{Subject: "laptop", Role: auth.Roles{runtype.RoleRequester}, SHA256: digest("laptop-token"), Agents: []string{"coding"}},
		{Subject: "muted", Role: auth.Roles{runtype.RoleRequester}, SHA256: digest("muted-token"), Agents: []string{}},
	}}
}

func setup(t *testing.T, cfg *auth.Config, opts auth.Options) *auth.Authenticator {
	t.Helper()
	a, err := auth.New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

// authError asserts err is an *auth.Error saying want, and that it does not repeat the token.
func authError(t *testing.T, err error, want, token string) *auth.Error {
	t.Helper()
	var ae *auth.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *auth.Error", err, err)
	}
	if ae.Message != want {
		t.Fatalf("message %q, want %q", ae.Message, want)
	}
	if token != "" && strings.Contains(ae.Error(), token) {
		t.Fatalf("message %q repeats the token", ae.Error())
	}
	return ae
}

func TestHeaderShape(t *testing.T) {
	t.Parallel()
	a := setup(t, staticConfig(), auth.Options{})
	for _, tc := range []struct{ header, want string }{
		{"", "missing bearer token"},
		{"   ", "missing bearer token"},
		{"Basic x", `malformed Authorization header: expected "Bearer <token>"`},
		{"Bearer", `malformed Authorization header: expected "Bearer <token>"`},
		{"Bearer  ", `malformed Authorization header: expected "Bearer <token>"`},
		{"Bearer alice-token extra", `malformed Authorization header: expected "Bearer <token>"`},
		{"Bearer alice\x00token", `malformed Authorization header: expected "Bearer <token>"`},
		{"Token alice-token", `malformed Authorization header: expected "Bearer <token>"`},
		{"Bearer " + strings.Repeat("a", 20<<10), `malformed Authorization header: expected "Bearer <token>"`},
	} {
		p, err := a.Authenticate(context.Background(), tc.header)
		if p != nil {
			t.Fatalf("%q: authenticated as %+v", tc.header, p)
		}
		ae := authError(t, err, tc.want, "")
		if ae.Missing != (tc.want == "missing bearer token") {
			t.Fatalf("%q: Missing is %v", tc.header, ae.Missing)
		}
	}
}

func TestStaticTokens(t *testing.T) {
	t.Parallel()
	a := setup(t, staticConfig(), auth.Options{})
	for _, tc := range []struct {
		header    string
		subject   string
		roles     []runtype.Role
		resources []string
		agents    []string
	}{
		{"Bearer alice-token", "alice", []runtype.Role{runtype.RoleApprover}, nil, nil},
		{"bearer alice-token", "alice", []runtype.Role{runtype.RoleApprover}, nil, nil},
		{"BEARER   alice-token ", "alice", []runtype.Role{runtype.RoleApprover}, nil, nil},
		{"Bearer bob-token", "bob", []runtype.Role{runtype.RoleApprover, "refunds"}, nil, nil},
		{"Bearer portal-token", "portal", []runtype.Role{runtype.RoleViewer}, []string{"customer-1", "customer-2"}, nil},
		{"Bearer nobody-token", "nobody", []runtype.Role{runtype.RoleViewer}, []string{}, nil},
		{"Bearer laptop-token", "laptop", []runtype.Role{runtype.RoleRequester}, nil, []string{"coding"}},
		{"Bearer muted-token", "muted", []runtype.Role{runtype.RoleRequester}, nil, []string{}},
	} {
		p, err := a.Authenticate(context.Background(), tc.header)
		if err != nil {
			t.Fatalf("%q: %v", tc.header, err)
		}
		if p.Subject != tc.subject || !slices.Equal(p.Roles, tc.roles) || !slices.Equal(p.Resources, tc.resources) {
			t.Fatalf("%q: got %+v", tc.header, p)
		}
		if (p.Resources == nil) != (tc.resources == nil) {
			t.Fatalf("%q: resources %#v, want %#v (nil is every resource, empty is none)", tc.header, p.Resources, tc.resources)
		}
		if !slices.Equal(p.Agents, tc.agents) || (p.Agents == nil) != (tc.agents == nil) {
			t.Fatalf("%q: agents %#v, want %#v (nil is any agent, empty is none)", tc.header, p.Agents, tc.agents)
		}
	}

	// A caller changing its principal changes nobody else's.
	p, _ := a.Authenticate(context.Background(), "Bearer portal-token")
	p.Roles[0], p.Resources[0] = runtype.RoleAdmin, "customer-9"
	again, _ := a.Authenticate(context.Background(), "Bearer portal-token")
	if again.Roles[0] != runtype.RoleViewer || again.Resources[0] != "customer-1" {
		t.Fatalf("the stored principal changed: %+v", again)
	}
	p, _ = a.Authenticate(context.Background(), "Bearer laptop-token")
	p.Agents[0] = "deploy-bot"
	if again, _ := a.Authenticate(context.Background(), "Bearer laptop-token"); again.Agents[0] != "coding" {
		t.Fatalf("the stored principal changed: %+v", again)
	}

	for _, token := range []string{"alice-token2", "Alice-token", digest("alice-token"), "a.b.c"} {
		p, err := a.Authenticate(context.Background(), "Bearer "+token)
		if p != nil {
			t.Fatalf("%q authenticated as %+v", token, p)
		}
		authError(t, err, "unknown token", token)
	}
}

func TestNewRejectsABadConfig(t *testing.T) {
	t.Parallel()
	cfg := staticConfig()
	cfg.Tokens[0].SHA256 = "alice-token"
	_, err := auth.New(context.Background(), cfg, auth.Options{})
	if err == nil || !strings.Contains(err.Error(), "auth.tokens[0].sha256: must be the SHA-256 of the token in hex") {
		t.Fatalf("got %v", err)
	}
	if _, err := auth.New(context.Background(), nil, auth.Options{}); err == nil {
		t.Fatal("a nil config was accepted")
	}
}

func TestGenerated(t *testing.T) {
	t.Parallel()
	token, a := auth.Generated()
	t.Cleanup(a.Close)
	if len(token) != 43 || strings.ContainsAny(token, ".+/=") {
		t.Fatalf("token %q is not 32 bytes of unpadded base64url", token)
	}
	p, err := a.Authenticate(context.Background(), "Bearer "+token)
	if err != nil {
		t.Fatal(err)
	}
	if p.Subject != "admin" || !slices.Equal(p.Roles, []runtype.Role{runtype.RoleAdmin}) || p.Resources != nil {
		t.Fatalf("got %+v", p)
	}
	other, _ := auth.Generated()
	if other == token {
		t.Fatal("two generated tokens are the same")
	}
	_, err = a.Authenticate(context.Background(), "Bearer "+other)
	authError(t, err, "unknown token", other)
}
