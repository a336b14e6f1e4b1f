package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"interlock/gormstore"
	"interlock/internal/apptest"
	"interlock/runtype"
)

// The desk tests (issue 37 §1): a person approving all day, signed in, beside other approvers.

// deskStartRuns starts n runs of the support agent as token's principal, each waiting on one
// refund (or as prompt says, %d standing for the run's number), pacing itself when the
// principal is over its mutation rate, and returns their ids once all wait.
func deskStartRuns(t *testing.T, s *apptest.Server, token string, n int, prompt string) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := 0; len(ids) < n; i++ {
		r := s.PostAs(t, token, `mutation($i: StartRunInput!) { startRun(input: $i) { runId } }`,
			map[string]any{"i": map[string]any{"agentId": "support-agent", "prompt": fmt.Sprintf(prompt, i+1)}})
		if r.Code == "RATE_LIMITED" {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if r.Code != "" {
			t.Fatalf("startRun: %s %s", r.Code, r.Msg)
		}
		var out struct{ StartRun struct{ RunID string } }
		json.Unmarshal(r.Data, &out)
		ids = append(ids, out.StartRun.RunID)
	}
	for _, id := range ids {
		deskWait(t, s, id, "SUSPENDED")
	}
	return ids
}

// deskStatus is the status of run id, read as root.
func deskStatus(t *testing.T, s *apptest.Server, id string) string {
	t.Helper()
	var out struct{ Run struct{ Status string } }
	s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { status } }`, map[string]any{"id": id}, &out)
	return out.Run.Status
}

func deskWait(t *testing.T, s *apptest.Server, id, status string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for deskStatus(t, s, id) != status {
		if time.Now().After(deadline) {
			t.Fatalf("run %s is not %s", id, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deskInterrupted stores a run of the support agent whose instance died while its refund ran
// (its lease long expired), and recovers it: it waits again on an interrupted call.
func deskInterrupted(t *testing.T, s *apptest.Server, id string) {
	t.Helper()
	db := s.App.DB()
	past := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	owner := "gone/1"
	snap := `{"messages":[{"role":"user","content":"refund order 5 for 5"},{"role":"assistant","toolCalls":[{"id":"call_1","name":"issue_refund","args":{"orderId":"5","amount":5}}]}],` +
		`"pending":[{"id":"call_1","serverId":"tc_1","name":"issue_refund","args":{"orderId":"5","amount":5},"state":"executing"}],"steps":0,"callIds":1,"seq":2}`
	row := gormstore.Run{ID: id, AgentID: "support-agent", Prompt: "refund order 5 for 5", Status: string(runtype.StatusRunning),
		Snapshot: &snap, CreatedAt: past, UpdatedAt: past, LastSeq: 2, LeaseOwner: &owner, LeaseUntil: &past}
	if err := db.Create(&row).Error; err != nil {
		t.Fatal(err)
	}
	call, _ := json.Marshal(runtype.Event{ToolCall: &runtype.ToolCall{ToolCallID: "tc_1", ToolName: "issue_refund", Args: json.RawMessage(`{"orderId":"5","amount":5}`)}})
	for _, ev := range []gormstore.Event{
		{RunID: id, Seq: 1, Type: string(runtype.EventRunStarted), Data: `{"status":"RUNNING"}`, CreatedAt: past},
		{RunID: id, Seq: 2, Type: string(runtype.EventToolCallRequested), Data: string(call), CreatedAt: past},
	} {
		if err := db.Create(&ev).Error; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.App.Service.RecoverExpired(runtype.WithSystem(context.Background())); err != nil {
		t.Fatal(err)
	}
	deskWait(t, s, id, "SUSPENDED")
}

// deskSpy records, in the page, every decideToolCalls request's items (window.__batches) and
// fails the next one as a dropped connection when window.__failNext is set.
const deskSpy = `
	window.__batches = [];
	const realFetch = window.fetch;
	window.fetch = async (url, init) => {
		const body = init && init.body ? JSON.parse(init.body) : {};
		if (body.query && body.query.includes("decideToolCalls")) {
			window.__batches.push(body.variables.d);
			if (window.__failNext) { window.__failNext = false; throw new TypeError("Failed to fetch"); }
		}
		return realFetch(url, init);
	};`

// TestConsoleDeskBulk: alice, at the default mutation rate, ticks all 200 runs waiting (an
// interrupted one cannot be ticked), bob decides 20 of them first, and "Approve 200" sends one
// decideToolCalls of 200 items: 180 approved, 20 named as decided by bob, nothing failed (no
// rate limit), the interrupted run still waits. Then a batch whose request is lost reports each
// item failed, and "Retry the 3 failed" sends those again and approves them.
func TestConsoleDeskBulk(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "desk-bulk.db"), "")
	ids := deskStartRuns(t, s, apptest.TokenOf("root"), 200, "refund order %d for 5")
	deskInterrupted(t, s, "run-interrupted")
	page := tab(t, ctx, true)
	if _, err := chromedp.Call(page, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: deskSpy}); err != nil {
		t.Fatal(err)
	}
	do(t, page, chromedp.Navigate(s.URL+"/?perPage=300#token="+apptest.TokenOf("alice")),
		until(`document.querySelectorAll("#inbox-list a.row").length === 201`))
	box := get(t, page, chromedp.Evaluate[string](`(() => { const b = document.getElementById("pick-run-interrupted");
		return b.disabled + "|" + document.getElementById(b.getAttribute("aria-describedby"))?.textContent; })()`))
	if box != "true|interrupted: open it to decide" {
		t.Fatalf("the interrupted run's box [disabled, note] = %s", box)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`#pick-all`)), until(`!document.querySelector("#bulk").hidden`))
	if txt := textOf(t, page, `#bulk-approve`); txt != "Approve 200" {
		t.Fatalf("bulk button %q, want Approve 200", txt)
	}
	elsewhere := []string{}
	for i := 3; i < 200; i += 10 {
		s.MustAs(t, apptest.TokenOf("bob"), `mutation($id: ID!) { approveToolCall(runId: $id, toolCallId: "tc_1") { status } }`, map[string]any{"id": ids[i]}, nil)
		elsewhere = append(elsewhere, ids[i])
	}
	// 200 decisions, each a transaction, and 180 runs going on: on a loaded machine this takes
	// longer than until's 20 s.
	do(t, page, chromedp.Click(chromedp.CSS(`#bulk-approve`)))
	if _, err := chromedp.Run(page, chromedp.Poll[bool](`document.querySelector("#bulk-result").innerText.includes("approved.")`, chromedp.WithPollingTimeout(3*time.Minute))); err != nil {
		t.Fatalf("the bulk approval's report: %v", err)
	}
	summary := textOf(t, page, `#bulk-result .bulk-summary`)
	if !strings.Contains(summary, "180 approved.") || !strings.Contains(summary, "20 decided by someone else first") || strings.Contains(summary, "failed") {
		t.Fatalf("bulk summary %q", summary)
	}
	var batches [][]map[string]any
	if err := json.Unmarshal([]byte(get(t, page, chromedp.Evaluate[string](`JSON.stringify(window.__batches)`))), &batches); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || len(batches[0]) != 200 {
		t.Fatalf("%d requests sent, the first of %d items; want one of 200", len(batches), len(batches[0]))
	}
	for _, it := range batches[0] {
		if it["runId"] == "run-interrupted" || it["kind"] != "APPROVE" || it["toolCallId"] != "tc_1" {
			t.Fatalf("item sent: %v", it)
		}
	}
	named := get(t, page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#bulk-result .bulk-conflicts li")].map((li) => li.dataset.run)`))
	slices.Sort(named)
	slices.Sort(elsewhere)
	if !slices.Equal(named, elsewhere) {
		t.Fatalf("named as decided by someone else: %v, want %v", named, elsewhere)
	}
	if txt := textOf(t, page, `#bulk-result .bulk-conflicts`); strings.Count(txt, "already approved by bob at") != 20 {
		t.Fatalf("the conflicts do not each name bob: %q", txt)
	}
	if st := deskStatus(t, s, "run-interrupted"); st != "SUSPENDED" {
		t.Fatalf("the interrupted run is %s after the bulk approval", st)
	}
	for _, id := range ids {
		if st := deskStatus(t, s, id); st == "SUSPENDED" {
			t.Fatalf("run %s still waits", id)
		}
	}

	t.Run("a lost request: its items are said failed and retried", func(t *testing.T) {
		more := deskStartRuns(t, s, apptest.TokenOf("root"), 3, "refund order 90%d for 5")
		do(t, page, until(`document.querySelectorAll("#inbox-list a.row").length === 4`), js(`window.__failNext = true`),
			chromedp.Click(chromedp.CSS(`#pick-all`)), until(`document.querySelector("#bulk-approve")?.textContent === "Approve 3"`),
			chromedp.Click(chromedp.CSS(`#bulk-approve`)), until(`document.querySelector("#bulk-result .bulk-summary")?.innerText.includes("3 failed")`))
		if txt := textOf(t, page, `#bulk-retry`); txt != "Retry the 3 failed" {
			t.Fatalf("retry button %q", txt)
		}
		do(t, page, chromedp.Click(chromedp.CSS(`#bulk-retry`)), until(`document.querySelector("#bulk-result .bulk-summary")?.innerText.includes("3 approved.")`))
		if txt := textOf(t, page, `#bulk-result`); strings.Contains(txt, "failed") {
			t.Fatalf("after the retry: %q", txt)
		}
		for _, id := range more {
			if st := deskStatus(t, s, id); st == "SUSPENDED" {
				t.Fatalf("run %s still waits after the retry", id)
			}
		}
	})
}

