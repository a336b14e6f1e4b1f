package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// evalJSON runs an async expression in the page that returns JSON.stringify(…) and decodes it.
func evalJSON(t *testing.T, page context.Context, expr string, v any) {
	t.Helper()
	got := get(t, page, chromedp.Evaluate[string](expr, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
	if err := json.Unmarshal([]byte(got), v); err != nil {
		t.Fatalf("%v in %s", err, got)
	}
}

// TestConsoleMarkdownIsSafe: model text rendered as Markdown keeps markup, scripts, images and
// javascript: links inert (shown as text), and renders the subset it knows.
func TestConsoleMarkdownIsSafe(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "md.db"))
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(`document.readyState === "complete"`))
	const source = "Hello **bold** and *em* and _also em_ and `x < y` in issue_refund.\n" +
		"A second line.\n\n" +
		"<img src=x onerror=\"window.__pwned = 1\"> <script>window.__pwned = 2</script>\n\n" +
		"[click me](javascript:window.__pwned=3) [upper](JAVASCRIPT:alert(1)) [data](data:text/html,<b>x</b>) [rel](/graphql)\n\n" +
		"[the policy](https://example.com/policy?a=1) and https://example.org/x.\n\n" +
		"- one\n- two\n  - nested\n\n3. third\n4. fourth\n\n" +
		"```html\n<img src=y onerror=\"window.__pwned = 4\">\n```\n\n> quoted"
	var out struct {
		Pwned                              any
		Images, Scripts, Strong, Em, Code  int
		Pre, UL, OL, Nested, Breaks, Quote int
		OLStart                            string
		Links                              []struct{ Href, Rel, Target, Text string }
		Text                               string
	}
	src, _ := json.Marshal(source)
	evalJSON(t, page, `(async () => {
		const { markdown } = await import("/js/markdown.js");
		const node = markdown(`+string(src)+`);
		document.body.append(node);
		await new Promise((ok) => setTimeout(ok, 200)); // an onerror would have fired
		const n = (sel) => node.querySelectorAll(sel).length;
		return JSON.stringify({
			pwned: window.__pwned ?? null,
			images: document.querySelectorAll("img").length, scripts: n("script"),
			strong: n("strong"), em: n("em"), code: n("code"), pre: n("pre"), ul: n("ul"), ol: n("ol"),
			nested: n("ul ul"), breaks: n("p br"), quote: n("blockquote"), olStart: node.querySelector("ol")?.getAttribute("start") || "",
			links: [...node.querySelectorAll("a")].map((a) => ({ href: a.getAttribute("href"), rel: a.rel, target: a.target, text: a.textContent })),
			text: node.textContent,
		});
	})()`, &out)
	if out.Pwned != nil || out.Images != 0 || out.Scripts != 0 {
		t.Fatalf("markup ran or was made: pwned=%v images=%d scripts=%d", out.Pwned, out.Images, out.Scripts)
	}
	for _, want := range []string{`<img src=x onerror="window.__pwned = 1">`, "<script>", "[click me](javascript:window.__pwned=3)", "[upper](JAVASCRIPT:alert(1))", "[rel](/graphql)", `<img src=y onerror="window.__pwned = 4">`, "issue_refund"} {
		if !strings.Contains(out.Text, want) {
			t.Errorf("the text lacks %q (shown as written): %q", want, out.Text)
		}
	}
	if len(out.Links) != 2 || out.Links[0].Href != "https://example.com/policy?a=1" || out.Links[0].Text != "the policy" || out.Links[1].Href != "https://example.org/x" {
		t.Fatalf("links %+v, want only the two http(s) ones", out.Links)
	}
	for _, l := range out.Links {
		if l.Rel != "noopener noreferrer" || l.Target != "_blank" {
			t.Errorf("link %+v: rel/target", l)
		}
	}
	if out.Strong != 1 || out.Em != 2 || out.Code != 2 || out.Pre != 1 || out.UL != 2 || out.Nested != 1 || out.OL != 1 || out.OLStart != "3" || out.Breaks != 1 || out.Quote != 1 {
		t.Errorf("rendered %+v", out)
	}
}

