package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"interlock/gormstore"
	"interlock/internal/app"
	"interlock/internal/apptest"
)

// chromium is the one headless Chromium the package's tests share: started by the first test
// that asks for a browser, ended by TestMain. Each test gets a browser context of its own
// (separate cookies, storage and tabs), so tests stay isolated and can run in parallel.
var chromium struct {
	once   sync.Once
	ctx    context.Context // the browser's first tab, parent of every test's context
	err    error
	cancel func()
}

// jwtSecret signs the tests' JWTs; the servers read it from INTERLOCK_TEST_JWT, set once here
// since parallel tests cannot Setenv.
const jwtSecret = "a-shared-secret-of-at-least-32-bytes!"

func TestMain(m *testing.M) {
	os.Setenv("INTERLOCK_TEST_JWT", jwtSecret)
	code := m.Run()
	if chromium.cancel != nil {
		chromium.cancel()
	}
	os.Exit(code)
}

// browser gives the test a fresh browser context in the shared Chromium (Debian's, headless),
// or skips (fails under CI=true) when there is none. Tabs opened from it share its cookies.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; CI must run the console tests (apt-get install chromium)")
		}
		t.Skip("chromium not installed")
	}
	chromium.once.Do(func() {
		// No UserDataDir: in a profile directory of its own making, chromedp kills, when the
		// browser ends, every process still using that directory (Chromium's zygote and
		// helpers), then removes it. Should the test binary die first, the kernel kills the
		// browser (chromedp starts it with Pdeathsig).
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1200, 900),
			chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
			// Tests run side by side, each in a window of its own: none of them is in the
			// background, so none may have its timers or renderer slowed down.
			chromedp.Flag("disable-background-timer-throttling", true),
			chromedp.Flag("disable-backgrounding-occluded-windows", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		chromium.ctx = ctx
		chromium.cancel = func() { cancel(); cancelAlloc() }
		chromium.err = chromedp.Do(ctx)
	})
	if chromium.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium does not start: %v", chromium.err)
		}
		t.Skipf("chromium does not start: %v", chromium.err)
	}
	ctx, cancel := chromedp.NewContext(chromium.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, noUndo()); err != nil { // opens the tab; it must have no timeout
		t.Fatal(err)
	}
	return ctx
}

// tab opens a new tab, in its own browser context (separate cookies and storage) when isolated.
func tab(t *testing.T, parent context.Context, isolated bool) context.Context {
	t.Helper()
	var opts []chromedp.ContextOption
	if isolated {
		opts = append(opts, chromedp.WithNewBrowserContext())
	}
	ctx, cancel := chromedp.NewContext(parent, opts...)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, noUndo()); err != nil { // the first run opens the tab; it must have no timeout
		t.Fatal(err)
	}
	return ctx
}

func do(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// get runs one action that returns a value.
func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// until waits for a JavaScript condition to hold in the page.
func until(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))(ctx, tg)
		if err != nil {
			err = fmt.Errorf("waiting for %s: %w", expr, err)
		}
		return chromedp.Void{}, err
	}
}

// js evaluates an expression for its effect.
func js(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[any](expr)(ctx, tg)
		return chromedp.Void{}, err
	}
}

func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return get(t, ctx, chromedp.Text(chromedp.CSS(sel)))
}

func bodyText(t *testing.T, ctx context.Context) string {
	t.Helper()
	return get(t, ctx, chromedp.Evaluate[string](`document.body.innerText`))
}

