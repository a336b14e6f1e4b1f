package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"interlock/llm"
)

// chatServer is a local server speaking the streamed chat-completions wire format: each answer
// is a list of chunks sent as `data: {…}` lines, then `data: [DONE]`. Before that, it answers
// the first len(statuses) requests with those HTTP statuses.
type chatServer struct {
	*httptest.Server
	requests atomic.Int64
	bodies   chan map[string]any
}

func newChatServer(t *testing.T, statuses []int, delay time.Duration, chunks ...string) *chatServer {
	t.Helper()
	s := &chatServer{bodies: make(chan map[string]any, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.requests.Add(1))
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test-key" {
			http.Error(w, `{"error":{"message":"bad path or key"}}`, http.StatusNotFound)
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		s.bodies <- body
		if n <= len(statuses) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("retry-after-ms", "10")
			w.WriteHeader(statuses[n-1])
			fmt.Fprintf(w, `{"error":{"message":"status %d, your key sk-test-key","type":"x"}}`, statuses[n-1])
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "data: %s\n\n", c)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

func chunk(delta string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
}

func model(t *testing.T, s *chatServer, timeout time.Duration) *llm.OpenAI {
	t.Helper()
	m, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: s.URL + "/v1", Model: "test-model", APIKey: "sk-test-key", Timeout: timeout, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var req = llm.Request{
	Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "be brief"},
		{Role: llm.RoleUser, Content: "refund order 4"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "lookup", Args: json.RawMessage(`{"orderId":"4"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "call_0", ToolName: "lookup", Content: `"paid"`},
	},
	Tools: []llm.ToolDef{{Name: "refund", Description: "Refund an order", Parameters: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`)}},
}

func TestOpenAIStreamsText(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, nil, 0, chunk(`{"role":"assistant","content":"Hel"}`), chunk(`{"content":"lo, "}`), chunk(`{"content":"world"}`))
	var pieces []string
	resp, err := model(t, s, 5*time.Second).Stream(context.Background(), req, func(d string) error { pieces = append(pieces, d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello, world" || strings.Join(pieces, "|") != "Hel|lo, |world" || len(resp.ToolCalls) != 0 {
		t.Fatalf("response %+v, pieces %q", resp, pieces)
	}
	body := <-s.bodies
	msgs, _ := body["messages"].([]any)
	tools, _ := body["tools"].([]any)
	if body["model"] != "test-model" || body["stream"] != true || len(msgs) != 4 || len(tools) != 1 {
		t.Fatalf("request body: %v", body)
	}
	asst := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if asst["arguments"] != `{"orderId":"4"}` || msgs[3].(map[string]any)["tool_call_id"] != "call_0" {
		t.Fatalf("conversation sent: %v", msgs)
	}
}

func TestOpenAIAssemblesToolCallsSplitOverChunks(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, nil, 0,
		chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":""}}]}`),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"order"}}]}`),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"Id\":\"4\"}"}}]}`),
		chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"refund","arguments":"{\"amount\":"}}]}`),
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"10}"}}]}`),
	)
	resp, err := model(t, s, 5*time.Second).Stream(context.Background(), req, func(string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 2 ||
		resp.ToolCalls[0].ID != "call_a" || resp.ToolCalls[0].Name != "lookup" || string(resp.ToolCalls[0].Args) != `{"orderId":"4"}` ||
		resp.ToolCalls[1].ID != "call_b" || resp.ToolCalls[1].Name != "refund" || string(resp.ToolCalls[1].Args) != `{"amount":10}` {
		t.Fatalf("tool calls: %+v", resp.ToolCalls)
	}
}

func TestOpenAIRetriesRateLimitsAndServerErrors(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, []int{429}, 0, chunk(`{"content":"ok"}`))
	resp, err := model(t, s, 5*time.Second).Stream(context.Background(), req, func(string) error { return nil })
	if err != nil || resp.Text != "ok" || s.requests.Load() != 2 {
		t.Fatalf("after a 429: %+v, %v, %d requests", resp, err, s.requests.Load())
	}

	s = newChatServer(t, []int{500, 502, 503, 500}, 0, chunk(`{"content":"never"}`))
	_, err = model(t, s, 5*time.Second).Stream(context.Background(), req, func(string) error { return nil })
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 503 || pe.Provider != "openai/test-model" || s.requests.Load() != 3 {
		t.Fatalf("5xx until retries run out: %v after %d requests", err, s.requests.Load())
	}
}

func TestOpenAIDoesNotRetryRefusalsAndHidesTheKey(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, []int{401}, 0)
	_, err := model(t, s, 5*time.Second).Stream(context.Background(), req, func(string) error { return nil })
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 401 || s.requests.Load() != 1 {
		t.Fatalf("401: %v after %d requests", err, s.requests.Load())
	}
	if strings.Contains(err.Error(), "sk-test-key") {
		t.Fatalf("the error shows the API key: %v", err)
	}
}

func TestOpenAITimesOutASlowServer(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, nil, 5*time.Second, chunk(`{"content":"late"}`))
	start := time.Now()
	_, err := model(t, s, 200*time.Millisecond).Stream(context.Background(), req, func(string) error { return nil })
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "within 200ms") {
		t.Fatalf("slow server: %v", err)
	}
	if time.Since(start) > 4*time.Second {
		t.Fatalf("the call waited %s for a slow server", time.Since(start))
	}
}