// TestConsoleDeskShortcuts: opening a run that waits for an answer from the keyboard focuses no
// field, so the keys r, M, Enter answer "M" (r goes to the field; it typed "rM" before);
// and a shortcut never types its own letter into the field it focuses: d then "no" declines
// with "no", e then nothing leaves the editor's arguments as they were.
func TestConsoleDeskShortcuts(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "desk-keys.db"))

	t.Run("r, M, Enter after opening an answer's run", func(t *testing.T) {
		id := suspended(t, s, "ask the customer for their shoe size").RunID
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 1`),
			key("j"), key(kb.Enter), until(fmt.Sprintf(`location.search === "?run=%s"`, id)),
			until(`!!document.querySelector("#resume-tc_1-answer")`), until(`document.activeElement?.matches(".pending")`))
		do(t, page, key("r"), until(`document.activeElement?.id === "resume-tc_1-answer"`), key("M"), key(kb.Enter))
		s.WaitStatus(t, id, "COMPLETED")
		if ds := decisions(t, s, id); len(ds) != 1 || fmt.Sprint(ds[0]["resumeData"]) != "map[answer:M]" {
			t.Fatalf("answer sent: %v, want M", ds)
		}
	})

	t.Run("d and e type nothing into what they focus", func(t *testing.T) {
		id := suspended(t, s, "refund order 71 for 5").RunID
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 1`),
			key("j"), key(kb.Enter), until(`document.activeElement?.matches(".pending button.approve")`),
			key("e"), until(`document.activeElement?.matches(".pending details.edit :is(input, select, textarea)")`))
		// The form's first field holds an argument as the model gave it (amount 5 or order 71).
		edited := get(t, page, chromedp.Evaluate[bool](`!["5", "71"].includes(document.activeElement.value)`))
		if edited {
			t.Fatal("e typed its letter into the arguments editor")
		}
		do(t, page, js(`document.activeElement.blur()`), key("d"), until(`document.activeElement?.id === "reason-tc_1"`), key("no"), key(kb.Enter))
		s.WaitStatus(t, id, "COMPLETED")
		if ds := decisions(t, s, id); len(ds) != 1 || ds[0]["kind"] != "DECLINED" || ds[0]["reason"] != "no" {
			t.Fatalf("decision: %v, want declined with reason no", ds)
		}
	})
}

