package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/proctest"
)

// gatewayDoc is the page of the MCP gateway; its Codex table is what TestMCPGatewayRealCodex
// gives Codex, as written.
var gatewayDoc = filepath.Join("..", "..", "docs", "mcp-gateway.md")

// The name Codex 0.171.0 gives its model for the gateway's orders__refund when the gateway is
// the MCP server interlock: the tool orders__refund in the namespace mcp__interlock (the
// Responses API's function call carries both).
const (
	codexGatewayNamespace = "mcp__interlock"
	codexGatewayRefund    = "orders__refund"
)

// gatewayModel is a model speaking the Responses API's streamed wire format, enough for one
// Codex turn through the gateway: asked to work, it calls orders__refund in the namespace
// mcp__interlock with {"order":42,"amount":30} when Codex offers it that tool, and answers in
// text that it has none otherwise; given the tool's output, it records it and answers "done".
type gatewayModel struct {
	*httptest.Server

	mu      sync.Mutex
	offered []string // the tools of the last request that had no tool output, "namespace/name"
	outputs []string // the tool outputs the model was given
}

func newGatewayModel(t *testing.T) *gatewayModel {
	t.Helper()
	m := &gatewayModel{}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *gatewayModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	type tool struct{ Type, Name string }
	var req struct {
		Tools []struct {
			tool
			Tools []tool
		}
		Input []struct {
			Type   string
			CallID string `json:"call_id"`
			Output json.RawMessage
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, in := range req.Input {
		if in.Type == "function_call_output" && in.CallID == "call_1" {
			m.outputs = append(m.outputs, string(in.Output))
			responsesStream(w, assistantMessage("done"))
			return
		}
	}
	m.offered = nil
	found := false
	for _, tl := range req.Tools {
		m.offered = append(m.offered, tl.Name)
		for _, in := range tl.Tools {
			m.offered = append(m.offered, tl.Name+"/"+in.Name)
			found = found || (tl.Type == "namespace" && tl.Name == codexGatewayNamespace && in.Name == codexGatewayRefund)
		}
	}
	if !found {
		responsesStream(w, assistantMessage("I have no refund tool."))
		return
	}
	responsesStream(w, map[string]any{"type": "function_call", "namespace": codexGatewayNamespace, "name": codexGatewayRefund,
		"arguments": `{"order":42,"amount":30}`, "call_id": "call_1"})
}

// took is what the model was offered and told since the last call.
func (m *gatewayModel) took() (offered, outputs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	offered, outputs = m.offered, m.outputs
	m.offered, m.outputs = nil, nil
	return offered, outputs
}

// outputText is the text of a function_call_output's output as Codex sends it: a string, or a
// list of input_text items.
func outputText(t *testing.T, raw string) string {
	t.Helper()
	var text string
	if json.Unmarshal([]byte(raw), &text) == nil {
		return text
	}
	var items []struct{ Type, Text string }
	if err := json.Unmarshal([]byte(raw), &items); err != nil {
		t.Fatalf("a tool output that is neither a string nor a list of items: %s", raw)
	}
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Text + "\n")
	}
	return b.String()
}

// docCodexGateway is the Codex table of gatewayDoc with its URL made url, and the
// tool_timeout_sec it sets, checked for what the test relies on.
func docCodexGateway(t *testing.T, url string) (toml string, toolTimeout time.Duration) {
	t.Helper()
	toml = docBlock(t, gatewayDoc, "**Codex**", "toml")
	const docURL = `url = "http://localhost:8080/mcp"` + "\n"
	if !strings.HasPrefix(toml, "[mcp_servers.interlock]\n") || !strings.Contains(toml, docURL) ||
		!strings.Contains(toml, `bearer_token_env_var = "INTERLOCK_TOKEN"`+"\n") {
		t.Fatalf("the Codex table of docs/mcp-gateway.md:\n%s", toml)
	}
	m := regexp.MustCompile(`(?m)^tool_timeout_sec = (\d+)\b`).FindStringSubmatch(toml)
	if m == nil {
		t.Fatalf("the Codex table of docs/mcp-gateway.md sets no tool_timeout_sec:\n%s", toml)
	}
	n, _ := strconv.Atoi(m[1])
	return strings.Replace(toml, docURL, fmt.Sprintf("url = %q\n", url), 1), time.Duration(n) * time.Second
}

