package web_test

import (
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// requestLog records every request a tab makes, HTTP and WebSocket, and fails at once any HTTP
// request to another origin than the server's, so that nothing leaves the machine.
type requestLog struct {
	mu      sync.Mutex
	origin  string
	all     []string
	foreign []string
}

func (l *requestLog) add(raw string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, raw)
	if !l.sameOrigin(raw) {
		l.foreign = append(l.foreign, raw)
	}
}

// sameOrigin reports whether raw is of the server's origin (ws: and wss: as http: and https:).
func (l *requestLog) sameOrigin(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	scheme := strings.Replace(strings.Replace(u.Scheme, "wss", "https", 1), "ws", "http", 1)
	return scheme+"://"+u.Host == l.origin || u.Scheme == "data" || u.Scheme == "blob"
}

func (l *requestLog) snapshot() (all, foreign []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all), slices.Clone(l.foreign)
}

// watchRequests intercepts every request of the tab before it is sent: same-origin ones go on,
// any other is failed (BlockedByClient) and recorded. WebSockets, which interception does not
// see, are recorded from the network domain.
func watchRequests(t *testing.T, page context.Context, origin string) *requestLog {
	t.Helper()
	l := &requestLog{origin: origin}
	paused := chromedp.Events(page, fetch.RequestPaused)
	sockets := chromedp.Events(page, network.WebSocketCreated)
	if _, err := chromedp.Call(page, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(page, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*"}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			l.add(ev.Request.URL)
			if l.sameOrigin(ev.Request.URL) {
				chromedp.Call(page, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			} else {
				chromedp.Call(page, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
			}
		}
	}()
	go func() {
		for ev, err := range sockets {
			if err != nil {
				return
			}
			l.add(ev.URL)
		}
	}()
	return l
}

// editor is the JavaScript for the CodeMirror editor of GraphiQL's pane labelled label (its
// visible one: the Variables and Headers pane holds both editors, one hidden).
func editor(label string) string {
	return `([...document.querySelectorAll('[aria-label="` + label + `"] .CodeMirror')].find((e) => !e.closest(".hidden")) || {}).CodeMirror`
}

// runInGraphiQL puts query in the query editor, runs it, and waits until the result pane
// contains want; it returns the result pane's text.
func runInGraphiQL(t *testing.T, page context.Context, query, want string) string {
	t.Helper()
	q, _ := json.Marshal(query)
	w, _ := json.Marshal(want)
	result := `(` + editor("Result Window") + ` || {getValue: () => ""}).getValue()`
	do(t, page, js(editor("Query Editor")+`.setValue(`+string(q)+`)`), chromedp.Click(chromedp.CSS(`.graphiql-execute-button`)))
	pollCtx, cancel := context.WithTimeout(page, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(pollCtx, chromedp.Poll[bool](result+`.includes(`+string(w)+`)`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("running %s in GraphiQL: no %s in the result within 20s (%v); the result pane shows:\n%s",
			query, want, err, get(t, page, chromedp.Evaluate[string](result)))
	}
	return get(t, page, chromedp.Evaluate[string](result))
}

// TestPlaygroundWorksOffline: in Chromium, with every request to another origin blocked and
// recorded, /playground renders GraphiQL from the server's own files, runs a query over HTTP and
// a subscription over WebSocket with the token from its Headers pane, and no request leaves
// the server's origin (none is even attempted: the page's CSP would report it).
func TestPlaygroundWorksOffline(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "playground.db"), "")
	run := s.SuspendAs(t, apptest.TokenOf("root"), "refund order 42 for 30", nil)

	page := tab(t, ctx, true)
	requests := watchRequests(t, page, s.URL)
	violations := cspWatch(t, page)
	do(t, page, chromedp.Navigate(s.URL+"/playground"),
		until(`!!document.querySelector(".graphiql-container .graphiql-query-editor .CodeMirror")`),
		until(`!!`+editor("Headers")))
	if got := get(t, page, chromedp.Evaluate[string](editor("Headers")+`.getValue()`)); strings.TrimSpace(got) != "" {
		t.Errorf("the Headers pane starts with %q, want it empty (nothing secret prefilled)", got)
	}

	// Without a token the server says so, and GraphiQL shows it.
	runInGraphiQL(t, page, `{ suspendedRuns { total } }`, "UNAUTHENTICATED")

	do(t, page, js(editor("Headers")+`.setValue('{"Authorization": "Bearer `+apptest.TokenOf("root")+`"}')`))
	// With the token, GraphiQL's introspection query passes (auth and the depth limit): the
	// documentation explorer lists the schema's root types.
	do(t, page, chromedp.Click(chromedp.CSS(`[aria-label="Re-fetch GraphQL schema"]`)),
		js(`[...document.querySelectorAll("button[aria-label$='Documentation Explorer']")].forEach((b) => b.click())`),
		until(`(document.querySelector(".graphiql-doc-explorer") || {innerText: ""}).innerText.includes("Subscription")`))
	out := runInGraphiQL(t, page, `{ suspendedRuns { total runs { id status } } }`, run.ID)
	if !strings.Contains(out, `"total": 1`) || !strings.Contains(out, `"SUSPENDED"`) {
		t.Errorf("the query's result: %s", out)
	}
	// A subscription goes over the WebSocket, with the same token in connection_init.
	runInGraphiQL(t, page, `subscription Follow { runEvents(runId: "`+run.ID+`") { seq type } }`, "RUN_SUSPENDED")

	all, foreign := requests.snapshot()
	if len(foreign) > 0 {
		t.Errorf("requests to other origins: %v", foreign)
	}
	for _, want := range []string{s.URL + "/playground", s.URL + "/playground/vendor/graphiql@4.1.2/graphiql.min.js", s.URL + "/graphql"} {
		if !slices.Contains(all, want) {
			t.Errorf("no request for %s among %v", want, all)
		}
	}
	wsURL := "ws" + strings.TrimPrefix(s.URL, "http") + "/graphql"
	if !slices.Contains(all, wsURL) {
		t.Errorf("the subscription opened no WebSocket to %s: %v", wsURL, all)
	}
	if v := violations(); len(v) > 0 {
		t.Errorf("CSP violations: %v", v)
	}
	if text := bodyText(t, page); strings.Contains(text, "Loading") {
		t.Errorf("the page still says Loading: %q", text)
	}
	screenshot(t, page, "playground.png")
}
