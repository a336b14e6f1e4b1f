package llm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"interlock/llm"
)

// sseServer answers its n-th request with answers[n] (the last one once they run out), written
// as is: a raw text/event-stream body. An answer "CUT" plus text sends that text and then drops
// the connection in the middle of the chunked body.
type sseServer struct {
	*httptest.Server
	requests atomic.Int64
}

func newSSEServer(t *testing.T, answers ...string) *sseServer {
	t.Helper()
	s := &sseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(s.requests.Add(1))
		io.Copy(io.Discard, r.Body)
		a := answers[min(n, len(answers))-1]
		w.Header().Set("Content-Type", "text/event-stream")
		if cut, ok := strings.CutPrefix(a, "CUT"); ok {
			io.WriteString(w, cut)
			w.(http.Flusher).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close() // the chunked body never gets its last chunk
			}
			return
		}
		io.WriteString(w, a)
	}))
	t.Cleanup(s.Close)
	return s
}

func sse(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	return b.String()
}

const done = "data: [DONE]\n\n"

func finish(reason string) string {
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

func sseModel(t *testing.T, s *sseServer) *llm.OpenAI {
	t.Helper()
	m, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: s.URL + "/v1", Model: "test-model", Timeout: 20 * time.Second, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A stream that ends before the model finished it (no finish_reason, no [DONE]; or the
// connection cut) is not the answer: the call is made again, and the text streamed so far is
// declared void through RetryFunc before the next attempt streams its own.
func TestOpenAIRepeatsACutOffAnswer(t *testing.T) {
	t.Parallel()
	s := newSSEServer(t,
		sse(chunk(`{"role":"assistant","content":"Hel"}`)),         // ends cleanly, unfinished
		"CUT"+sse(chunk(`{"role":"assistant","content":"Hello"}`)), // connection dropped
		sse(chunk(`{"role":"assistant","content":"Hello, "}`), chunk(`{"content":"world"}`), finish("stop"))+done,
	)
	var pieces []string
	r := req
	r.RetryFunc = func() error { pieces = append(pieces, "<retry>"); return nil }
	resp, err := sseModel(t, s).Stream(context.Background(), r, func(d string) error { pieces = append(pieces, d); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello, world" || s.requests.Load() != 3 {
		t.Fatalf("answer %q after %d requests", resp.Text, s.requests.Load())
	}
	if got := strings.Join(pieces, "|"); got != "Hel|<retry>|Hello|<retry>|Hello, |world" {
		t.Fatalf("streamed %q", got)
	}

	// A finish_reason without [DONE], or [DONE] without a finish_reason, is a finished answer.
	for _, body := range []string{
		sse(chunk(`{"content":"ok"}`), finish("stop")),
		sse(chunk(`{"content":"ok"}`)) + done,
	} {
		s := newSSEServer(t, body)
		resp, err := sseModel(t, s).Stream(context.Background(), req, func(string) error { return nil })
		if err != nil || resp.Text != "ok" || s.requests.Load() != 1 {
			t.Fatalf("%q: %q, %v after %d requests", body, resp.Text, err, s.requests.Load())
		}
	}
}

// When every attempt is cut off, the call fails with ErrCutOff once MaxRetries are used: the
// fragment is never returned as the answer.
func TestOpenAIFailsWhenEveryAnswerIsCutOff(t *testing.T) {
	t.Parallel()
	s := newSSEServer(t, sse(chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"refund","arguments":"{\"amo"}}]}`)))
	retries := 0
	r := req
	r.RetryFunc = func() error { retries++; return nil }
	resp, err := sseModel(t, s).Stream(context.Background(), r, func(string) error { return nil })
	var pe *llm.ProviderError
	if !errors.Is(err, llm.ErrCutOff) || !errors.As(err, &pe) || pe.Status != 0 || len(resp.ToolCalls) != 0 {
		t.Fatalf("cut off every time: %+v, %v", resp, err)
	}
	if s.requests.Load() != 3 || retries != 2 {
		t.Fatalf("%d requests, %d retries; want 3 and 2 (MaxRetries 2)", s.requests.Load(), retries)
	}
}

// Some servers change the chunk id mid-stream; the answer is the whole stream all the same.
func TestOpenAIKeepsTheAnswerWhenTheChunkIDChanges(t *testing.T) {
	t.Parallel()
	second := strings.ReplaceAll(chunk(`{"content":"lo, world"}`), `"c1"`, `"c2"`)
	call := strings.ReplaceAll(chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":"{}"}}]}`), `"c1"`, `"c3"`)
	s := newSSEServer(t, sse(chunk(`{"role":"assistant","content":"Hel"}`), second, call, finish("tool_calls"))+done)
	resp, err := sseModel(t, s).Stream(context.Background(), req, func(string) error { return nil })
	if err != nil || resp.Text != "Hello, world" || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "lookup" {
		t.Fatalf("answer %+v, %v", resp, err)
	}
}

// Parallel tool calls sent without an index are told apart by order: a new id, or a name when
// the call before has one, starts the next call. With an index they go by index, even
// interleaved.
func TestOpenAIAssemblesParallelToolCalls(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		chunks []string
		want   string
	}{
		"no index, ids": {[]string{
			`{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"lookup","arguments":"{\"orderId\":"}}]}`,
			`{"tool_calls":[{"function":{"arguments":"\"4\"}"}}]}`,
			`{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"refund","arguments":""}}]}`,
			`{"tool_calls":[{"id":"call_b","function":{"arguments":"{\"amount\":10}"}}]}`,
		}, `call_a lookup {"orderId":"4"}; call_b refund {"amount":10}`},
		"no index, no ids": {[]string{
			`{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"lookup","arguments":"{\"orderId\":\"4\"}"}}]}`,
			`{"tool_calls":[{"type":"function","function":{"name":"refund","arguments":"{\"amount\":"}}]}`,
			`{"tool_calls":[{"function":{"arguments":"10}"}}]}`,
		}, ` lookup {"orderId":"4"};  refund {"amount":10}`},
		"both in one chunk": {[]string{
			`{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"lookup","arguments":"{}"}},{"id":"call_b","type":"function","function":{"name":"refund","arguments":"{}"}}]}`,
		}, `call_a lookup {}; call_b refund {}`},
		"index, interleaved": {[]string{
			`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":"{\"orderId\":"}}]}`,
			`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"refund","arguments":"{\"amount\":"}}]}`,
			`{"tool_calls":[{"index":0,"function":{"arguments":"\"4\"}"}}]}`,
			`{"tool_calls":[{"index":1,"function":{"arguments":"10}"}}]}`,
		}, `call_a lookup {"orderId":"4"}; call_b refund {"amount":10}`},
		"index 0 for every call, ids differ": {[]string{
			`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"lookup","arguments":"{}"}}]}`,
			`{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"refund","arguments":"{}"}}]}`,
		}, `call_a lookup {}; call_b refund {}`},
	} {
		t.Run(name, func(t *testing.T) {
			var chunks []string
			for _, c := range tc.chunks {
				chunks = append(chunks, chunk(c))
			}
			s := newSSEServer(t, sse(append(chunks, finish("tool_calls"))...)+done)
			resp, err := sseModel(t, s).Stream(context.Background(), req, func(string) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.ToolCalls {
				got = append(got, c.ID+" "+c.Name+" "+string(c.Args))
			}
			if strings.Join(got, "; ") != tc.want {
				t.Fatalf("calls %q, want %q", strings.Join(got, "; "), tc.want)
			}
		})
	}
}