// TestConsoleDeskDecidedElsewhere: a run waits on two calls; while alice looks at it, bob
// approves the first in another browser: its card leaves alice's page at once (no Approve left
// for it) and the notice says bob approved it, while the second call's Approve and Decline stay
// enabled. Then bob declines the second: the notice names both calls, each with its own
// decision.
func TestConsoleDeskDecidedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "desk-elsewhere.db"), "")
	id := deskStartRuns(t, s, apptest.TokenOf("root"), 1, "refund orders 3%d and 32 for 5")[0]
	alice := tab(t, ctx, true)
	do(t, alice, chromedp.Navigate(s.URL+"/?run="+id+"#token="+apptest.TokenOf("alice")),
		until(`document.querySelectorAll(".pending[data-call]").length === 2`))
	bob := tab(t, ctx, true)
	do(t, bob, chromedp.Navigate(s.URL+"/?run="+id+"#token="+apptest.TokenOf("bob")),
		until(`document.querySelectorAll(".pending[data-call]").length === 2`),
		chromedp.Click(chromedp.CSS(`.pending[data-call="tc_1"] button.approve`)),
		until(`!document.querySelector('.pending[data-call="tc_1"]')`))
	do(t, alice, until(`!document.querySelector('.pending[data-call="tc_1"]')`),
		until(`document.querySelector('[role="alert"]')?.innerText.includes("bob approved this at")`))
	if state := get(t, alice, chromedp.Evaluate[string](`[...document.querySelectorAll('.pending[data-call="tc_2"] > .actions > :is(button.approve, button.decline)')].map((b) => b.disabled).join(",")`)); state != "false,false" {
		t.Fatalf("the call still waiting has Approve, Decline disabled = %q", state)
	}
	do(t, bob, chromedp.SendKeys(chromedp.CSS(`#reason-tc_2`), "too much"), chromedp.Click(chromedp.CSS(`.pending[data-call="tc_2"] button.decline`)))
	do(t, alice, until(`document.querySelectorAll('[role="alert"] .lost-calls li').length === 2`), until(`!document.querySelector(".pending")`))
	calls := get(t, alice, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[role="alert"] .lost-calls li')].map((li) => li.dataset.call + ": " + li.innerText)`))
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "tc_1: ") || !strings.Contains(calls[0], "bob approved this at") ||
		!strings.HasPrefix(calls[1], "tc_2: ") || !strings.Contains(calls[1], "bob declined this at") || !strings.Contains(calls[1], "too much") {
		t.Fatalf("the notice of the calls decided elsewhere: %q", calls)
	}
}

