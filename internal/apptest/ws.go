package apptest

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

// WSClient speaks one of the two GraphQL WebSocket subprotocols, as Apollo (graphql-transport-ws)
// or GraphQL Playground (graphql-ws) do.
type WSClient struct {
	T        testing.TB
	Conn     *websocket.Conn
	Protocol string
	NextID   int
}

type WSMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func DialWS(t testing.TB, baseURL, protocol string) *WSClient {
	t.Helper()
	c := DialRawWS(t, baseURL, protocol)
	c.Send(WSMessage{Type: "connection_init", Payload: json.RawMessage(`{}`)})
	if m := c.Read(); m.Type != "connection_ack" {
		t.Fatalf("after connection_init got %s %s", m.Type, m.Payload)
	}
	return c
}

// DialRawWS opens a WebSocket with the subprotocol and sends nothing.
func DialRawWS(t testing.TB, baseURL, protocol string) *WSClient {
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
	c := &WSClient{T: t, Conn: conn, Protocol: protocol}
	t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "") })
	return c
}

// Closed reads until the server closes the socket and returns its close status and reason;
// the test fails if a message other than a keep-alive (or graphql-ws's connection_error)
// arrives first, or nothing within 20s.
func (c *WSClient) Closed() (websocket.StatusCode, string) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var m WSMessage
		err := wsjson.Read(ctx, c.Conn, &m)
		if err == nil {
			if m.Type == "ka" || m.Type == "ping" || m.Type == "pong" || m.Type == "connection_error" {
				continue // keep-alives, and graphql-ws's announcement of the close
			}
			c.T.Fatalf("%s: waiting for the close, got %s %s (id %s)", c.Protocol, m.Type, m.Payload, m.ID)
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			c.T.Fatalf("waiting for the close: %v", err)
		}
		return ce.Code, ce.Reason
	}
}

func (c *WSClient) Send(m WSMessage) {
	c.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, c.Conn, m); err != nil {
		c.T.Fatalf("ws write: %v", err)
	}
}

// Read returns the next message that is not a keep-alive, answering pings; the test fails when
// none arrives within 20s.
func (c *WSClient) Read() WSMessage {
	c.T.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		var m WSMessage
		err := wsjson.Read(ctx, c.Conn, &m)
		cancel()
		if err != nil {
			c.T.Fatalf("ws read (%s): %v", c.Protocol, err)
		}
		switch m.Type {
		case "ka", "pong":
			continue
		case "ping":
			c.Send(WSMessage{Type: "pong"})
			continue
		}
		return m
	}
}

// Subscribe starts an operation and returns its id.
func (c *WSClient) Subscribe(query string, vars map[string]any) string {
	c.T.Helper()
	c.NextID++
	id := fmt.Sprint(c.NextID)
	payload, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	typ := "subscribe"
	if c.Protocol == "graphql-ws" {
		typ = "start"
	}
	c.Send(WSMessage{ID: id, Type: typ, Payload: payload})
	return id
}

// Next returns the data of the operation's next result; done is true when it completed instead.
// An error message fails the test unless wantErr is set, in which case its payload is returned.
func (c *WSClient) Next(id string) (data json.RawMessage, done bool, errPayload json.RawMessage) {
	c.T.Helper()
	m := c.Read()
	if m.ID != id {
		c.T.Fatalf("message for operation %q while waiting for %q: %s %s", m.ID, id, m.Type, m.Payload)
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
		c.T.Fatalf("unexpected message %s %s", m.Type, m.Payload)
		return nil, false, nil
	}
}
