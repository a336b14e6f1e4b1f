package web_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// xssContext is the context of an approval request that tries every way into the page: raw HTML
// with handlers, a script, javascript: links in Markdown and in HTML. Each would set window.__xss.
const xssContext = "## Deploy **checkout** v2\n\n" +
	"Runs `make deploy` as the [runbook](https://example.com/runbook) says.\n\n" +
	"<img src=x onerror=\"window.__xss='img'\">\n\n" +
	"<script>window.__xss='script'</script>\n\n" +
	"[click me](javascript:window.__xss='link')\n\n" +
	"<a href=\"javascript:window.__xss='a'\" id=\"evil\">raw link</a>\n\n" +
	"<svg onload=\"window.__xss='svg'\"></svg>\n"

// externalConsoleConfig: cc asks (requester), alice decides (approver); coding is an external agent
// taking any tool name, triage an agent Interlock runs on the demo model.
func externalConsoleConfig(t *testing.T) string {
	t.Helper()
	var tokens strings.Builder
	for _, p := range []struct{ subject, role string }{{"cc", "requester"}, {"otto", "operator"}, {"alice", "approver"}} {
		fmt.Fprintf(&tokens, "    - {subject: %s, role: %s, sha256: %s}\n", p.subject, p.role, apptest.Sha256Hex(apptest.TokenOf(p.subject)))
	}
	return apptest.WriteConfig(t, `
auth:
  tokens:
`+tokens.String()+`agents:
  - {id: coding, name: Coding agents, external: true, tools: ['*']}
  - {id: triage, name: Triage, model: {provider: demo}, tools: [refund]}
tools:
  - name: '*'
    requireApproval: true
  - name: refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    http: {url: 'http://127.0.0.1:9/refund'}
`)
}

// requestApprovalAs asks for an approval over GraphQL and returns the run's id.
func requestApprovalAs(s *apptest.Server, t *testing.T, token string, input map[string]any) string {
	t.Helper()
	var out struct{ RequestApproval struct{ RunID string } }
	s.MustAs(t, token, `mutation($in: ApprovalRequestInput!) { requestApproval(input: $in) { runId } }`, map[string]any{"in": input}, &out)
	return out.RequestApproval.RunID
}