// screenshot saves a PNG of the page in the repository's docs/ when INTERLOCK_SCREENSHOTS=1, else in a
// temp dir.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := t.TempDir()
	if os.Getenv("INTERLOCK_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "docs") // tests run in web/
	}
	png := get(t, ctx, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConsole(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "console.db"))
	inbox := tab(t, ctx, false)
	do(t, inbox, chromedp.Navigate(s.URL+"/"), until(`document.body.innerText.includes("Nothing waits")`))

	t.Run("a run created in the UI appears in the inbox live, and is approved", func(t *testing.T) {
		creator := tab(t, ctx, false)
		do(t, creator, chromedp.Navigate(s.URL+"/?view=new"), until(`!!document.querySelector("#n-agent option")`),
			chromedp.SetValue(chromedp.CSS(`#n-prompt`), "refund order 42 for 30"),
			chromedp.SetValue(chromedp.CSS(`#n-thread`), "web-thread"),
			chromedp.Click(chromedp.CSS(`form button[type=submit]`)),
			until(`location.search.startsWith("?run=")`))
		do(t, inbox, until(`document.querySelectorAll("a[data-run]").length === 1`))
		if row := textOf(t, inbox, `a[data-run]`); !strings.Contains(row, "issue_refund") || !strings.Contains(row, "web-thread") || !strings.Contains(row, `"orderId":"42"`) {
			t.Fatalf("inbox row: %q", row)
		}
		screenshot(t, inbox, "inbox.png")
		do(t, inbox, chromedp.Click(chromedp.CSS(`a[data-run]`)), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
			chromedp.Click(chromedp.CSS(`.pending button.raw-toggle`))) // the raw JSON behind the arguments table
		if args := textOf(t, inbox, `.pending pre`); !strings.Contains(args, `"amount": 30`) {
			t.Fatalf("arguments shown: %q", args)
		}
		if body := bodyText(t, inbox); strings.Contains(body, "null") || strings.Contains(body, "undefined") {
			t.Fatalf("the run view shows a raw null/undefined:\n%s", body)
		}
		screenshot(t, inbox, "run.png")
		do(t, inbox, chromedp.Click(chromedp.CSS(`button.approve`)),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
			until(`document.querySelector("#stream")?.innerText.includes("rf_42")`))
		// Back to the inbox: the decided run is gone.
		do(t, inbox, chromedp.NavigateBack(), until(`location.search === ""`), until(`document.body.innerText.includes("Nothing waits")`))
	})

	t.Run("decline with a reason", func(t *testing.T) {
		run := s.StartRun(t, "refund order 9", nil)
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(`button.decline`)),
			chromedp.SendKeys(chromedp.CSS(`.pending input[type=text]`), "needs a receipt"),
			chromedp.Click(chromedp.CSS(`button.decline`)),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
		if out := textOf(t, page, `#run-output`); !strings.Contains(out, "needs a receipt") {
			t.Fatalf("final text %q lacks the reason", out)
		}
	})

	t.Run("resume through the generated form", func(t *testing.T) {
		run := s.StartRun(t, "ask the customer for their shoe size", nil)
		page := tab(t, ctx, false)
		field := `#resume-tc_1-answer`
		do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(field)),
			chromedp.Click(chromedp.CSS(`.pending button[type=submit]`)),
			until(`document.querySelector(".field-error").textContent.includes("answer")`))
		if st := s.Run(t, run.RunID).Status; st != "SUSPENDED" {
			t.Fatalf("after an invalid resume the run is %s", st)
		}
		label := textOf(t, page, `label[for="resume-tc_1-answer"]`)
		if !strings.Contains(label, "required") || !strings.Contains(label, "The customer's answer") {
			t.Fatalf("field label %q lacks the required mark or description", label)
		}
		do(t, page, chromedp.SendKeys(chromedp.CSS(field), "43"), chromedp.Click(chromedp.CSS(`.pending button[type=submit]`)),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
		if out := textOf(t, page, `#run-output`); !strings.Contains(out, "43") {
			t.Fatalf("final text %q lacks the answer", out)
		}
	})

	t.Run("two browsers decide the same run: one wins, the other sees the conflict", func(t *testing.T) {
		run := s.StartRun(t, "refund order 5", nil)
		a, b := tab(t, ctx, true), tab(t, ctx, true)
		for _, p := range []context.Context{a, b} {
			do(t, p, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(`button.approve`)))
		}
		var wg sync.WaitGroup
		for _, p := range []context.Context{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); chromedp.Do(p, js(`document.querySelector("button.approve").click()`)) }()
		}
		wg.Wait()
		conflicts := 0
		for _, p := range []context.Context{a, b} {
			do(t, p, until(`document.body.innerText.includes("Decision sent") || document.body.innerText.includes("Someone else decided first")`))
			if strings.Contains(bodyText(t, p), "Someone else decided first") {
				conflicts++
			}
		}
		if conflicts != 1 {
			t.Fatalf("%d of the two browsers saw the conflict, want 1", conflicts)
		}
		for _, p := range []context.Context{a, b} {
			do(t, p, until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
		}
	})

	t.Run("history lists the finished runs with their decisions", func(t *testing.T) {
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(`document.querySelectorAll("a.row").length >= 4`))
		body := bodyText(t, page)
		for _, want := range []string{"declined issue_refund", "needs a receipt", "resumed ask_customer", "approved issue_refund"} {
			if !strings.Contains(body, want) {
				t.Errorf("history lacks %q", want)
			}
		}
	})

	t.Run("filters live in the URL and the back button restores them", func(t *testing.T) {
		s.StartRun(t, "refund order 77", map[string]any{"threadId": "t-77"})
		s.StartRun(t, "refund order 78", map[string]any{"threadId": "t-78"})
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("a[data-run]").length === 2`),
			chromedp.SendKeys(chromedp.CSS(`#f-thread`), "t-77"), chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)),
			until(`location.search === "?thread=t-77" && document.querySelectorAll("a[data-run]").length === 1`),
			chromedp.NavigateBack(), until(`location.search === "" && document.querySelectorAll("a[data-run]").length === 2`),
			chromedp.Navigate(s.URL+"/?thread=t-78"), until(`document.querySelectorAll("a[data-run]").length === 1 && document.querySelector("#f-thread").value === "t-78"`))
	})

	t.Run("the resume form covers string, number, integer, boolean and enum", func(t *testing.T) {
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(`document.readyState === "complete"`))
		got := get(t, page, chromedp.Evaluate[string](`(async () => {
			const { schemaForm } = await import("/js/schemaform.js");
			const f = schemaForm({ type: "object", required: ["name", "size"], properties: {
				name: { type: "string", description: "Who" },
				weight: { type: "number" },
				size: { type: "integer" },
				gift: { type: "boolean" },
				colour: { enum: ["red", "blue"] },
				note: { type: "string" },
			} }, "t");
			document.body.append(f.node);
			const set = (id, v) => { const n = document.getElementById(id); n.value = v; };
			set("t-name", "Ann"); set("t-weight", "2.5"); set("t-size", "7"); set("t-colour", "1");
			document.getElementById("t-gift").checked = true;
			const labels = [...f.node.querySelectorAll("label")].map((l) => l.textContent).join("|");
			const kinds = [...f.node.querySelectorAll("input, select")].map((n) => n.type + (n.step ? ":" + n.step : "")).join(",");
			return JSON.stringify({ value: f.value(), labels, kinds });
		})()`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
		var out struct {
			Value         map[string]any
			Labels, Kinds string
		}
		if err := json.Unmarshal([]byte(got), &out); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"name": "Ann", "weight": 2.5, "size": 7.0, "gift": true, "colour": "blue"}
		if fmt.Sprint(out.Value) != fmt.Sprint(want) {
			t.Errorf("form value %v, want %v", out.Value, want)
		}
		if !strings.Contains(out.Labels, "name *required · Who") || !strings.Contains(out.Labels, "size *required") || strings.Contains(out.Labels, "note *") {
			t.Errorf("labels %q", out.Labels)
		}
		if out.Kinds != "text,number:any,number:1,checkbox,select-one,text" {
			t.Errorf("inputs %q", out.Kinds)
		}
	})

	t.Run("readable at phone width: nothing overflows sideways", func(t *testing.T) {
		s.StartRun(t, "refund order 123456789 for 30", map[string]any{"threadId": "a-rather-long-thread-name-for-a-phone", "resourceId": "customer-with-long-id"})
		page := tab(t, ctx, false)
		do(t, page, chromedp.EmulateViewport(375, 740, chromedp.EmulateMobile), chromedp.Navigate(s.URL+"/"),
			until(`document.querySelectorAll("a[data-run]").length > 0`),
			until(`document.documentElement.scrollWidth <= 375`),
			js(`document.querySelector("a[data-run]").click()`), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
			until(`document.documentElement.scrollWidth <= 375`))
		screenshot(t, page, "run-phone.png")
	})

	t.Run("an unreachable server is said so", func(t *testing.T) {
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(`document.querySelectorAll("a.row").length > 0`))
		s.CloseHTTP()
		do(t, page, js(`document.querySelector('a[href="/?view=new"]').click()`),
			until(`/unreachable|Reconnecting/.test(document.querySelector("#conn").textContent)`))
	})
}

