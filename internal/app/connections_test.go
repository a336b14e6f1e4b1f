package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"interlock/internal/app"
	"interlock/internal/apptest"
)

// capServer starts a server allowing each principal (or client address) max WebSockets and
// event streams, with authentication on (authServer's principals) or off.
func capServer(t *testing.T, authOn bool, max int) *apptest.Server {
	t.Helper()
	args := []string{"--max-connections-per-principal", fmt.Sprint(max)}
	if authOn {
		var digests []any
		for _, s := range []string{"vera", "otto", "alice", "bob", "root", "portal"} {
			digests = append(digests, apptest.Sha256Hex(apptest.TokenOf(s)))
		}
		args = append(args, "--auth=on", "--config", apptest.WriteConfig(t, "auth:\n  tokens:"+fmt.Sprintf(apptest.AuthPrincipals, digests...)))
	}
	return apptest.Start(t, "sqlite:"+t.TempDir()+"/conns.db", args...)
}

// dialFrom opens a WebSocket of the subprotocol through client (nil: the default) and sends
// connection_init, with the token unless empty; it does not wait for the answer.
func dialFrom(t *testing.T, baseURL, protocol string, client *http.Client, token string) *apptest.WSClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(baseURL, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{protocol}, HTTPClient: client})
	if err != nil {
		t.Fatalf("dial %s: %v", protocol, err)
	}
	t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "") })
	c := &apptest.WSClient{T: t, Conn: conn, Protocol: protocol}
	payload := json.RawMessage(`{}`)
	if token != "" {
		payload, _ = json.Marshal(map[string]any{"authorization": "Bearer " + token})
	}
	c.Send(apptest.WSMessage{Type: "connection_init", Payload: payload})
	return c
}

// initAnswer reads what the server answers a connection_init with: "ack", or the close code
// and reason (graphql-ws announces a refusal with connection_error first, whose message is
// returned too).
func initAnswer(t *testing.T, c *apptest.WSClient) (acked bool, code websocket.StatusCode, reason, message string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		var m apptest.WSMessage
		err := wsjson.Read(ctx, c.Conn, &m)
		if err == nil {
			switch m.Type {
			case "connection_ack":
				return true, 0, "", ""
			case "connection_error":
				var e struct{ Message string }
				json.Unmarshal(m.Payload, &e)
				message = e.Message
			}
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: waiting for the answer to connection_init: %v", c.Protocol, err)
		}
		return false, ce.Code, ce.Reason, message
	}
}

// wantAcked fails unless the socket's connection_init is acknowledged.
func wantAcked(t *testing.T, c *apptest.WSClient, who string) {
	t.Helper()
	if acked, code, reason, _ := initAnswer(t, c); !acked {
		t.Fatalf("%s over %s: closed %d %q, want connection_ack", who, c.Protocol, code, reason)
	}
}

// wantTooMany fails unless the socket is closed with 4429 "too many connections for who"
// after its connection_init (and, over graphql-ws, a connection_error saying what to do).
func wantTooMany(t *testing.T, c *apptest.WSClient, who string) {
	t.Helper()
	acked, code, reason, msg := initAnswer(t, c)
	if acked || code != 4429 || reason != "too many connections for "+who {
		t.Fatalf("%s over %s: acked %v, closed %d %q; want 4429 %q", who, c.Protocol, acked, code, reason, "too many connections for "+who)
	}
	if c.Protocol == "graphql-ws" && !strings.Contains(msg, "close one") {
		t.Fatalf("%s over graphql-ws: connection_error %q, want what to do", who, msg)
	}
}

// openStream opens a subscription over SSE through client with the token (none when empty)
// and returns the response once its headers are in; cancel ends the stream.
func openStream(t *testing.T, base string, client *http.Client, token string) (resp *http.Response, body []byte, cancel func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	q, _ := json.Marshal(map[string]any{"query": `subscription { suspendedRunsChanged { kind } }`})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/graphql", bytes.NewReader(q))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return resp, body, cancel
}