// textModel is an OpenAI-compatible model server: asked first, it streams some Markdown (with
// markup that must stay inert) and then calls refund with nested arguments; once the tool's result
// is in, it answers with two lines.
func textModel(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta any) {
			b, _ := json.Marshal(delta)
			apptest.SendChunk(w, string(b))
		}
		if body.Messages[len(body.Messages)-1].Role == "tool" {
			send(map[string]any{"role": "assistant", "content": "Refunded.\nThe receipt is on its way."})
		} else {
			send(map[string]any{"role": "assistant", "content": "I checked order 7: it arrived **damaged**. "})
			send(map[string]any{"content": "<img src=x onerror=\"window.__pwned = 1\">\n\n- refund `5` EUR\n- [policy](javascript:window.__pwned=2)"})
			args, _ := json.Marshal(map[string]any{"orderId": "7", "amount": 5, "customer": map[string]any{"name": "Ann", "tier": "gold"}, "items": []string{"mug", "plate"}})
			send(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "tc_1", "type": "function", "function": map[string]any{"name": "refund", "arguments": string(args)}}}})
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// TestConsoleRunShowsTheRequestReadably: the pending call shows its tool's description, what the
// agent said before asking (safe Markdown), the arguments as a table with the raw JSON behind a
// disclosure button; once approved, the tool's text result and the final answer show as text
// (two lines, not JSON-escaped), and the timeline groups the events by step, each with its time.
func TestConsoleRunShowsTheRequestReadably(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	model := textModel(t)
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"result": "Refund rf_7 issued.\nReceipt mailed."}`)
	}))
	t.Cleanup(tool.Close)
	file := apptest.WriteConfig(t, `
