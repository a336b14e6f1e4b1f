package app_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/proctest"
)

// receiptsExampleDir holds the verifyReceipt() of docs/receipts.md ("Receipts a tool can verify"):
// verify_receipt.py (PyJWT) and verify-receipt.ts (jose), a Node project with its own lock.
var receiptsExampleDir = apptest.RepoPath("examples", "receipts")

// TestReceiptsExamples runs the Python and TypeScript verifiers as the service behind a tool
// would, against a real server: each fetches /.well-known/jwks.json and accepts the receipt of
// an approval for exactly the arguments it names — given in another key order, spacing and
// number spelling, so the digest must be their own RFC 8785 form — and refuses other arguments,
// another tool and another issuer. Without python3 with PyJWT, or node and npm, the example
// skips, except under CI=true.
func TestReceiptsExamples(t *testing.T) {
	t.Parallel()
	s := approvalsServer(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"))
	// The policy approves status at once; its args exercise JCS: key order by UTF-16 code units,
	// escapes, and numbers as JavaScript writes them.
	policy := ask(t, s, "bot", "0", map[string]any{"agentId": "deploy-bot", "toolName": "status",
		"args": map[string]any{"service": "api", "ratio": 0.000015, "big": 1e21, "n": 3, "note": "café 😀 <b>\n", "\ue000": []any{true, nil, -12.5}}})
	policyReceipt := pollReceipt(t, s, policy.RunID).Receipt
	asWritten := `{ "\ue000": [true, null, -12.50], "note": "caf\u00e9 \ud83d\ude00 <b>\n", "n": 3.0, "big": 1E21, "ratio": 1.5e-5, "service": "api" }`
	edited := ask(t, s, "bot", "0", deployRequest(nil))
	s.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": edited.RunID, "args": map[string]any{"service": "api", "version": "1.2.2"}}, nil)
	editedReceipt := pollReceipt(t, s, edited.RunID).Receipt
	if policyReceipt == nil || editedReceipt == nil {
		t.Fatal("no receipts to verify")
	}
	cases := []struct {
		name, receipt, tool, args, issuer, want string
		ok                                      bool
	}{
		{"policy", *policyReceipt, "status", asWritten, "interlock", "VERIFIED status of run " + policy.RunID + " call tc_1 approved by policy", true},
		{"edited", *editedReceipt, "deploy", `{"version": "1.2.2", "service": "api"}`, "interlock", "VERIFIED deploy of run " + edited.RunID + " call tc_1 approved by sue", true},
		{"requested args", *editedReceipt, "deploy", `{"service": "api", "version": "1.2.3"}`, "interlock", "does not approve deploy", false},
		{"another tool", *policyReceipt, "deploy", asWritten, "interlock", "does not approve deploy", false},
		{"another issuer", *editedReceipt, "deploy", `{"service": "api", "version": "1.2.2"}`, "https://other.example", "", false},
	}
	run := func(t *testing.T, command ...string) {
		for _, c := range cases {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			cmd := proctest.CommandContext(ctx, t, command[0], append(command[1:], c.receipt, c.tool, c.args)...)
			cmd.Env = append(os.Environ(), "INTERLOCK_URL="+s.URL, "INTERLOCK_ISSUER="+c.issuer)
			out, err := cmd.CombinedOutput()
			cancel()
			if c.ok && (err != nil || !strings.Contains(string(out), c.want)) {
				t.Errorf("%s: %v, printed %s; want %q", c.name, err, out, c.want)
			}
			if !c.ok && (err == nil || !strings.Contains(string(out), c.want)) {
				t.Errorf("%s: accepted (%v), printed %s; want a refusal saying %q", c.name, err, out, c.want)
			}
		}
	}

	t.Run("python", func(t *testing.T) {
		run(t, pythonWithJWT(t), filepath.Join(receiptsExampleDir, "verify_receipt.py"))
	})
	t.Run("typescript", func(t *testing.T) {
		node, npm := nodeTools(t)
		if err := npmCIIn(t, npm, receiptsExampleDir); err != nil {
			t.Fatal(err)
		}
		tsc := proctest.Command(t, node, filepath.Join(receiptsExampleDir, "node_modules", "typescript", "bin", "tsc"), "-p", receiptsExampleDir)
		if out, err := tsc.CombinedOutput(); err != nil {
			t.Fatalf("tsc: %v\n%s", err, out)
		}
		run(t, node, filepath.Join(receiptsExampleDir, "verify-receipt.js"))
	})
}

// pythonWithJWT finds a Python 3 that imports PyJWT with its EdDSA support (Debian's
// python3-jwt is installed for the system's /usr/bin/python3, which may not be first on PATH),
// or skips the test (fails it under CI=true).
func pythonWithJWT(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if err := exec.Command(path, "-c", "import jwt, jwt.algorithms; jwt.algorithms.OKPAlgorithm").Run(); err == nil {
			return path
		}
		tried = append(tried, path)
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must run the Python receipt example, but no python3 imports PyJWT with EdDSA (tried %v; apt-get install python3-jwt)", tried)
	}
	t.Skipf("no python3 with PyJWT (tried %v): skipping its example", tried)
	return ""
}

// TestReceiptsDocShowsTheExamples: the verifiers docs/receipts.md shows are the example files, as
// they are.
func TestReceiptsDocShowsTheExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(apptest.RepoPath("docs", "receipts.md"))
	if err != nil {
		t.Fatal(err)
	}
	for file, lang := range map[string]string{"verify_receipt.py": "python", "verify-receipt.ts": "ts"} {
		src, err := os.ReadFile(filepath.Join(receiptsExampleDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), "```"+lang+"\n"+string(src)+"```\n") {
			t.Errorf("docs/receipts.md does not show examples/receipts/%s as it is, in a ```%s block", file, lang)
		}
	}
}
