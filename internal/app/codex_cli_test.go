package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
)

// What the tests that run the real Codex CLI share (TestHooksRealCodex, TestMCPGatewayRealCodex):
// the binary, and the streamed Responses API answer their fake models give it.

// codexBinary is the Codex CLI to run: $INTERLOCK_TEST_CODEX, or codex on PATH.
func codexBinary(t *testing.T) string {
	if p := os.Getenv("INTERLOCK_TEST_CODEX"); p != "" {
		return p
	}
	p, err := exec.LookPath("codex")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must run the real Codex CLI, but it is not installed (.ci/run installs @openai/codex and sets INTERLOCK_TEST_CODEX)")
		}
		t.Skip("the Codex CLI is not installed (npm install -g @openai/codex, or INTERLOCK_TEST_CODEX=path/to/codex)")
	}
	return p
}

// responsesStream writes one answer of the Responses API in its streamed wire format, as much of
// it as Codex reads: response.created, each output item done, then response.completed with its
// token usage.
func responsesStream(w http.ResponseWriter, items ...map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
	}
	send(map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_1"}})
	for _, item := range items {
		send(map[string]any{"type": "response.output_item.done", "item": item})
	}
	send(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1",
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}})
}

// assistantMessage is the output item of a model's answer in text.
func assistantMessage(text string) map[string]any {
	return map[string]any{"type": "message", "role": "assistant", "id": "msg_1",
		"content": []any{map[string]any{"type": "output_text", "text": text}}}
}
