package app_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// TestGatedHTTPToolRedirectedElsewhere: an approved call of an HTTP tool whose endpoint answers
// with a redirect to another origin is a tool error the model reads — the run goes on and
// completes, it is not sent back for a new decision as an unknown outcome (the configured
// origin answered; nothing was sent elsewhere) — and the other origin gets nothing: no
// connection, so neither the tool's Authorization header nor the approved arguments.
func TestGatedHTTPToolRedirectedElsewhere(t *testing.T) {
	t.Parallel()
	var otherConns atomic.Int64
	var mu sync.Mutex
	var otherGot []string
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		otherGot = append(otherGot, fmt.Sprintf("%s %v %s", r.Method, r.Header, body))
		mu.Unlock()
		io.WriteString(w, `{"result": "refunded by the other host"}`)
	}))
	other.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			otherConns.Add(1)
		}
	}
	other.Start()
	defer other.Close()
	var calls atomic.Int64
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Redirect(w, r, other.URL+"/refund", http.StatusTemporaryRedirect)
	}))
	defer endpoint.Close()

	check := func(t *testing.T, db string) {
		model := apptest.ScriptedModel(t, []apptest.ScriptedCall{{ID: "call_1", Tool: "refund", Args: `{"orderId":"7","amount":5}`}})
		s := apptest.Start(t, db, "--auth=on", "--config", apptest.WriteConfig(t, fmt.Sprintf(`
auth:
  tokens:
    - {subject: alice, role: approver, sha256: %s}
    - {subject: root, role: admin, sha256: %s}
agents:
  - id: billing
    model: {provider: openai, baseURL: %s/v1, name: scripted}
    tools: [refund]
tools:
  - name: refund
    description: Refund an order
    inputSchema: {type: object}
    requireApproval: true
    http: {url: %s/refund, headers: {Authorization: Bearer sk-refunds}}
`, apptest.Sha256Hex(apptest.TokenOf("alice")), apptest.Sha256Hex(apptest.TokenOf("root")), model.URL, endpoint.URL)))
		runID := idStart(t, s, "billing", "refund order 7")
		suspendedOn(t, s, runID, 1)
		before := calls.Load()
		s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": runID}, nil)
		r := finished(t, s, runID)
		want := "a redirect to another origin (" + other.URL + ")"
		if r.Status != "COMPLETED" || r.Output == nil || !strings.Contains(*r.Output, want) {
			t.Fatalf("run %s with output %v, want COMPLETED, the model told of %q", r.Status, r.Output, want)
		}
		for _, ev := range allEvents(t, s, runID) {
			if ev.Type == "TOOL_CALL_INTERRUPTED" {
				t.Fatalf("the call was interrupted: %+v", ev)
			}
		}
		if n := calls.Load() - before; n != 1 {
			t.Fatalf("the endpoint got %d requests, want 1", n)
		}
	}
	t.Run("sqlite", func(t *testing.T) { check(t, "sqlite:"+t.TempDir()+"/interlock.db") })
	t.Run("mysql", func(t *testing.T) { check(t, dbtest.MySQLURL(dbtest.MySQLDSN(t))) })
	mu.Lock()
	defer mu.Unlock()
	if n := otherConns.Load(); n != 0 || len(otherGot) != 0 {
		t.Fatalf("the other host got %d connections and %q", n, otherGot)
	}
}
