package apptest

// Fake models: local servers speaking the streamed chat-completions wire format, which the test
// configs name as their agents' model (provider openai, baseURL the server's, no API key).

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// ScriptedCall is one tool call a scripted model asks for: its id (the model's), tool and
// arguments exactly as the model writes them.
type ScriptedCall struct{ ID, Tool, Args string }

// ScriptedModel is a local server speaking the streamed chat-completions wire format that asks,
// in its step n (the number of assistant messages with tool calls so far), for the calls of
// steps[n], and once the steps are done answers with the content of the last tool message.
func ScriptedModel(t *testing.T, steps ...[]ScriptedCall) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role      string `json:"role"`
				Content   any    `json:"content"`
				ToolCalls []any  `json:"tool_calls"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		step := 0
		for _, m := range body.Messages {
			if m.Role == "assistant" && len(m.ToolCalls) > 0 {
				step++
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta string) { SendChunk(w, delta) }
		if step < len(steps) {
			var calls []string
			for i, c := range steps[step] {
				args, _ := json.Marshal(c.Args)
				calls = append(calls, fmt.Sprintf(`{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, i, c.ID, c.Tool, args))
			}
			send(`{"role":"assistant","tool_calls":[` + strings.Join(calls, ",") + `]}`)
		} else {
			last := body.Messages[len(body.Messages)-1]
			content, _ := json.Marshal(fmt.Sprint("Done: ", last.Content))
			send(`{"role":"assistant","content":` + string(content) + `}`)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}
