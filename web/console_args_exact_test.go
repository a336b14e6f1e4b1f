package web_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleEditNeverRewritesWhatItCannotHold: what a person approves is what runs, also where
// the browser cannot hold the arguments exactly. A request whose arguments hold an integer past
// 2^53 (which the browser reads rounded) is shown with a warning; approved from "Edit and
// approve" unchanged it is a plain approval (the review shows no rounded JSON as what runs, and
// the decision has no edited arguments, so the request runs with the asker's digits). Changed,
// it is refused with a message and nothing is sent.
func TestConsoleEditNeverRewritesWhatItCannotHold(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "exact.db"), "--auth=on", "--config", externalConsoleConfig(t))
	const args = `{"account":12345678901234567890,"service":"checkout"}`
	ask := func() string {
		return requestApprovalAs(s, t, apptest.TokenOf("cc"), map[string]any{"agentId": "coding", "toolName": "deploy", "args": json.RawMessage(args)})
	}
	type decision struct {
		Kind             string
		Args, EditedArgs json.RawMessage
	}
	decisions := func(id string) []decision {
		var out struct {
			Run struct{ Decisions []decision }
		}
		s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { decisions { kind args editedArgs } } }`, map[string]any{"id": id}, &out)
		return out.Run.Decisions
	}
	const f = `.pending details.edit`

	unchanged := ask()
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/?run="+unchanged+"#token="+apptest.TokenOf("alice")),
		until(`document.querySelector("#whoami")?.textContent.includes("alice") && !!document.querySelector(".pending .inexact-number")`),
		chromedp.Click(chromedp.CSS(f+` summary`)), until(`document.querySelector("`+f+`").open`),
		chromedp.Click(chromedp.CSS(f+` button[type=submit]`)), until(`!document.querySelector("`+f+` .args-review-box").hidden`))
	if txt := textOf(t, page, f+` .args-review-box`); !strings.Contains(txt, "No changes") || !strings.Contains(txt, "as they were asked") || strings.Contains(txt, "12345678901234567000") {
		t.Fatalf("the review of unchanged arguments: %q; want no changes, run as asked, and no rounded number as what runs", txt)
	}
	do(t, page, chromedp.Click(chromedp.CSS(f+` button.final`)), until(`document.querySelector("#run-status")?.textContent !== "SUSPENDED"`))
	d := decisions(unchanged)
	if len(d) != 1 || d[0].Kind != "APPROVED" || string(d[0].Args) != args || (len(d[0].EditedArgs) != 0 && string(d[0].EditedArgs) != "null") {
		t.Fatalf("decisions %+v: want one approval of %s without edited arguments", d, args)
	}

	changed := ask()
	do(t, page, chromedp.Navigate(s.URL+"/?run="+changed), until(`!!document.querySelector(".pending .inexact-number")`),
		chromedp.Click(chromedp.CSS(f+` summary`)), until(`document.querySelector("`+f+`").open`),
		js(`document.querySelector("`+f+` .args-raw textarea").value = '{"account": 12345678901234567890, "service": "billing"}'`),
		chromedp.Click(chromedp.CSS(f+` button[type=submit]`)),
		until(`document.querySelector("`+f+` .form-error").textContent.includes("past 2^53")`))
	if hidden := get(t, page, chromedp.Evaluate[bool](`document.querySelector("`+f+` .args-review-box").hidden`)); !hidden {
		t.Fatal("the review opened for arguments the console cannot send exactly")
	}
	if d := decisions(changed); len(d) != 0 {
		t.Fatalf("decisions %+v after a refused edit: want none", d)
	}
}

// TestConsoleFormKeepsLineBreaks: a string argument with line breaks is edited in a textarea
// (a text field would join its lines); arguments with a carriage return are edited as JSON (a
// textarea turns CR LF into LF). Read back untouched, each gives the values it was given.
func TestConsoleFormKeepsLineBreaks(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "lines.db"))
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.readyState === "complete"`))
	got := get(t, page, chromedp.Evaluate[map[string]any](`(async () => {
		const { argsEditor } = await import("/js/argsform.js");
		const schema = { type: "object", properties: { sql: { type: "string" }, name: { type: "string" } } };
		const args = { name: "one line", sql: "SELECT 1;\nDROP TABLE t;" }; // keys as the form reads them back: sorted
		const ed = argsEditor(schema, args, "lines");
		document.body.append(ed.node);
		const withCR = { sql: "a\r\nb", name: "x" }; // U+000D is a hidden character: JSON, where it shows as \r
		const cr = argsEditor(schema, withCR, "cr");
		document.body.append(cr.node);
		const tag = (id) => document.getElementById(id)?.tagName;
		return { lines: JSON.stringify(ed.read().args) === JSON.stringify(args), cr: JSON.stringify(cr.read().args) === JSON.stringify(withCR),
			sql: tag("lines-f-sql"), name: tag("lines-f-name"), crForm: tag("cr-f-sql") || "none" };
	})()`, chromedp.EvalAwaitPromise))
	if got["lines"] != true || got["cr"] != true || got["sql"] != "TEXTAREA" || got["name"] != "INPUT" || got["crForm"] != "none" {
		t.Fatalf("the form of multi-line strings [same read back, same with CR, sql field, name field, CR in a form]: %v", got)
	}
}

// TestConsoleRunViewKeyNeverApprovesAnInterruptedCall: `a` in a run view waiting on an
// interrupted call (its tool may have run; approving runs it again) approves nothing and says
// why; the Approve button stays for a deliberate click.
func TestConsoleRunViewKeyNeverApprovesAnInterruptedCall(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interrupted-key.db"))
	deskInterrupted(t, s, "run-interrupted")
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/?run=run-interrupted"), chromedp.WaitVisible(chromedp.CSS(`.pending[data-interrupted="true"] button.approve`)),
		js(`document.activeElement?.blur()`), chromedp.KeyEvent("a"),
		until(`[...document.querySelectorAll(".notice.held")].some((n) => n.textContent.includes("interrupted"))`))
	if r := s.Run(t, "run-interrupted"); r.Status != "SUSPENDED" {
		t.Fatalf("after a on an interrupted call the run is %s, want SUSPENDED", r.Status)
	}
}
