package app_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/proctest"
)

// wireDir is a Node project of third-party clients and conformance suites, with its own
// package-lock.json: graphql-http's audit, graphql-sse, graphql-ws (testdata/wire/README.md).
var wireDir = apptest.RepoPath("internal", "app", "testdata", "wire")

var (
	wireOnce sync.Once
	wireErr  error
)

// installWire installs wireDir's locked packages, once for every test of the package.
func installWire(t testing.TB, npm string) error {
	wireOnce.Do(func() { wireErr = npmCIIn(t, npm, wireDir) })
	return wireErr
}

// runWire runs a script of wireDir with node against the server s, acting with token, and
// returns what it printed; the test fails when the script exits non-zero.
func runWire(t *testing.T, s *apptest.Server, token, script string) string {
	t.Helper()
	node, npm := nodeTools(t)
	if err := installWire(t, npm); err != nil {
		t.Fatal(err)
	}
	cmd := proctest.Command(t, node, script)
	cmd.Dir = wireDir
	cmd.Env = append(os.Environ(), "INTERLOCK_URL="+s.URL, "INTERLOCK_TOKEN="+token)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out.Bytes())
	}
	return out.String()
}

// TestGraphQLOverHTTPAudit runs graphql-http's serverAudits (every check the GraphQL-over-HTTP
// spec's reference suite makes: media types, status codes, parameters, the data entry) against
// a real server with authentication on, over SQLite and MySQL. Every audit must pass: no
// warning, no notice, no error. (Before the gqlhttp transport: 55 ok, 5 warnings, 1 notice.)
func TestGraphQLOverHTTPAudit(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		out := runWire(t, s, apptest.TokenOf("alice"), "audit.mjs")
		var got struct {
			Total, OK, Notice, Warn, Error int
			Failed                         []map[string]any
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
			t.Fatalf("the audit printed %q", out)
		}
		t.Logf("graphql-http audit: %d audits, %d ok, %d notices, %d warnings, %d errors", got.Total, got.OK, got.Notice, got.Warn, got.Error)
		if got.Total < 60 || got.OK != got.Total {
			t.Fatalf("graphql-http audit: %s", out)
		}
	})
}

// TestGraphQLSSEClient runs graphql-sse's own client in both of its modes (distinct
// connections; a single connection reserved with PUT) through the demo flow: start a run,
// follow it to its suspension, approve it, follow it to the end, read it back COMPLETED; a
// refused query, and a subscription stopped by the client. Over SQLite and MySQL.
func TestGraphQLSSEClient(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		out := runWire(t, s, apptest.TokenOf("alice"), "sse.mjs")
		for _, want := range []string{"sse distinct connections: OK", "sse single connection: OK", "sse: OK"} {
			if !strings.Contains(out, want) {
				t.Fatalf("graphql-sse client: no %q in\n%s", want, out)
			}
		}
	})
}

// TestGraphQLWSClient runs graphql-ws's own client over graphql-transport-ws through the demo
// flow, a refused query, and a token the server does not know, which it closes with 4401.
func TestGraphQLWSClient(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		out := runWire(t, s, apptest.TokenOf("alice"), "ws.mjs")
		if !strings.Contains(out, "closed with 4401") || !strings.Contains(out, "ws: OK") {
			t.Fatalf("graphql-ws client:\n%s", out)
		}
	})
}
