package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/introspection"

	"interlock/internal/app"
	"interlock/internal/apptest"
)

// nest is `subAgents { subAgents { … id } }`, fields nested depth deep.
func nest(depth int) string {
	return strings.Repeat("subAgents { ", depth-1) + "id" + strings.Repeat(" }", depth-1)
}

// deepAgents is `{ agents { subAgents { … { id } } } }` with fields nested depth deep.
func deepAgents(depth int) string { return "{ agents { " + nest(depth-1) + " } }" }

// typeRef is GraphiQL's TypeRef fragment with ofType nested n times.
func typeRef(n int) string {
	return "fragment TypeRef on __Type { kind name " + strings.Repeat("ofType { kind name ", n) + strings.Repeat("} ", n) + "}"
}

// consoleQueries are the queries the console in web/ sends, read from its scripts.
func consoleQueries(t *testing.T) []string {
	t.Helper()
	var out []string
	files, err := filepath.Glob(apptest.RepoPath("web", "static", "js", "*.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Constant pieces a query interpolates (${RUN_FIELDS}) are put in as the page does.
		consts := map[string]string{}
		for _, m := range regexp.MustCompile("(?s)const ([A-Z_]+) = `([^`]*)`").FindAllStringSubmatch(string(b), -1) {
			consts[m[1]] = m[2]
		}
		for _, m := range regexp.MustCompile("(?s)= `(query [^`]*)`").FindAllStringSubmatch(string(b), -1) {
			out = append(out, regexp.MustCompile(`\$\{([A-Z_]+)\}`).ReplaceAllStringFunc(m[1], func(ref string) string {
				return consts[ref[2:len(ref)-1]]
			}))
		}
	}
	if len(out) < 3 {
		t.Fatalf("found %d console queries, want at least 3 (Inbox, Run, History)", len(out))
	}
	return out
}

// TestQueryDepthLimit: an operation nested deeper than --max-query-depth is refused before it
// runs with QUERY_TOO_DEEP (a request error: 200 as application/json), fragments counted where they are spread, over HTTP and
// WebSocket; what the console and introspection clients send passes.
func TestQueryDepthLimit(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/depth.db")
	for name, q := range map[string]string{
		"15 deep":                  deepAgents(15),
		"introspection":            introspection.Query,
		"introspection with oneOf": introspection.NewQuery(introspection.QueryOptions{OneOf: true}),
		// GraphiQL's and Playground's: ofType nested 9 times under __schema types fields type.
		"GraphiQL's TypeRef": "{ __schema { types { fields { type { ...TypeRef } } inputFields { type { ...TypeRef } } } } } " + typeRef(9),
	} {
		if r := s.PostJSON(t, map[string]any{"query": q}); r.Status != 200 || len(r.Errors) != 0 {
			t.Fatalf("%s: status %d, errors %+v", name, r.Status, r.Errors)
		}
	}
	for _, q := range consoleQueries(t) {
		r := s.PostJSON(t, map[string]any{"query": q, "variables": map[string]any{"id": "nope", "page": 0, "perPage": 500,
			"from": "2026-12-01T00:00:00Z", "to": "2026-12-02T00:00:00Z"}}) // Team's period
		if r.Status != 200 || len(r.Errors) != 0 {
			t.Fatalf("console query %.40s: status %d, errors %+v", q, r.Status, r.Errors)
		}
	}

	for name, tc := range map[string]struct{ query, want string }{
		"16 deep":   {deepAgents(16), "nests fields 16 deep; the limit is 15"},
		"1000 deep": {deepAgents(1000), "nests fields 1000 deep"},
		// gqlparser itself refuses 1000 nested selection sets, as a parse error.
		"introspection 990":      {"{ __schema { types { fields { type { " + strings.Repeat("ofType { ", 985) + "name" + strings.Repeat(" }", 989) + " }", "nests fields 990 deep"},
		"through fragments":      {"{ agents { ...A } } fragment A on Agent { subAgents { ...B } } fragment B on Agent { subAgents { subAgents { ...C } } } fragment C on Agent { " + nest(13) + " }", "nests fields 17 deep"},
		"through inline":         {"{ agents { ... on Agent { " + nest(15) + " } } }", "16 deep"},
		"GraphiQL's TypeRef +2 ": {"{ __schema { types { fields { type { ...TypeRef } } } } } " + typeRef(11), "16 deep"},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			r := s.PostJSONWithin(t, 10*time.Second, map[string]any{"query": tc.query})
			t.Logf("refused in %s", time.Since(start))
			if r.Status != http.StatusOK || r.Code() != "QUERY_TOO_DEEP" || !strings.Contains(r.Errors[0].Message, tc.want) {
				t.Fatalf("status %d, errors %+v; want 200 QUERY_TOO_DEEP with %q", r.Status, r.Errors, tc.want)
			}
		})
	}
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	if _, _, errs := ws.Next(ws.Subscribe(deepAgents(100), nil)); !strings.Contains(string(errs), "QUERY_TOO_DEEP") {
		t.Fatalf("over WebSocket: %s", errs)
	}
	// The limit is a setting.
	shallow := apptest.Start(t, "sqlite:"+t.TempDir()+"/shallow.db", "--max-query-depth", "2")
	shallow.Must(t, `{ agents { id } }`, nil, &struct{}{})
	shallow.WantError(t, "QUERY_TOO_DEEP", `{ agents { tools { name } } }`, nil)
}