// TestConsoleDeskViewer: vera (viewer) sees what waits, read-only: the inbox has no ticks, no
// "select all", no "Approve all" and no bulk bar; the run view has no Approve, Decline, Edit or
// Resume; a note says why; a and x do nothing. alice (approver) sees them all.
func TestConsoleDeskViewer(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "desk-viewer.db"), "")
	id := deskStartRuns(t, s, apptest.TokenOf("root"), 1, "refund orders 4%d and 42 for 5")[0]
	ask := deskStartRuns(t, s, apptest.TokenOf("root"), 1, "ask the customer for their size %d")[0]
	visible := func(page context.Context, sel string) int {
		return get(t, page, chromedp.Evaluate[int](fmt.Sprintf(`[...document.querySelectorAll(%q)].filter((n) => n.getClientRects().length > 0).length`, sel)))
	}
	controls := []string{"#inbox-list input.pick", "#pick-all", "#inbox-list button.approve-all"}
	runControls := []string{".pending button.approve", ".pending button.decline", ".pending details.edit", `.pending form[aria-label="Resume"]`, `.pending input[id^="reason-"]`}

	vera := tab(t, ctx, true)
	do(t, vera, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("vera")), until(`document.querySelectorAll("#inbox-list a.row").length === 2`),
		until(`!!document.querySelector("#readonly-note")`))
	if note := textOf(t, vera, `#readonly-note`); !strings.Contains(note, "vera") || !strings.Contains(note, "approver role") {
		t.Fatalf("read-only note %q", note)
	}
	for _, sel := range controls {
		if n := visible(vera, sel); n != 0 {
			t.Errorf("the viewer sees %d of %s", n, sel)
		}
	}
	do(t, vera, key("j"), key("x"))
	if n := visible(vera, "#bulk"); n != 0 {
		t.Error("x showed the bulk bar to the viewer")
	}
	for _, run := range []string{id, ask} {
		do(t, vera, chromedp.Navigate(s.URL+"/?run="+run), until(`document.querySelectorAll(".pending").length > 0`), until(`!!document.querySelector("#readonly-note")`))
		for _, sel := range runControls {
			if n := visible(vera, sel); n != 0 {
				t.Errorf("run %s: the viewer sees %d of %s", run, n, sel)
			}
		}
	}
	do(t, vera, chromedp.Navigate(s.URL+"/?run="+id), until(`document.querySelectorAll(".pending").length === 2`), until(`!!document.querySelector("#readonly-note")`), key("a"))
	time.Sleep(300 * time.Millisecond) // a would have sent its approval by now
	if st := deskStatus(t, s, id); st != "SUSPENDED" {
		t.Fatalf("a on the viewer's run view left the run %s", st)
	}

	alice := tab(t, ctx, true)
	do(t, alice, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")), until(`document.querySelectorAll("#inbox-list a.row").length === 2`))
	for _, sel := range controls {
		if n := visible(alice, sel); n == 0 {
			t.Errorf("the approver sees no %s", sel)
		}
	}
	if n := visible(alice, "#readonly-note"); n != 0 {
		t.Error("the approver is told the desk is read-only")
	}
	do(t, alice, chromedp.Navigate(s.URL+"/?run="+id), until(`document.querySelectorAll(".pending > .actions > button.approve").length === 2`))
}