agents:
  - id: billing
    name: Billing assistant
    instructions: You are a careful billing assistant.
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [refund]
tools:
  - name: refund
    description: Refund an order to the customer's card.
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}, customer: {type: object}, items: {type: array}}, required: [orderId, amount]}
    requireApproval: true
    http: {url: `+tool.URL+`/refund, timeout: 5s}
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "readable.db"), "--config", file)
	run := s.StartRun(t, "refund order 7", map[string]any{"agentId": "billing"})
	s.WaitStatus(t, run.RunID, "SUSPENDED")
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
		until(`!!document.querySelector(".pending .said")`))
	if d := textOf(t, page, `.pending .tool-description`); d != "Refund an order to the customer's card." {
		t.Errorf("tool description %q", d)
	}
	var said struct {
		Text           string
		Strong, Images int
		Links          int
		Pwned          any
	}
	evalJSON(t, page, `(async () => {
		await new Promise((ok) => setTimeout(ok, 200));
		const s = document.querySelector(".pending .said");
		return JSON.stringify({ text: s.innerText, strong: s.querySelectorAll("strong").length, images: document.querySelectorAll("img").length,
			links: s.querySelectorAll("a").length, pwned: window.__pwned ?? null });
	})()`, &said)
	if !strings.Contains(said.Text, "I checked order 7: it arrived damaged.") || !strings.Contains(said.Text, "<img src=x") || said.Strong != 1 {
		t.Errorf("the agent's message: %+v", said)
	}
	if said.Images != 0 || said.Links != 0 || said.Pwned != nil {
		t.Fatalf("the agent's markup was made live: %+v", said)
	}

	var args struct {
		Rows           []string
		Expanded       string
		Controls       string
		RawVisible     bool
		NestedRows     int
		ToggleIsButton bool
	}
	const argsState = `JSON.stringify({
		rows: [...document.querySelectorAll(".pending .args > .args-table > tbody > tr")].map((tr) => tr.children[0].innerText + " | " + tr.children[1].innerText.replace(/\s+/g, " ")),
		expanded: document.querySelector(".pending .raw-toggle").getAttribute("aria-expanded"),
		controls: document.querySelector(".pending .raw-toggle").getAttribute("aria-controls"),
		rawVisible: !!document.querySelector(".pending pre.raw-json").offsetHeight,
		nestedRows: document.querySelectorAll(".pending .args-table.nested tr").length,
		toggleIsButton: document.querySelector(".pending .raw-toggle").tagName === "BUTTON",
	})`
	evalJSON(t, page, argsState, &args)
	want := []string{"amount | 5", "customer | name Ann tier gold", "items | mug, plate", "orderId | 7"}
	if fmt.Sprint(args.Rows) != fmt.Sprint(want) || args.NestedRows != 2 {
		t.Errorf("argument rows %q (nested %d), want %q", args.Rows, args.NestedRows, want)
	}
	if args.Expanded != "false" || args.RawVisible || !args.ToggleIsButton || args.Controls != "raw-tc_1" {
		t.Errorf("raw JSON before the click: %+v", args)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`.pending .raw-toggle`)))
	evalJSON(t, page, argsState, &args)
	if args.Expanded != "true" || !args.RawVisible {
		t.Errorf("raw JSON after the click: %+v", args)
	}
	if raw := textOf(t, page, `#raw-tc_1`); !strings.Contains(raw, `"tier": "gold"`) {
		t.Errorf("raw JSON %q", raw)
	}
	screenshot(t, page, "run-readable.png")

	do(t, page, chromedp.Click(chromedp.CSS(`button.approve`)),
		until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
		until(`!!document.querySelector('#stream li[data-type="RUN_FINISHED"]')`))
	if r := textOf(t, page, `#stream li[data-type="TOOL_RESULT"] .result-text`); r != "Refund rf_7 issued.\nReceipt mailed." {
		t.Errorf("the tool's text result shows as %q, want two lines", r)
	}
	if out := textOf(t, page, `#run-output .md`); out != "Refunded.\nThe receipt is on its way." {
		t.Errorf("the final answer shows as %q, want two lines", out)
	}
	var tl struct {
		Steps    []string
		Times    int
		Titled   bool
		Said     string
		Decision string
	}
	evalJSON(t, page, `JSON.stringify({
		steps: [...document.querySelectorAll("#stream .step-title")].map((h) => h.innerText),
		times: document.querySelectorAll("#stream li[data-type] time[datetime]").length,
		titled: [...document.querySelectorAll("#stream li[data-type] time")].every((t) => t.title && !isNaN(Date.parse(t.getAttribute("datetime")))),
		said: document.querySelector('#stream li[data-type="TEXT_DELTA"] .md')?.innerText || "",
		decision: document.querySelector('section[aria-label="Decisions"] li')?.innerText || "",
	})`, &tl)
	if len(tl.Steps) != 2 || !strings.HasPrefix(tl.Steps[0], "Step 1") || !strings.Contains(tl.Steps[0], "refund") || !strings.HasPrefix(tl.Steps[1], "Step 2") {
		t.Errorf("step headings %q", tl.Steps)
	}
	if tl.Times < 8 || !tl.Titled {
		t.Errorf("%d events carry a time (all titled: %v)", tl.Times, tl.Titled)
	}
	if !strings.Contains(tl.Said, "damaged") || strings.Contains(tl.Said, "**") {
		t.Errorf("the streamed text in the timeline is not rendered: %q", tl.Said)
	}
	if !strings.HasPrefix(tl.Decision, "Approved at ") || !strings.Contains(tl.Decision, "refund") {
		t.Errorf("decision %q", tl.Decision)
	}
}

