package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"interlock/gqlhttp"
	"interlock/internal/apptest"
)

// TestNoCredentialsNoData sends every transport (POST, GET, SSE in both of graphql-sse's modes,
// both WebSocket subprotocols) every
// header combination an attacker could try without a valid token — Upgrade: websocket in any
// case or among others, with and without Accept: text/event-stream, with no token or a wrong one
// — through the whole handler. Every answer is 401 (or 4401 on a socket), UNAUTHENTICATED, with
// no data, and nothing is stored. (Before, a POST saying Upgrade: websocket and asking for an
// event stream ran any operation for nobody, which the rules let do everything.)
func TestNoCredentialsNoData(t *testing.T) {
	t.Parallel()
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/interlock.db", "")
	const query = `{ me { subject } suspendedRuns { total runs { runId } } }`
	const mutation = `mutation { startRun(input: {agentId: "support-agent", prompt: "refund order 7 for 5000"}) { runId } }`

	type variant struct{ upgrade, connection string }
	upgrades := []variant{{}, {"websocket", "Upgrade"}, {"WebSocket", "Upgrade"}, {"h2c, websocket", "Upgrade, HTTP2-Settings"}, {"websocket", ""}}
	credentials := map[string]string{"no token": "", "wrong token": "Bearer token-mallory", "malformed": "Basic YWxpY2U6cHc="}
	for _, op := range []string{query, mutation} {
		for _, transport := range []string{"POST", "GET", "SSE"} {
			for _, up := range upgrades {
				for _, sse := range []bool{false, true} {
					for credName, cred := range credentials {
						name := fmt.Sprintf("%s upgrade=%q accept-sse=%v %s %.8s", transport, up.upgrade, sse, credName, op)
						req := bypassRequest(t, s.URL, transport, op)
						if up.upgrade != "" {
							req.Header.Set("Upgrade", up.upgrade)
							req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
							req.Header.Set("Sec-WebSocket-Version", "13")
						}
						if up.connection != "" {
							req.Header.Set("Connection", up.connection)
						}
						if sse || transport == "SSE" {
							req.Header.Set("Accept", "text/event-stream")
						}
						if cred != "" {
							req.Header.Set("Authorization", cred)
						}
						status, body := bypassDo(t, req)
						if transport == "GET" && up.upgrade != "" && up.connection != "" && cred == "" {
							// A real handshake goes on without a token, but only to become a
							// WebSocket, whose connection_init must then authenticate it (below).
							if status != http.StatusSwitchingProtocols {
								t.Errorf("%s: %d %s, want the WebSocket's 101", name, status, body)
							}
							continue
						}
						if status != http.StatusUnauthorized || !strings.Contains(body, "UNAUTHENTICATED") || strings.Contains(body, "suspendedRuns") || strings.Contains(body, "runId") {
							t.Errorf("%s: %d %s, want 401 UNAUTHENTICATED and no data", name, status, body)
						}
					}
				}
			}
		}
	}

	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		// A wrong token in the handshake's header is refused before the upgrade.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/graphql", &websocket.DialOptions{
			Subprotocols: []string{protocol}, HTTPHeader: http.Header{"Authorization": {"Bearer token-mallory"}},
		})
		cancel()
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token in the handshake: %v, want 401", protocol, err)
		}
		for name, init := range map[string]*apptest.WSMessage{
			"no credentials":            {Type: "connection_init", Payload: json.RawMessage(`{}`)},
			"a wrong token":             {Type: "connection_init", Payload: json.RawMessage(`{"authorization":"Bearer token-mallory"}`)},
			"no connection_init at all": nil,
		} {
			c := apptest.DialRawWS(t, s.URL, protocol)
			if init != nil {
				c.Send(*init)
			}
			c.Subscribe(query, nil)
			c.Subscribe(mutation, nil)
			code, _ := c.Closed()
			if init != nil && code != 4401 {
				t.Errorf("%s with %s: closed with %d, want 4401", protocol, name, code)
			}
		}
	}

	// graphql-sse's single connection mode: a reservation token is no credential. No
	// reservation is made, no stream connected, no operation run or stopped on root's stream
	// without a token of root's own; each is 401 with no data, and root's stream carries nothing
	// before root's own operation.
	root := apptest.TokenOf("root")
	streamToken := strings.TrimSpace(reserveStream(t, s, root).body)
	stream, refused := connectSingle(t, s, root, streamToken)
	if refused != nil {
		t.Fatalf("root's stream: %d %s", refused.status, refused.body)
	}
	for credName, cred := range credentials {
		h := func(more ...string) map[string]string {
			m := map[string]string{}
			if cred != "" {
				m["Authorization"] = cred
			}
			for i := 0; i+1 < len(more); i += 2 {
				m[more[i]] = more[i+1]
			}
			return m
		}
		for _, op := range []string{query, mutation} {
			body, _ := json.Marshal(map[string]any{"query": op, "extensions": map[string]any{"operationId": "x"}})
			for name, got := range map[string]exchange{
				"PUT":                   doGraphQL(t, s, http.MethodPut, "", "", h()),
				"GET stream (header)":   doGraphQL(t, s, http.MethodGet, "", "", h("Accept", "text/event-stream", gqlhttp.TokenHeader, streamToken)),
				"GET stream (?token=)":  doGraphQL(t, s, http.MethodGet, "token="+url.QueryEscape(streamToken), "", h("Accept", "text/event-stream")),
				"POST operation":        doGraphQL(t, s, http.MethodPost, "", string(body), h("Content-Type", "application/json", gqlhttp.TokenHeader, streamToken)),
				"GET operation":         doGraphQL(t, s, http.MethodGet, "query="+url.QueryEscape(op)+"&token="+url.QueryEscape(streamToken), "", h()),
				"DELETE":                doGraphQL(t, s, http.MethodDelete, "operationId=x", "", h(gqlhttp.TokenHeader, streamToken)),
				"POST operation as SSE": doGraphQL(t, s, http.MethodPost, "", string(body), h("Content-Type", "application/json", "Accept", "text/event-stream", gqlhttp.TokenHeader, streamToken)),
			} {
				if got.status != http.StatusUnauthorized || !strings.Contains(got.body, "UNAUTHENTICATED") || got.hasDataKey(t) || strings.Contains(got.body, "runId") {
					t.Errorf("single connection %s with %s, %.8s: %d %s, want 401 UNAUTHENTICATED and no data", name, credName, op, got.status, got.body)
				}
			}
		}
	}
	if got := postOnStream(t, s, root, streamToken, "root", `{ me { subject } }`, nil, ""); got.status != http.StatusAccepted {
		t.Fatalf("root's own operation: %d %s", got.status, got.body)
	}
	if ev := stream.next(t); single(t, ev).ID != "root" {
		t.Fatalf("root's stream carried %s %s before root's operation", ev.Name, ev.Data)
	}

	var total struct{ RecentRuns struct{ Total int } }
	s.MustAs(t, apptest.TokenOf("root"), `{ recentRuns { total } }`, nil, &total)
	if total.RecentRuns.Total != 0 {
		t.Fatalf("%d runs were started without credentials", total.RecentRuns.Total)
	}
}

// bypassRequest is an operation over the transport: a POST of JSON, a GET with the query in the
// address, or a POST asking for an event stream.
func bypassRequest(t *testing.T, base, transport, op string) *http.Request {
	t.Helper()
	var req *http.Request
	var err error
	if transport == "GET" {
		req, err = http.NewRequest(http.MethodGet, base+"/graphql?query="+url.QueryEscape(op), nil)
	} else {
		body, _ := json.Marshal(map[string]any{"query": op})
		req, err = http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
	}
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// bypassDo sends req and returns the status and what the body held within a second (an event
// stream that wrongly answered would go on).
func bypassDo(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, "" // a WebSocket, which this client does not speak
	}
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		done <- string(b)
	}()
	select {
	case b := <-done:
		return resp.StatusCode, b
	case <-time.After(time.Second):
		cancel()
		return resp.StatusCode, <-done
	}
}
