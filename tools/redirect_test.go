package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/agent"
	"interlock/tools"
)

// redirects are the statuses a server redirects with: 307 and 308 keep the method and body,
// 301, 302 and 303 turn a POST into a GET without its body.
var redirects = []int{301, 302, 303, 307, 308}

// toolSecrets are the configured headers of the tools under test.
var toolSecrets = map[string]string{"Authorization": "Bearer sk-tool-secret", "X-Api-Key": "key-tool-secret"}

// anotherHost is a server at another origin that records whatever reaches it: connections, and
// each request with its headers and body. A tool redirected to it must send it nothing.
type anotherHost struct {
	*httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	got   []string
}

func newAnotherHost(t *testing.T) *anotherHost {
	t.Helper()
	h := &anotherHost{}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, fmt.Sprintf("%s %s %v %s", r.Method, r.URL, r.Header, body))
		h.mu.Unlock()
		io.WriteString(w, `{"result": "the other host ran it"}`)
	}))
	h.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			h.conns.Add(1)
		}
	}
	h.Start()
	t.Cleanup(h.Close)
	return h
}

// wantNothing fails t unless nothing reached h: no connection, so no header and no argument.
func (h *anotherHost) wantNothing(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.conns.Load(); n != 0 || len(h.got) != 0 {
		t.Fatalf("the other host got %d connections and %d requests: %q", n, len(h.got), h.got)
	}
}

// wantRefused fails t unless err is a tool error (not an unknown outcome) saying it was a
// redirect of that status, with each of says.
func wantRefused(t *testing.T, err error, status int, says ...string) {
	t.Helper()
	var unknown *agent.OutcomeUnknown
	var redirect *tools.RedirectError
	if err == nil || errors.As(err, &unknown) || !errors.As(err, &redirect) || redirect.Status != status {
		t.Fatalf("error %v, want a tool error: a refused redirect (HTTP %d)", err, status)
	}
	for _, s := range append(says, "HTTP "+strconv.Itoa(status)) {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q, want it to say %q", err, s)
		}
	}
}

// TestHTTPToolRedirectToAnotherOrigin: an HTTP tool's endpoint that redirects the call to another
// origin — another port of the same host, another name of the same address, https — with any
// redirect status gets a tool error the model reads, naming the refused origin; the other origin
// gets nothing: no connection, so neither the tool's headers nor the call's arguments.
func TestHTTPToolRedirectToAnotherOrigin(t *testing.T) {
	t.Parallel()
	other := newAnotherHost(t)
	otherTLS := httptest.NewUnstartedServer(http.NotFoundHandler())
	var tlsConns atomic.Int64
	otherTLS.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tlsConns.Add(1)
		}
	}
	otherTLS.StartTLS()
	defer otherTLS.Close()

	var target atomic.Value // where the endpoint redirects to, per case
	var status atomic.Int64
	var calls, byOtherName atomic.Int64
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Host, "localhost:") {
			byOtherName.Add(1) // the same server, reached under another host name
			return
		}
		calls.Add(1)
		http.Redirect(w, r, target.Load().(string), int(status.Load()))
	}))
	defer endpoint.Close()
	_, port, _ := net.SplitHostPort(endpoint.Listener.Addr().String())

	exec := tools.HTTPExecute(tools.HTTPConfig{URL: endpoint.URL + "/refund", Headers: toolSecrets})
	for _, to := range []struct{ name, url, origin string }{
		{"another port", other.URL + "/refund", other.URL},
		{"another host name", "http://localhost:" + port + "/refund", "http://localhost:" + port},
		{"https", otherTLS.URL + "/refund", otherTLS.URL},
	} {
		for _, code := range redirects {
			target.Store(to.url)
			status.Store(int64(code))
			before := calls.Load()
			_, err := exec(context.Background(), call(`{"orderId":"7","amount":5}`))
			wantRefused(t, err, code, "another origin ("+to.origin+")", "configured origin ("+endpoint.URL+")")
			if n := calls.Load() - before; n != 1 {
				t.Fatalf("%s, %d: the endpoint got %d requests, want 1", to.name, code, n)
			}
		}
	}
	other.wantNothing(t)
	if n := tlsConns.Load(); n != 0 {
		t.Fatalf("the https origin got %d connections", n)
	}
	if n := byOtherName.Load(); n != 0 {
		t.Fatalf("%d requests reached the endpoint under another host name", n)
	}
}