// TestConsoleDeskSubAgents: New run offers the first agent that is no supervisor (the demo's
// supervisor sorts first); History shows a supervisor's finished run with its sub-agent's run
// under it, not as a row of its own, linked both ways; the Decided by filter finds "ALI" in
// alice, whatever the case.
func TestConsoleDeskSubAgents(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "desk-sub.db"), "")
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/?view=new#token="+apptest.TokenOf("root")), until(`document.querySelectorAll("#n-agent option").length === 2`))
	if v := get(t, page, chromedp.Evaluate[string](`document.querySelector("#n-agent").value + "|" + document.querySelector("#n-agent option").value`)); v != "support-agent|supervisor" {
		t.Fatalf("New run's agent [chosen, first listed] = %s, want support-agent first chosen", v)
	}
	var started struct{ StartRun struct{ RunID string } }
	s.MustAs(t, apptest.TokenOf("root"), `mutation { startRun(input: {agentId: "supervisor", prompt: "refund order 7 for 5"}) { runId } }`, nil, &started)
	sup := started.StartRun.RunID
	deskWait(t, s, sup, "SUSPENDED")
	s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": sup}, nil)
	deskWait(t, s, sup, "COMPLETED")
	do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(`document.querySelectorAll("a.row").length === 2`))
	shape := get(t, page, chromedp.Evaluate[string](`(() => {
		const top = [...document.querySelectorAll("ul.history > li")];
		const sub = document.querySelectorAll("ul.history > li > ul.sub-runs > li");
		return top.length + "|" + (top[0]?.dataset.run) + "|" + sub.length + "|" + (sub[0]?.querySelector(".sub-of a")?.getAttribute("href"));
	})()`))
	if want := fmt.Sprintf("1|%s|1|/?run=%s", sup, sup); shape != want {
		t.Fatalf("History [top rows, first, sub-runs under it, their supervisor link] = %s, want %s", shape, want)
	}
	do(t, page, chromedp.Navigate(s.URL+"/?view=history&decidedBy=ALI"), until(`document.querySelectorAll("a.row").length >= 1 || !!document.querySelector("#history-empty")`))
	if n := get(t, page, chromedp.Evaluate[int](`document.querySelectorAll("a.row").length`)); n == 0 {
		t.Fatal("Decided by ALI finds none of alice's decisions")
	}
}

// TestConsoleDeskExternal: an external agent's request shows its context's first line in its
// inbox row (Markdown marks dropped), and its run view has no "Step" headings: one call, no
// agent steps.
func TestConsoleDeskExternal(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "desk-external.db"), "--auth=on", "--config", externalConsoleConfig(t))
	id := requestApprovalAs(s, t, apptest.TokenOf("cc"), map[string]any{"agentId": "coding", "toolName": "deploy",
		"args": map[string]any{"service": "checkout"}, "context": "\n## Deploy checkout v2 to production\n\nRuns `make deploy`."})
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")), until(`document.querySelectorAll("#inbox-list a.row").length === 1`))
	if line := textOf(t, page, `#inbox-list a.row .context-line`); line != "Deploy checkout v2 to production" {
		t.Fatalf("the row's context line %q", line)
	}
	do(t, page, chromedp.Navigate(s.URL+"/?run="+id), until(`document.querySelectorAll("#stream li").length > 0 && !!document.querySelector("#stream.one-call")`))
	if n := get(t, page, chromedp.Evaluate[int](`[...document.querySelectorAll("#stream .step-title")].filter((n) => n.getClientRects().length > 0).length`)); n != 0 {
		t.Fatalf("the request's timeline shows %d step headings", n)
	}
}

