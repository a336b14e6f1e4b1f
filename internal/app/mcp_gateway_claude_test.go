package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/proctest"
)

// claudeGatewayRefund is the name Claude Code gives its model for the gateway's orders__refund
// when the gateway is the MCP server interlock: mcp__<server>__<tool>.
const claudeGatewayRefund = "mcp__interlock__orders__refund"

// claudeBinary is the Claude Code CLI to run: $INTERLOCK_TEST_CLAUDE, or claude on PATH.
func claudeBinary(t *testing.T) string {
	if p := os.Getenv("INTERLOCK_TEST_CLAUDE"); p != "" {
		return p
	}
	p, err := exec.LookPath("claude")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI must run the real Claude Code CLI, but it is not installed (.ci/run installs @anthropic-ai/claude-code and sets INTERLOCK_TEST_CLAUDE)")
		}
		t.Skip("the Claude Code CLI is not installed (npm install -g @anthropic-ai/claude-code@2.1.332, or INTERLOCK_TEST_CLAUDE=path/to/claude)")
	}
	return p
}

// claudeModel is a model speaking the Messages API's streamed wire format, enough for one
// Claude Code turn through the gateway, acting as a real model would on Claude Code's requests:
// offered the gateway's refund among its tools, it calls it with {"order":42,"amount":30}; told
// of it only by name, as a deferred tool, it first loads it with Claude Code's ToolSearch; given
// the refund's result, it records it and answers "done". Anything else it answers in text.
type claudeModel struct {
	*httptest.Server

	mu      sync.Mutex
	offered [][]string // the tools of each request that had no result of the refund, in order
	results []string   // the refund results the model was given, as text
	failed  []bool     // whether each of those results was marked is_error
}

// The ids of the model's tool_use blocks: the refund, and the ToolSearch that loads it.
const (
	claudeCallID   = "toolu_gateway_1"
	claudeSearchID = "toolu_search_1"
)

func newClaudeModel(t *testing.T) *claudeModel {
	t.Helper()
	m := &claudeModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

// claudeBlock is a content block of a Messages API message: text, tool_use or tool_result
// (whose content is a string or a list of blocks).
type claudeBlock struct {
	Type      string
	Text      string
	ToolUseID string `json:"tool_use_id"`
	Content   json.RawMessage
	IsError   bool `json:"is_error"`
}

func (m *claudeModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	raw, err := io.ReadAll(r.Body)
	var req struct {
		Stream   bool
		System   json.RawMessage
		Tools    []struct{ Name string }
		Messages []struct {
			Role    string
			Content json.RawMessage
		}
	}
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil || !req.Stream {
		http.Error(w, fmt.Sprintf("want a streamed Messages request (%v)", err), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	searched := false
	for _, msg := range req.Messages {
		var blocks []claudeBlock
		if msg.Role != "user" || json.Unmarshal(msg.Content, &blocks) != nil {
			continue // a string: no tool results
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			switch b.ToolUseID {
			case claudeCallID:
				m.results = append(m.results, blockText(b.Content))
				m.failed = append(m.failed, b.IsError)
				messagesStream(w, "end_turn", map[string]any{"type": "text", "text": "done"})
				return
			case claudeSearchID:
				searched = true
			}
		}
	}
	var names []string
	offered, search := false, false
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
		offered = offered || tl.Name == claudeGatewayRefund
		search = search || tl.Name == "ToolSearch"
	}
	m.offered = append(m.offered, names)
	switch {
	case offered:
		messagesStream(w, "tool_use", toolUse(claudeCallID, claudeGatewayRefund, `{"order":42,"amount":30}`))
	case search && !searched && strings.Contains(string(raw), claudeGatewayRefund):
		// Deferred: its name is in the prompt, its schema is not, so it cannot be called yet.
		messagesStream(w, "tool_use", toolUse(claudeSearchID, "ToolSearch", `{"query":"select:`+claudeGatewayRefund+`"}`))
	default:
		messagesStream(w, "end_turn", map[string]any{"type": "text", "text": "I have no refund tool."})
	}
}

// toolUse is a tool_use block calling name with the JSON input, which messagesStream sends as an
// input_json_delta.
func toolUse(id, name, input string) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}, "partial_json": input}
}

// blockText is the text of a tool_result's content: a string, or the text of its blocks.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []claudeBlock
	_ = json.Unmarshal(raw, &blocks)
	var b strings.Builder
	for _, bl := range blocks {
		b.WriteString(bl.Text + "\n")
	}
	return b.String()
}

// took is what the model was offered and given so far.
func (m *claudeModel) took() (offered [][]string, results []string, failed []bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.offered, m.results, m.failed
}

