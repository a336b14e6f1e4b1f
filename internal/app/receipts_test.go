package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/receipt"
)

// jwksOf fetches a server's receipt keys as a service would: GET /.well-known/jwks.json,
// without credentials (the servers of these tests authenticate every other request).
func jwksOf(t testing.TB, baseURL string) jose.JSONWebKeySet {
	t.Helper()
	res, err := http.Get(baseURL + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("GET /.well-known/jwks.json: %d %s %s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		t.Fatalf("jwks.json: %v: %s", err, body)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() || k.Algorithm != "EdDSA" || k.KeyID == "" {
			t.Fatalf("jwks.json serves %+v: want public EdDSA keys with a kid", k)
		}
	}
	return set
}

// verified checks a receipt against the server's published keys and the call it must approve:
// run, call, agent, tool, decidedBy, the digest of args (the arguments that run), the issuer,
// and an exp of the default 15 minutes after decidedAt.
func verified(t testing.TB, baseURL string, token *string, runID, callID, agentID, tool string, decidedBy *string, args string) *receipt.Claims {
	t.Helper()
	if token == nil || *token == "" {
		t.Fatalf("no receipt for %s of run %s", tool, runID)
	}
	c, err := receipt.Verify(*token, jwksOf(t, baseURL))
	if err != nil {
		t.Fatalf("receipt of run %s does not verify with the published keys: %v", runID, err)
	}
	digest, err := receipt.ArgsDigest([]byte(args))
	if err != nil {
		t.Fatal(err)
	}
	decided, err := time.Parse(time.RFC3339, c.DecidedAt)
	if err != nil {
		t.Fatalf("decidedAt %q: %v", c.DecidedAt, err)
	}
	if c.Issuer != "interlock" || c.RunID != runID || c.ToolCallID != callID || c.AgentID != agentID || c.Tool != tool ||
		c.Decision != "APPROVED" || c.ArgsDigest != digest || fmt.Sprint(deref(c.DecidedBy)) != fmt.Sprint(deref(decidedBy)) ||
		c.Expires != decided.Add(15*time.Minute).Unix() || c.ID == "" {
		t.Fatalf("receipt claims %+v; want run %s call %s agent %s tool %s by %s digest %s (of %s), exp 15m after decidedAt",
			c, runID, callID, agentID, tool, deref(decidedBy), digest, args)
	}
	return c
}

const decisionsReceipts = `query($id: ID!) { run(runId: $id) { decisions { kind decidedBy receipt } } }`

type receiptDecision struct {
	Kind      string
	DecidedBy *string
	Receipt   *string
}

func decisionsOf(t testing.TB, s *apptest.Server, runID string) []receiptDecision {
	t.Helper()
	var out struct {
		Run struct{ Decisions []receiptDecision }
	}
	s.MustAs(t, apptest.TokenOf("vera"), decisionsReceipts, map[string]any{"id": runID}, &out)
	return out.Run.Decisions
}

