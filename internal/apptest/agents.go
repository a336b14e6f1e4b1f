package apptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// FakeModel is a local server speaking the streamed chat-completions wire format, behaving
// like a model that refunds: asked anything, it calls refund (its arguments split over
// chunks); given a tool's answer, it replies with that answer as text.
func FakeModel(t *testing.T, tool string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta string) { SendChunk(w, delta) }
		last := body.Messages[len(body.Messages)-1]
		if last.Role == "tool" {
			content, _ := json.Marshal(fmt.Sprint("Done: ", last.Content))
			send(`{"role":"assistant","content":` + string(content) + `}`)
		} else {
			send(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"` + tool + `","arguments":"{\"orderId\":"}}]}`)
			send(`{"tool_calls":[{"index":0,"function":{"arguments":"\"7\",\"amount\":5}"}}]}`)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// SendChunk writes one streamed chat completions chunk (a server-sent event) whose choice
// carries delta, a JSON object such as {"role":"assistant","content":"Hi"}. A fake model ends
// its stream with "data: [DONE]".
func SendChunk(w io.Writer, delta string) {
	fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", delta)
}

// RefundEndpoint is the HTTP tool's backend: it records each call.
type RefundEndpoint struct {
	*httptest.Server
	Mu    sync.Mutex
	Calls []map[string]any
	Auth  []string
}

func NewRefundEndpoint(t *testing.T) *RefundEndpoint {
	e := &RefundEndpoint{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		e.Mu.Lock()
		e.Calls = append(e.Calls, body)
		e.Auth = append(e.Auth, r.Header.Get("Authorization"))
		e.Mu.Unlock()
		io.WriteString(w, `{"result": {"refundId": "rf_7"}}`)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *RefundEndpoint) Got() ([]map[string]any, []string) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	return append([]map[string]any(nil), e.Calls...), append([]string(nil), e.Auth...)
}