// TestConsoleExternalRequests: the console shows an external agent's approval request with the
// context its caller sent as safe Markdown — formatting and an http(s) link work; raw HTML, a
// script, SVG handlers and javascript: links stay text and never run, with no Content-Security-
// Policy to stop them — who asked, and no prompt or transcript. A person declines one there and
// approves a coding agent's hook there (the hook gets the allow). The inbox marks external rows
// and filters external vs internal agents (kept in the URL, live updates included); History lists
// the requests like any run, with the same filter.
func TestConsoleExternalRequests(t *testing.T) {
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "external.db"), "--auth=on", "--config", externalConsoleConfig(t))
	deploy := requestApprovalAs(s, t, apptest.TokenOf("cc"), map[string]any{"agentId": "coding", "toolName": "deploy",
		"args": map[string]any{"service": "checkout", "version": "v2"}, "context": xssContext})
	body := bytes.Replace(apptest.HookFixture(t, "claude-code/permission-request.json"), []byte(`"Remove node_modules directory"`),
		[]byte(`"Remove node_modules <img src=y onerror=\"window.__xss='hook'\">"`), 1)
	hook := s.PostHookAsync(t, "/hooks/claude-code/coding?wait=60s", "Bearer "+apptest.TokenOf("cc"), body)
	hookRun := ""
	for deadline := time.Now().Add(20 * time.Second); hookRun == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hook's request was not stored")
		}
		for _, r := range s.HookRequests(t, "coding") {
			if r.RunID != deploy && r.Status == "SUSPENDED" {
				hookRun = r.RunID
			}
		}
	}
	internal := s.SuspendAs(t, apptest.TokenOf("otto"), "refund order 42 for 30", map[string]any{"agentId": "triage"}).ID

	page := tab(t, ctx, true)
	rowsJS := `[...document.querySelectorAll("#inbox-list a.row[data-run]")].map((a) => a.dataset.run).sort()`
	externalJS := `[...document.querySelectorAll("#inbox-list li[data-run]")].filter((li) => li.querySelector(".badge.external")).map((li) => li.dataset.run).sort()`
	do(t, page, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")), until(`document.querySelectorAll("#inbox-list a.row").length === 3`),
		until(`document.querySelectorAll("#inbox-list .badge.external").length === 2`))
	want := []string{deploy, hookRun}
	slices.Sort(want)
	if got := get(t, page, chromedp.Evaluate[[]string](externalJS)); !slices.Equal(got, want) {
		t.Fatalf("rows marked external %v, want %v", got, want)
	}

	t.Run("the inbox filters external and internal agents", func(t *testing.T) {
		do(t, page, chromedp.SetValue(chromedp.CSS(`#f-kind`), "external"), chromedp.Click(chromedp.CSS(`#f-apply`)),
			until(`location.search === "?kind=external"`), until(`document.querySelectorAll("#inbox-list a.row").length === 2`))
		if got := get(t, page, chromedp.Evaluate[[]string](rowsJS)); !slices.Equal(got, want) {
			t.Fatalf("external: rows %v, want %v", got, want)
		}
		// Live: a new internal run stays out, a new external request comes in.
		other := s.SuspendAs(t, apptest.TokenOf("otto"), "refund order 43 for 30", map[string]any{"agentId": "triage"}).ID
		fresh := requestApprovalAs(s, t, apptest.TokenOf("cc"), map[string]any{"agentId": "coding", "toolName": "Write", "args": map[string]any{"file_path": "/tmp/x"}})
		do(t, page, until(`document.querySelector('#inbox-list a.row[data-run="`+fresh+`"]') !== null`))
		if get(t, page, chromedp.Evaluate[bool](`document.querySelector('#inbox-list a.row[data-run="`+other+`"]') !== null`)) {
			t.Fatal("an internal run is listed under external")
		}
		s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { declineToolCall(runId: $id) { status } }`, map[string]any{"id": fresh}, nil)
		do(t, page, until(`document.querySelectorAll("#inbox-list a.row").length === 2`))

		do(t, page, chromedp.SetValue(chromedp.CSS(`#f-kind`), "internal"), chromedp.Click(chromedp.CSS(`#f-apply`)),
			until(`location.search === "?kind=internal"`), until(`document.querySelectorAll("#inbox-list a.row").length === 2`))
		internals := []string{internal, other}
		slices.Sort(internals)
		if got := get(t, page, chromedp.Evaluate[[]string](rowsJS)); !slices.Equal(got, internals) {
			t.Fatalf("internal: rows %v, want %v", got, internals)
		}
		if n := get(t, page, chromedp.Evaluate[int](`document.querySelectorAll("#inbox-list .badge.external").length`)); n != 0 {
			t.Fatalf("%d internal rows marked external", n)
		}
		// A link with the filter opens filtered.
		do(t, page, chromedp.Navigate(s.URL+"/?kind=external"), until(`document.querySelectorAll("#inbox-list a.row").length === 2`),
			until(`document.querySelector("#f-kind").value === "external"`))
	})

	t.Run("the request's context is safe Markdown; who asked; no transcript; decline", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?run="+deploy), until(`document.querySelector("#run-context .md") !== null`),
			chromedp.WaitVisible(chromedp.CSS(`.pending button.decline`)))
		got := get(t, page, chromedp.Evaluate[map[string]any](`(() => {
			const c = document.querySelector("#run-context .md");
			const link = c.querySelector('a[href="https://example.com/runbook"]');
			return {
				xss: window.__xss === undefined ? "" : String(window.__xss),
				heading: c.querySelector("h4")?.textContent || "",
				strong: c.querySelector("h4 strong")?.textContent || "",
				code: c.querySelector("code")?.textContent || "",
				link: link ? link.rel + "|" + link.target : "",
				elements: [...c.querySelectorAll("img, script, svg, iframe, [onerror], [onload], #evil")].length,
				jsLinks: [...document.querySelectorAll("a")].filter((a) => a.href.trim().toLowerCase().startsWith("javascript:")).length,
				text: c.innerText,
				by: document.querySelector("#run-started-by")?.textContent || "",
				external: document.querySelector("#run-external")?.textContent || "",
				title: document.querySelector("h1")?.textContent || "",
				transcript: document.querySelectorAll(".plain-text, #run-output, #thread-earlier, .said").length,
			};
		})()`))
		if got["xss"] != "" || got["elements"] != float64(0) || got["jsLinks"] != float64(0) {
			t.Fatalf("the context injected markup or ran script: %v", got)
		}
		text, _ := got["text"].(string)
		for _, literal := range []string{`<img src=x onerror="window.__xss='img'">`, `<script>window.__xss='script'</script>`,
			`[click me](javascript:window.__xss='link')`, `<a href="javascript:window.__xss='a'" id="evil">raw link</a>`} {
			if !strings.Contains(text, literal) {
				t.Fatalf("the context does not show %q as text:\n%s", literal, text)
			}
		}
		if got["heading"] != "Deploy checkout v2" || got["strong"] != "checkout" || got["code"] != "make deploy" || got["link"] != "noopener noreferrer|_blank" {
			t.Fatalf("the context's Markdown: %v", got)
		}
		if got["by"] != "Requested by cc" || got["external"] != "external" || !strings.HasPrefix(got["title"].(string), "Approval request") || got["transcript"] != float64(0) {
			t.Fatalf("the request's head: %v", got)
		}
		do(t, page, chromedp.SendKeys(chromedp.CSS(`input[id^="reason-"]`), "not on a Friday"), chromedp.Click(chromedp.CSS(`.pending button.decline`)),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
			until(`document.querySelector('section[aria-label="Decisions"]')?.innerText.includes("Declined by alice")`))
		ds := decisionsAs(t, s, apptest.TokenOf("alice"), deploy)
		if len(ds) != 1 || ds[0]["kind"] != "DECLINED" || ds[0]["decidedBy"] != "alice" {
			t.Fatalf("decisions %v", ds)
		}
		if x := get(t, page, chromedp.Evaluate[bool](`window.__xss === undefined && document.querySelector("#run-context") !== null`)); !x {
			t.Fatal("after the decision: script ran, or the context is gone")
		}
	})

	t.Run("a coding agent's hook, approved in the console, gets the allow", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?run="+hookRun), until(`document.querySelector("#run-context .md blockquote") !== null`),
			chromedp.WaitVisible(chromedp.CSS(`.pending button.approve`)))
		ctxText := textOf(t, page, `#run-context`)
		if !strings.Contains(ctxText, "Claude Code asks to run Bash in /Users/...") || !strings.Contains(ctxText, `<img src=y onerror="window.__xss='hook'">`) ||
			!strings.Contains(ctxText, "rm -rf node_modules") {
			t.Fatalf("the hook's context: %q", ctxText)
		}
		if x := get(t, page, chromedp.Evaluate[bool](`window.__xss === undefined && !document.querySelector("#run-context img")`)); !x {
			t.Fatal("the hook's description injected markup")
		}
		do(t, page, chromedp.Click(chromedp.CSS(`.pending button.approve`)), until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
		apptest.WantAnswer(t, "the hook", apptest.Answered(t, hook), apptest.HookFixture(t, "claude-code/answer-allow.json"))
	})

	t.Run("history lists the requests like any run, with the filter", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?view=history&kind=external"), until(`document.querySelectorAll("#history-list li a.row").length === 3`))
		rows := textOf(t, page, `#history-list`)
		for _, want := range []string{"asked to run deploy (requested by cc)", "asked to run Bash (requested by cc)", "declined", "alice"} {
			if !strings.Contains(rows, want) {
				t.Fatalf("history (external) lacks %q:\n%s", want, rows)
			}
		}
		if got := get(t, page, chromedp.Evaluate[string](`document.querySelector("#h-kind").value`)); got != "external" {
			t.Fatalf("the kind filter shows %q", got)
		}
		do(t, page, chromedp.Navigate(s.URL+"/?view=history&kind=internal&status=ANY"), until(`document.querySelectorAll("#history-list li a.row").length === 2`))
		if rows := textOf(t, page, `#history-list`); strings.Contains(rows, "asked to run") {
			t.Fatalf("history (internal) lists a request:\n%s", rows)
		}
	})

	t.Run("under the strict CSP nothing is blocked", func(t *testing.T) {
		url := serve(t, withCSP(s.App.Handler()))
		p := tab(t, ctx, true)
		violations := cspWatch(t, p)
		do(t, p, chromedp.Navigate(url+"/?run="+deploy+"#token="+apptest.TokenOf("alice")), until(`document.querySelector("#run-context .md h4") !== null`))
		do(t, p, chromedp.Navigate(url+"/?kind=external"), until(`document.querySelector("#inbox-list") !== null && document.querySelector("#f-kind").value === "external"`))
		if v := violations(); len(v) != 0 {
			t.Fatalf("CSP violations: %v", v)
		}
	})
}