// fragmentChain is a query whose fragments each spread the next twice: n fragments stand for
// 2^n selections of agents.
func fragmentChain(n int) string {
	var b strings.Builder
	b.WriteString("{ ...F0 }\n")
	for i := range n {
		fmt.Fprintf(&b, "fragment F%d on Query { agents { id } ...F%d ...F%d }\n", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on Query { agents { id } }\n", n)
	return b.String()
}

// aliases is `{ a0: field a1: field … }` with n aliases.
func aliases(n int, field string) string {
	var b strings.Builder
	b.WriteString("{ ")
	for i := range n {
		fmt.Fprintf(&b, "a%d: %s ", i, field)
	}
	b.WriteString("}")
	return b.String()
}

// TestComplexityLimit: an operation costlier than --max-query-complexity is refused before it
// runs with COMPLEXITY_LIMIT_EXCEEDED (200 as application/json): ten thousand aliases (caught by the token limit
// first; by complexity when that is raised), nested pages, a fragment chain that doubles at every
// step (gqlgen's own complexity walk would take minutes on it), aliased introspection.
func TestComplexityLimit(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/complexity.db")
	if r := s.PostJSON(t, map[string]any{"query": aliases(10_000, "agents { id }")}); r.Status != http.StatusOK || r.Code() != "GRAPHQL_VALIDATION_FAILED" || !strings.Contains(r.Errors[0].Message, "the limit is 10000") {
		t.Fatalf("10,000 aliases under the token limit: status %d, errors %+v", r.Status, r.Errors)
	}
	wide := apptest.Start(t, "sqlite:"+t.TempDir()+"/wide.db", "--max-query-tokens", "1000000")
	for name, tc := range map[string]struct{ query, want string }{
		"10,000 aliases":  {aliases(10_000, "agents { id }"), "complexity 20000, which exceeds the limit of 15000"},
		"10,000 __schema": {aliases(10_000, "__schema { types { name } }"), "complexity 30000"},
		// 1 + 500 × (threads 1 + runs (1 + 500 × (runs 1 + id 1)))
		"pages in pages": {`{ threads(perPage: 500) { threads { runs(perPage: 500) { runs { id } } } } }`, "complexity 501001"},
		// 1 + 500,000 × (runs 1 + 3 fields + decisions 2)
		"pages from variables": {`query($n: Int) { recentRuns(perPage: $n) { runs { id prompt output decisions { id } } } }`, "complexity 3000001"},
		// 1 + 20 × (threads 1 + runs (1 + 20 × (runs 1 + 40 ids)))
		"default page size": {`{ threads { threads { runs { runs { ` + strings.Repeat("id ", 40) + `} } } } }`, "complexity 16441"},
		// 2^13 selections of agents { id }; longer chains are refused before validation
		// (TestCostlyQueriesAreRefusedBeforeValidation's comparisons bound).
		"fragments doubling ×12": {fragmentChain(12), "complexity 16382"},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			r := wide.PostJSONWithin(t, 20*time.Second, map[string]any{"query": tc.query, "variables": map[string]any{"n": 500_000}})
			t.Logf("refused in %s", time.Since(start))
			if r.Status != http.StatusOK || r.Code() != "COMPLEXITY_LIMIT_EXCEEDED" || !strings.Contains(r.Errors[0].Message, tc.want) {
				t.Fatalf("status %d, errors %+v; want 200 COMPLEXITY_LIMIT_EXCEEDED with %q", r.Status, r.Errors, tc.want)
			}
		})
	}
	// The console's largest page, and a short fragment chain, pass.
	wide.Must(t, fragmentChain(8), nil, &struct{}{})
	ws := apptest.DialWS(t, wide.URL, "graphql-transport-ws")
	if _, _, errs := ws.Next(ws.Subscribe(aliases(8000, "agents { id }"), nil)); !strings.Contains(string(errs), "COMPLEXITY_LIMIT_EXCEEDED") {
		t.Fatalf("over WebSocket: %s", errs)
	}
	small := apptest.Start(t, "sqlite:"+t.TempDir()+"/small.db", "--max-query-complexity", "3")
	small.Must(t, `{ agents { id name } }`, nil, &struct{}{})
	small.WantError(t, "COMPLEXITY_LIMIT_EXCEEDED", `{ agents { id name model } }`, nil)
}

