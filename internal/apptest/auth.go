package apptest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The principals of authServer, by subject: each one's token is "token-" + subject.
var AuthPrincipals = `
    - {subject: vera, role: viewer, sha256: %s}
    - {subject: otto, role: operator, sha256: %s}
    - {subject: alice, role: approver, sha256: %s}
    - {subject: bob, role: [approver], sha256: %s}
    - {subject: root, role: admin, sha256: %s}
    - {subject: portal, role: [approver], resources: [r2], sha256: %s}
`

func TokenOf(subject string) string { return "token-" + subject }

func Sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// AuthServer starts a server with authentication on, the principals above and the demo agents;
// extra is appended to the auth section.
func AuthServer(t *testing.T, db string, extra string) *Server {
	t.Helper()
	return AuthServerWith(t, db, extra)
}

// AuthServerWith is authServer started with further command-line args.
func AuthServerWith(t *testing.T, db string, extra string, args ...string) *Server {
	t.Helper()
	var digests []any
	for _, s := range []string{"vera", "otto", "alice", "bob", "root", "portal"} {
		digests = append(digests, Sha256Hex(TokenOf(s)))
	}
	file := WriteConfig(t, "auth:\n  tokens:"+fmt.Sprintf(AuthPrincipals, digests...)+extra)
	return Start(t, db, append([]string{"--auth=on", "--config", file}, args...)...)
}

// Result is one answer to an operation, over whichever transport: its data and the code of its
// first error ("" when none); status is the HTTP status where there is one.
type Result struct {
	Status int
	Data   json.RawMessage
	Code   string
	Msg    string
}

func FirstError(errs json.RawMessage) (code, msg string) {
	var list []Error
	if json.Unmarshal(errs, &list) != nil || len(list) == 0 {
		return "", ""
	}
	c, _ := list[0].Extensions["code"].(string)
	return c, list[0].Message
}

// PostAs sends an operation over HTTP POST with the token (none when empty).
func (s *Server) PostAs(t testing.TB, token, query string, vars map[string]any) Result {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest("POST", s.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := DecodeGQL(t, resp)
	var msg string
	if len(r.Errors) > 0 {
		msg = r.Errors[0].Message
	}
	return Result{Status: resp.StatusCode, Data: r.Data, Code: r.Code(), Msg: msg}
}

// MustAs is postAs that must succeed, decoding the data into v.
func (s *Server) MustAs(t testing.TB, token, query string, vars map[string]any, v any) {
	t.Helper()
	r := s.PostAs(t, token, query, vars)
	if r.Code != "" {
		t.Fatalf("%s as %s: %s %s", strings.Fields(query)[0], token, r.Code, r.Msg)
	}
	if v != nil {
		if err := json.Unmarshal(r.Data, v); err != nil {
			t.Fatal(err)
		}
	}
}

// SSEAs runs an operation over Server-Sent Events with the token and returns its first result.
func (s *Server) SSEAs(t testing.TB, token, query string, vars map[string]any) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := s.SubscribeSSE(t, ctx, token, query, vars)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		code, msg := FirstError(json.RawMessage(GjsonErrors(raw)))
		return Result{Status: resp.StatusCode, Code: code, Msg: msg}
	}
	events := NewSSEReader(resp.Body)
	for {
		ev, ok := events.Next()
		if !ok || ev.Name == "complete" {
			return Result{Status: resp.StatusCode}
		}
		if ev.Name == "next" {
			data, errs := ev.Result()
			code, msg := FirstError(errs)
			return Result{Status: resp.StatusCode, Data: data, Code: code, Msg: msg}
		}
	}
}

func GjsonErrors(raw []byte) []byte {
	var r struct{ Errors json.RawMessage }
	json.Unmarshal(raw, &r)
	return r.Errors
}

// DialAs opens a WebSocket with the subprotocol and a connection_init carrying the token.
func DialAs(t testing.TB, baseURL, protocol, token string) *WSClient {
	t.Helper()
	c := DialRawWS(t, baseURL, protocol)
	payload, _ := json.Marshal(map[string]any{"authorization": "Bearer " + token})
	c.Send(WSMessage{Type: "connection_init", Payload: payload})
	if m := c.Read(); m.Type != "connection_ack" {
		t.Fatalf("after connection_init as %s got %s %s", token, m.Type, m.Payload)
	}
	return c
}

// WsAs runs an operation over a WebSocket of the subprotocol with the token and returns its
// first result.
func (s *Server) WsAs(t testing.TB, protocol, token, query string, vars map[string]any) Result {
	t.Helper()
	c := DialAs(t, s.URL, protocol, token)
	defer c.Conn.Close(websocket.StatusNormalClosure, "")
	data, done, errs := c.Next(c.Subscribe(query, vars))
	if done {
		return Result{}
	}
	code, msg := FirstError(errs)
	return Result{Data: data, Code: code, Msg: msg}
}

// SuspendAs starts a run with the token and waits for it to suspend.
func (s *Server) SuspendAs(t testing.TB, token, prompt string, extra map[string]any) Run {
	t.Helper()
	input := map[string]any{"agentId": "support-agent", "prompt": prompt}
	for k, v := range extra {
		input[k] = v
	}
	var out struct{ StartRun Run }
	s.MustAs(t, token, `mutation($input: StartRunInput!) { startRun(input: $input) { `+RunFields+` } }`, map[string]any{"input": input}, &out)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var got struct{ Run *Run }
		s.MustAs(t, token, `query($id: ID!) { run(runId: $id) { `+RunFields+` } }`, map[string]any{"id": out.StartRun.ID}, &got)
		if got.Run.Status == "SUSPENDED" {
			return *got.Run
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s did not suspend", out.StartRun.ID)
	return Run{}
}