// messagesStream writes one answer of the Messages API in its streamed wire format:
// message_start with an empty message, each block as content_block_start, one
// content_block_delta (text_delta, or input_json_delta with a tool_use block's "partial_json")
// and content_block_stop, then message_delta with stopReason and message_stop.
func messagesStream(w http.ResponseWriter, stopReason string, blocks ...map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
	}
	send(map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
		"model": "fake-model", "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}})
	for i, b := range blocks {
		start := map[string]any{}
		for k, v := range b {
			start[k] = v
		}
		var delta map[string]any
		switch b["type"] {
		case "text":
			start["text"] = ""
			delta = map[string]any{"type": "text_delta", "text": b["text"]}
		case "tool_use":
			delete(start, "partial_json")
			delta = map[string]any{"type": "input_json_delta", "partial_json": b["partial_json"]}
		}
		send(map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		send(map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
		send(map[string]any{"type": "content_block_stop", "index": i})
	}
	send(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 1}})
	send(map[string]any{"type": "message_stop"})
}

// docClaudeGateway is what docs/mcp-gateway.md's Claude Code section has a user do, with its
// URL made url: the `claude mcp add` command, or the project's .mcp.json; and the settings that
// let Claude Code call the gateway's tools.
func docClaudeGateway(t *testing.T, url string) (add, mcpJSON, settings string) {
	t.Helper()
	const docURL = "http://localhost:8080/mcp"
	add = strings.TrimSpace(docBlock(t, gatewayDoc, "**Claude Code**", "sh"))
	if !strings.HasPrefix(add, "claude mcp add --transport http interlock ") || strings.Count(add, " "+docURL+" ") != 1 ||
		!strings.Contains(add, `"Authorization: Bearer $INTERLOCK_TOKEN"`) || strings.Contains(add, "\n") {
		t.Fatalf("the claude mcp add command of docs/mcp-gateway.md:\n%s", add)
	}
	mcpJSON = docBlock(t, gatewayDoc, "Or for a project, in `.mcp.json`", "json")
	if !json.Valid([]byte(mcpJSON)) || strings.Count(mcpJSON, `"`+docURL+`"`) != 1 || !strings.Contains(mcpJSON, `"Bearer ${INTERLOCK_TOKEN}"`) {
		t.Fatalf("the .mcp.json of docs/mcp-gateway.md:\n%s", mcpJSON)
	}
	settings = docBlock(t, gatewayDoc, "Then let Claude Code call the gateway's tools", "json")
	if !json.Valid([]byte(settings)) || !strings.Contains(settings, `"mcp__interlock"`) {
		t.Fatalf("the Claude Code settings of docs/mcp-gateway.md:\n%s", settings)
	}
	return strings.Replace(add, docURL, url, 1), strings.Replace(mcpJSON, docURL, url, 1), settings
}

// claudeGateway is a gateway with Claude Code set up for it, as docs/mcp-gateway.md's Claude
// Code section says, in a project directory and a HOME of the test's own: the gateway added
// by the page's `claude mcp add` command (run by a shell) or by its .mcp.json, with
// INTERLOCK_TOKEN holding agentbot's token; the page's settings in ~/.claude/settings.json. The
// model Claude Code talks to is local (ANTHROPIC_BASE_URL, a dummy key) and Claude Code's other
// traffic is off, so nothing leaves the machine.
type claudeGateway struct {
	s       *apptest.Server
	up      *apptest.MCPUpstream
	model   *claudeModel
	claude  string
	project string
	env     []string
}

func newClaudeGateway(t *testing.T, claude string, wait time.Duration, withMCPJSON bool) *claudeGateway {
	t.Helper()
	g := &claudeGateway{up: apptest.NewMCPUpstream(t), model: newClaudeModel(t), claude: claude, project: t.TempDir()}
	g.s = apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), gatewayConfig(g.up, wait.String(), ""))
	add, mcpJSON, settings := docClaudeGateway(t, g.s.URL+"/mcp")
	token := apptest.TokenOf("agentbot")
	home := t.TempDir()
	// Only these variables: none of the machine's Claude Code settings reach the CLI.
	g.env = []string{"PATH=" + filepath.Dir(claude) + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home,
		"ANTHROPIC_BASE_URL=" + g.model.URL, "ANTHROPIC_API_KEY=sk-ant-dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1",
		"INTERLOCK_TOKEN=" + token}

	if withMCPJSON {
		if err := os.WriteFile(filepath.Join(g.project, ".mcp.json"), []byte(mcpJSON), 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		sh := proctest.Command(t, "sh", "-c", add)
		sh.Dir, sh.Env = g.project, g.env
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", add, err, out)
		}
		stored, err := os.ReadFile(filepath.Join(home, ".claude.json"))
		if err != nil || !strings.Contains(string(stored), g.s.URL+"/mcp") || !strings.Contains(string(stored), "Bearer "+token) {
			t.Fatalf("claude mcp add did not store the gateway with agentbot's token in ~/.claude.json (%v):\n%s", err, stored)
		}
	}
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	return g
}

// start starts `claude -p "refund order 42"` in the project; the channel is told how it ended.
func (g *claudeGateway) start(t *testing.T, out *strings.Builder) <-chan error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := proctest.CommandContext(ctx, t, g.claude, "-p", "refund order 42")
	cmd.Dir, cmd.Env = g.project, g.env
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited
}

