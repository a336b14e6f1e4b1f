package tools

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// transport is how the server is reached, made anew for each connection (a reconnect starts
// the command again, or opens a new HTTP session, with the same environment and headers). For
// a stdio server it returns the process too.
func (s *MCPServer) transport() (mcp.Transport, *process) {
	if len(s.cfg.Command) > 0 {
		p := &process{log: s.log, exited: make(chan struct{})}
		return &stdioTransport{cfg: s.cfg, proc: p}, p
	}
	// Interlock only calls tools: no standing stream for server-initiated messages.
	var rt http.RoundTripper = http.DefaultTransport
	if len(s.cfg.Headers) > 0 {
		rt = &headerTransport{base: rt, headers: s.cfg.Headers}
	}
	return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: &deliveryTransport{base: rt}, CheckRedirect: sameOriginRedirects}}, nil
}

// stdioEnv is the environment a stdio MCP server is started with: of Interlock's own
// environment (environ, as os.Environ) only PATH, HOME and the locale — LANG, LANGUAGE, TZ and
// every LC_* variable — each only when set, and then the variables of extra, which win over
// those. A server is a program Interlock did not write that the model drives: given the whole
// environment, a tool that reads it hands the model API key, a webhook secret or a database
// password to the model and into the stored events. Whatever else a server needs is given to
// it by name (the config's env:).
func stdioEnv(environ []string, extra map[string]string) []string {
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !passedToStdio(name) {
			continue
		}
		if _, override := extra[name]; !override {
			out = append(out, kv)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		out = append(out, name+"="+extra[name])
	}
	return out
}

// passedToStdio says whether a variable of Interlock's environment reaches a stdio server.
func passedToStdio(name string) bool {
	switch name {
	case "PATH", "HOME", "LANG", "LANGUAGE", "TZ":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// headerTransport sends the configured headers (such as Authorization) with every request to
// a url server: the first initialize, each call, the session's end, and every reconnect — and
// every redirect the client follows, which is why it follows only those within the configured
// origin (sameOriginRedirects): another host never gets the headers. A
// header the MCP client itself set on the request (Content-Type, Accept, Mcp-Session-Id,
// Mcp-Protocol-Version) is left as the protocol needs it. The values are secrets: they are
// never logged.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	for k, v := range t.headers {
		if req.Header.Get(k) == "" {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}
