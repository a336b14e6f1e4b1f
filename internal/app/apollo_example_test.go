package app_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/internal/proctest"
)

// apolloDir is the Apollo Client example, a Node program with its own package-lock.json.
var apolloDir = apptest.RepoPath("examples", "apollo")

// lockStamp, inside node_modules, holds the digest of the package-lock.json that `npm ci`
// installed, so the example's packages are installed again only when the lock changes.
const lockStamp = "node_modules/.interlock-package-lock.sha256"

// TestApolloExample runs examples/apollo (a real Apollo Client over HTTP and graphql-ws) against
// a real server process with authentication on, over SQLite and MySQL: it lists, watches,
// starts, approves and streams a run, and checks its normalized cache. It fails when the
// program exits non-zero. Without node and npm it skips, except under CI=true.
func TestApolloExample(t *testing.T) {
	t.Parallel()
	node, npm := nodeTools(t)
	npmCI(t, npm)
	t.Run("sqlite", func(t *testing.T) {
		runApolloExample(t, node, "sqlite:"+filepath.Join(t.TempDir(), "apollo.db"))
	})
	t.Run("mysql", func(t *testing.T) {
		runApolloExample(t, node, dbtest.MySQLURL(dbtest.MySQLDSN(t)))
	})
}

// nodeTools finds node and npm, or skips the test (fails it under CI=true): the Apollo example
// and the clients of testdata/wire.
func nodeTools(t *testing.T) (node, npm string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run the Node clients, but node (%v) or npm (%v) is missing", errNode, errNpm)
		}
		t.Skipf("node or npm is not installed: skipping the Node clients (%v, %v)", errNode, errNpm)
	}
	return node, npm
}

// npmCI installs the example's locked packages unless node_modules holds that lock already.
func npmCI(t *testing.T, npm string) {
	t.Helper()
	if err := npmCIIn(t, npm, apolloDir); err != nil {
		t.Fatal(err)
	}
}

// npmCIIn installs the locked packages of the Node project in dir unless its node_modules
// holds that lock already.
func npmCIIn(t testing.TB, npm, dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("%s has no package-lock.json: %w", dir, err)
	}
	want := apptest.Sha256Hex(string(lock))
	stamp := filepath.Join(dir, lockStamp)
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return nil
	}
	cmd := proctest.Command(t, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	return os.WriteFile(stamp, []byte(want), 0o644)
}

// runApolloExample starts a server over db with a token and runs the example against it.
func runApolloExample(t *testing.T, node, db string) {
	secret := make([]byte, 16)
	rand.Read(secret)
	token := hex.EncodeToString(secret)
	file := apptest.WriteConfig(t, fmt.Sprintf("auth:\n  tokens:\n    - {subject: front-end, role: approver, sha256: %s}\n", apptest.Sha256Hex(token)))
	// The demo model answers after 300ms, so the example's watch of the suspended set is
	// surely live before its run suspends (nothing in the protocol says when it is).
	s := apptest.StartProc(t, db, "--auth=on", "--config", file, "--demo-delay=300ms")
	// A run that already waits, for the example's inbox to list.
	waiting := s.SuspendAs(t, token, "refund order 7 for 5", nil)

	// A token the server does not know: the example says so and exits non-zero.
	if out, err := apolloExample(t, node, s.URL, "not-"+token); err == nil || !bytes.Contains(out, []byte("apollo example: FAIL: ")) || !bytes.Contains(out, []byte("4401")) {
		t.Fatalf("the example with a bad token: %v\n%s\nwant a non-zero exit naming the WebSocket's 4401", err, out)
	}

	out, err := apolloExample(t, node, s.URL, token)
	t.Logf("node demo.js:\n%s", out)
	if err != nil {
		t.Fatalf("the Apollo example failed (%v)", err)
	}
	if !bytes.Contains(out, []byte("1 suspended run(s)")) || !bytes.Contains(out, []byte("apollo example: OK")) {
		t.Fatalf("the Apollo example did not list the waiting run %s and finish: see its output above", waiting.ID)
	}
	// What the example did is stored: its run completed, the waiting one still waits.
	var list struct{ SuspendedRuns struct{ Runs []apptest.Run } }
	s.MustAs(t, token, `{ suspendedRuns { runs { id } } }`, nil, &list)
	if len(list.SuspendedRuns.Runs) != 1 || list.SuspendedRuns.Runs[0].ID != waiting.ID {
		t.Fatalf("suspended runs after the example: %+v, want only %s", list.SuspendedRuns.Runs, waiting.ID)
	}
}

// apolloExample runs the example against url with token and returns what it printed.
func apolloExample(t *testing.T, node, url, token string) ([]byte, error) {
	t.Helper()
	cmd := proctest.Command(t, node, "demo.js")
	cmd.Dir = apolloDir
	cmd.Env = append(os.Environ(), "INTERLOCK_URL="+url, "INTERLOCK_TOKEN="+token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}
