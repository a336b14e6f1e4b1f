package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"interlock/auth/oidctest"
	"interlock/internal/apptest"
)

// TestOIDCOverEveryTransport: an ID token of the auth.oidc provider is taken, beside the static
// tokens, on every way in — POST /graphql, SSE, both WebSocket subprotocols' connection_init,
// /approvals and the MCP gateway's /mcp — and an expired one, one for another client and one
// from another issuer are refused on each. GET /console.json tells the console how to sign in
// and the console's CSP lets it reach the provider.
func TestOIDCOverEveryTransport(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{})
	t.Cleanup(idp.Close)
	stranger := oidctest.Start(oidctest.Options{ClientID: idp.ClientID()})
	t.Cleanup(stranger.Close)
	up := apptest.NewMCPUpstream(t)
	config := gatewayConfig(up, "5s", "")
	i := strings.Index(config, "  separationOfDuties")
	oidc := fmt.Sprintf("  oidc: {issuer: %q, clientID: %q}\n", idp.Issuer, idp.ClientID())
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", config[:i]+oidc+config[i:])

	good := idp.IDToken(nil)
	for name, run := range transports(s) {
		if r := run(t, good, `{ me { subject roles } }`, nil); r.Code != "" || !strings.Contains(string(r.Data), `"subject":"u-1"`) {
			t.Errorf("%s with an ID token: %s %s %s, want me u-1", name, r.Code, r.Msg, r.Data)
		}
	}
	if a := approvalRequest(t, s, context.Background(), "Bearer "+good, "GET", "/approvals/no-such-run?wait=0s", ""); a.status != http.StatusNotFound {
		t.Errorf("/approvals with an ID token: %d %s, want 404 (authenticated, no such run)", a.status, a.raw)
	}
	if status, session, body := mcpInitialize(t, s.URL, "Bearer "+good, ""); status != http.StatusOK || session == "" {
		t.Errorf("/mcp with an ID token: %d %s, want a session", status, body)
	}
	if r := s.PostAs(t, apptest.TokenOf("root"), `{ me { subject } }`, nil); r.Code != "" {
		t.Errorf("a static token beside OIDC: %s %s", r.Code, r.Msg)
	}

	for name, c := range map[string]struct{ token, says string }{
		"expired":            {idp.IDToken(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), "token expired"},
		"another client":     {idp.IDToken(map[string]any{"aud": "another-app"}), "wrong audience"},
		"another issuer":     {idp.IDToken(map[string]any{"iss": "https://elsewhere.test"}), "issuer is not trusted"},
		"another provider's": {stranger.IDToken(nil), "signature"},
		"forged issuer":      {stranger.IDToken(map[string]any{"iss": idp.Issuer}), "signature"},
	} {
		if r := s.PostAs(t, c.token, `{ me { subject } }`, nil); r.Status != http.StatusUnauthorized || r.Code != "UNAUTHENTICATED" || !strings.Contains(r.Msg, c.says) {
			t.Errorf("POST with an ID token %s: %d %s %q, want 401 saying %q", name, r.Status, r.Code, r.Msg, c.says)
		}
		if r := s.SSEAs(t, c.token, `{ me { subject } }`, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("SSE with an ID token %s: %d %s", name, r.Status, r.Code)
		}
		for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
			if code := refusedInit(t, s, protocol, c.token); code != 4401 {
				t.Errorf("%s with an ID token %s closed with %d, want 4401", protocol, name, code)
			}
		}
		if a := approvalRequest(t, s, context.Background(), "Bearer "+c.token, "GET", "/approvals/no-such-run?wait=0s", ""); a.status != http.StatusUnauthorized {
			t.Errorf("/approvals with an ID token %s: %d, want 401", name, a.status)
		}
		if status, _, _ := mcpInitialize(t, s.URL, "Bearer "+c.token, ""); status != http.StatusUnauthorized {
			t.Errorf("/mcp with an ID token %s: %d, want 401", name, status)
		}
	}

	resp, err := http.Get(s.URL + "/console.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		OIDC struct {
			Issuer, ClientID string
			Scopes           []string
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&cfg)
	resp.Body.Close()
	if err != nil || cfg.OIDC.Issuer != idp.Issuer || cfg.OIDC.ClientID != idp.ClientID() || strings.Join(cfg.OIDC.Scopes, " ") != "openid profile email offline_access" {
		t.Errorf("/console.json: %+v %v", cfg, err)
	}
	resp, err = http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' ws: wss: "+idp.Issuer) {
		t.Errorf("the console's CSP %q does not let it reach the provider %s", csp, idp.Issuer)
	}
}

// refusedInit sends connection_init with token and returns the close code the server answers with.
func refusedInit(t *testing.T, s *apptest.Server, protocol, token string) websocket.StatusCode {
	t.Helper()
	c := apptest.DialRawWS(t, s.URL, protocol)
	payload, _ := json.Marshal(map[string]any{"authorization": "Bearer " + token})
	c.Send(apptest.WSMessage{Type: "connection_init", Payload: payload})
	for {
		var m apptest.WSMessage
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := wsjson.Read(ctx, c.Conn, &m)
		cancel()
		if err == nil {
			if m.Type == "connection_ack" {
				t.Fatalf("%s: acknowledged", protocol)
			}
			continue // graphql-ws says connection_error first
		}
		return websocket.CloseStatus(err)
	}
}

// TestConsoleConfigWithoutOIDC: without auth.oidc, /console.json is {} and the console keeps its
// pasted-token and printed-link sign-in; its CSP is the fixed one.
func TestConsoleConfigWithoutOIDC(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/i.db", "--auth=on")
	resp, err := http.Get(s.URL + "/console.json")
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil || len(body) != 0 || resp.StatusCode != http.StatusOK {
		t.Errorf("/console.json without auth.oidc: %d %v %v, want {}", resp.StatusCode, body, err)
	}
}

// TestOIDCProviderDownAtStart: the server starts while the provider does not answer, serves
// its static tokens and tells the console how to sign in; the provider's tokens are refused,
// saying why, until a retry in the background reaches it.
func TestOIDCProviderDownAtStart(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{})
	t.Cleanup(idp.Close)
	idp.SetDown(true)
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", fmt.Sprintf("  oidc: {issuer: %q, clientID: %q}\n", idp.Issuer, idp.ClientID()))
	if r := s.PostAs(t, apptest.TokenOf("root"), `{ me { subject } }`, nil); r.Code != "" {
		t.Fatalf("a static token while the provider is down: %s %s", r.Code, r.Msg)
	}
	tok := idp.IDToken(nil)
	if r := s.PostAs(t, tok, `{ me { subject } }`, nil); r.Status != http.StatusUnauthorized || !strings.Contains(r.Msg, "not been reached yet") {
		t.Fatalf("an ID token while the provider is down: %d %s %q", r.Status, r.Code, r.Msg)
	}
	if resp, err := http.Get(s.URL + "/console.json"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/console.json while the provider is down: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	idp.SetDown(false)
	apptest.Eventually(t, func() bool { return s.PostAs(t, tok, `{ me { subject } }`, nil).Code == "" },
		func() string { return "the provider's token still refused after it came back" })
}