// TestIntrospectionSetting: with --introspection=false, __schema and __type are refused with
// INTROSPECTION_DISABLED (200 as application/json, no data), through fragments too, while __typename and ordinary queries
// pass; by default introspection is served.
func TestIntrospectionSetting(t *testing.T) {
	t.Parallel()
	on := apptest.Start(t, "sqlite:"+t.TempDir()+"/on.db")
	if r := on.PostJSON(t, map[string]any{"query": introspection.Query}); r.Status != 200 || len(r.Errors) != 0 || !strings.Contains(string(r.Data), "AgentRun") {
		t.Fatalf("introspection on: status %d, errors %+v", r.Status, r.Errors)
	}
	off := apptest.Start(t, "sqlite:"+t.TempDir()+"/off.db", "--introspection=false")
	for _, q := range []string{
		introspection.Query,
		`{ __type(name: "AgentRun") { name } }`,
		`{ agents { id } ...S } fragment S on Query { ... on Query { __schema { queryType { name } } } }`,
	} {
		r := off.PostJSON(t, map[string]any{"query": q})
		if r.Status != http.StatusOK || r.Code() != "INTROSPECTION_DISABLED" || r.Errors[0].Message != "introspection is disabled on this server" || strings.Contains(r.Body, `"data"`) {
			t.Fatalf("%.40s: status %d, data %s, errors %+v", q, r.Status, r.Data, r.Errors)
		}
	}
	off.Must(t, `{ __typename agents { __typename id } }`, nil, &struct{}{})
	if _, err := app.ParseConfig([]string{"--introspection", "maybe"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "INTERLOCK_INTROSPECTION") {
		t.Fatalf("--introspection maybe: %v", err)
	}
}

// preflight sends a CORS preflight for a POST from origin.
func preflight(t *testing.T, base, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodOptions, base+"/graphql", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// postFrom sends a query with an Origin header.
func postFrom(t *testing.T, base, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(`{"query":"{ agents { id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestCORS: without --cors-origins no origin is allowed (no Access-Control-Allow-Origin on any
// answer); with it, exactly the listed origins get preflights and answers allowing GET/POST with
// Authorization and Content-Type, never credentials; "*" and non-origins are refused as settings.
func TestCORS(t *testing.T) {
	const good, evil = "https://console.example.com", "https://evil.example"
	closed := apptest.Start(t, "sqlite:"+t.TempDir()+"/closed.db")
	for _, resp := range []*http.Response{preflight(t, closed.URL, good), postFrom(t, closed.URL, good), preflight(t, closed.URL, evil)} {
		if h := resp.Header.Get("Access-Control-Allow-Origin"); h != "" {
			t.Fatalf("closed by default, yet %s %s answers Access-Control-Allow-Origin %q", resp.Request.Method, resp.Request.Header.Get("Origin"), h)
		}
	}

	open := apptest.Start(t, "sqlite:"+t.TempDir()+"/open.db", "--cors-origins", good+", http://localhost:5173")
	resp := preflight(t, open.URL, good)
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != good ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "authorization") ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "content-type") ||
		h.Get("Access-Control-Max-Age") != "600" || h.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("allowed preflight: status %d, headers %v", resp.StatusCode, h)
	}
	if resp := preflight(t, open.URL, "http://localhost:5173"); resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Fatalf("second origin: %v", resp.Header)
	}
	if resp := preflight(t, open.URL, evil); resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Methods") != "" {
		t.Fatalf("denied preflight: %v", resp.Header)
	}
	if resp := postFrom(t, open.URL, good); resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != good || !strings.Contains(resp.Header.Get("Vary"), "Origin") {
		t.Fatalf("simple request from an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := postFrom(t, open.URL, evil); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("simple request from another origin: %v", resp.Header)
	}
	// A plain OPTIONS (no preflight) still reaches gqlgen's Options transport.
	req, _ := http.NewRequest(http.MethodOptions, open.URL+"/graphql", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Allow"), "POST") {
		t.Fatalf("plain OPTIONS: %v %v", resp, err)
	}

	for _, bad := range []string{"*", "https://*.example.com", "console.example.com", "https://console.example.com/app", "ftp://x.example"} {
		if _, err := app.ParseConfig([]string{"--cors-origins", bad}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "INTERLOCK_CORS_ORIGINS") {
			t.Errorf("--cors-origins %q: %v", bad, err)
		}
	}
}

// fromAddr is an HTTP client whose connections come from the loopback address ip, so the
// server sees another client IP.
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// postAs sends query with client, with who's token (tokenOf) unless who is empty.
func postAs(t *testing.T, client *http.Client, base, who, query string) (*http.Response, apptest.Response) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+apptest.TokenOf(who))
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, apptest.DecodeGQL(t, resp)
}

const cheapMutation = `mutation { declineToolCall(runId: "no-such-run") { status } }`

// TestMutationRateLimit: each principal (or client IP without one) gets --mutation-burst
// mutations at once, then RATE_LIMITED with extensions.retryAfter, HTTP 429 and Retry-After over
// plain HTTP, an error over WebSocket and SSE too; queries are not limited, and other principals
// and IPs are unaffected.
func TestMutationRateLimit(t *testing.T) {
	// Without authentication the client IP is the bucket; with it, the principal.
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/rate.db", "--mutation-rate", "1/h", "--mutation-burst", "3")
	authed := apptest.AuthServerWith(t, "sqlite:"+t.TempDir()+"/rate-auth.db", "", "--mutation-rate", "1/h", "--mutation-burst", "3")
	for _, who := range []string{"", "alice"} {
		srvURL := s.URL
		if who != "" {
			srvURL = authed.URL
		}
		for i := range 3 {
			if resp, r := postAs(t, http.DefaultClient, srvURL, who, cheapMutation); resp.StatusCode != 200 || r.Code() != "NOT_FOUND" {
				t.Fatalf("%q mutation %d within the burst: %d %+v", who, i+1, resp.StatusCode, r.Errors)
			}
		}
		resp, r := postAs(t, http.DefaultClient, srvURL, who, cheapMutation)
		if resp.StatusCode != http.StatusTooManyRequests || r.Code() != "RATE_LIMITED" {
			t.Fatalf("%q over the burst: %d %+v", who, resp.StatusCode, r.Errors)
		}
		secs, ok := r.Errors[0].Extensions["retryAfter"].(float64)
		if !ok || secs < 1 || secs != float64(int(secs)) || resp.Header.Get("Retry-After") != fmt.Sprint(int(secs)) ||
			!strings.Contains(r.Errors[0].Message, fmt.Sprintf("retry in %d seconds", int(secs))) || secs > 3600 {
			t.Fatalf("%q: retryAfter %v, Retry-After %q, message %q", who, r.Errors[0].Extensions["retryAfter"], resp.Header.Get("Retry-After"), r.Errors[0].Message)
		}
		if resp, r := postAs(t, http.DefaultClient, srvURL, who, `{ agents { id } }`); resp.StatusCode != 200 || len(r.Errors) != 0 {
			t.Fatalf("%q: a query after the limit: %d %+v", who, resp.StatusCode, r.Errors)
		}
	}
	// Another principal, and another IP without a principal, have their own buckets.
	if resp, r := postAs(t, http.DefaultClient, authed.URL, "bob", cheapMutation); resp.StatusCode != 200 || r.Code() != "NOT_FOUND" {
		t.Fatalf("bob: %d %+v", resp.StatusCode, r.Errors)
	}
	if resp, r := postAs(t, fromAddr("127.0.0.2"), s.URL, "", cheapMutation); resp.StatusCode != 200 || r.Code() != "NOT_FOUND" {
		t.Fatalf("from 127.0.0.2: %d %+v", resp.StatusCode, r.Errors)
	}
	// The IP 127.0.0.1 is spent: over WebSocket and SSE (to the app directly) it is refused too.
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	if _, _, errs := ws.Next(ws.Subscribe(cheapMutation, nil)); !strings.Contains(string(errs), "RATE_LIMITED") || !strings.Contains(string(errs), "retryAfter") {
		t.Fatalf("over WebSocket: %s", errs)
	}
	if out := sse(t, context.Background(), s, cheapMutation, nil, nil); len(out) != 1 || !strings.Contains(string(out[0]), "RATE_LIMITED") {
		t.Fatalf("over SSE: %s", out)
	}
	// A rate of 0 is no limit.
	free := apptest.Start(t, "sqlite:"+t.TempDir()+"/free.db", "--mutation-rate", "0", "--mutation-burst", "1")
	for range 10 {
		free.WantError(t, "NOT_FOUND", cheapMutation, nil)
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{"20": 20, "20/s": 20, "600/m": 10, "1800/h": 0.5, "0": 0, "0.5": 0.5} {
		if got, err := app.ParseRate(in); err != nil || got != want {
			t.Errorf("app.ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-1", "10/d", "10/", "Inf"} {
		if _, err := app.ParseRate(in); err == nil {
			t.Errorf("app.ParseRate(%q) accepted", in)
		}
	}
	if _, err := app.ParseConfig([]string{"--mutation-burst", "0"}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "INTERLOCK_MUTATION_BURST") {
		t.Errorf("--mutation-burst 0: %v", err)
	}
	cfg, err := app.ParseConfig(nil, func(string) string { return "" })
	if err != nil || cfg.MutationRate != 20 || cfg.MutationBurst != 100 || cfg.MaxQueryDepth != 15 || cfg.MaxQueryComplexity != 15000 || !cfg.Introspection || cfg.CORSOrigins != nil {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}

// TestNoMutationOverGET: a mutation sent as GET (a link, an <img>) is refused (405, Allow: POST,
// BAD_USER_INPUT) and changes nothing.
func TestNoMutationOverGET(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/get.db")
	q := `mutation { startRun(input: {agentId: "support-agent", prompt: "refund order 42 for 30"}) { runId } }`
	resp, err := http.Get(s.URL + "/graphql?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r apptest.Response
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &r); err != nil || resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" || len(r.Errors) != 1 || r.Code() != "BAD_USER_INPUT" || !strings.Contains(r.Errors[0].Message, "send it with POST") {
		t.Fatalf("GET mutation: status %d, body %s", resp.StatusCode, raw)
	}
	var out struct{ RecentRuns struct{ Total int } }
	s.Must(t, `{ recentRuns(statuses: [RUNNING, SUSPENDED, COMPLETED, FAILED]) { total } }`, nil, &out)
	if out.RecentRuns.Total != 0 {
		t.Fatalf("a GET mutation started %d runs", out.RecentRuns.Total)
	}
	// A query over GET is served.
	if body, err := apptest.HttpGet(s.URL + "/graphql?query=" + url.QueryEscape(`{ agents { id } }`)); err != nil || !strings.Contains(body, "support-agent") {
		t.Fatalf("GET query: %s %v", body, err)
	}
}

// leaks are what must never reach a client: Go source paths, stack traces, SQL and driver text.
var leaks = regexp.MustCompile(`(?i)\.go:\d|goroutine |panic|/root/|/home/|/work/|runtime\.|sql:|sqlite|gorm|SELECT |mysql`)

// TestErrorHygiene: a failure inside the server (its database gone) is "internal server error"
// with code INTERNAL and nothing of the cause; malformed, mistyped and oversized requests get a
// clear error; no answer carries Go paths, stack traces or SQL.
func TestErrorHygiene(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/hygiene.db")
	check := func(name string, status int, body string, wantStatus int, want string) {
		t.Helper()
		if status != wantStatus || !strings.Contains(body, want) || leaks.MatchString(body) {
			t.Errorf("%s: status %d, body %.300s; want %d with %q and no internals", name, status, body, wantStatus, want)
		}
	}
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		want                    string
	}{
		{"malformed JSON", "application/json", `{"query": "{ agents { id } }"`, 400, "not valid JSON"},
		{"text/plain", "text/plain", `{"query": "{ agents { id } }"}`, 415, "Content-Type: application/json"},
		{"form", "application/x-www-form-urlencoded", `query=%7B+agents+%7B+id+%7D+%7D`, 415, "Content-Type: application/json"},
		{"multipart", "multipart/form-data; boundary=x", "--x\r\n\r\n--x--", 415, "Content-Type: application/json"},
		{"huge", "application/json", `{"query": "` + strings.Repeat("a", 2<<20) + `"}`, 413, "larger than"},
		{"parse error", "application/json", `{"query": "{ agents { id "}`, 200, "GRAPHQL_PARSE_FAILED"},
		{"unknown field", "application/json", `{"query": "{ nope }"}`, 200, "GRAPHQL_VALIDATION_FAILED"},
		{"bad date", "application/json", `{"query": "{ suspendedRuns(fromDate: \"yesterday\") { total } }"}`, 200, "is not an RFC 3339 DateTime"},
	} {
		resp, err := http.Post(s.URL+"/graphql", tc.contentType, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		check(tc.name, resp.StatusCode, string(raw), tc.status, tc.want)
	}

	// The database goes away under the server: every read fails inside GORM. Storage being
	// unavailable is UNAVAILABLE (503, retry), in the server's words, not the driver's.
	sqlDB, err := s.App.DB().DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.Close()
	for _, q := range []string{`{ suspendedRuns { total } }`, `{ run(runId: "x") { id } }`, `mutation { declineToolCall(runId: "x") { status } }`} {
		r := s.PostJSON(t, map[string]any{"query": q})
		if r.Code() != "UNAVAILABLE" || r.Errors[0].Message != "storage is unavailable; retry in a few seconds" {
			t.Errorf("%s with the database closed: %+v", q, r.Errors)
		}
		check(q, r.Status, r.Body, 503, "storage is unavailable")
	}
}
