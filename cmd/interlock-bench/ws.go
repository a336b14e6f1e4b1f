package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/coder/websocket"
)

// wsConn is one graphql-transport-ws connection carrying many subscriptions: each message of
// an operation goes to the channel it was subscribed with.
type wsConn struct {
	c    *websocket.Conn
	mu   sync.Mutex
	subs map[string]chan wsMessage
	next int
}

// wsMessage is a message of the protocol.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// dialWS opens a socket to base's /graphql and completes connection_init.
func dialWS(ctx context.Context, base string) (*wsConn, error) {
	url := "ws" + strings.TrimPrefix(base, "http") + "/graphql"
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		return nil, fmt.Errorf("open a WebSocket: %w", err)
	}
	c.SetReadLimit(1 << 20)
	w := &wsConn{c: c, subs: map[string]chan wsMessage{}}
	if err := w.send(ctx, wsMessage{Type: "connection_init", Payload: json.RawMessage(`{}`)}); err != nil {
		c.CloseNow()
		return nil, err
	}
	var ack wsMessage
	if err := w.read(ctx, &ack); err != nil || ack.Type != "connection_ack" {
		c.CloseNow()
		return nil, fmt.Errorf("connection_init: got %q, %v", ack.Type, err)
	}
	go w.loop(context.Background())
	return w, nil
}

func (w *wsConn) send(ctx context.Context, m wsMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return w.c.Write(ctx, websocket.MessageText, b)
}

func (w *wsConn) read(ctx context.Context, m *wsMessage) error {
	_, b, err := w.c.Read(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, m)
}

// loop hands each message to its operation's channel (dropping it when the reader is behind)
// and answers pings.
func (w *wsConn) loop(ctx context.Context) {
	defer func() {
		w.mu.Lock()
		for id, ch := range w.subs {
			close(ch)
			delete(w.subs, id)
		}
		w.mu.Unlock()
	}()
	for {
		var m wsMessage
		if err := w.read(ctx, &m); err != nil {
			return
		}
		if m.Type == "ping" {
			w.send(ctx, wsMessage{Type: "pong"})
			continue
		}
		w.mu.Lock()
		ch := w.subs[m.ID]
		if ch != nil && (m.Type == "complete" || m.Type == "error") {
			delete(w.subs, m.ID)
		}
		w.mu.Unlock()
		if ch == nil {
			continue
		}
		select {
		case ch <- m:
		default:
		}
		if m.Type == "complete" || m.Type == "error" {
			close(ch)
		}
	}
}

// subscribe starts an operation; its messages arrive on the channel returned, which is
// closed when the operation ends.
func (w *wsConn) subscribe(ctx context.Context, query string, vars map[string]any) (<-chan wsMessage, error) {
	payload, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.next++
	id := fmt.Sprint(w.next)
	ch := make(chan wsMessage, 64)
	w.subs[id] = ch
	w.mu.Unlock()
	if err := w.send(ctx, wsMessage{ID: id, Type: "subscribe", Payload: payload}); err != nil {
		return nil, err
	}
	return ch, nil
}

func (w *wsConn) Close() { w.c.Close(websocket.StatusNormalClosure, "") }