// TestReceiptsOverApprovals: through the whole server on both dialects, every decision that lets
// an external agent's call run has a receipt that verifies with the published keys — a
// person's approval with edited arguments (bound to the edited ones, not the request's) and the
// policy's — the same in /approvals and on the GraphQL decision; a decline and an expiry have none.
func TestReceiptsOverApprovals(t *testing.T) {
	t.Parallel()
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		sue := "sue"
		t.Run("edited", func(t *testing.T) {
			r := ask(t, s, "bot", "0", deployRequest(nil))
			var pending struct {
				Receipt *string `json:"receipt"`
			}
			raw := poll(t, s, "bot", r.RunID, "0").raw
			if err := json.Unmarshal([]byte(raw), &pending); err != nil || pending.Receipt != nil {
				t.Fatalf("pending answer %s: want receipt null", raw)
			}
			s.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": r.RunID, "args": map[string]any{"version": "1.2.2", "service": "api"}}, nil)
			got := pollReceipt(t, s, r.RunID)
			if got.Status != "APPROVED" {
				t.Fatalf("status %s", got.Status)
			}
			c := verified(t, s.URL, got.Receipt, r.RunID, "tc_1", "deploy-bot", "deploy", &sue, `{"service":"api","version":"1.2.2"}`)
			requested, _ := receipt.ArgsDigest([]byte(`{"service":"api","version":"1.2.3"}`))
			if c.ArgsDigest == requested {
				t.Fatal("the receipt binds the requested arguments, not the edited ones that run")
			}
			if ds := decisionsOf(t, s, r.RunID); len(ds) != 1 || deref(ds[0].Receipt) != *got.Receipt {
				t.Fatalf("GraphQL decisions %+v: want the receipt /approvals gave", ds)
			}
		})
		t.Run("declined", func(t *testing.T) {
			r := ask(t, s, "bot", "0", deployRequest(nil))
			s.MustAs(t, apptest.TokenOf("sue"), declineMutation, map[string]any{"id": r.RunID, "reason": "no"}, nil)
			if got := pollReceipt(t, s, r.RunID); got.Status != "DECLINED" || got.Receipt != nil {
				t.Fatalf("declined answer %+v: want no receipt", got)
			}
			if ds := decisionsOf(t, s, r.RunID); len(ds) != 1 || ds[0].Kind != "DECLINED" || ds[0].Receipt != nil {
				t.Fatalf("GraphQL decisions %+v: a decline has no receipt", ds)
			}
		})
		t.Run("expired", func(t *testing.T) {
			r := ask(t, s, "bot", "0", map[string]any{"agentId": "deploy-bot", "toolName": "quick", "args": map[string]any{}})
			got := poll(t, s, "bot", r.RunID, "20s")
			var a struct {
				Status  string
				Receipt *string
			}
			json.Unmarshal([]byte(got.raw), &a)
			if a.Status != "EXPIRED" || a.Receipt != nil {
				t.Fatalf("expired answer %s: want EXPIRED without a receipt", got.raw)
			}
			if ds := decisionsOf(t, s, r.RunID); len(ds) != 1 || ds[0].Kind != "EXPIRED" || ds[0].Receipt != nil {
				t.Fatalf("GraphQL decisions %+v: an expiry has no receipt", ds)
			}
		})
		t.Run("policy", func(t *testing.T) {
			r := ask(t, s, "bot", "0", map[string]any{"agentId": "deploy-bot", "toolName": "status", "args": map[string]any{"b": 1, "a": "x"}})
			got := pollReceipt(t, s, r.RunID)
			if got.Status != "APPROVED" {
				t.Fatalf("status %s", got.Status)
			}
			verified(t, s.URL, got.Receipt, r.RunID, "tc_1", "deploy-bot", "status", nil, `{"a":"x","b":1}`)
		})
	})
}

// pollReceipt is GET /approvals/{runId} with the receipt.
func pollReceipt(t testing.TB, s *apptest.Server, runID string) struct {
	Status  string
	Receipt *string
} {
	t.Helper()
	got := poll(t, s, "bot", runID, "0")
	var a struct {
		Status  string
		Receipt *string
	}
	if err := json.Unmarshal([]byte(got.raw), &a); err != nil {
		t.Fatalf("%d %s", got.status, got.raw)
	}
	return a
}

// receiptChecker is the service behind a tool: it checks the receipt each call brings against
// Interlock's published keys (at interlock, set once the server runs) and the call it came with.
type receiptChecker struct {
	interlock atomic.Value // string: the server's URL
	mu        sync.Mutex
	verified  []*receipt.Claims
	errs      []string
}

func (c *receiptChecker) check(token, runID, callID, tool string, args json.RawMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(format string, a ...any) { c.errs = append(c.errs, fmt.Sprintf(format, a...)) }
	if token == "" {
		fail("%s call %s came without a receipt", tool, callID)
		return
	}
	res, err := http.Get(c.interlock.Load().(string) + "/.well-known/jwks.json")
	if err != nil {
		fail("jwks: %v", err)
		return
	}
	defer res.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		fail("jwks: %v", err)
		return
	}
	claims, err := receipt.Verify(token, set)
	if err != nil {
		fail("receipt: %v", err)
		return
	}
	digest, _ := receipt.ArgsDigest(args)
	if claims.RunID != runID || claims.ToolCallID != callID || claims.Tool != tool || claims.ArgsDigest != digest || claims.Expires < time.Now().Unix() {
		fail("receipt %+v does not approve %s call %s of run %s with %s", claims, tool, callID, runID, args)
		return
	}
	c.verified = append(c.verified, claims)
}

func (c *receiptChecker) result() ([]*receipt.Claims, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verified, c.errs
}