// TestMCPGatewayRealCodex runs the Codex CLI (`codex exec`, skipped when it is not installed)
// with the table of docs/mcp-gateway.md's Codex section in its config.toml, pointing at the
// gateway, and INTERLOCK_TOKEN holding agentbot's token, against a fake model that calls the
// gateway's orders__refund as Codex names it:
//   - the call waits in Interlock as agentbot's request; approved by alice, the upstream's refund
//     runs once and Codex gives the model its result;
//   - in a new Codex session the same call is a new request; declined by bob, the refund does not
//     run and the model reads that a person declined it, and why.
//
// The gateway's wait is under the tool_timeout_sec the page sets, as the page says it must be.
func TestMCPGatewayRealCodex(t *testing.T) {
	codex := codexBinary(t)
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	const wait = 20 * time.Second
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), gatewayConfig(up, wait.String(), ""))
	model := newGatewayModel(t)
	table, toolTimeout := docCodexGateway(t, s.URL+"/mcp")
	if wait >= toolTimeout {
		t.Fatalf("the gateway's wait %v is not under the page's tool_timeout_sec (%v)", wait, toolTimeout)
	}
	home := t.TempDir()
	config := fmt.Sprintf("model = \"fake-model\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = %q\nwire_api = \"responses\"\n\n%s", model.URL+"/v1", table)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	alice := apptest.TokenOf("alice")

	// run starts `codex exec` as agentbot, waits for its call in suspendedRuns (failing at once
	// if Codex ends first), checks the request, lets act decide it, and waits for Codex to exit
	// 0. It returns the text of the one tool output the model was given.
	run := func(name string, act func(runID string)) string {
		t.Helper()
		refunds := len(up.Calls("refund"))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		// --strict-config: Codex refuses a key it does not know, so a misspelt key of the page's
		// table fails here rather than being ignored.
		cmd := proctest.CommandContext(ctx, t, codex, "exec", "--skip-git-repo-check", "--ephemeral", "--strict-config", "refund order 42")
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "INTERLOCK_TOKEN=" + apptest.TokenOf("agentbot")}
		cmd.Stdin = strings.NewReader("")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()

		var req apptest.HookRun
		for deadline := time.Now().Add(time.Minute); req.RunID == ""; time.Sleep(20 * time.Millisecond) {
			select {
			case err := <-exited:
				offered, _ := model.took()
				t.Fatalf("%s: codex exec ended (%v) before its call waited in Interlock; the model was offered %v\n%s", name, err, offered, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no call of Codex waits in Interlock\n%s", name, out.String())
			}
			var data struct {
				SuspendedRuns struct{ Runs []apptest.HookRun }
			}
			s.MustAs(t, alice, `{ suspendedRuns(agentId: "mcp-gateway") { runs { `+apptest.HookRunFields+` } } }`, nil, &data)
			if len(data.SuspendedRuns.Runs) == 1 {
				req = data.SuspendedRuns.Runs[0]
			}
		}
		if req.StartedBy == nil || *req.StartedBy != "agentbot" || len(req.ToolCalls) != 1 || req.ToolCalls[0].ToolName != codexGatewayRefund ||
			!apptest.SameJSONValue(t, req.ToolCalls[0].Args, []byte(`{"order":42,"amount":30}`)) {
			t.Errorf("%s: the request in Interlock: %+v (started by %v), want agentbot's call of orders__refund with order 42, amount 30", name, req, req.StartedBy)
		}
		if n := len(up.Calls("refund")); n != refunds {
			t.Errorf("%s: the upstream ran refund before anyone decided (%d calls, %d before)", name, n, refunds)
		}
		act(req.RunID)
		if err := <-exited; err != nil {
			t.Fatalf("%s: codex exec: %v\n%s", name, err, out.String())
		}
		_, outputs := model.took()
		if len(outputs) != 1 {
			t.Fatalf("%s: the model was given %d tool outputs %q, want 1\n%s", name, len(outputs), outputs, out.String())
		}
		t.Logf("%s: the model was told %q", name, outputText(t, outputs[0]))
		return outputText(t, outputs[0])
	}

	got := run("approved", func(id string) { decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`) })
	if !strings.Contains(got, `{"order":42,"refunded":30}`) {
		t.Errorf("approved: the model was told %s, want the refund's result (refunded 30)", got)
	}
	calls := up.Calls("refund")
	if len(calls) != 1 || calls[0].Args["order"] != float64(42) || calls[0].Args["amount"] != float64(30) {
		t.Fatalf("approved: the upstream's refund calls = %+v, want one, of order 42 and amount 30", calls)
	}

	got = run("declined", func(id string) {
		decide(t, s, "bob", id, `declineToolCall(runId: $id, reason: "order 42 was refunded already") { id }`)
	})
	if !strings.Contains(got, "declined") || !strings.Contains(got, "order 42 was refunded already") {
		t.Errorf("declined: the model was told %s, want that a person declined the call, and why", got)
	}
	if n := len(up.Calls("refund")); n != 1 {
		t.Fatalf("declined: the upstream ran refund %d times in all, want still 1", n)
	}
}
