package web_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin for the offset-less link, whatever the machine has

	"github.com/chromedp/cdproto/emulation"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"interlock/gormstore"
	"interlock/internal/apptest"
)

// focused describes document.activeElement: "BODY", or tag#id.class[data-run=…].
const focusedJS = `(() => { const a = document.activeElement; if (!a || a === document.body) return "BODY";
	return a.tagName + (a.id ? "#" + a.id : "") + (a.className ? "." + String(a.className).split(" ").join(".") : "") +
		(a.dataset.run ? "[" + a.dataset.run + "]" : ""); })()`

func focused(t *testing.T, page context.Context) string {
	t.Helper()
	return get(t, page, chromedp.Evaluate[string](focusedJS))
}

// key presses one key (or types a string) in the page.
func key(k string, opts ...chromedp.KeyOption) chromedp.Action[chromedp.Void] {
	return chromedp.KeyEvent(k, opts...)
}

func location(t *testing.T, page context.Context) string {
	t.Helper()
	return get(t, page, chromedp.Evaluate[string](`location.search`))
}

// rowOrder is the inbox's run ids, top to bottom.
func rowOrder(t *testing.T, page context.Context) []string {
	t.Helper()
	return get(t, page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#inbox-list a.row[data-run]")].map((a) => a.dataset.run)`))
}

func inZone(t *testing.T, page context.Context, zone string) {
	t.Helper()
	if _, err := chromedp.Call(page, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone}); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInboxKeyboard: a person approves and declines three runs in a row with the keyboard
// only; focus always lands on the next waiting item, never on <body>, also when the list is
// redrawn by a live update; shortcuts stay quiet while typing; the ? dialog; the skip link.
func TestConsoleInboxKeyboard(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "keys.db"))

	t.Run("three runs in a row, keyboard only", func(t *testing.T) {
		ids := suspendedMany(t, s, 3, "")
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 3`))
		if got := rowOrder(t, page); !slices.Equal(got, ids) {
			t.Fatalf("inbox order %v, want oldest first %v", got, ids)
		}
		row := func(i int) string { return "A.row[" + ids[i] + "]" }
		steps := []struct {
			keys []chromedp.Action[chromedp.Void]
			want string
		}{
			{[]chromedp.Action[chromedp.Void]{key("j")}, row(0)},
			{[]chromedp.Action[chromedp.Void]{key("j")}, row(1)},
			{[]chromedp.Action[chromedp.Void]{key("j"), key("j")}, row(2)}, // stops at the last row
			{[]chromedp.Action[chromedp.Void]{key("k")}, row(1)},
			{[]chromedp.Action[chromedp.Void]{key(kb.ArrowUp)}, row(0)},
			{[]chromedp.Action[chromedp.Void]{key(kb.ArrowDown), key(kb.ArrowUp)}, row(0)},
			{[]chromedp.Action[chromedp.Void]{key("j", chromedp.KeyModifiers(chromedp.ModifierCtrl))}, row(0)}, // a modifier: no shortcut
		}
		for i, st := range steps {
			do(t, page, st.keys...)
			if got := focused(t, page); got != st.want && !strings.HasPrefix(got, st.want) {
				t.Fatalf("step %d: focus on %s, want %s", i, got, st.want)
			}
		}
		if sel := get(t, page, chromedp.Evaluate[string](`document.querySelector("a.row[aria-current=true]")?.dataset.run + " " + document.querySelector("li.selected")?.dataset.run`)); sel != ids[0]+" "+ids[0] {
			t.Fatalf("the selection shown is %q, want %s", sel, ids[0])
		}

		// Enter opens the run; its Approve button has the focus.
		do(t, page, key(kb.Enter), until(fmt.Sprintf(`location.search === "?run=%s"`, ids[0])),
			until(`document.activeElement?.matches(".pending button.approve")`))
		// a approves: the next run opens, focus on its Approve.
		do(t, page, key("a"))
		s.WaitStatus(t, ids[0], "COMPLETED")
		do(t, page, until(fmt.Sprintf(`location.search === "?run=%s"`, ids[1])), until(`document.activeElement?.matches(".pending button.approve")`))
		// d goes to the reason, Enter in it declines with what was typed.
		do(t, page, key("d"), until(`document.activeElement?.id?.startsWith("reason-")`), key("no receipt"), key(kb.Enter))
		s.WaitStatus(t, ids[1], "COMPLETED")
		if ds := decisions(t, s, ids[1]); len(ds) != 1 || ds[0]["kind"] != "DECLINED" || ds[0]["reason"] != "no receipt" {
			t.Fatalf("decisions of the declined run: %v", ds)
		}
		do(t, page, until(fmt.Sprintf(`location.search === "?run=%s"`, ids[2])), until(`document.activeElement?.matches(".pending button.approve")`))
		// The last one: back to the inbox, now empty, the focus on what it says.
		do(t, page, key("a"))
		s.WaitStatus(t, ids[2], "COMPLETED")
		do(t, page, until(`location.search === "" && document.body.innerText.includes("Nothing waits")`),
			until(`document.activeElement?.matches("#inbox-list .empty")`))
	})

	t.Run("decided with the mouse: the run stays on screen, a focused link leads to the next", func(t *testing.T) {
		ids := suspendedMany(t, s, 2, "8")
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 2`),
			chromedp.Click(chromedp.CSS(`#inbox-list a.row`)), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
			chromedp.Click(chromedp.CSS(`button.approve`)), until(`document.activeElement?.id === "next-up-link"`),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
		if txt := textOf(t, page, `#next-up-link`); !strings.Contains(txt, "Next waiting run: issue_refund") || location(t, page) != "?run="+ids[0] {
			t.Fatalf("after a mouse decision: link %q at %s", txt, location(t, page))
		}
		do(t, page, key(kb.Enter), until(fmt.Sprintf(`location.search === "?run=%s"`, ids[1])),
			until(`document.activeElement?.matches(".pending button.approve")`),
			chromedp.Click(chromedp.CSS(`button.approve`)), until(`document.activeElement?.id === "next-up-link"`))
		if txt := textOf(t, page, `#next-up-link`); !strings.Contains(txt, "Back to the inbox") {
			t.Fatalf("the last run's link %q", txt)
		}
		do(t, page, key(kb.Enter), until(`location.search === "" && document.activeElement?.matches("#inbox-list .empty")`))
	})

	t.Run("a live update keeps the focus on the same run's row, or the next", func(t *testing.T) {
		ids := suspendedMany(t, s, 3, "4")
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 3`),
			key("j"), key("j"), until(fmt.Sprintf(`document.activeElement?.dataset.run === %q`, ids[1])))
		// Another run decided elsewhere: the list is drawn again, the focus stays on the same run.
		approveAPI(t, s, ids[0])
		do(t, page, until(`document.querySelectorAll("#inbox-list a.row").length === 2`))
		if got := focused(t, page); got != "A.row["+ids[1]+"]" {
			t.Fatalf("after a redraw focus is on %s, want the same row %s", got, ids[1])
		}
		// The focused run itself decided elsewhere: the focus goes to the next row.
		approveAPI(t, s, ids[1])
		do(t, page, until(`document.querySelectorAll("#inbox-list a.row").length === 1`))
		if got := focused(t, page); got != "A.row["+ids[2]+"]" {
			t.Fatalf("after its row left, focus is on %s, want the next row %s", got, ids[2])
		}
		approveAPI(t, s, ids[2])
		do(t, page, until(`document.body.innerText.includes("Nothing waits")`))
		if got := focused(t, page); got == "BODY" {
			t.Fatalf("focus fell to <body> when the last row left")
		}
	})

	t.Run("shortcuts stay quiet while typing", func(t *testing.T) {
		id := suspended(t, s, "refund order 61 for 5").RunID
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 1`),
			chromedp.Focus(chromedp.CSS(`#f-thread`)), key("jk?"))
		if v := get(t, page, chromedp.Evaluate[string](`document.querySelector("#f-thread").value + "|" + !!document.querySelector("a.row[aria-current]") + "|" + !!document.querySelector("dialog[open]")`)); v != "jk?|false|false" {
			t.Fatalf("typing j, k and ? in a field: %s", v)
		}
		// In the run view, a typed in the reason is text, not an approval.
		do(t, page, chromedp.Navigate(s.URL+"/?run="+id), chromedp.WaitVisible(chromedp.CSS(`.pending input[id^="reason-"]`)),
			chromedp.Focus(chromedp.CSS(`.pending input[id^="reason-"]`)), key("a"))
		time.Sleep(300 * time.Millisecond)
		if st := s.Run(t, id).Status; st != "SUSPENDED" {
			t.Fatalf("typing a in the reason approved the run: %s", st)
		}
		// e opens Edit and approve, with the focus in its editor.
		do(t, page, chromedp.Focus(chromedp.CSS(`button.approve`)), key("e"),
			until(`document.querySelector(".pending details.edit").open && document.activeElement?.matches(".pending details.edit :is(input, select, textarea)")`))
		approveAPI(t, s, id)
	})

	t.Run("r goes to the resume form", func(t *testing.T) {
		id := suspended(t, s, "ask the customer for their shoe size").RunID
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/?run="+id), chromedp.WaitVisible(chromedp.CSS(`#resume-tc_1-answer`)),
			js(`document.activeElement?.blur()`), key("r"), until(`document.activeElement?.id === "resume-tc_1-answer"`),
			key("43"), key(kb.Enter))
		s.WaitStatus(t, id, "COMPLETED")
	})

	t.Run("? lists the shortcuts in a modal dialog", func(t *testing.T) {
		suspended(t, s, "refund order 62 for 5")
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 1`),
			key("j"), key("?"), until(`!!document.querySelector("dialog[open]")`))
		info := get(t, page, chromedp.Evaluate[string](`(() => { const d = document.querySelector("dialog[open]");
			return [d.getAttribute("role"), d.getAttribute("aria-modal"), document.getElementById(d.getAttribute("aria-labelledby"))?.textContent,
				d.contains(document.activeElement), d.textContent.includes("Approve")].join("|"); })()`))
		if info != "dialog|true|Keyboard shortcuts|true|true" {
			t.Fatalf("dialog [role, aria-modal, title, has focus, lists keys] = %s", info)
		}
		for i := range 4 {
			opt := []chromedp.KeyOption{}
			if i%2 == 1 {
				opt = append(opt, chromedp.KeyModifiers(chromedp.ModifierShift))
			}
			do(t, page, key(kb.Tab, opt...))
			if in := get(t, page, chromedp.Evaluate[bool](`document.querySelector("dialog[open]").contains(document.activeElement)`)); !in {
				t.Fatalf("Tab %d took the focus out of the dialog, to %s", i, focused(t, page))
			}
		}
		do(t, page, key("j")) // no shortcut behind the dialog
		do(t, page, key(kb.Escape), until(`!document.querySelector("dialog[open]")`))
		if got := focused(t, page); !strings.HasPrefix(got, "A.row[") {
			t.Fatalf("after Escape focus is on %s, want back on the row", got)
		}
	})

	t.Run("the skip link moves the focus to main without redrawing", func(t *testing.T) {
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(`document.readyState === "complete" && !!document.querySelector("main h1")`),
			js(`document.querySelector("main h1").dataset.mark = "1"`), key(kb.Tab), until(`document.activeElement?.matches("a.skip")`),
			key(kb.Enter), until(`document.activeElement?.id === "main"`))
		if still := get(t, page, chromedp.Evaluate[bool](`!!document.querySelector("main h1[data-mark]") && location.search === "?view=history"`)); !still {
			t.Fatal("the skip link drew the view again or changed the address")
		}
	})
}

// TestConsoleInboxBulk: 20 runs ticked with "select all on this page"; two are decided over the
// API after the page loaded; "Approve 20" reports 18 approved and names the two as decided by
// someone else. A run waiting for an answer cannot be ticked.
func TestConsoleInboxBulk(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "bulk.db"))
	ids := suspendedMany(t, s, 20, "1")
	ask := suspended(t, s, "ask the customer for their size").RunID
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/?perPage=50"), until(`document.querySelectorAll("#inbox-list a.row").length === 21`),
		chromedp.Click(chromedp.CSS(`#pick-all`)), until(`!document.querySelector("#bulk").hidden`))
	if txt := textOf(t, page, `#bulk-approve`); txt != "Approve 20" {
		t.Fatalf("bulk button %q, want Approve 20", txt)
	}
	if dis := get(t, page, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const b = document.querySelector('#pick-%s');
		return b.disabled + "|" + b.checked + "|" + document.getElementById(b.getAttribute("aria-describedby"))?.textContent; })()`, ask))); dis != "true|false|needs an answer: open it" {
		t.Fatalf("the resume run's box [disabled, checked, note] = %s", dis)
	}
	elsewhere := []string{ids[3], ids[11]}
	for _, id := range elsewhere {
		approveAPI(t, s, id)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`#bulk-approve`)), until(`document.querySelector("#bulk-result").innerText.includes("approved")`))
	summary := textOf(t, page, `#bulk-result .bulk-summary`)
	if !strings.Contains(summary, "18 approved") || !strings.Contains(summary, "2 decided by someone else first") {
		t.Fatalf("bulk summary %q", summary)
	}
	named := get(t, page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#bulk-result .bulk-conflicts li")].map((li) => li.dataset.run)`))
	slices.Sort(named)
	want := slices.Clone(elsewhere)
	slices.Sort(want)
	if !slices.Equal(named, want) {
		t.Fatalf("named as decided by someone else: %v, want %v", named, want)
	}
	if txt := textOf(t, page, `#bulk-result .bulk-conflicts`); !strings.Contains(txt, "was already approved by someone unnamed at 20") {
		t.Fatalf("the conflicts lack the server's message: %q", txt)
	}
	if got := focused(t, page); got != "DIV#bulk-result" {
		t.Fatalf("after the bulk decision focus is on %s, want the result", got)
	}
	for _, id := range ids {
		if st := s.Run(t, id).Status; st == "SUSPENDED" {
			t.Fatalf("run %s still waits after the bulk approval", id)
		}
	}
	do(t, page, until(`document.querySelectorAll("#inbox-list a.row").length === 1`))
	if st := s.Run(t, ask).Status; st != "SUSPENDED" {
		t.Fatalf("the run waiting for an answer is %s", st)
	}
	if got := focused(t, page); got == "BODY" {
		t.Fatal("focus fell to <body> after the list was redrawn")
	}
}

// TestConsoleInboxSeveralCalls: a run whose step asked for two refunds waits on both; its row
// says "2 calls" and approves them all, one decideToolCalls item per call in order, and the run
// completes.
func TestConsoleInboxSeveralCalls(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "calls.db"))
	id := suspended(t, s, "refund orders 31 and 32 for 5").RunID
	page := tab(t, ctx, false)
	if _, err := chromedp.Call(page, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__approved = [];
		const realFetch = window.fetch;
		window.fetch = async (url, init) => {
			const body = init && init.body ? JSON.parse(init.body) : {};
			if (body.query && body.query.includes("decideToolCalls")) window.__approved.push(...body.variables.d.map((i) => i.kind + " " + i.toolCallId));
			return realFetch(url, init);
		};`}); err != nil {
		t.Fatal(err)
	}
	do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 1`))
	if txt := textOf(t, page, `#inbox-list li[data-run]`); !strings.Contains(txt, "2 calls") || !strings.Contains(txt, "Approve all 2 calls") {
		t.Fatalf("row of a run with two waiting calls: %q", txt)
	}
	do(t, page, chromedp.Click(chromedp.CSS(`#inbox-list button.approve-all`)), until(`document.querySelector("#bulk-result").innerText.includes("2 approved")`))
	if got := get(t, page, chromedp.Evaluate[[]string](`window.__approved`)); !slices.Equal(got, []string{"APPROVE tc_1", "APPROVE tc_2"}) {
		t.Fatalf("decisions sent %v, want tc_1 then tc_2 approved in one batch", got)
	}
	s.WaitStatus(t, id, "COMPLETED")
	if ds := decisions(t, s, id); len(ds) != 2 || ds[0]["kind"] != "APPROVED" || ds[1]["kind"] != "APPROVED" {
		t.Fatalf("decisions: %v, want both calls approved", ds)
	}
}