// TestConsoleRunShowsTheThread: a run on a thread shows the thread's earlier messages, collapsed.
func TestConsoleRunShowsTheThread(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "thread.db"))
	first := s.StartRun(t, "hello there", map[string]any{"threadId": "t-ctx"})
	s.WaitStatus(t, first.RunID, "COMPLETED")
	run := s.StartRun(t, "refund order 43 for 30", map[string]any{"threadId": "t-ctx"})
	s.WaitStatus(t, run.RunID, "SUSPENDED")
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
		until(`!!document.querySelector("#thread-earlier")`))
	var th struct {
		Summary string
		Open    bool
		Text    string
	}
	const state = `JSON.stringify({ summary: document.querySelector("#thread-earlier summary").innerText,
		open: document.querySelector("#thread-earlier").open, text: document.querySelector("#thread-earlier").innerText })`
	evalJSON(t, page, state, &th)
	if th.Summary != "Earlier in this thread (2)" || th.Open {
		t.Fatalf("thread box %+v, want collapsed with 2 earlier messages", th)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`#thread-earlier summary`)))
	evalJSON(t, page, state, &th)
	if !th.Open || !strings.Contains(th.Text, "hello there") || !strings.Contains(th.Text, "Hello! I can look up") || strings.Contains(th.Text, "refund order 43") {
		t.Fatalf("opened thread box: %+v", th)
	}
	// A run without earlier messages shows no box.
	do(t, page, chromedp.Navigate(s.URL+"/?run="+first.RunID), until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
	if n := get(t, page, chromedp.Evaluate[int](`document.querySelectorAll("#thread-earlier").length`)); n != 0 {
		t.Errorf("the thread's first run shows %d earlier-messages boxes", n)
	}
}

