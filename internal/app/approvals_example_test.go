package app_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/proctest"
)

// approvalsExampleDir holds the askPerson() helpers of docs/external-approvals.md ("Approvals for
// agents that run elsewhere"): ask_person.py and ask-person.ts, a Node project with its own lock.
var approvalsExampleDir = apptest.RepoPath("examples", "approvals")

// TestApprovalsExamples runs the Python and TypeScript examples as a user would, against a real
// server with an external agent: each asks, waits, and prints the decision a person takes
// through the API meanwhile (edited and approved; declined with a reason). Without python3, or
// node and npm, the example skips, except under CI=true.
func TestApprovalsExamples(t *testing.T) {
	t.Parallel()
	s := approvalsServer(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"))
	env := append(os.Environ(), "INTERLOCK_URL="+s.URL, "INTERLOCK_TOKEN="+apptest.TokenOf("bot"))

	t.Run("python", func(t *testing.T) {
		python := lookTool(t, "python3")
		out := runExample(t, s, env, func(t *testing.T, runID string) {
			s.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": runID, "args": map[string]any{"service": "api", "version": "1.2.2"}}, nil)
		}, python, filepath.Join(approvalsExampleDir, "ask_person.py"))
		if want := `APPROVED by sue - deploying {"service": "api", "version": "1.2.2"}`; !strings.Contains(out, want) {
			t.Fatalf("ask_person.py printed %q, want %q", out, want)
		}
	})

	t.Run("typescript", func(t *testing.T) {
		node, npm := nodeTools(t)
		if err := npmCIIn(t, npm, approvalsExampleDir); err != nil {
			t.Fatal(err)
		}
		tsc := proctest.Command(t, node, filepath.Join(approvalsExampleDir, "node_modules", "typescript", "bin", "tsc"), "-p", approvalsExampleDir)
		if out, err := tsc.CombinedOutput(); err != nil {
			t.Fatalf("tsc: %v\n%s", err, out)
		}
		out := runExample(t, s, env, func(t *testing.T, runID string) {
			s.MustAs(t, apptest.TokenOf("sue"), declineMutation, map[string]any{"id": runID, "reason": "not on a Friday"}, nil)
		}, node, filepath.Join(approvalsExampleDir, "ask-person.js"))
		if want := "DECLINED by sue - not on a Friday"; !strings.Contains(out, want) {
			t.Fatalf("ask-person.js printed %q, want %q", out, want)
		}
	})
}

// lookTool finds a program, or skips the test (fails it under CI=true).
func lookTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run the examples, but %s is missing: %v", name, err)
		}
		t.Skipf("%s is not installed: skipping its example (%v)", name, err)
	}
	return path
}

// runExample starts the example, waits until its request waits in the inbox (checking what
// it asked), decides it with decide while the example waits, and returns what it printed once
// it exits, which it must do with status 0.
func runExample(t *testing.T, s *apptest.Server, env []string, decide func(t *testing.T, runID string), command ...string) string {
	t.Helper()
	cmd := proctest.Command(t, command[0], command[1:]...)
	cmd.Env = env
	var out apptest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var runID string
	for runID == "" {
		var got struct {
			SuspendedRuns struct {
				Runs []struct {
					RunID, Context string
					ToolCalls      []struct{ ToolName string }
				}
			}
		}
		s.MustAs(t, apptest.TokenOf("vera"), `{ suspendedRuns(agentId: "deploy-bot") { runs { runId context toolCalls { toolName } } } }`, nil, &got)
		if runs := got.SuspendedRuns.Runs; len(runs) > 0 {
			r := runs[0]
			if r.ToolCalls[0].ToolName != "deploy" || !strings.Contains(r.Context, "canary") {
				t.Fatalf("the example asked %+v", r)
			}
			runID = r.RunID
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("%s exited before a person decided: %v\n%s", command[len(command)-1], err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	// It waits now, on its long-poll: the decision ends the wait.
	for s.App.Service.Followers(runID) == 0 {
		select {
		case err := <-exited:
			t.Fatalf("%s exited before a person decided: %v\n%s", command[len(command)-1], err, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	decide(t, runID)
	if err := <-exited; err != nil {
		t.Fatalf("%s: %v\n%s", command[len(command)-1], err, out.String())
	}
	return out.String()
}

// TestApprovalsDocShowsTheExamples: the Python and TypeScript helpers docs/external-approvals.md
// shows are the example files, as they are (the files are what CI runs).
func TestApprovalsDocShowsTheExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(apptest.RepoPath("docs", "external-approvals.md"))
	if err != nil {
		t.Fatal(err)
	}
	for file, lang := range map[string]string{"ask_person.py": "python", "ask-person.ts": "ts"} {
		src, err := os.ReadFile(filepath.Join(approvalsExampleDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(doc, []byte("```"+lang+"\n"+string(src)+"```\n")) {
			t.Errorf("docs/external-approvals.md does not show examples/approvals/%s as it is, in a ```%s block", file, lang)
		}
	}
}