// TestConsoleInboxTriage: the count in the tab's title, live; oldest / newest first across
// pages; the age mark; desktop notifications while the tab is hidden.
func TestConsoleInboxTriage(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "triage.db"))

	t.Run("the count of waiting runs is in the title, live", func(t *testing.T) {
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.body.innerText.includes("Nothing waits")`))
		if title := get(t, page, chromedp.Evaluate[string](`document.title`)); title != "Interlock" {
			t.Fatalf("empty inbox title %q", title)
		}
		a := suspended(t, s, "refund order 1 for 5").RunID
		do(t, page, until(`document.title === "(1) Interlock"`))
		b := suspended(t, s, "refund order 2 for 5").RunID
		do(t, page, until(`document.title === "(2) Interlock"`))
		approveAPI(t, s, a)
		do(t, page, until(`document.title === "(1) Interlock"`))
		do(t, page, js(`document.querySelector('a[data-nav="history"]').click()`), until(`location.search === "?view=history"`),
			until(`document.title === "Interlock"`))
		approveAPI(t, s, b)
	})

	t.Run("oldest or newest first, across pages", func(t *testing.T) {
		ids := suspendedMany(t, s, 5, "2")
		rev := slices.Clone(ids)
		slices.Reverse(rev)
		page := tab(t, ctx, false)
		cases := []struct {
			query string
			want  []string
		}{
			{"?perPage=2", ids[0:2]},
			{"?perPage=2&page=1", ids[2:4]},
			{"?perPage=2&page=2", ids[4:5]},
			{"?perPage=2&sort=oldest&page=1", ids[2:4]},
			{"?perPage=2&sort=newest", rev[0:2]},
			{"?perPage=2&sort=newest&page=1", rev[2:4]},
			{"?perPage=2&sort=newest&page=2", rev[4:5]},
			{"?perPage=3&page=1", ids[3:5]},
			{"?perPage=3&sort=newest&page=1", rev[3:5]},
			{"?perPage=20", ids},
			{"?perPage=20&sort=newest", rev},
		}
		for _, c := range cases {
			do(t, page, chromedp.Navigate(s.URL+"/"+c.query), until(fmt.Sprintf(`document.querySelectorAll("#inbox-list a.row").length === %d`, len(c.want))))
			if got := rowOrder(t, page); !slices.Equal(got, c.want) {
				t.Errorf("%s: rows %v, want %v", c.query, got, c.want)
			}
		}
		// The select: kept in the URL, the focus kept on it.
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 5`),
			js(`const s = document.querySelector("#f-sort"); s.focus(); s.value = "newest"; s.dispatchEvent(new Event("change"))`),
			until(`location.search === "?sort=newest"`), until(fmt.Sprintf(`document.querySelector("#inbox-list a.row")?.dataset.run === %q`, rev[0])))
		if got := focused(t, page); got != "SELECT#f-sort" {
			t.Fatalf("after sorting focus is on %s", got)
		}
		for _, id := range ids {
			approveAPI(t, s, id)
		}
	})

	t.Run("runs waiting long are marked amber, then red, not by color alone", func(t *testing.T) {
		ids := suspendedMany(t, s, 3, "3")
		now := time.Now()
		for id, ago := range map[string]time.Duration{ids[1]: 20 * time.Minute, ids[2]: 2 * time.Hour} {
			if err := s.App.DB().Model(&gormstore.Run{}).Where("id = ?", id).Update("suspended_at", now.Add(-ago)).Error; err != nil {
				t.Fatal(err)
			}
		}
		page := tab(t, ctx, false)
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelectorAll("#inbox-list a.row").length === 3`))
		for id, want := range map[string][2]string{ids[0]: {"fresh", "waiting "}, ids[1]: {"amber", "waiting long: waiting 20 min · over 15 min"}, ids[2]: {"red", "waiting very long: waiting 2 h · over 1 h"}} {
			got := get(t, page, chromedp.Evaluate[[]string](fmt.Sprintf(`(() => { const a = document.querySelector('#inbox-list a.row[data-run=%q] .age');
				const vis = [...a.childNodes].filter((n) => !(n.classList && n.classList.contains("age-mark"))).map((n) => n.textContent).join("");
				return [a.dataset.age, vis, getComputedStyle(a).color]; })()`, id)))
			if got[0] != want[0] || !strings.HasPrefix(got[1], want[1]) {
				t.Errorf("age of a run %s: %q, want %v", want[0], got, want)
			}
		}
		colors := get(t, page, chromedp.Evaluate[[]string](`["fresh", "amber", "red"].map((l) => getComputedStyle(document.querySelector(".age." + l)).color)`))
		if colors[0] == colors[1] || colors[1] == colors[2] {
			t.Errorf("the age colors do not differ: %v", colors)
		}
		// The thresholds, exactly: through the page's own function at a fixed time.
		levels := get(t, page, chromedp.Evaluate[string](`(async () => {
			const m = await import("/js/inbox.js");
			const at = Date.parse("2026-12-02T12:00:00Z");
			const since = (min) => new Date(at - min * 60000).toISOString();
			return [m.AMBER_AFTER_MS, m.RED_AFTER_MS, ...[0, 15, 15.01, 60, 60.01, 1440].map((min) => m.ageLevel(since(min), at))].join(",");
		})()`, chromedp.EvalAwaitPromise))
		if levels != "900000,3600000,fresh,fresh,amber,amber,red,red" {
			t.Errorf("age levels: %s", levels)
		}
		for _, id := range ids {
			approveAPI(t, s, id)
		}
	})

	t.Run("a notification per new waiting run while the tab is hidden", func(t *testing.T) {
		page := tab(t, ctx, false)
		// The page's Notification and visibility stand-ins: headless Chromium shows none.
		if _, err := chromedp.Call(page, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `
			window.__notes = [];
			class FakeNotification {
				static permission = "default";
				static async requestPermission() { FakeNotification.permission = "granted"; return "granted"; }
				constructor(title, opts) { this.title = title; this.body = opts.body; window.__notes.push(this); }
				close() {}
			}
			window.Notification = FakeNotification;
			Object.defineProperty(document, "hidden", { get: () => !!window.__hidden });`}); err != nil {
			t.Fatal(err)
		}
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelector("#notify")?.textContent === "Notify me"`),
			chromedp.Click(chromedp.CSS(`#notify`)), until(`document.querySelector("#notify").textContent === "Notifications on"`))
		suspended(t, s, "refund order 71 for 5") // visible tab: no notification
		do(t, page, until(`document.title === "(1) Interlock"`), js(`window.__hidden = true`))
		id := suspended(t, s, "refund order 72 for 5").RunID
		do(t, page, until(`window.__notes.length === 1`))
		if n := get(t, page, chromedp.Evaluate[string](`window.__notes[0].title + "|" + window.__notes[0].body`)); n != "issue_refund|support-agent" {
			t.Fatalf("notification %q", n)
		}
		do(t, page, js(`window.__notes[0].onclick()`), until(fmt.Sprintf(`location.search === "?run=%s"`, id)))
	})
}