// TestConsoleDeskLayout: at 1280 × 800 at least 9 inbox rows fit on the first screen (5 did);
// at 375 × 812 the first row starts in the top 300 px (it started at 595); the dark theme's
// "2 calls" badge has a contrast of at least 4.5:1 (it had 1.75:1), measured from the colours
// the browser computed; the run view lists decisions in the order they were taken.
func TestConsoleDeskLayout(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "desk-layout.db"))
	suspendedMany(t, s, 11, "6")
	two := suspended(t, s, "refund orders 91 and 92 for 5").RunID
	measure := `(() => { const rows = [...document.querySelectorAll("#inbox-list li.inbox-item")].map((r) => r.getBoundingClientRect());
		return [rows.filter((r) => r.bottom <= innerHeight).length, Math.round(rows[0].top)]; })()`
	for _, c := range []struct {
		w, h             int64
		mobile           bool
		minFit, maxFirst int
	}{{1280, 800, false, 9, 800}, {375, 812, true, 1, 340}} { // 340: the header also holds Grants and Team
		page := tab(t, ctx, false)
		do(t, page, chromedp.EmulateViewport(c.w, c.h, func(p *emulation.SetDeviceMetricsOverrideParams, q *emulation.SetTouchEmulationEnabledParams) {
			p.Mobile = c.mobile
		}), chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 12`))
		got := get(t, page, chromedp.Evaluate[[]int](measure))
		if got[0] < c.minFit || got[1] > c.maxFirst {
			t.Errorf("at %d × %d: %d rows fit, the first at y=%d; want at least %d, the first above %d", c.w, c.h, got[0], got[1], c.minFit, c.maxFirst)
		}
	}

	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/"), js(`localStorage.setItem("interlock.theme", "dark")`), chromedp.Reload(),
		until(`document.documentElement.dataset.theme === "dark" && !!document.querySelector("#inbox-list .badge.calls")`))
	ratio := get(t, page, chromedp.Evaluate[float64](`(() => {
		const b = document.querySelector("#inbox-list .badge.calls"), cs = getComputedStyle(b);
		const rgb = (s) => s.match(/[\d.]+/g).slice(0, 3).map(Number);
		const lum = (c) => { const [r, g, b] = c.map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
		const [a, z] = [lum(rgb(cs.color)), lum(rgb(cs.backgroundColor))].sort((x, y) => y - x);
		return (a + 0.05) / (z + 0.05);
	})()`))
	if ratio < 4.5 {
		t.Errorf("the dark '2 calls' badge's contrast is %.2f:1, want at least 4.5:1", ratio)
	}

	s.Must(t, `mutation($id: ID!) { declineToolCall(runId: $id, toolCallId: "tc_2", reason: "later") { status } }`, map[string]any{"id": two}, &struct{}{})
	s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id, toolCallId: "tc_1") { status } }`, map[string]any{"id": two}, &struct{}{})
	do(t, page, chromedp.Navigate(s.URL+"/?run="+two), until(`document.querySelectorAll(".decisions-list li").length === 2`))
	if order := get(t, page, chromedp.Evaluate[[]string](`[...document.querySelectorAll(".decisions-list li")].map((li) => li.dataset.kind)`)); !slices.Equal(order, []string{"DECLINED", "APPROVED"}) {
		t.Fatalf("decisions listed %v, want the decline (taken first) then the approval", order)
	}
}

// TestPlaygroundRefetchesSchemaOnHeaders: with authentication on, the Playground's first
// schema read fails (no token yet); putting a token in the Headers pane reads it again, so the
// documentation explorer lists the schema without "Re-fetch GraphQL schema" being pressed.
func TestPlaygroundRefetchesSchemaOnHeaders(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "playground-headers.db"), "")
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/playground"),
		until(`!!document.querySelector(".graphiql-container .graphiql-query-editor .CodeMirror")`), until(`!!`+editor("Headers")),
		js(`[...document.querySelectorAll("button[aria-label$='Documentation Explorer']")].forEach((b) => b.click())`),
		until(`!!document.querySelector(".graphiql-doc-explorer")`))
	if txt := textOf(t, page, `.graphiql-doc-explorer`); strings.Contains(txt, "Subscription") {
		t.Fatalf("the schema was read without a token: %q", txt)
	}
	do(t, page, js(editor("Headers")+`.setValue('{"Authorization": "Bearer `+apptest.TokenOf("root")+`"}')`),
		until(`(document.querySelector(".graphiql-doc-explorer") || {innerText: ""}).innerText.includes("Subscription")`))
}