// waiting is the request of Claude Code's call waiting in suspendedRuns, checked to be
// agentbot's call of orders__refund with order 42 and amount 30 that has not run. It fails at
// once if Claude Code ends first.
func (g *claudeGateway) waiting(t *testing.T, exited <-chan error, out *strings.Builder) apptest.HookRun {
	t.Helper()
	var req apptest.HookRun
	for deadline := time.Now().Add(time.Minute); req.RunID == ""; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			offered, results, _ := g.model.took()
			t.Fatalf("claude -p ended (%v) before its call waited in Interlock; the model was offered %v and given %q\n%s", err, offered, results, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call of Claude Code waits in Interlock\n%s", out)
		}
		var data struct {
			SuspendedRuns struct{ Runs []apptest.HookRun }
		}
		g.s.MustAs(t, apptest.TokenOf("alice"), `{ suspendedRuns(agentId: "mcp-gateway") { runs { `+apptest.HookRunFields+` } } }`, nil, &data)
		if len(data.SuspendedRuns.Runs) == 1 {
			req = data.SuspendedRuns.Runs[0]
		}
	}
	if req.StartedBy == nil || *req.StartedBy != "agentbot" || len(req.ToolCalls) != 1 || req.ToolCalls[0].ToolName != "orders__refund" ||
		!apptest.SameJSONValue(t, req.ToolCalls[0].Args, []byte(`{"order":42,"amount":30}`)) {
		t.Errorf("the request in Interlock: %+v (started by %v), want agentbot's call of orders__refund with order 42, amount 30", req, req.StartedBy)
	}
	if n := len(g.up.Calls("refund")); n != 0 {
		t.Errorf("the upstream ran refund %d times before anyone decided", n)
	}
	return req
}

// TestMCPGatewayRealClaudeCode runs the Claude Code CLI (`claude -p`, skipped when it is not
// installed) set up as docs/mcp-gateway.md's Claude Code section says, against a fake model
// that calls the gateway's orders__refund as Claude Code names it (loading it with ToolSearch
// first, as Claude Code defers MCP tools):
//   - approved (the gateway added by the page's command, or by its .mcp.json): the call waits
//     in Interlock as agentbot's request; approved by alice, the upstream's refund runs once,
//     Claude Code gives the model its result and exits 0. The gateway's wait is well under
//     Claude Code's limits on a remote MCP call (the page's "Choosing wait");
//   - undecided: Claude Code, which speaks 2026-07-28 and can open URLs, gets the URL
//     elicitation when wait passes and calls again, round after round; after its last round
//     it tells the model that the call failed, as the page says. The refund has not run and
//     the request still waits in the inbox.
func TestMCPGatewayRealClaudeCode(t *testing.T) {
	claude := claudeBinary(t)
	t.Parallel()

	for _, c := range []struct {
		name        string
		withMCPJSON bool
	}{{"approved", false}, {"approved, .mcp.json", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g := newClaudeGateway(t, claude, 20*time.Second, c.withMCPJSON)
			var out strings.Builder
			exited := g.start(t, &out)
			req := g.waiting(t, exited, &out)
			decide(t, g.s, "alice", req.RunID, `approveToolCall(runId: $id) { id }`)
			if err := <-exited; err != nil {
				t.Fatalf("claude -p: %v\n%s", err, out.String())
			}
			offered, results, failed := g.model.took()
			t.Logf("the model was offered %v; given %q", offered, results)
			if len(results) != 1 || failed[0] || !strings.Contains(results[0], `"refunded":30`) {
				t.Errorf("the model was given %q (is_error %v), want one result of the refund, refunded 30\n%s", results, failed, out.String())
			}
			calls := g.up.Calls("refund")
			if len(calls) != 1 || calls[0].Args["order"] != float64(42) || calls[0].Args["amount"] != float64(30) {
				t.Errorf("the upstream's refund calls = %+v, want one, of order 42 and amount 30", calls)
			}
			if got := strings.TrimSpace(out.String()); got != "done" {
				t.Errorf("claude -p printed %q, want the model's answer, done", got)
			}
		})
	}

	t.Run("undecided", func(t *testing.T) {
		t.Parallel()
		g := newClaudeGateway(t, claude, time.Second, false)
		var out strings.Builder
		exited := g.start(t, &out)
		req := g.waiting(t, exited, &out)
		if err := <-exited; err != nil {
			t.Fatalf("claude -p: %v\n%s", err, out.String())
		}
		_, results, failed := g.model.took()
		t.Logf("the model was given %q", results)
		if len(results) != 1 || !failed[0] || !strings.Contains(results[0], "still required input after 10 rounds") {
			t.Errorf("the model was given %q (is_error %v), want one error: still required input after 10 rounds", results, failed)
		}
		if n := len(g.up.Calls("refund")); n != 0 {
			t.Errorf("the upstream ran refund %d times, undecided", n)
		}
		if r := g.s.HookRequests(t, "mcp-gateway"); len(r) != 1 || r[0].RunID != req.RunID || r[0].Status != "SUSPENDED" {
			t.Errorf("the gateway's runs = %+v, want the one request, still SUSPENDED", r)
		}
	})
}