// strictCSP is the Content-Security-Policy the server sends with the console.
const strictCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// serve serves h on a new local HTTP server for the test and returns its URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL
}

// withCSP adds the strict Content-Security-Policy to every answer of h.
func withCSP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", strictCSP)
		h.ServeHTTP(w, r)
	})
}

// cspWatch records the CSP violations of every document the tab loads, from two sources: the
// securitypolicyviolation events (a listener installed before the page's own scripts run) and
// the browser's console. It returns a function giving the violations seen so far in the page.
func cspWatch(t *testing.T, page context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var logged []string
	messages := chromedp.Console(page)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if strings.Contains(m.Text, "Content Security Policy") {
				mu.Lock()
				logged = append(logged, m.Text)
				mu.Unlock()
			}
		}
	}()
	_, err := chromedp.Call(page, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__csp = [];
		document.addEventListener("securitypolicyviolation", (e) =>
			window.__csp.push(e.violatedDirective + " " + e.blockedURI + " at " + e.sourceFile + ":" + e.lineNumber + " " + e.sample));`})
	if err != nil {
		t.Fatal(err)
	}
	return func() []string {
		t.Helper()
		// A violation event is dispatched from a task of its own: let queued tasks run first.
		inPage := get(t, page, chromedp.Evaluate[[]string](`new Promise((ok) => setTimeout(() => ok(window.__csp || []), 50))`, chromedp.EvalAwaitPromise))
		mu.Lock()
		defer mu.Unlock()
		return append(inPage, logged...)
	}
}

// TestConsoleUnderStrictCSP: every page of the console works under the strict policy the server
// sends, and none makes the browser block anything (no inline script, style attribute, inline
// handler or eval).
func TestConsoleUnderStrictCSP(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "csp.db"))
	url := serve(t, withCSP(s.App.Handler()))
	page := tab(t, ctx, false)
	violations := cspWatch(t, page)
	check := func(name string) {
		t.Helper()
		if v := violations(); len(v) > 0 {
			t.Fatalf("%s: %d CSP violations:\n%s", name, len(v), strings.Join(v, "\n"))
		}
	}

	s.StartRun(t, "refund order 42 for 30", map[string]any{"threadId": "csp"})
	s.StartRun(t, "ask the customer for their size", map[string]any{"threadId": "csp"})
	do(t, page, chromedp.Navigate(url+"/"), until(`document.querySelectorAll("a[data-run]").length === 2`))
	check("inbox")

	do(t, page, js(`[...document.querySelectorAll("a[data-run]")].find((a) => a.innerText.includes("ask_customer")).click()`),
		chromedp.WaitVisible(chromedp.CSS(`.pending form input`)))
	check("run view with a resume form")

	do(t, page, chromedp.NavigateBack(), until(`document.querySelectorAll("a[data-run]").length === 2`),
		js(`[...document.querySelectorAll("a[data-run]")].find((a) => a.innerText.includes("issue_refund")).click()`),
		chromedp.WaitVisible(chromedp.CSS(`button.approve`)))
	check("run view with an approval")
	do(t, page, chromedp.Click(chromedp.CSS(`button.approve`)),
		until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
	check("run view streaming the run to its end")

	do(t, page, chromedp.Navigate(url+"/?view=new"), until(`!!document.querySelector("#n-agent option")`))
	check("new run")

	do(t, page, chromedp.Navigate(url+"/?view=history"), until(`document.querySelectorAll("a.row").length === 1`))
	check("history")
}

// socketGate serves h, holding WebSocket handshakes back until release, and can drop every
// WebSocket it let through (as a restarting proxy or a lost network would).
type socketGate struct {
	h        http.Handler
	released chan struct{}
	once     sync.Once
	mu       sync.Mutex
	conns    []net.Conn
}

func newSocketGate(h http.Handler) *socketGate {
	return &socketGate{h: h, released: make(chan struct{})}
}

func (g *socketGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") == "" {
		g.h.ServeHTTP(w, r)
		return
	}
	select {
	case <-g.released:
	case <-r.Context().Done():
		return
	}
	g.h.ServeHTTP(&hijackRecorder{ResponseWriter: w, gate: g}, r)
}

// release lets the held handshakes, and every later one, through.
func (g *socketGate) release() { g.once.Do(func() { close(g.released) }) }

// drop closes every WebSocket connection let through so far.
func (g *socketGate) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		c.Close()
	}
	g.conns = nil
}

// hijackRecorder notes the connections the WebSocket handshake takes over.
type hijackRecorder struct {
	http.ResponseWriter
	gate *socketGate
}

func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err == nil {
		h.gate.mu.Lock()
		h.gate.conns = append(h.gate.conns, c)
		h.gate.mu.Unlock()
	}
	return c, rw, err
}

// rerendered marks the run view's current header, and then waits until the view has drawn the
// run anew (it redraws the header and the pending form together).
func rerendered(t *testing.T, page context.Context, trigger func()) {
	t.Helper()
	do(t, page, js(`document.querySelector("#run-status").dataset.old = "1"`))
	trigger()
	do(t, page, until(`!!document.querySelector("#run-status") && !document.querySelector("#run-status[data-old]")`))
}

// TestConsoleKeepsWhatThePersonTypes: the run view redraws when events arrive (the stream first
// replays the run's RUN_SUSPENDED) and after it reconnects; a reason or answer being typed
// survives every redraw, keeps the focus, and is the one recorded with the decision.
func TestConsoleKeepsWhatThePersonTypes(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "typing.db"))

	cases := []struct {
		name, prompt, field, submit, kind string
		recorded                          func(map[string]any) any
	}{
		{"decline reason", "refund order 11", `.pending input[type=text]`, `button.decline`, "DECLINED",
			func(d map[string]any) any { return d["reason"] }},
		{"resume answer", "ask the customer for their size", `#resume-tc_1-answer`, `.pending button[type=submit]`, "RESUMED",
			func(d map[string]any) any { return d["resumeData"].(map[string]any)["answer"] }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			run := suspended(t, s, c.prompt)
			gate := newSocketGate(s.App.Handler())
			url := serve(t, gate)
			t.Cleanup(gate.release)
			page := tab(t, ctx, false)
			// The view is drawn from a query while its event stream is held back...
			do(t, page, chromedp.Navigate(url+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(c.field)),
				chromedp.SendKeys(chromedp.CSS(c.field), "needs a "))
			kept := func(typed string) {
				t.Helper()
				state := get(t, page, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const f = document.querySelector(%q);
					return JSON.stringify([f.value, document.activeElement === f]); })()`, c.field)))
				if want := fmt.Sprintf(`[%q,true]`, typed); state != want {
					t.Fatalf("after a redraw the field [value, focused] is %s, want %s", state, want)
				}
			}
			// ...so the replayed RUN_SUSPENDED redraws it while the person is typing.
			rerendered(t, page, gate.release)
			kept("needs a ")
			// The socket drops: the view reconnects and reads the run again.
			do(t, page, chromedp.SendKeys(chromedp.CSS(c.field), "rec"))
			rerendered(t, page, gate.drop)
			kept("needs a rec")
			// The pending call changes (now marked interrupted): the form is drawn anew, with what
			// was typed in it carried over.
			if err := s.App.DB().Model(&gormstore.ToolCall{}).Where("run_id = ?", run.RunID).Update("interrupted", true).Error; err != nil {
				t.Fatal(err)
			}
			rerendered(t, page, gate.drop)
			if txt := textOf(t, page, `.pending`); !strings.Contains(txt, "interrupted") {
				t.Fatalf("the redrawn form does not say the call was interrupted: %q", txt)
			}
			kept("needs a rec")
			do(t, page, chromedp.SendKeys(chromedp.CSS(c.field), "eipt"), chromedp.Click(chromedp.CSS(c.submit)),
				until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
			ds := decisions(t, s, run.RunID)
			if len(ds) != 1 || ds[0]["kind"] != c.kind || c.recorded(ds[0]) != "needs a receipt" {
				t.Fatalf("decisions recorded %v, want one %s with %q", ds, c.kind, "needs a receipt")
			}
		})
	}
}

// TestConsoleDropsTextOfARetriedModelCall: a run whose instance died while its model call
// streamed text is recovered; the model call is made again after MODEL_CALL_RETRIED, and the run
// view drops the cut-off text instead of showing it before the repeat's. Both live and replayed.
func TestConsoleDropsTextOfARetriedModelCall(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "retried.db"))
	// A run executing on an instance that is gone: its model call had streamed two pieces of text
	// (seq 2 and 3) after the snapshot (seq 1). Its lease is still valid, so nobody recovers it yet.
	now := time.Now().UTC().Truncate(time.Millisecond)
	owner, snapshot := "dead-instance", `{"messages":[{"role":"user","content":"hello"}],"steps":0,"seq":1}`
	lease := now.Add(time.Hour)
	id := "run-cut-off"
	db := s.App.DB()
	if err := db.Create(&gormstore.Run{ID: id, AgentID: "support-agent", Prompt: "hello", Status: "RUNNING", Snapshot: &snapshot,
		CreatedAt: now, UpdatedAt: now, LastSeq: 3, LeaseOwner: &owner, LeaseUntil: &lease}).Error; err != nil {
		t.Fatal(err)
	}
	for i, e := range [][2]string{{"RUN_STARTED", `{}`}, {"TEXT_DELTA", `{"text":"Half an answer "}`}, {"TEXT_DELTA", `{"text":"that was cut off"}`}} {
		if err := db.Create(&gormstore.Event{RunID: id, Seq: int64(i + 1), Type: e[0], Data: e[1], CreatedAt: now}).Error; err != nil {
			t.Fatal(err)
		}
	}

	live := tab(t, ctx, false)
	do(t, live, chromedp.Navigate(s.URL+"/?run="+id), until(`document.querySelector("#stream")?.innerText.includes("Half an answer that was cut off")`))
	// The instance's lease runs out: recovery (this server's) takes the run over.
	if err := db.Model(&gormstore.Run{}).Where("id = ?", id).Update("lease_until", now.Add(-time.Minute)).Error; err != nil {
		t.Fatal(err)
	}
	if n, err := s.App.Service.RecoverExpired(context.Background()); err != nil || n > 1 {
		t.Fatalf("recovered %d runs: %v", n, err)
	}
	replayed := tab(t, ctx, false)
	for name, page := range map[string]context.Context{"live": live, "replayed": replayed} {
		if name == "replayed" {
			do(t, page, chromedp.Navigate(s.URL+"/?run="+id))
		}
		do(t, page, until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
			until(`document.querySelector("#stream")?.innerText.includes("FINISHED")`))
		stream := textOf(t, page, `#stream`)
		if strings.Contains(stream, "cut off") || strings.Count(stream, "Hello! I can look up") != 1 {
			t.Errorf("%s: the stream keeps the cut-off text or lacks the repeated answer:\n%s", name, stream)
		}
	}
}