// wantStreamRefused fails unless the stream is refused with 429, Retry-After and a
// TOO_MANY_CONNECTIONS error naming who.
func wantStreamRefused(t *testing.T, resp *http.Response, body []byte, who string) {
	t.Helper()
	var r apptest.Response
	json.Unmarshal(body, &r)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || r.Code() != "TOO_MANY_CONNECTIONS" ||
		!strings.Contains(r.Errors[0].Message, "too many connections for "+who) {
		t.Fatalf("stream of %s over the cap: %d Retry-After %q %s", who, resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// wantStreamOpen fails unless the stream was accepted.
func wantStreamOpen(t *testing.T, resp *http.Response, body []byte, who string) {
	t.Helper()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream of %s: %d %s", who, resp.StatusCode, body)
	}
}

// eventuallyAcked dials until a socket of who's is acknowledged: a slot frees once the server
// has seen the close of another, which the client does not wait for.
func eventuallyAcked(t *testing.T, dial func() *apptest.WSClient, who string) *apptest.WSClient {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := dial()
		acked, code, reason, _ := initAnswer(t, c)
		if acked {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no slot freed after a close: %d %q", who, code, reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectionCapPerPrincipal: with authentication on, each principal holds at most
// --max-connections-per-principal WebSockets (both subprotocols) and event streams together:
// the next socket is closed with 4429 right after its connection_init, the next stream refused
// with 429; another principal has a quota of its own; closing a socket or a stream frees its
// slot.
func TestConnectionCapPerPrincipal(t *testing.T) {
	t.Parallel()
	s := capServer(t, true, 2)
	vera, alice := apptest.TokenOf("vera"), apptest.TokenOf("alice")
	first := dialFrom(t, s.URL, "graphql-transport-ws", nil, vera)
	wantAcked(t, first, "vera")
	wantAcked(t, dialFrom(t, s.URL, "graphql-ws", nil, vera), "vera")
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		wantTooMany(t, dialFrom(t, s.URL, protocol, nil, vera), "vera")
	}
	resp, body, _ := openStream(t, s.URL, nil, vera)
	wantStreamRefused(t, resp, body, "vera")

	// Alice's quota is her own; her open stream counts in it as a socket does.
	wantAcked(t, dialFrom(t, s.URL, "graphql-ws", nil, alice), "alice")
	resp, body, endStream := openStream(t, s.URL, nil, alice)
	wantStreamOpen(t, resp, body, "alice")
	wantTooMany(t, dialFrom(t, s.URL, "graphql-transport-ws", nil, alice), "alice")

	// A closed socket frees vera's slot; an ended stream frees alice's.
	first.Conn.Close(websocket.StatusNormalClosure, "")
	eventuallyAcked(t, func() *apptest.WSClient { return dialFrom(t, s.URL, "graphql-transport-ws", nil, vera) }, "vera")
	wantTooMany(t, dialFrom(t, s.URL, "graphql-ws", nil, vera), "vera")
	endStream()
	resp.Body.Close()
	eventuallyAcked(t, func() *apptest.WSClient { return dialFrom(t, s.URL, "graphql-transport-ws", nil, alice) }, "alice")
}

// TestConnectionCapPerAddress: with authentication off, the cap is per client address: a
// third socket (either subprotocol) or stream from 127.0.0.1 is refused while 127.0.0.2 is
// served, and a closed socket frees its slot.
func TestConnectionCapPerAddress(t *testing.T) {
	t.Parallel()
	s := capServer(t, false, 2)
	first := dialFrom(t, s.URL, "graphql-ws", nil, "")
	wantAcked(t, first, "127.0.0.1")
	resp, body, endStream := openStream(t, s.URL, nil, "")
	wantStreamOpen(t, resp, body, "127.0.0.1")
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		wantTooMany(t, dialFrom(t, s.URL, protocol, nil, ""), "127.0.0.1")
	}
	resp2, body, _ := openStream(t, s.URL, nil, "")
	wantStreamRefused(t, resp2, body, "127.0.0.1")

	other := fromAddr("127.0.0.2")
	wantAcked(t, dialFrom(t, s.URL, "graphql-transport-ws", other, ""), "127.0.0.2")
	resp2, body, _ = openStream(t, s.URL, other, "")
	wantStreamOpen(t, resp2, body, "127.0.0.2")
	wantTooMany(t, dialFrom(t, s.URL, "graphql-ws", other, ""), "127.0.0.2")

	first.Conn.Close(websocket.StatusNormalClosure, "")
	eventuallyAcked(t, func() *apptest.WSClient { return dialFrom(t, s.URL, "graphql-transport-ws", nil, "") }, "127.0.0.1")
	endStream()
	resp.Body.Close()
	eventuallyAcked(t, func() *apptest.WSClient { return dialFrom(t, s.URL, "graphql-ws", nil, "") }, "127.0.0.1")
}

// TestConnectionCapSetting: the flag's default, its variable, 0 for no limit, and a bad value
// named in the error.
func TestConnectionCapSetting(t *testing.T) {
	t.Parallel()
	none := func(string) string { return "" }
	if cfg, err := app.ParseConfig(nil, none); err != nil || cfg.MaxConnectionsPerPrincipal != 32 {
		t.Fatalf("default: %d, %v", cfg.MaxConnectionsPerPrincipal, err)
	}
	env := func(k string) string { return map[string]string{"INTERLOCK_MAX_CONNECTIONS_PER_PRINCIPAL": "0"}[k] }
	if cfg, err := app.ParseConfig(nil, env); err != nil || cfg.MaxConnectionsPerPrincipal != 0 {
		t.Fatalf("from the environment: %d, %v", cfg.MaxConnectionsPerPrincipal, err)
	}
	for _, bad := range []string{"-1", "many"} {
		if _, err := app.ParseConfig([]string{"--max-connections-per-principal", bad}, none); err == nil || !strings.Contains(err.Error(), "INTERLOCK_MAX_CONNECTIONS_PER_PRINCIPAL") {
			t.Errorf("--max-connections-per-principal %s: %v", bad, err)
		}
	}
	// 0 is no limit.
	s := capServer(t, false, 0)
	for range 5 {
		wantAcked(t, dialFrom(t, s.URL, "graphql-transport-ws", nil, ""), "127.0.0.1")
	}
}