// TestReceiptHeaderOnHTTPTool: an HTTP tool's request carries the receipt of its approval as
// Interlock-Approval, which the tool's server verifies with the published keys against the
// request itself — with the arguments a person edited — on both dialects.
func TestReceiptHeaderOnHTTPTool(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"sqlite", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			checker := &receiptChecker{}
			tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var body struct {
					Args       json.RawMessage `json:"args"`
					RunID      string          `json:"runId"`
					ToolCallID string          `json:"toolCallId"`
				}
				json.NewDecoder(r.Body).Decode(&body)
				checker.check(r.Header.Get("Interlock-Approval"), body.RunID, body.ToolCallID, "refund", body.Args)
				io.WriteString(w, `{"result": {"refundId": "rf_7"}}`)
			}))
			t.Cleanup(tool.Close)
			model := apptest.FakeModel(t, "refund")
			file := apptest.WriteConfig(t, `
agents:
  - id: billing
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [refund]
tools:
  - name: refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    http: {url: `+tool.URL+`/refund, timeout: 5s}
`)
			db := "sqlite:" + filepath.Join(t.TempDir(), "interlock.db")
			if dialect == "mysql" {
				db = dbtest.MySQLURL(dbtest.MySQLDSN(t))
			}
			s := apptest.Start(t, db, "--config", file)
			checker.interlock.Store(s.URL)
			r := s.StartRun(t, "refund order 7", map[string]any{"agentId": "billing"})
			s.WaitStatus(t, r.RunID, "SUSPENDED")
			s.Must(t, approveMutation, map[string]any{"id": r.RunID, "args": map[string]any{"orderId": "7", "amount": 3}}, &struct{}{})
			s.WaitStatus(t, r.RunID, "COMPLETED")
			got, errs := checker.result()
			if len(errs) > 0 || len(got) != 1 {
				t.Fatalf("the tool verified %d receipts; errors %v", len(got), errs)
			}
			if digest, _ := receipt.ArgsDigest([]byte(`{"amount":3,"orderId":"7"}`)); got[0].ArgsDigest != digest || got[0].AgentID != "billing" || got[0].DecidedBy != nil {
				t.Fatalf("receipt %+v: want the edited arguments, agent billing, decided by nobody (auth off)", got[0])
			}
			if ds := decisionsOf(t, s, r.RunID); len(ds) != 1 || ds[0].Receipt == nil {
				t.Fatalf("decisions %+v: want the approval with its receipt", ds)
			} else if c, _ := receipt.Verify(*ds[0].Receipt, jwksOf(t, s.URL)); c == nil || c.ID != got[0].ID {
				t.Fatal("the tool was given another receipt than the one the API shows")
			}
		})
	}
}

