package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"interlock/agent"
	"interlock/llm"
	"interlock/tools"
)

func call(args string) *agent.Call {
	return &agent.Call{
		ToolCall: llm.ToolCall{ID: "call_1", Name: "refund", Args: json.RawMessage(args)},
		Run:      agent.RunInfo{RunID: "run-1", AgentID: "billing", ThreadID: "t-1", ResourceID: "customer-1"},
	}
}

// endpoint is an HTTP tool backend that answers with fn and keeps the requests it got.
func endpoint(t *testing.T, fn func(w http.ResponseWriter, req tools.HTTPRequest)) (*httptest.Server, func() []tools.HTTPRequest, func() []http.Header) {
	t.Helper()
	var mu sync.Mutex
	var got []tools.HTTPRequest
	var headers []http.Header
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req tools.HTTPRequest
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("got %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Errorf("request body %s: %v", body, err)
		}
		mu.Lock()
		got = append(got, req)
		headers = append(headers, r.Header.Clone())
		mu.Unlock()
		fn(w, req)
	}))
	t.Cleanup(s.Close)
	return s, func() []tools.HTTPRequest { mu.Lock(); defer mu.Unlock(); return got },
		func() []http.Header { mu.Lock(); defer mu.Unlock(); return headers }
}

func TestHTTPToolResult(t *testing.T) {
	t.Parallel()
	s, got, headers := endpoint(t, func(w http.ResponseWriter, req tools.HTTPRequest) {
		io.WriteString(w, `{"result": {"refundId": "rf_7", "args": `+string(req.Args)+`}}`)
	})
	exec := tools.HTTPExecute(tools.HTTPConfig{URL: s.URL, Headers: map[string]string{"Authorization": "Bearer tok"}})
	v, err := exec(context.Background(), call(`{"orderId":"7","amount":5}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(v.(json.RawMessage)) != `{"refundId": "rf_7", "args": {"orderId":"7","amount":5}}` {
		t.Fatalf("result %s", v)
	}
	want := tools.HTTPRequest{Args: json.RawMessage(`{"orderId":"7","amount":5}`), RunID: "run-1", ToolCallID: "call_1", AgentID: "billing", ThreadID: "t-1", ResourceID: "customer-1"}
	if len(got()) != 1 || !sameRequest(got()[0], want) {
		t.Fatalf("requests %+v, want one %+v", got(), want)
	}
	if h := headers()[0].Get("Authorization"); h != "Bearer tok" {
		t.Fatalf("Authorization %q", h)
	}
}

func sameRequest(a, b tools.HTTPRequest) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestHTTPToolSuspendsThenResumes(t *testing.T) {
	t.Parallel()
	s, got, _ := endpoint(t, func(w http.ResponseWriter, req tools.HTTPRequest) {
		if req.ResumeData == nil {
			io.WriteString(w, `{"suspend": {"question": "Which card?"}}`)
			return
		}
		io.WriteString(w, `{"result": {"card": `+string(req.ResumeData)+`}}`)
	})
	exec := tools.HTTPExecute(tools.HTTPConfig{URL: s.URL})
	c := call(`{"orderId":"7"}`)
	_, err := exec(context.Background(), c)
	if err == nil || err.Error() != "tool suspended" {
		t.Fatalf("first call: %v, want the suspension", err)
	}
	c.SuspendPayload = json.RawMessage(`{"question": "Which card?"}`)
	c.ResumeData = json.RawMessage(`"visa"`)
	v, err := exec(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if string(v.(json.RawMessage)) != `{"card": "visa"}` {
		t.Fatalf("result %s", v)
	}
	if r := got(); len(r) != 2 || string(r[1].SuspendPayload) != `{"question":"Which card?"}` || string(r[1].ResumeData) != `"visa"` {
		t.Fatalf("requests %+v", r)
	}
}

func TestHTTPToolFailuresAreToolErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		answer     func(w http.ResponseWriter)
	}{
		{"non-2xx", "answered HTTP 503: down for maintenance", func(w http.ResponseWriter) { http.Error(w, "down for maintenance", 503) }},
		{"not JSON", "not JSON of the form", func(w http.ResponseWriter) { io.WriteString(w, "<html>oops</html>") }},
		{"neither", `neither "result" nor "suspend"`, func(w http.ResponseWriter) { io.WriteString(w, `{"ok": true}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := endpoint(t, func(w http.ResponseWriter, _ tools.HTTPRequest) { tc.answer(w) })
			_, err := tools.HTTPExecute(tools.HTTPConfig{URL: s.URL})(context.Background(), call(`{}`))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestHTTPToolTimeout(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	release := make(chan struct{})
	defer close(release)
	s, _, _ := endpoint(t, func(w http.ResponseWriter, _ tools.HTTPRequest) {
		calls.Add(1)
		<-release
	})
	_, err := tools.HTTPExecute(tools.HTTPConfig{URL: s.URL, Timeout: 50 * time.Millisecond})(context.Background(), call(`{}`))
	// The request was sent: it may have been carried out, so its outcome is unknown (a person
	// decides when the call needed approval; the model is told of the timeout otherwise).
	var unknown *agent.OutcomeUnknown
	if !errors.As(err, &unknown) || unknown.ModelError != "the tool's endpoint did not answer within 50ms" ||
		!strings.Contains(unknown.Reason, "did not answer within 50ms after the request was sent, so whether it took effect is unknown") {
		t.Fatalf("error %v, want a timeout whose outcome is unknown", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d calls, want 1 (no retry of a call that may have had an effect)", calls.Load())
	}
}

func TestHTTPToolUnreachable(t *testing.T) {
	t.Parallel()
	s := httptest.NewServer(http.NotFoundHandler())
	url := s.URL
	s.Close()
	_, err := tools.HTTPExecute(tools.HTTPConfig{URL: url})(context.Background(), call(`{}`))
	if err == nil || !strings.Contains(err.Error(), "could not be reached") || strings.Contains(err.Error(), "Post ") {
		t.Fatalf("error %v", err)
	}
}

// TestHTTPToolConnectionCutAfterSending: the endpoint takes the request and its connection breaks
// before the whole answer came (before the headers, and in the middle of the body). The endpoint
// may have acted, so the outcome is unknown — an agent.OutcomeUnknown for a person to judge, not a
// tool error the model could answer by calling again — and the request went out once. A
// refused connection (nothing sent) stays a tool error.
func TestHTTPToolConnectionCutAfterSending(t *testing.T) {
	t.Parallel()
	for name, cut := range map[string]func(w http.ResponseWriter){
		"before the answer": func(w http.ResponseWriter) {},
		"mid-body": func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, `{"result": {"refund`)
			w.(http.Flusher).Flush()
		},
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int64
			s, _, _ := endpoint(t, func(w http.ResponseWriter, _ tools.HTTPRequest) {
				calls.Add(1)
				cut(w)
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				conn.Close()
			})
			_, err := tools.HTTPExecute(tools.HTTPConfig{URL: s.URL})(context.Background(), call(`{}`))
			var unknown *agent.OutcomeUnknown
			if !errors.As(err, &unknown) || !strings.Contains(unknown.Reason, "refund broke after the request was sent") {
				t.Fatalf("error %v, want the outcome unknown", err)
			}
			if calls.Load() != 1 {
				t.Fatalf("%d requests reached the endpoint, want 1", calls.Load())
			}
		})
	}
	s := httptest.NewServer(http.NotFoundHandler())
	url := s.URL
	s.Close()
	_, err := tools.HTTPExecute(tools.HTTPConfig{URL: url})(context.Background(), call(`{}`))
	var unknown *agent.OutcomeUnknown
	if errors.As(err, &unknown) {
		t.Fatalf("a refused connection: %v, want a tool error (nothing was sent)", err)
	}
}
