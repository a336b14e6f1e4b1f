package tools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/agent"
	"interlock/llm"
	"interlock/tools"
)

// midCallServer asks its client in the middle of ask (a form question) and of ask_url (a URL to
// open), and answers with how the question was answered; ask waits until `together` calls have
// arrived before it asks.
func midCallServer(t *testing.T, together int) string {
	s := midCallMCPServer(together)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// midCallMCPServer is midCallServer's MCP server, for any transport, of the protocol versions
// given (none: all the SDK has).
func midCallMCPServer(together int, versions ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ServerOptions{SupportedProtocolVersions: versions})
	var arrived, asked atomic.Int64
	all := make(chan struct{})      // closed once `together` calls are in flight
	answered := make(chan struct{}) // closed once each of them has had its question answered
	reply := func(res *mcp.ElicitResult, err error) (*mcp.CallToolResult, error) {
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "question failed: " + err.Error()}}}, nil
		}
		b, _ := json.Marshal(res.Content)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action + " " + string(b)}}}, nil
	}
	s.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if arrived.Add(1) == int64(together) {
			close(all)
		}
		<-all
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which colour?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"colour": map[string]any{"type": "string"}}}})
		// No call ends before every question was asked and answered: while one waits, the
		// others are still in flight.
		if asked.Add(1) == int64(together) {
			close(answered)
		}
		<-answered
		return reply(res, err)
	})
	s.AddTool(&mcp.Tool{Name: "ask_url", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return reply(req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.com/login", ElicitationID: "e1"}))
	})
	return s
}

func connectMidCall(t *testing.T, url string, timeout time.Duration) *tools.MCPServer {
	t.Helper()
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "asker", URL: url, Timeout: timeout}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// TestMCPMidCallQuestionIsAskedOfTheCall: a form question asked during a call goes to the call's
// Ask with the question's message and schema, and the answer reaches the server; the call's
// timeout does not run while the question waits (the person takes three times the timeout).
func TestMCPMidCallQuestionIsAskedOfTheCall(t *testing.T) {
	t.Parallel()
	srv := connectMidCall(t, midCallServer(t, 1), 300*time.Millisecond)
	var asked agent.Question
	c := &agent.Call{ToolCall: llm.ToolCall{ID: "tc_1", Name: "ask", Args: json.RawMessage(`{}`)},
		Ask: func(ctx context.Context, q agent.Question) (agent.Answer, error) {
			asked = q
			time.Sleep(900 * time.Millisecond) // a person thinking, past the call's timeout
			return agent.Answer{Kind: agent.CallResumed, Data: json.RawMessage(`{"colour":"teal"}`)}, nil
		}}
	out, err := srv.Execute("ask")(context.Background(), c)
	if err != nil || out != `accept {"colour":"teal"}` {
		t.Fatalf("Execute = %v, %v; want the server's answer to the accepted question", out, err)
	}
	var payload struct{ Message string }
	if json.Unmarshal(asked.Payload, &payload) != nil || payload.Message != "Which colour?" || !strings.Contains(string(asked.Schema), `"colour"`) {
		t.Fatalf("asked %s with schema %s", asked.Payload, asked.Schema)
	}

	// Declined and cancelled answers are the server's decline and cancel.
	for kind, want := range map[agent.CallState]string{agent.CallDeclined: "decline null", agent.CallExpired: "cancel null"} {
		c.Ask = func(context.Context, agent.Question) (agent.Answer, error) { return agent.Answer{Kind: kind}, nil }
		if out, err := srv.Execute("ask")(context.Background(), c); err != nil || out != want {
			t.Fatalf("answered %s: Execute = %v, %v; want %q", kind, out, err, want)
		}
	}
}

// TestMCPMidCallQuestionsInterlockCannotHold: a URL question (the SDK refuses it already: the
// client declares form elicitation only; askedMidCall would too), a question during a call that
// cannot ask (no Ask), and a question of a stdio server while two of its calls are in flight on
// its one session (which of them asks is not said) are refused — the server sees an error that
// says why — and nobody is asked.
func TestMCPMidCallQuestionsInterlockCannotHold(t *testing.T) {
	t.Parallel()
	var asks atomic.Int64
	ask := func(context.Context, agent.Question) (agent.Answer, error) {
		asks.Add(1)
		return agent.Answer{Kind: agent.CallResumed, Data: json.RawMessage(`{}`)}, nil
	}
	call := func(name string, withAsk bool) *agent.Call {
		c := &agent.Call{ToolCall: llm.ToolCall{ID: "tc_1", Name: name, Args: json.RawMessage(`{}`)}}
		if withAsk {
			c.Ask = ask
		}
		return c
	}
	srv := connectMidCall(t, midCallServer(t, 1), 5*time.Second)
	if _, err := srv.Execute("ask_url")(context.Background(), call("ask_url", true)); err == nil || !strings.Contains(err.Error(), "url") {
		t.Fatalf("URL question: %v; want it refused as such", err)
	}
	if _, err := srv.Execute("ask")(context.Background(), call("ask", false)); err == nil || !strings.Contains(err.Error(), "cannot hold a question") {
		t.Fatalf("question without Ask: %v", err)
	}

	two, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "asker", Command: []string{os.Args[0]},
		Env: map[string]string{"INTERLOCK_TEST_MCP_STDIO": "asker2"}, Timeout: 5 * time.Second}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { two.Close() })
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { _, errs[i] = two.Execute("ask")(context.Background(), call("ask", true)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "cannot tell which of the 2 tool calls") || !strings.Contains(err.Error(), "stdio") {
			t.Fatalf("question with two calls in flight: %v", errs)
		}
	}
	if n := asks.Load(); n != 0 {
		t.Fatalf("%d questions were put to a person", n)
	}
}

// TestMCPMidCallQuestionsOfOverlappingCalls: two calls in flight at once on one url server both
// ask in the middle of their calls; each call has a session of its own, so each question goes to
// its own call, is answered with that call's answer, and each call's server side gets its own.
func TestMCPMidCallQuestionsOfOverlappingCalls(t *testing.T) {
	t.Parallel()
	srv := connectMidCall(t, midCallServer(t, 2), 5*time.Second)
	colours := []string{"teal", "ochre"}
	outs, errs := make([]any, 2), make([]error, 2)
	var wg sync.WaitGroup
	for i, colour := range colours {
		c := &agent.Call{ToolCall: llm.ToolCall{ID: "tc_" + colour, Name: "ask", Args: json.RawMessage(`{}`)},
			Ask: func(context.Context, agent.Question) (agent.Answer, error) {
				return agent.Answer{Kind: agent.CallResumed, Data: json.RawMessage(`{"colour":"` + colour + `"}`)}, nil
			}}
		wg.Go(func() { outs[i], errs[i] = srv.Execute("ask")(context.Background(), c) })
	}
	wg.Wait()
	for i, colour := range colours {
		if want := `accept {"colour":"` + colour + `"}`; errs[i] != nil || outs[i] != want {
			t.Fatalf("call %d: %v, %v; want %q", i, outs[i], errs[i], want)
		}
	}
}