// TestReceiptInMCPMeta: an MCP tool's tools/call carries the receipt of its approval in
// _meta["io.interlock/approval"].receipt, which the MCP server verifies with the published keys.
func TestReceiptInMCPMeta(t *testing.T) {
	t.Parallel()
	checker := &receiptChecker{}
	var runID atomic.Value
	srv := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "cancel_order", Description: "Cancel an order"},
		func(_ context.Context, req *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
			var token string
			if m, ok := req.Params.Meta["io.interlock/approval"].(map[string]any); ok {
				token, _ = m["receipt"].(string)
			}
			checker.check(token, runID.Load().(string), "tc_1", "cancel_order", req.Params.Arguments)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("cancelled %v", in["orderId"])}}}, nil, nil
		})
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(h.Close)
	model := apptest.FakeModel(t, "cancel_order")
	file := apptest.WriteConfig(t, `
agents:
  - id: orders
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [cancel_order]
mcpServers:
  - name: orders
    url: `+h.URL+`
    requireApproval: [cancel_order]
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), "--config", file)
	checker.interlock.Store(s.URL)
	r := s.StartRun(t, "cancel order 7", map[string]any{"agentId": "orders"})
	runID.Store(r.RunID)
	s.WaitStatus(t, r.RunID, "SUSPENDED")
	s.Must(t, approveMutation, map[string]any{"id": r.RunID}, &struct{}{})
	s.WaitStatus(t, r.RunID, "COMPLETED")
	if got, errs := checker.result(); len(errs) > 0 || len(got) != 1 {
		t.Fatalf("the MCP server verified %d receipts; errors %v", len(got), errs)
	}
}

// TestReceiptsAcrossInstances: instances started at once on one empty database make exactly one
// signing key, and a receipt an instance signed verifies with another's published keys (MariaDB,
// raced; SQLite, one file, one instance after the other).
func TestReceiptsAcrossInstances(t *testing.T) {
	t.Parallel()
	// together: whether the instances start at once (on SQLite they cannot: two migrations of
	// one file at once collide, which is not what this test is about).
	both := func(t *testing.T, db string, n int, together bool) {
		cfg, err := app.ParseConfig([]string{"--auth=on", "--db", db, "--config", apptest.WriteConfig(t, approvalsYAML())}, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		apps := make([]*app.App, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { apps[i], errs[i] = app.NewApp(context.Background(), cfg, apptest.DiscardLog()) })
			if !together {
				wg.Wait()
			}
		}
		wg.Wait()
		urls := make([]string, n)
		for i, a := range apps {
			if errs[i] != nil {
				t.Fatalf("instance %d: %v", i, errs[i])
			}
			h := httptest.NewServer(a.Handler())
			t.Cleanup(func() { h.Close(); a.Close() })
			urls[i] = h.URL
		}
		var keys int64
		if err := apps[0].DB().Table("receipt_keys").Count(&keys).Error; err != nil || keys != 1 {
			t.Fatalf("%d signing keys stored (%v), want 1", keys, err)
		}
		a := &apptest.Server{URL: urls[0], App: apps[0]}
		r := ask(t, a, "bot", "0", deployRequest(nil))
		a.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": r.RunID}, nil)
		got := pollReceipt(t, a, r.RunID)
		sue := "sue"
		for _, u := range urls[1:] {
			verified(t, u, got.Receipt, r.RunID, "tc_1", "deploy-bot", "deploy", &sue, `{"service":"api","version":"1.2.3"}`)
		}
	}
	t.Run("mysql", func(t *testing.T) { both(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)), 4, true) })
	t.Run("sqlite", func(t *testing.T) { both(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), 2, false) })
}

// TestReceiptKeyRotation: through the whole server on both dialects, with the stored keys aged
// in the database (instances read them at start): an instance that finds the signing key
// Rotation old (30 days) makes the next one and publishes both, still signing with the old one
// (the new one signs two minutes after it was made, once every instance publishes it); once the
// new key has taken over, the old one stays published until its receipts have expired (15
// minutes, plus two of refresh and skew) and is dropped after.
func TestReceiptKeyRotation(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, db string) {
		age := func(gen int, d time.Duration) {
			t.Helper()
			a := approvalsServer(t, db) // any instance's database handle
			if err := a.App.DB().Exec("UPDATE receipt_keys SET created_at = ? WHERE generation = ?", time.Now().UTC().Add(-d), gen).Error; err != nil {
				t.Fatal(err)
			}
		}
		approvedReceipt := func(s *apptest.Server) string {
			t.Helper()
			r := ask(t, s, "bot", "0", deployRequest(nil))
			s.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": r.RunID}, nil)
			got := pollReceipt(t, s, r.RunID)
			sue := "sue"
			verified(t, s.URL, got.Receipt, r.RunID, "tc_1", "deploy-bot", "deploy", &sue, `{"service":"api","version":"1.2.3"}`)
			return *got.Receipt
		}
		first := approvalsServer(t, db)
		old := kids(jwksOf(t, first.URL))
		if len(old) != 1 {
			t.Fatalf("a first start publishes %v, want one key", old)
		}
		age(1, 31*24*time.Hour)
		rotating := approvalsServer(t, db)
		if got := kids(jwksOf(t, rotating.URL)); len(got) != 2 || got[1] != old[0] {
			t.Fatalf("after Rotation an instance publishes %v, want a new key and the old %s", got, old[0])
		}
		if kid := kidOfReceipt(t, approvedReceipt(rotating)); kid != old[0] {
			t.Fatalf("the new key signs at once (%s): instances that have not read it do not publish it", kid)
		}
		age(2, 10*time.Minute) // the new key took over 8 minutes ago
		later := approvalsServer(t, db)
		published := kids(jwksOf(t, later.URL))
		if len(published) != 2 || published[1] != old[0] {
			t.Fatalf("8 minutes after the takeover an instance publishes %v: the old key's receipts have not expired", published)
		}
		if kid := kidOfReceipt(t, approvedReceipt(later)); kid != published[0] {
			t.Fatalf("after the takeover %s signs, want the new key %s", kid, published[0])
		}
		age(2, time.Hour) // the old key's receipts expired long ago
		if got := kids(jwksOf(t, approvalsServer(t, db).URL)); len(got) != 1 || got[0] != published[0] {
			t.Fatalf("once the old key's receipts expired an instance publishes %v, want only %s", got, published[0])
		}
	})
}

// eachDialect runs fn with a database of each dialect that instances started on it share.
func eachDialect(t *testing.T, fn func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db")) })
	t.Run("mysql", func(t *testing.T) { fn(t, dbtest.MySQLURL(dbtest.MySQLDSN(t))) })
}

func kids(set jose.JSONWebKeySet) []string {
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KeyID)
	}
	return out
}

func kidOfReceipt(t testing.TB, token string) string {
	t.Helper()
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return jws.Signatures[0].Header.KeyID
}