// TestConsoleRunAccountability: with authentication on, the decisions say who decided and when;
// the loser of a race is told who won and when; a half-written decline reason made unsendable by
// someone else's decision is shown with a Copy button.
func TestConsoleRunAccountability(t *testing.T) {
	t.Parallel()
	ctx := browser(t)

	t.Run("the admin token: who decided, when", func(t *testing.T) {
		s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "who.db"), "--auth=on")
		admin := s.App.AdminToken
		run := s.SuspendAs(t, admin, "refund order 42 for 30", nil)
		page := tab(t, ctx, true)
		do(t, page, chromedp.Navigate(s.URL+"/#token="+admin), until(`document.querySelectorAll("a[data-run]").length === 1`),
			chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
			chromedp.Click(chromedp.CSS(`button.approve`)),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
			until(`!!document.querySelector('section[aria-label="Decisions"] li time')`))
		var d struct{ Text, Datetime, Title string }
		evalJSON(t, page, `(() => { const li = document.querySelector('section[aria-label="Decisions"] li'), t = li.querySelector("time");
			return JSON.stringify({ text: li.innerText, datetime: t.getAttribute("datetime"), title: t.title }); })()`, &d)
		ds := decisionsAs(t, s, admin, run.RunID)
		if !strings.HasPrefix(d.Text, "Approved by admin at ") || len(ds) != 1 || d.Datetime != ds[0]["decidedAt"] || d.Title == "" {
			t.Fatalf("decision shown %+v, recorded %v", d, ds)
		}
		if txt := strings.ToLower(textOf(t, page, `#stream`)); !strings.Contains(txt, "approved") || !strings.Contains(txt, "by admin") {
			t.Errorf("the timeline does not say who approved: %q", txt)
		}
	})

	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "race.db"), "")

	t.Run("the race loser is told who decided and when", func(t *testing.T) {
		run := s.SuspendAs(t, apptest.TokenOf("root"), "refund order 42 for 30", nil)
		gate := newSocketGate(s.App.Handler()) // the page hears of nothing: it still shows the call
		url := serve(t, gate)
		t.Cleanup(gate.release)
		page := tab(t, ctx, true)
		do(t, page, chromedp.Navigate(url+"/?run="+run.RunID+"#token="+apptest.TokenOf("bob")), chromedp.WaitVisible(chromedp.CSS(`button.approve`)))
		s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, nil)
		do(t, page, chromedp.Click(chromedp.CSS(`button.approve`)),
			until(`document.querySelector('[role="alert"] .notice')?.innerText.includes("alice approved this at")`),
			until(`!document.querySelector("button.approve")`))
		var n struct{ Text, Datetime string }
		evalJSON(t, page, `(() => { const p = document.querySelector('[role="alert"] .notice');
			return JSON.stringify({ text: p.innerText, datetime: p.querySelector("time")?.getAttribute("datetime") || "" }); })()`, &n)
		ds := decisionsAs(t, s, apptest.TokenOf("root"), run.RunID)
		if !strings.HasPrefix(n.Text, "Someone else decided first: alice approved this at ") || len(ds) != 1 || n.Datetime != ds[0]["decidedAt"] {
			t.Fatalf("notice %+v, decisions %v", n, ds)
		}
	})

	t.Run("a half-written reason lost to someone else's decision can be copied", func(t *testing.T) {
		run := s.SuspendAs(t, apptest.TokenOf("root"), "refund order 43 for 30", nil)
		page := tab(t, ctx, true)
		const typed = "the receipt is missing, ask for"
		do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID+"#token="+apptest.TokenOf("bob")), chromedp.WaitVisible(chromedp.CSS(`button.decline`)),
			chromedp.SendKeys(chromedp.CSS(`#reason-tc_1`), typed))
		s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { declineToolCall(runId: $id, reason: "no") { status } }`, map[string]any{"id": run.RunID}, nil)
		do(t, page, until(`!!document.querySelector(".lost textarea")`))
		var lost struct {
			Value, Label, Notice string
			ReadOnly             bool
		}
		evalJSON(t, page, `(() => { const a = document.querySelector(".lost textarea");
			return JSON.stringify({ value: a.value, readOnly: a.readOnly, label: a.labels[0]?.innerText || "",
				notice: document.querySelector('[role="alert"] .notice')?.innerText || "" }); })()`, &lost)
		if lost.Value != typed || !lost.ReadOnly || !strings.Contains(lost.Label, "was not sent") {
			t.Fatalf("lost text %+v", lost)
		}
		if !strings.Contains(lost.Notice, "alice declined this at") || !strings.Contains(lost.Notice, "“no”") {
			t.Errorf("notice %q", lost.Notice)
		}
		do(t, page, chromedp.Click(chromedp.CSS(`.lost button.copy`)),
			until(`/Copied|Selected/.test(document.querySelector(".lost .copy-status").textContent)`))
		if ds := decisionsAs(t, s, apptest.TokenOf("root"), run.RunID); len(ds) != 1 || ds[0]["decidedBy"] != "alice" {
			t.Fatalf("decisions %v", ds)
		}
	})
}

// TestConsoleRunClearsAStaleNotice: a supervisor's run shows its sub-agent's two refunds one
// after the other, under the same delegate call id; after approving the first, "Decision sent"
// goes once the second waits; after the last, it says the run has finished.
func TestConsoleRunClearsAStaleNotice(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "stale.db"))
	run := s.StartRun(t, "refund orders 7 and 8", map[string]any{"agentId": "supervisor"})
	s.WaitStatus(t, run.RunID, "SUSPENDED")
	page := tab(t, ctx, false)
	order := func(n string) string {
		return `/"orderId":\s*"` + n + `"/.test(document.querySelector(".pending pre.raw-json")?.textContent || "")`
	}
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(`.pending button.approve`)),
		until(order("7")), chromedp.Click(chromedp.CSS(`button.approve`)),
		until(`!!document.querySelector(".pending button.approve:not(:disabled)") && `+order("8")))
	// Give a late answer to the first approval the time to (wrongly) say it was sent.
	do(t, page, js(`new Promise((ok) => setTimeout(ok, 300))`))
	if body := bodyText(t, page); strings.Contains(body, "Decision sent") {
		t.Fatalf("the next call waits and the page still says the decision was sent:\n%s", body)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`button.approve`)),
		until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
		until(`document.body.innerText.includes("Decision sent. The run has finished")`))
	if body := bodyText(t, page); strings.Contains(body, "goes on below") {
		t.Fatalf("a finished run still says it goes on:\n%s", body)
	}
}

// TestConsoleRunSeveralCalls: a run waiting on two approvals shows both; approving the first
// from the keyboard keeps the view on the run, says one more call waits, and focuses the second
// call's Approve; approving that one resumes the run.
func TestConsoleRunSeveralCalls(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "calls.db"))
	run := suspended(t, s, "refund orders 7 and 8")
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID),
		chromedp.WaitVisible(chromedp.CSS(`.pending[data-call="tc_2"] button.approve`)),
		chromedp.Focus(chromedp.CSS(`.pending[data-call="tc_1"] button.approve`)), key("a"),
		until(`!document.querySelector('.pending[data-call="tc_1"]') && document.activeElement?.matches('.pending[data-call="tc_2"] button.approve')`),
		until(`document.body.innerText.includes("1 more call waits for you")`))
	if r := s.Run(t, run.RunID); r.Status != "SUSPENDED" || len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolCallID != "tc_2" {
		t.Fatalf("after the first approval the run is %s waiting on %+v", r.Status, r.ToolCalls)
	}
	if loc := get(t, page, chromedp.Evaluate[string](`location.search`)); loc != "?run="+run.RunID {
		t.Fatalf("the view moved to %q while the run still waits", loc)
	}
	do(t, page, key("a"))
	s.WaitStatus(t, run.RunID, "COMPLETED")
	if ds := decisions(t, s, run.RunID); len(ds) != 2 {
		t.Fatalf("decisions: %v, want two", ds)
	}
}

// TestConsoleRunResumeFormErrors: an answer of only spaces is refused on the field, in plain
// words, with aria-invalid and aria-describedby; the error goes as it is corrected.
func TestConsoleRunResumeFormErrors(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "resume.db"))
	run := suspended(t, s, "ask the customer for their size")
	page := tab(t, ctx, false)
	const field = `#resume-tc_1-answer`
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(field)),
		chromedp.SendKeys(chromedp.CSS(field), "   "), chromedp.Click(chromedp.CSS(`.pending button[type=submit]`)),
		until(`document.querySelector("`+field+`").getAttribute("aria-invalid") === "true"`))
	var st struct {
		Described, Error string
		Focused          bool
	}
	const state = `(() => { const f = document.querySelector("` + field + `"); const id = f.getAttribute("aria-describedby");
		return JSON.stringify({ described: id, error: document.getElementById(id)?.textContent || "", focused: document.activeElement === f }); })()`
	evalJSON(t, page, state, &st)
	if st.Described != "resume-tc_1-answer-error" || st.Error != "Enter an answer" || !st.Focused {
		t.Fatalf("field after refusing spaces: %+v", st)
	}
	if r := s.Run(t, run.RunID); r.Status != "SUSPENDED" {
		t.Fatalf("spaces were sent: the run is %s", r.Status)
	}
	do(t, page, chromedp.SendKeys(chromedp.CSS(field), "M"),
		until(`!document.querySelector("`+field+`").hasAttribute("aria-invalid")`))
	evalJSON(t, page, state, &st)
	if st.Error != "" {
		t.Fatalf("the error stays once corrected: %+v", st)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`.pending button[type=submit]`)),
		until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
		until(`document.querySelector('section[aria-label="Decisions"]')?.innerText.includes("Resumed at")`))

	// The form's checks, one by one.
	var msgs map[string]string
	evalJSON(t, page, `(async () => {
		const { schemaForm } = await import("/js/schemaform.js");
		const f = schemaForm({ type: "object", required: ["size", "count"], properties: {
			size: { enum: ["S", "M", "L"] }, count: { type: "integer", minimum: 1 },
			note: { type: "string", minLength: 1 }, code: { type: "string", pattern: "^[A-Z]{3}$" }, shoeSize: { type: "number", maximum: 50 },
		} }, "x");
		document.body.append(f.node);
		const set = (id, v) => { document.getElementById(id).value = v; };
		set("x-count", "0"); set("x-note", "  "); set("x-code", "ab"); set("x-shoeSize", "51");
		const ok = f.check();
		const out = { ok: String(ok) };
		for (const n of ["size", "count", "note", "code", "shoeSize"]) out[n] = document.getElementById("x-" + n + "-error").textContent;
		return JSON.stringify(out);
	})()`, &msgs)
	want := map[string]string{"ok": "false", "size": "Must be one of: S, M, L", "count": "Must be at least 1", "note": "Enter a note",
		"code": "Must match the pattern ^[A-Z]{3}$", "shoeSize": "Must be at most 50"}
	if fmt.Sprint(msgs) != fmt.Sprint(want) {
		t.Errorf("form messages %v, want %v", msgs, want)
	}
}