// TestHTTPToolRedirectWithinTheOrigin: within the configured origin a 307 or 308 is followed —
// the same POST, arguments and headers, at the path it points to — and a 301, 302 or 303 is a
// tool error (followed, it would be a GET without the arguments), with nothing sent to where it
// points. A followed redirect whose next request cannot connect is a plain tool error (nothing
// was sent), and a loop of redirects ends in a tool error too: neither is an unknown outcome.
func TestHTTPToolRedirectWithinTheOrigin(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var moved []string // what reached /v2
	var code atomic.Int64
	var hops atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/refund":
			http.Redirect(w, r, "/v2/refund?sig=abc", int(code.Load()))
		case "/v2/refund":
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			moved = append(moved, r.Method+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key")+" "+string(body))
			mu.Unlock()
			io.WriteString(w, `{"result": "refunded"}`)
		case "/loop":
			hops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusTemporaryRedirect)
		}
	}))
	defer s.Close()
	exec := tools.HTTPExecute(tools.HTTPConfig{URL: s.URL + "/refund", Headers: toolSecrets})
	body := `{"args":{"orderId":"7","amount":5},"runId":"run-1","toolCallId":"call_1","agentId":"billing","threadId":"t-1","resourceId":"customer-1"}` + "\n"
	for _, c := range redirects {
		code.Store(int64(c))
		mu.Lock()
		moved = nil
		mu.Unlock()
		v, err := exec(context.Background(), call(`{"orderId":"7","amount":5}`))
		mu.Lock()
		got := moved
		mu.Unlock()
		if c == 307 || c == 308 {
			if err != nil || string(v.(json.RawMessage)) != `"refunded"` {
				t.Fatalf("%d: %v, %v; want the result from where it points", c, v, err)
			}
			if want := "POST Bearer sk-tool-secret key-tool-secret " + body; len(got) != 1 || got[0] != want {
				t.Fatalf("%d: /v2/refund got %q, want one %q", c, got, want)
			}
			continue
		}
		wantRefused(t, err, c, "a redirect to "+s.URL+"/v2/refund that would send the request again as a GET without its body")
		if strings.Contains(err.Error(), "sig=abc") {
			t.Fatalf("the error shows the redirect's query: %v", err)
		}
		if len(got) != 0 {
			t.Fatalf("%d: /v2/refund got %q, want nothing", c, got)
		}
	}

	_, err := tools.HTTPExecute(tools.HTTPConfig{URL: s.URL + "/loop"})(context.Background(), call(`{}`))
	wantRefused(t, err, 307, "redirected 10 times within "+s.URL)
	if n := hops.Load(); n != 10 {
		t.Fatalf("the loop went %d times, want 10", n)
	}

	// The endpoint redirects, closing its connection and its listener: the followed request
	// cannot connect, so it was never sent.
	var gone *httptest.Server
	gone = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gone.Listener.Close()
		w.Header().Set("Connection", "close")
		http.Redirect(w, r, "/v2", http.StatusTemporaryRedirect)
	}))
	defer gone.Close()
	_, err = tools.HTTPExecute(tools.HTTPConfig{URL: gone.URL})(context.Background(), call(`{}`))
	var unknown *agent.OutcomeUnknown
	if err == nil || errors.As(err, &unknown) || !strings.Contains(err.Error(), "could not be reached") {
		t.Fatalf("error %v, want a tool error: the followed request was never sent", err)
	}
}

// redirectingMCP is a url MCP server (orders) behind a front that redirects what redirect says
// (a JSON-RPC method, or "*" for every request) with status to target; calls counts the
// lookups that ran.
type redirectingMCP struct {
	*httptest.Server
	calls  atomic.Int64
	method atomic.Value // string
	status atomic.Int64
	target atomic.Value // string
}

func newRedirectingMCP(t *testing.T) *redirectingMCP {
	t.Helper()
	m := &redirectingMCP{}
	m.method.Store("")
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ordersServer(&m.calls) }, nil)
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if method := m.method.Load().(string); method == "*" || method != "" && strings.Contains(string(body), `"method":"`+method+`"`) {
			http.Redirect(w, r, m.target.Load().(string), int(m.status.Load()))
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *redirectingMCP) redirect(method string, status int, target string) {
	m.target.Store(target)
	m.status.Store(int64(status))
	m.method.Store(method)
}

