package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"

	"interlock/internal/apptest"
)

// TestTransportWSCloseCodes: graphql-transport-ws's close codes, from a Go WebSocket client
// against a server with authentication on. A subscribe before connection_ack is 4401
// Unauthorized; a second connection_init is 4429; any message the protocol does not allow (not
// JSON, not an object, an unknown type, a message only the server sends, a subscribe without an
// id or a GraphQL payload, a complete without an id) is 4400 — where gqlgen closed with 1002 or
// dropped the connection. A ping before connection_init is answered, and the socket goes on.
func TestTransportWSCloseCodes(t *testing.T) {
	t.Parallel()
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/wsproto.db", "")
	init := apptest.WSMessage{Type: "connection_init", Payload: json.RawMessage(`{"authorization":"Bearer ` + apptest.TokenOf("alice") + `"}`)}
	query := json.RawMessage(`{"query":"{ __typename }"}`)

	c := apptest.DialRawWS(t, s.URL, "graphql-transport-ws")
	c.Send(apptest.WSMessage{ID: "1", Type: "subscribe", Payload: query})
	if code, reason := c.Closed(); code != 4401 || reason != "Unauthorized" {
		t.Errorf("subscribe before connection_init: %d %q, want 4401 Unauthorized", code, reason)
	}

	for name, raw := range map[string]string{
		"not JSON":                    `{"type":`,
		"not an object":               `["subscribe"]`,
		"null":                        `null`,
		"no type":                     `{"id":"1"}`,
		"an unknown type":             `{"type":"start","id":"1","payload":{"query":"{ __typename }"}}`,
		"a server's connection_ack":   `{"type":"connection_ack"}`,
		"a server's next":             `{"type":"next","id":"1","payload":{"data":{}}}`,
		"a server's error":            `{"type":"error","id":"1","payload":[]}`,
		"subscribe without an id":     `{"type":"subscribe","payload":{"query":"{ __typename }"}}`,
		"subscribe with a number id":  `{"type":"subscribe","id":1,"payload":{"query":"{ __typename }"}}`,
		"subscribe without payload":   `{"type":"subscribe","id":"1"}`,
		"subscribe, payload a list":   `{"type":"subscribe","id":"1","payload":[]}`,
		"subscribe, query a number":   `{"type":"subscribe","id":"1","payload":{"query":5}}`,
		"subscribe, variables a list": `{"type":"subscribe","id":"1","payload":{"query":"{ __typename }","variables":[1]}}`,
		"complete without an id":      `{"type":"complete"}`,
	} {
		c := apptest.DialRawWS(t, s.URL, "graphql-transport-ws")
		c.Send(init)
		if m := c.Read(); m.Type != "connection_ack" {
			t.Fatalf("%s: after connection_init got %s", name, m.Type)
		}
		writeRaw(t, c, raw)
		if code, _ := c.Closed(); code != 4400 {
			t.Errorf("%s: closed with %d, want 4400", name, code)
		}
	}

	c = apptest.DialRawWS(t, s.URL, "graphql-transport-ws")
	c.Send(init)
	c.Read()
	c.Send(init)
	if code, reason := c.Closed(); code != 4429 || reason != "Too many initialisation requests" {
		t.Errorf("a second connection_init: %d %q, want 4429", code, reason)
	}

	// A ping before connection_init is answered with a pong; then the socket is initialised
	// and serves as ever.
	c = apptest.DialRawWS(t, s.URL, "graphql-transport-ws")
	c.Send(apptest.WSMessage{Type: "ping"})
	if m := readAny(t, c); m.Type != "pong" {
		t.Fatalf("a ping before connection_init: got %s, want pong", m.Type)
	}
	c.Send(init)
	if m := c.Read(); m.Type != "connection_ack" {
		t.Fatalf("after the ping, connection_init: %s", m.Type)
	}
	if data, _, errs := c.Next(c.Subscribe(`{ __typename }`, nil)); errs != nil || string(data) != `{"__typename":"Query"}` {
		t.Fatalf("a query after the ping: %s %s", data, errs)
	}

	// The legacy graphql-ws subprotocol is served as before: its own messages, keep-alives.
	legacy := apptest.DialAs(t, s.URL, "graphql-ws", apptest.TokenOf("alice"))
	if data, _, errs := legacy.Next(legacy.Subscribe(`{ __typename }`, nil)); errs != nil || string(data) != `{"__typename":"Query"}` {
		t.Fatalf("graphql-ws: %s %s", data, errs)
	}
}

// writeRaw sends text as it is, as a text message.
func writeRaw(t *testing.T, c *apptest.WSClient, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Conn.Write(ctx, websocket.MessageText, []byte(text)); err != nil {
		t.Fatal(err)
	}
}

// readAny returns the next message, whatever its type (wsClient.read answers pings and skips
// pongs).
func readAny(t *testing.T, c *apptest.WSClient) apptest.WSMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := c.Conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m apptest.WSMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}
