package app_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// fakeResponses is a model speaking the Responses API's streamed wire format, enough for one
// Codex turn: asked to work, it calls Codex's shell tool to run command with escalated
// permissions (so Codex must ask for approval); given the tool's output, it records it and
// answers "done". Asked by Codex's automatic reviewer (a request for its structured
// assessment), it approves — as the reviewer model that approved `rm -rf build` did.
type fakeResponses struct {
	*httptest.Server
	command string

	mu       sync.Mutex
	outputs  []string // the tool outputs the model was given
	reviewed int      // how many times the reviewer was asked
}

func newFakeResponses(t *testing.T, command string) *fakeResponses {
	t.Helper()
	f := &fakeResponses{command: command}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeResponses) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Tools []struct{ Name string }
		Input []struct {
			Type   string
			Output json.RawMessage
		}
		Text struct {
			Format struct{ Name string }
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var output string
	for _, in := range req.Input {
		if in.Type == "function_call_output" {
			output = string(in.Output)
		}
	}
	var item map[string]any
	f.mu.Lock()
	switch {
	case req.Text.Format.Name == "codex_output_schema":
		f.reviewed++
		item = assistantMessage(`{"risk_level": "low", "user_authorization": "high", "outcome": "allow", "rationale": "removing build output is routine"}`)
	case output != "":
		f.outputs = append(f.outputs, output)
		item = assistantMessage("done")
	default:
		name, args := "shell", map[string]any{"command": []string{"bash", "-lc", f.command}}
		for _, tl := range req.Tools {
			switch tl.Name {
			case "exec_command":
				name, args = tl.Name, map[string]any{"cmd": f.command}
			case "shell_command":
				name, args = tl.Name, map[string]any{"command": f.command}
			}
		}
		args["sandbox_permissions"] = "require_escalated"
		args["justification"] = "clean the build"
		b, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "name": name, "arguments": string(b), "call_id": "call_1"}
	}
	f.mu.Unlock()
	responsesStream(w, item)
}

// took is what the model was told and whether the reviewer was asked, since the last call.
func (f *fakeResponses) took() (outputs []string, reviewed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	outputs, reviewed = f.outputs, f.reviewed
	f.outputs, f.reviewed = nil, 0
	return outputs, reviewed
}

// TestHooksRealCodex runs the Codex CLI (`codex exec`, skipped when it is not installed) with
// the hook of docs/coding-agent-hooks.md in its config.toml, against a fake model that asks to run `rm -rf build`
// and a reviewer model that approves it, as that page describes each step:
//   - untrusted, the hook is skipped without a word: Interlock gets nothing and Codex's reviewer
//     decides (and the build is gone) — why the page says to trust it;
//   - without --approve-for-me, `codex exec` never asks: Interlock gets nothing;
//   - trusted (--dangerously-bypass-hook-trust stands in for /hooks), the request waits in
//     Interlock: declined by sam, the command does not run and the model reads the reason;
//     approved, it runs;
//   - with Interlock down, the command's deny (curl exit 7) stops it: the reviewer is never asked.
func TestHooksRealCodex(t *testing.T) {
	codex := codexBinary(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the Codex hook command needs curl:", err)
	}
	sam := apptest.TokenOf("sam")
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), "--auth=on", "--config", apptest.WriteConfig(t, docHooksConfig(t)))
	model := newFakeResponses(t, "rm -rf build")
	hookTOML, _ := docCodexHook(t)
	home := t.TempDir()
	config := fmt.Sprintf("model = \"fake-model\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = %q\nwire_api = \"responses\"\n\n%s", model.URL+"/v1", hookTOML)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	requests := func() int {
		var out struct {
			RecentRuns struct{ Runs []apptest.HookRun }
		}
		s.MustAs(t, sam, `query { recentRuns(agentId: "coding", perPage: 100, statuses: [RUNNING, SUSPENDED, COMPLETED, FAILED]) { runs { runId } } }`, nil, &out)
		return len(out.RecentRuns.Runs)
	}
	// run starts `codex exec` with args in a workspace holding build/, as ana with
	// INTERLOCK_URL url; wait is called while it runs. It returns whether build/ is still there.
	run := func(name, url string, args []string, wait func()) (buildKept bool) {
		t.Helper()
		ws := t.TempDir()
		if err := os.MkdirAll(filepath.Join(ws, "build"), 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := proctest.CommandContext(ctx, t, codex, append(append([]string{"exec", "--skip-git-repo-check", "--ephemeral"}, args...), "clean the build")...)
		cmd.Dir = ws
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "INTERLOCK_TOKEN=token-ana", "INTERLOCK_URL=" + url}
		cmd.Stdin = strings.NewReader("")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if wait != nil {
			wait()
		}
		if err := <-exited; err != nil {
			t.Fatalf("%s: codex exec: %v\n%s", name, err, out.String())
		}
		_, err := os.Stat(filepath.Join(ws, "build"))
		return err == nil
	}
	wantTold := func(name string, says string, reviewerAsked bool) {
		t.Helper()
		outputs, reviewed := model.took()
		if len(outputs) != 1 || !strings.Contains(outputs[0], says) {
			t.Fatalf("%s: the model was told %q, want one tool output saying %q", name, outputs, says)
		}
		if (reviewed > 0) != reviewerAsked {
			t.Fatalf("%s: the reviewer was asked %d times", name, reviewed)
		}
	}
	trusted := []string{"--approve-for-me", "--dangerously-bypass-hook-trust"}

	if kept := run("untrusted", s.URL, []string{"--approve-for-me"}, nil); kept || requests() != 0 {
		t.Fatalf("untrusted: build kept %v, %d requests in Interlock; want the hook skipped and the reviewer's approval run", kept, requests())
	}
	if _, reviewed := model.took(); reviewed == 0 {
		t.Fatal("untrusted: the reviewer was not asked")
	}

	if kept := run("no --approve-for-me", s.URL, []string{"--dangerously-bypass-hook-trust"}, nil); !kept || requests() != 0 {
		t.Fatalf("without --approve-for-me: build kept %v, %d requests in Interlock; want neither the command nor a request", kept, requests())
	}
	wantTold("without --approve-for-me", "approval policy is Never", false)

	decide := func(mutation string, vars map[string]any) func() {
		return func() {
			r := waitingRequestAs(s, t, sam, "coding")
			if len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolName != "Bash" || !strings.Contains(string(r.ToolCalls[0].Args), `"rm -rf build"`) ||
				r.StartedBy == nil || *r.StartedBy != "ana-laptop" {
				t.Errorf("the request in Interlock: %+v", r)
			}
			vars["id"] = r.RunID
			s.MustAs(t, sam, mutation, vars, nil)
		}
	}
	if kept := run("declined", s.URL, trusted, decide(`mutation($id: ID!, $r: String) { declineToolCall(runId: $id, reason: $r) { status } }`, map[string]any{"r": "not on a Friday"})); !kept {
		t.Fatal("declined: the build was removed")
	}
	wantTold("declined", "not on a Friday", false)

	if kept := run("approved", s.URL, trusted, decide(`mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{})); kept {
		t.Fatal("approved: the build is still there")
	}
	if _, reviewed := model.took(); reviewed != 0 {
		t.Fatal("approved: the reviewer was asked")
	}

	if kept := run("Interlock down", downURL, trusted, nil); !kept {
		t.Fatal("Interlock down: the build was removed")
	}
	wantTold("Interlock down", "Not run: Interlock could not be asked (curl exit 7).", false)
}
