package auth_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"interlock/auth"
	"interlock/runtype"
)

// serveMiddleware serves auth.Middleware over real HTTP; the next handler answers with the
// subject of the principal in its context ("-" for none).
func serveMiddleware(t *testing.T) *httptest.Server {
	t.Helper()
	a := setup(t, staticConfig(), auth.Options{})
	srv := httptest.NewServer(auth.Middleware(a, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := runtype.PrincipalFrom(r.Context())
		if p == nil {
			_, _ = io.WriteString(w, "-")
			return
		}
		_, _ = io.WriteString(w, p.Subject)
	})))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, headers map[string]string) (*http.Response, string) {
	t.Helper()
	return send(t, srv, http.MethodPost, headers)
}

// send makes a request with method and headers to the middleware's server.
func send(t *testing.T, srv *httptest.Server, method string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+"/graphql", strings.NewReader(`{"query":"{__typename}"}`))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestMiddlewareRejects(t *testing.T) {
	t.Parallel()
	srv := serveMiddleware(t)
	for _, tc := range []struct {
		name, header, message, challenge string
	}{
		{"no header", "", "missing bearer token", `Bearer realm="interlock"`},
		{"unknown token", "Bearer s3cret-guess", "unknown token", `Bearer realm="interlock", error="invalid_token"`},
		{"not bearer", "Basic YWxpY2U6cHc=", `malformed Authorization header: expected "Bearer <token>"`, `Bearer realm="interlock", error="invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.header != "" {
				h["Authorization"] = tc.header
			}
			resp, body := get(t, srv, h)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, body %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Fatalf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Fatalf("Content-Type %q", ct)
			}
			var got struct {
				Errors []struct {
					Message    string `json:"message"`
					Extensions struct {
						Code string `json:"code"`
					} `json:"extensions"`
				} `json:"errors"`
				Data *json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if len(got.Errors) != 1 || got.Errors[0].Message != tc.message || got.Errors[0].Extensions.Code != "UNAUTHENTICATED" {
				t.Fatalf("body %s", body)
			}
			if got.Data != nil || strings.Contains(body, `"data"`) {
				t.Fatalf("a refused request has a data key: %s", body)
			}
			if strings.Contains(body, "s3cret-guess") || strings.Contains(body, "YWxpY2U6cHc") {
				t.Fatalf("the body repeats the credentials: %s", body)
			}
		})
	}
}

func TestMiddlewarePasses(t *testing.T) {
	t.Parallel()
	srv := serveMiddleware(t)
	// with returns a real WebSocket handshake's headers and more.
	with := func(more map[string]string) map[string]string {
		h := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"}
		for k, v := range more {
			if v == "" {
				delete(h, k)
			} else {
				h[k] = v
			}
		}
		return h
	}
	for _, tc := range []struct {
		name    string
		method  string
		headers map[string]string
		status  int
		body    string
	}{
		{"good token", http.MethodPost, map[string]string{"Authorization": "Bearer alice-token"}, http.StatusOK, "alice"},
		// Only a real handshake goes on without a token, acting for nobody (its connection_init
		// must authenticate it).
		{"WebSocket handshake without a header", http.MethodGet, with(nil), http.StatusOK, "-"},
		{"WebSocket handshake, another case", http.MethodGet, with(map[string]string{"Connection": "keep-alive, Upgrade", "Upgrade": "WebSocket"}), http.StatusOK, "-"},
		{"WebSocket handshake with a good header", http.MethodGet, with(map[string]string{"Authorization": "Bearer bob-token"}), http.StatusOK, "bob"},
		{"WebSocket handshake with a bad header", http.MethodGet, with(map[string]string{"Authorization": "Bearer nope"}), http.StatusUnauthorized, ""},
		// Anything short of a handshake needs a token, whatever its Upgrade header says.
		{"a POST saying Upgrade: websocket", http.MethodPost, with(nil), http.StatusUnauthorized, ""},
		{"a POST saying Upgrade and asking for SSE", http.MethodPost, with(map[string]string{"Accept": "text/event-stream"}), http.StatusUnauthorized, ""},
		{"a GET without Sec-WebSocket-Key", http.MethodGet, with(map[string]string{"Sec-WebSocket-Key": ""}), http.StatusUnauthorized, ""},
		{"a GET without Connection: Upgrade", http.MethodGet, with(map[string]string{"Connection": ""}), http.StatusUnauthorized, ""},
		{"a GET saying Upgrade: h2c, websocket", http.MethodGet, with(map[string]string{"Upgrade": "h2c, websocket", "Sec-WebSocket-Key": ""}), http.StatusUnauthorized, ""},
		{"another upgrade", http.MethodGet, with(map[string]string{"Upgrade": "h2c"}), http.StatusUnauthorized, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := send(t, srv, tc.method, tc.headers)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, body %s", resp.StatusCode, body)
			}
			if tc.body != "" && body != tc.body {
				t.Fatalf("next handler saw %q, want %q", body, tc.body)
			}
		})
	}
}

func TestFromInitPayload(t *testing.T) {
	t.Parallel()
	a := setup(t, staticConfig(), auth.Options{})
	for _, tc := range []struct {
		name    string
		payload map[string]any
		subject string
		want    string
	}{
		{"authorization", map[string]any{"authorization": "Bearer alice-token"}, "alice", ""},
		{"Authorization", map[string]any{"Authorization": "bearer bob-token"}, "bob", ""},
		{"nil payload", nil, "", "missing bearer token"},
		{"no key", map[string]any{"token": "alice-token"}, "", "missing bearer token"},
		{"not a string", map[string]any{"authorization": 42}, "", `malformed authorization in connection_init: expected "Bearer <token>"`},
		{"unknown token", map[string]any{"authorization": "Bearer nope"}, "", "unknown token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.FromInitPayload(context.Background(), tc.payload)
			if tc.want != "" {
				if p != nil {
					t.Fatalf("authenticated as %+v", p)
				}
				authError(t, err, tc.want, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Subject != tc.subject {
				t.Fatalf("got %+v", p)
			}
		})
	}
}

// TestUnauthorizedHidesOtherErrors: an error that is not an *auth.Error is not shown.
func TestUnauthorizedHidesOtherErrors(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	auth.Unauthorized(rec, httptest.NewRequest(http.MethodPost, "/graphql", nil), io.ErrUnexpectedEOF)
	if rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "EOF") || !strings.Contains(rec.Body.String(), `"message":"unauthenticated"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}