// serveApp runs the real app on ln with App.Serve, as main does; stop ends it gracefully (as
// SIGTERM would) and closes its database.
func serveApp(t *testing.T, db string, ln net.Listener) (s *apptest.Server, stop func()) {
	t.Helper()
	cfg, err := app.ParseConfig([]string{"--auth=off", "--db", db}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	app, err := app.NewApp(context.Background(), cfg, apptest.DiscardLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- app.Serve(ctx, ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
			app.Close()
		})
	}
	t.Cleanup(stop)
	return &apptest.Server{URL: "http://" + ln.Addr().String(), App: app, CloseHTTP: stop}, stop
}

// TestConsoleFollowsARollingDeploy: the server an open console talks to stops (completing its
// subscriptions and closing the socket) and a new one starts on the same address and database.
// Without a reload, the inbox shows a run suspended after the restart, the run view follows its
// run to the end, and the status line said that the console reconnected.
func TestConsoleFollowsARollingDeploy(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "deploy.db")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	first, stopFirst := serveApp(t, db, ln)
	before := suspended(t, first, "refund order 1")

	// The status line's every change is noted, so that a short-lived message is not missed.
	const noteStatus = `window.__conn = []; new MutationObserver(() => window.__conn.push(document.querySelector("#conn").textContent))
		.observe(document.querySelector("#conn"), { childList: true, characterData: true, subtree: true })`
	inbox, runPage := tab(t, ctx, false), tab(t, ctx, false)
	do(t, inbox, chromedp.Navigate(first.URL+"/"), until(`document.querySelectorAll("a[data-run]").length === 1`), js(noteStatus))
	do(t, runPage, chromedp.Navigate(first.URL+"/?run="+before.RunID), chromedp.WaitVisible(chromedp.CSS(`button.approve`)), js(noteStatus))

	stopFirst()
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	second, _ := serveApp(t, db, ln)
	after := suspended(t, second, "refund order 2")
	do(t, inbox, until(fmt.Sprintf(`!!document.querySelector('a[data-run=%q]') && document.querySelectorAll("a[data-run]").length === 2`, after.RunID)))

	var approved map[string]apptest.Run
	second.Must(t, `mutation($id: ID!) { d: approveToolCall(runId: $id) { status } }`, map[string]any{"id": before.RunID}, &approved)
	do(t, runPage, until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
		until(`document.querySelectorAll('#stream li[data-type="RUN_FINISHED"]').length === 1`))
	if n := get(t, runPage, chromedp.Evaluate[int](`document.querySelectorAll('#stream li[data-type="RUN_SUSPENDED"]').length`)); n != 1 {
		t.Errorf("the run view shows RUN_SUSPENDED %d times, want once (no event twice after resubscribing)", n)
	}
	for name, page := range map[string]context.Context{"inbox": inbox, "run view": runPage} {
		said := get(t, page, chromedp.Evaluate[[]string](`window.__conn`))
		if !slices.Contains(said, "Reconnecting…") || !slices.Contains(said, "Reconnected") {
			t.Errorf("%s: the status line said %q, want Reconnecting… then Reconnected", name, said)
		}
		if live := get(t, page, chromedp.Evaluate[string](`document.querySelector("#conn").getAttribute("aria-live")`)); live != "polite" {
			t.Errorf("%s: the status line is aria-live=%q", name, live)
		}
	}
}

// suspended starts a run on s and waits until it is suspended.
func suspended(t *testing.T, s *apptest.Server, prompt string) apptest.Run {
	t.Helper()
	r := s.StartRun(t, prompt, nil)
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	defer ws.Conn.CloseNow()
	apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": r.RunID}), apptest.IsType("RUN_SUSPENDED"))
	return r
}

// decisions reads the decisions recorded on a run of s but those nobody was asked for (AUTO_APPROVED:
// the demo's ungated tools, such as the one that then asks the customer, are let through by policy).
func decisions(t *testing.T, s *apptest.Server, runID string) []map[string]any {
	t.Helper()
	var out struct {
		Run struct{ Decisions []map[string]any }
	}
	s.Must(t, `query($id: ID!) { run(runId: $id) { decisions { kind reason resumeData } } }`, map[string]any{"id": runID}, &out)
	asked := []map[string]any{}
	for _, d := range out.Run.Decisions {
		if d["kind"] != "AUTO_APPROVED" {
			asked = append(asked, d)
		}
	}
	return asked
}