// TestMCPRedirectToAnotherOrigin: a url MCP server that redirects to another origin — at the
// start of the session, or a tool call — with any redirect status: the connection or the call
// fails with an error naming the refused origin (a tool error the model reads, not an unknown
// outcome: the server answered, and the call ran nowhere), and the other origin gets nothing,
// neither the configured headers nor the arguments. The session is kept: the next call that is
// not redirected runs.
func TestMCPRedirectToAnotherOrigin(t *testing.T) {
	t.Parallel()
	other := newAnotherHost(t)
	srv := newRedirectingMCP(t)
	cfg := tools.MCPConfig{Name: "orders", URL: srv.URL + "/mcp", Headers: toolSecrets}
	for _, code := range redirects {
		srv.redirect("*", code, other.URL+"/mcp")
		_, err := tools.ConnectMCP(context.Background(), cfg, "test")
		wantRefused(t, err, code, "MCP server orders answered HTTP", "another origin ("+other.URL+")", "configured origin ("+srv.URL+")")
	}

	srv.redirect("", 0, "")
	s, err := tools.ConnectMCP(context.Background(), cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lookup := s.Execute("lookup_order")
	for _, code := range redirects {
		srv.redirect("tools/call", code, other.URL+"/mcp")
		_, err := lookup(context.Background(), call(`{"orderId":"7"}`))
		wantRefused(t, err, code, "MCP server orders answered HTTP", "another origin ("+other.URL+")")
	}
	if n := srv.calls.Load(); n != 0 {
		t.Fatalf("%d lookups ran", n)
	}
	srv.redirect("", 0, "")
	if v, err := lookup(context.Background(), call(`{"orderId":"7"}`)); err != nil {
		t.Fatalf("the call after the redirects: %v, %v", v, err)
	}
	other.wantNothing(t)
}

// TestMCPRedirectWithinTheOrigin: a url server configured at /mcp that redirects to /mcp/ (as
// servers mounted under a path do) with a 307 or 308 is reached there, the headers with every
// request; with a 301, 302 or 303 the start fails saying why (followed, the POST would be a GET
// without its message) and nothing reaches /mcp/.
func TestMCPRedirectWithinTheOrigin(t *testing.T) {
	t.Parallel()
	var calls, atSlash atomic.Int64
	var code atomic.Int64
	var mu sync.Mutex
	var auth []string
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ordersServer(&calls) }, nil)
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			http.Redirect(w, r, "/mcp/", int(code.Load()))
			return
		}
		atSlash.Add(1)
		mu.Lock()
		auth = append(auth, r.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	}))
	defer h.Close()
	cfg := tools.MCPConfig{Name: "orders", URL: h.URL + "/mcp", Headers: toolSecrets}
	for _, c := range []int{307, 308} {
		code.Store(int64(c))
		s, err := tools.ConnectMCP(context.Background(), cfg, "test")
		if err != nil {
			t.Fatalf("%d: %v", c, err)
		}
		if _, err := s.Execute("lookup_order")(context.Background(), call(`{"orderId":"7"}`)); err != nil {
			t.Fatalf("%d: %v", c, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%d: close: %v", c, err)
		}
	}
	mu.Lock()
	for _, a := range auth {
		if !strings.HasSuffix(a, " Bearer sk-tool-secret") {
			t.Fatalf("a request at /mcp/ came with %q", a)
		}
	}
	mu.Unlock()
	if calls.Load() != 2 {
		t.Fatalf("%d lookups ran, want 2", calls.Load())
	}
	before := atSlash.Load()
	for _, c := range []int{301, 302, 303} {
		code.Store(int64(c))
		_, err := tools.ConnectMCP(context.Background(), cfg, "test")
		wantRefused(t, err, c, "MCP server orders answered HTTP", "a redirect to "+h.URL+"/mcp/ that would send the request again as a GET without its body")
	}
	if n := atSlash.Load() - before; n != 0 {
		t.Fatalf("%d requests reached /mcp/ after a refused redirect", n)
	}
}