// TestConsoleInboxFilters: dates in the URL carry their offset, so a link means the same runs in
// every time zone; old offset-less links are read in local time; a bad date says which field and
// what is expected; no match is not an empty inbox.
func TestConsoleInboxFilters(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "filters.db"))
	berlin := tab(t, ctx, true)
	inZone(t, berlin, "Europe/Berlin")
	newYork := tab(t, ctx, true)
	inZone(t, newYork, "America/New_York")

	t.Run("an empty inbox, and filters that match nothing", func(t *testing.T) {
		do(t, berlin, chromedp.Navigate(s.URL+"/"), until(`document.body.innerText.includes("Nothing waits for a decision")`),
			chromedp.Navigate(s.URL+"/?thread=nope"), until(`document.body.innerText.includes("No waiting runs match these filters")`))
		if body := bodyText(t, berlin); strings.Contains(body, "Nothing waits") {
			t.Fatalf("no match says the inbox is empty:\n%s", body)
		}
		if href := get(t, berlin, chromedp.Evaluate[string](`document.querySelector("#inbox-list .no-match a").getAttribute("href")`)); href != "/" {
			t.Fatalf("clear link %q", href)
		}
	})

	t.Run("bad dates in the link name the field and the expected form", func(t *testing.T) {
		for q, field := range map[string]string{"?from=yesterday": "Created from", "?to=2026-13-45T25:00": "Created to", "?to=2026-02-30T10:00:00Z": "Created to"} {
			do(t, berlin, chromedp.Navigate(s.URL+"/"+q), until(`!!document.querySelector("#filter-error")`))
			msg := textOf(t, berlin, `#filter-error`)
			if !strings.Contains(msg, "“"+field+"”") || !strings.Contains(msg, "+01:00") || strings.Contains(msg, "RangeError") {
				t.Errorf("%s: message %q", q, msg)
			}
			key := map[string]string{"Created from": "from", "Created to": "to"}[field]
			if inv := get(t, berlin, chromedp.Evaluate[string](`document.querySelector("#f-`+key+`").getAttribute("aria-invalid") || ""`)); inv != "true" {
				t.Errorf("%s: the field is not marked invalid", q)
			}
		}
		// from after to: said in local time, in the console's words.
		do(t, berlin, chromedp.Navigate(s.URL+"/?from=2026-12-02T21:00:00Z&to=2026-12-02T20:00:00Z"), until(`!!document.querySelector("#filter-error")`))
		msg := textOf(t, berlin, `#filter-error`)
		local := get(t, berlin, chromedp.Evaluate[string](`new Date("2026-12-02T21:00:00Z").getHours() === 22 ? new Date("2026-12-02T21:00:00Z").toLocaleString() : "not in Berlin"`))
		if !strings.Contains(msg, "is after") || !strings.Contains(msg, local) {
			t.Errorf("from after to: %q (local %q)", msg, local)
		}
		// The old offset-less form with seconds, which used to throw a RangeError, is read as local time.
		do(t, berlin, chromedp.Navigate(s.URL+"/?to=2026-12-02T21:00:30"), until(`!!document.querySelector("#inbox-list .card, #inbox-list .pager")`))
		if v := get(t, berlin, chromedp.Evaluate[string](`document.querySelector("#f-to").value + "|" + !!document.querySelector("#filter-error")`)); v != "2026-12-02T21:00:30|false" {
			t.Errorf("?to=2026-12-02T21:00:30: field and error %s", v)
		}
	})

	t.Run("applied filters are written with their offset", func(t *testing.T) {
		do(t, berlin, chromedp.Navigate(s.URL+"/"), until(`!!document.querySelector("#f-from")`),
			js(`document.querySelector("#f-from").value = "2026-12-02T21:00"; document.querySelector("#f-to").value = "2026-12-03T08:15"`),
			chromedp.Click(chromedp.CSS(`#f-apply`)), until(`location.search.includes("from=")`))
		q := get(t, berlin, chromedp.Evaluate[string](`(() => { const p = new URLSearchParams(location.search); return p.get("from") + " " + p.get("to"); })()`))
		if q != "2026-12-02T21:00:00+01:00 2026-12-03T08:15:59+01:00" {
			t.Fatalf("applied filter dates %q", q)
		}
		if v := get(t, berlin, chromedp.Evaluate[string](`document.querySelector("#f-from").value + " " + document.querySelector("#f-to").value + " " + document.activeElement.id`)); v != "2026-12-02T21:00 2026-12-03T08:15 f-apply" {
			t.Fatalf("the fields after applying: %q", v)
		}
		// The same link read in New York shows the same instants in New York's time.
		do(t, newYork, chromedp.Navigate(get(t, berlin, chromedp.Evaluate[string](`location.href`))), until(`!!document.querySelector("#f-from")`))
		if v := get(t, newYork, chromedp.Evaluate[string](`document.querySelector("#f-from").value + " " + document.querySelector("#f-to").value`)); v != "2026-12-02T15:00 2026-12-03T02:15" {
			t.Fatalf("the fields in New York: %q", v)
		}
	})

	t.Run("a shared link means the same runs in every time zone", func(t *testing.T) {
		id := suspended(t, s, "refund order 5 for 5").RunID
		created, err := time.Parse(time.RFC3339, s.Run(t, id).CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		india := time.FixedZone("IST", 5*3600+1800)
		count := func(page context.Context, from string) int {
			t.Helper()
			do(t, page, chromedp.Navigate(s.URL+"/?from="+url.QueryEscape(from)),
				until(`!!document.querySelector("#inbox-list .card, #inbox-list .pager, #filter-error")`))
			return get(t, page, chromedp.Evaluate[int](`document.querySelectorAll("#inbox-list a.row").length`))
		}
		before := created.Add(-time.Minute).In(india).Format(time.RFC3339)
		after := created.Add(time.Minute).In(india).Format(time.RFC3339)
		for name, page := range map[string]context.Context{"Berlin": berlin, "New York": newYork} {
			if n := count(page, before); n != 1 {
				t.Errorf("%s, from %s: %d runs, want 1", name, before, n)
			}
			if n := count(page, after); n != 0 {
				t.Errorf("%s, from %s: %d runs, want 0", name, after, n)
			}
		}
		// An old link without offset is local time: Berlin's wall clock a minute before the run
		// is six hours later in New York.
		loc, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		old := created.Add(-time.Minute).In(loc).Format("2006-01-02T15:04")
		if n := count(berlin, old); n != 1 {
			t.Errorf("Berlin, old link from=%s: %d runs, want 1", old, n)
		}
		if n := count(newYork, old); n != 0 {
			t.Errorf("New York, old link from=%s: %d runs, want 0", old, n)
		}
		approveAPI(t, s, id)
	})
}

// approveAPI approves the run's waiting call over the API (someone else, elsewhere).
func approveAPI(t *testing.T, s *apptest.Server, id string) {
	t.Helper()
	var out map[string]any
	s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": id}, &out)
}

// suspendedMany starts n refund runs on s, one after the other (so their createdAt differ),
// each waiting on issue_refund; their ids, oldest first.
func suspendedMany(t *testing.T, s *apptest.Server, n int, tag string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, suspended(t, s, fmt.Sprintf("refund order %s%d for 5", tag, i+1)).RunID)
		time.Sleep(5 * time.Millisecond)
	}
	return ids
}
