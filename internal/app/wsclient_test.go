package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
)

// wsClient speaks one of the two GraphQL WebSocket subprotocols, as Apollo (graphql-transport-ws)
// or GraphQL Playground (graphql-ws) do.
type wsClient struct {
	t        testing.TB
	conn     *websocket.Conn
	protocol string
	nextID   int
}

type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func dialWS(t testing.TB, baseURL, protocol string) *wsClient {
	t.Helper()
	c := dialRawWS(t, baseURL, protocol)
	c.send(wsMessage{Type: "connection_init", Payload: json.RawMessage(`{}`)})
	if m := c.read(); m.Type != "connection_ack" {
		t.Fatalf("after connection_init got %s %s", m.Type, m.Payload)
	}
	return c
}

// dialRawWS opens a WebSocket with the subprotocol and sends nothing.
func dialRawWS(t testing.TB, baseURL, protocol string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(baseURL, "http") + "/graphql"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{protocol}})
	if err != nil {
		t.Fatalf("dial %s: %v", protocol, err)
	}
	if conn.Subprotocol() != protocol {
		t.Fatalf("server chose subprotocol %q, want %q", conn.Subprotocol(), protocol)
	}
	c := &wsClient{t: t, conn: conn, protocol: protocol}
	t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "") })
	return c
}

// closed reads until the server closes the socket and returns its close status and reason;
// the test fails if a message other than a keep-alive (or graphql-ws's connection_error)
// arrives first, or nothing within 20s.
func (c *wsClient) closed() (websocket.StatusCode, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var m wsMessage
		err := wsjson.Read(ctx, c.conn, &m)
		if err == nil {
			if m.Type == "ka" || m.Type == "ping" || m.Type == "pong" || m.Type == "connection_error" {
				continue // keep-alives, and graphql-ws's announcement of the close
			}
			c.t.Fatalf("%s: waiting for the close, got %s %s (id %s)", c.protocol, m.Type, m.Payload, m.ID)
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("waiting for the close: %v", err)
		}
		return ce.Code, ce.Reason
	}
}

func (c *wsClient) send(m wsMessage) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, c.conn, m); err != nil {
		c.t.Fatalf("ws write: %v", err)
	}
}

// read returns the next message that is not a keep-alive, answering pings; the test fails when
// none arrives within 20s.
func (c *wsClient) read() wsMessage {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		var m wsMessage
		err := wsjson.Read(ctx, c.conn, &m)
		cancel()
		if err != nil {
			c.t.Fatalf("ws read (%s): %v", c.protocol, err)
		}
		switch m.Type {
		case "ka", "pong":
			continue
		case "ping":
			c.send(wsMessage{Type: "pong"})
			continue
		}
		return m
	}
}

// subscribe starts an operation and returns its id.
func (c *wsClient) subscribe(query string, vars map[string]any) string {
	c.t.Helper()
	c.nextID++
	id := fmt.Sprint(c.nextID)
	payload, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	typ := "subscribe"
	if c.protocol == "graphql-ws" {
		typ = "start"
	}
	c.send(wsMessage{ID: id, Type: typ, Payload: payload})
	return id
}

// next returns the data of the operation's next result; done is true when it completed instead.
// An error message fails the test unless wantErr is set, in which case its payload is returned.
func (c *wsClient) next(id string) (data json.RawMessage, done bool, errPayload json.RawMessage) {
	c.t.Helper()
	m := c.read()
	if m.ID != id {
		c.t.Fatalf("message for operation %q while waiting for %q: %s %s", m.ID, id, m.Type, m.Payload)
	}
	switch m.Type {
	case "next", "data":
		var r struct {
			Data   json.RawMessage `json:"data"`
			Errors json.RawMessage `json:"errors"`
		}
		json.Unmarshal(m.Payload, &r)
		if len(r.Errors) > 0 && string(r.Errors) != "null" {
			return nil, false, r.Errors
		}
		return r.Data, false, nil
	case "complete":
		return nil, true, nil
	case "error":
		return nil, false, m.Payload
	default:
		c.t.Fatalf("unexpected message %s %s", m.Type, m.Payload)
		return nil, false, nil
	}
}
