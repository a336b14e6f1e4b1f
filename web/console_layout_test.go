package web_test

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// axeSource is axe-core (testdata/README.md says which version, from where, under which
// license), evaluated in the page through the DevTools protocol: the console's
// Content-Security-Policy does not apply to that.
//
//go:embed testdata/axe.min.js
var axeSource string

// axeViolation is one rule axe-core found broken, with the elements breaking it.
type axeViolation struct {
	ID     string
	Impact string
	Help   string
	Nodes  []struct {
		Target  []any
		Summary string
	}
}

// axeCheck runs axe-core (WCAG 2.x A and AA rules and the best practices) on the page as it is
// and fails the test for every violation, naming the rule and the elements.
func axeCheck(t *testing.T, page context.Context, name string) {
	t.Helper()
	do(t, page, js(`typeof window.axe === "object" || (0, eval)(`+jsString(axeSource)+`)`))
	got := get(t, page, chromedp.Evaluate[string](`axe.run(document, { resultTypes: ["violations"] }).then((r) =>
		JSON.stringify(r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.map((n) => ({ target: n.target, summary: n.failureSummary })) }))))`, chromedp.EvalAwaitPromise))
	var vs []axeViolation
	if err := json.Unmarshal([]byte(got), &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		var b strings.Builder
		for _, n := range v.Nodes {
			fmt.Fprintf(&b, "\n    %v: %s", n.Target, strings.ReplaceAll(n.Summary, "\n", " "))
		}
		t.Errorf("%s: axe %s (%s): %s%s", name, v.ID, v.Impact, v.Help, b.String())
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// overflowCheck fails the test when the page scrolls sideways, an element reaches past the
// viewport's edges, or an element scrolls sideways in itself (a wide table or <pre>). What an
// element cuts off on purpose (overflow hidden, an ellipsis) is not looked into.
func overflowCheck(t *testing.T, page context.Context, name string) {
	t.Helper()
	bad := get(t, page, chromedp.Evaluate[[]string](`(() => {
		const root = document.documentElement, vw = root.clientWidth, bad = [];
		if (root.scrollWidth > vw) bad.push("the page is " + root.scrollWidth + " px wide in a " + vw + " px viewport");
		const name = (n) => n.tagName.toLowerCase() + (n.id ? "#" + n.id : "") + (n.className && typeof n.className === "string" ? "." + n.className.trim().split(/\s+/).join(".") : "");
		const cut = (n) => { for (let p = n.parentElement; p && p !== document.body; p = p.parentElement) {
			const o = getComputedStyle(p).overflowX; if (o === "hidden" || o === "clip") return true; } return false; };
		for (const n of document.body.querySelectorAll("*")) {
			const r = n.getBoundingClientRect();
			if (!r.width || cut(n)) continue;
			if (r.right > vw + 0.5 || r.left < -0.5) bad.push(name(n) + " spans " + Math.round(r.left) + "…" + Math.round(r.right) + " px");
			const o = getComputedStyle(n).overflowX;
			if ((o === "auto" || o === "scroll") && !["INPUT", "SELECT", "TEXTAREA"].includes(n.tagName) && n.scrollWidth > n.clientWidth + 1)
				bad.push(name(n) + " scrolls sideways (" + n.scrollWidth + " px in " + n.clientWidth + ")");
		}
		// Text reaching past the edge of its box (a long id or number that does not break).
		const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		for (let t = walk.nextNode(); t; t = walk.nextNode()) {
			if (!t.textContent.trim() || cut(t)) continue;
			const range = document.createRange();
			range.selectNodeContents(t);
			const r = range.getBoundingClientRect();
			if (r.width && (r.right > vw + 0.5 || r.left < -0.5)) bad.push("the text " + JSON.stringify(t.textContent.trim().slice(0, 40)) + " in " + name(t.parentElement) + " spans " + Math.round(r.left) + "…" + Math.round(r.right) + " px");
		}
		return bad;
	})()`))
	for _, b := range bad {
		t.Errorf("%s at %d px: %s", name, 375, b)
	}
}

// colorScheme makes the page's prefers-color-scheme light or dark.
func colorScheme(t *testing.T, page context.Context, scheme string) {
	t.Helper()
	if _, err := chromedp.Call(page, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
		t.Fatal(err)
	}
}

const (
	approveAs = `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`
	declineAs = `mutation($id: ID!, $r: String) { declineToolCall(runId: $id, reason: $r) { status } }`
	resumeAs  = `mutation($id: ID!, $d: JSON!) { resumeRun(runId: $id, resumeData: $d) { status } }`
)

// TestConsoleLayoutAndAccessibility: every page of the console (the inbox with runs, the run
// view waiting for an approval and for an answer, new run, history with rows and with no match,
// the sign-in prompt), at desktop and phone width, in the light and the dark theme: axe-core
// finds no violation, and at 375 px nothing reaches or scrolls sideways.
func TestConsoleLayoutAndAccessibility(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "layout.db"), "")
	root := apptest.TokenOf("root")
	long := map[string]any{"threadId": "a-rather-long-thread-name-for-a-phone-screen-0123456789", "resourceId": "customer-with-a-long-identifier-0123456789abcdef"}
	refund := s.SuspendAs(t, root, "refund order 123456789012345678901234567890 for 30", long)
	ask := s.SuspendAs(t, root, "ask the customer for their shoe size", long)
	done := s.SuspendAs(t, root, "refund order 9 for 30", long)
	decideAs(t, s, apptest.TokenOf("alice"), declineAs, map[string]any{"id": done.RunID, "r": "needs a receipt from the customer, a rather long reason to wrap"})

	pages := []struct {
		name, path, ready string
	}{
		{"inbox", "/", `document.querySelectorAll("a[data-run]").length === 2`},
		{"run view waiting for approval", "/?run=" + refund.RunID, `!!document.querySelector("button.approve")`},
		{"run view with a resume form", "/?run=" + ask.RunID, `!!document.querySelector(".pending form input")`},
		{"new run", "/?view=new", `!!document.querySelector("#n-agent option")`},
		{"history", "/?view=history", `document.querySelectorAll("a.row").length === 1`},
		{"history with no match", "/?view=history&decidedBy=nobody", `document.body.innerText.includes("No runs match")`},
	}
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/#token="+root), until(`document.querySelectorAll("a[data-run]").length === 2`))
	signin := tab(t, ctx, true)

	for _, width := range []int64{1200, 375} {
		for _, scheme := range []string{"light", "dark"} {
			t.Run(fmt.Sprintf("%d px %s", width, scheme), func(t *testing.T) {
				for _, p := range []context.Context{page, signin} {
					if width == 375 {
						do(t, p, chromedp.EmulateViewport(375, 740, chromedp.EmulateMobile))
					} else {
						do(t, p, chromedp.EmulateViewport(1200, 900))
					}
					colorScheme(t, p, scheme)
				}
				check := func(p context.Context, name string) {
					t.Helper()
					if got := get(t, p, chromedp.Evaluate[string](`document.documentElement.dataset.theme || ""`)); got != scheme {
						t.Errorf("%s: data-theme=%q, want %q (the system's)", name, got, scheme)
					}
					if width == 375 {
						overflowCheck(t, p, name)
					}
					axeCheck(t, p, name)
				}
				for _, pg := range pages {
					do(t, page, chromedp.Navigate(s.URL+pg.path), until(pg.ready))
					check(page, pg.name)
					if pg.name == "inbox" && width == 375 {
						if top := get(t, page, chromedp.Evaluate[float64](`document.querySelector("a[data-run]").getBoundingClientRect().top`)); top > 740-60 {
							t.Errorf("at 375×740 the first run starts %v px down: below the first screen", top)
						}
					}
				}
				do(t, signin, chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#access-token`)))
				check(signin, "sign-in prompt")
				do(t, signin, chromedp.SendKeys(chromedp.CSS(`#access-token`), "wrong"), chromedp.Click(chromedp.CSS(`form.signin button[type=submit]`)),
					until(`!!document.querySelector("#token-error")?.textContent.includes("refused")`))
				check(signin, "sign-in prompt with a refused token")
			})
		}
	}
}

// TestConsoleHistoryFilters: the history filters by status, agent, outcome and decider, keeps
// them in the URL (the back button restores them), pages through what matches, shows who decided
// what and when on every row, and says when a filter matches nothing (not "no runs yet").
func TestConsoleHistoryFilters(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "history.db"), "")
	root := apptest.TokenOf("root")
	page := tab(t, ctx, true)
	rows := `document.querySelectorAll("#history-list a.row")`
	do(t, page, chromedp.Navigate(s.URL+"/?view=history#token="+root), until(`!!document.querySelector("#history-empty")`))
	if body := bodyText(t, page); !strings.Contains(body, "No finished runs yet") || strings.Contains(body, "match") {
		t.Fatalf("an empty history says:\n%s", body)
	}

	approved := s.SuspendAs(t, root, "refund order 1 for 30", nil)
	decideAs(t, s, apptest.TokenOf("alice"), approveAs, map[string]any{"id": approved.RunID})
	declined := s.SuspendAs(t, root, "refund order 2 for 30", nil)
	decideAs(t, s, apptest.TokenOf("bob"), declineAs, map[string]any{"id": declined.RunID, "r": "no receipt"})
	resumed := s.SuspendAs(t, root, "ask the customer for their shoe size", nil)
	decideAs(t, s, apptest.TokenOf("alice"), resumeAs, map[string]any{"id": resumed.RunID, "d": map[string]any{"answer": "43"}})
	waiting := s.SuspendAs(t, root, "refund order 3 for 30", nil)

	rowOf := func(runID string) string {
		t.Helper()
		return get(t, page, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('#history-list a.row[href="/?run=%s"]')?.innerText || ""`, runID)))
	}
	do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(rows+`.length === 3`))
	for id, want := range map[string]string{approved.RunID: "approved issue_refund by alice", declined.RunID: "declined issue_refund by bob",
		resumed.RunID: "resumed ask_customer by alice"} {
		if row := rowOf(id); !strings.Contains(row, want) || !strings.Contains(row, "COMPLETED") {
			t.Errorf("history row of %s: %q, want %q", id, row, want)
		}
	}
	// 4: the three people's decisions, and ask_customer's AUTO_APPROVED (the policy let it run
	// before it asked the customer).
	if n := get(t, page, chromedp.Evaluate[int](`document.querySelectorAll("#history-list .decisions time[datetime]").length`)); n != 4 {
		t.Errorf("%d decisions say when they were taken, want 4", n)
	}

	t.Run("the form puts the filters in the URL", func(t *testing.T) {
		do(t, page, js(`document.querySelector("#h-decision").value = "DECLINED"`),
			chromedp.Click(chromedp.CSS(`form.hfilters button[type=submit]`)),
			until(`location.search === "?view=history&decision=DECLINED"`), until(rows+`.length === 1`))
		if row := rowOf(declined.RunID); !strings.Contains(row, "bob") || !strings.Contains(row, "no receipt") {
			t.Fatalf("declined row %q", row)
		}
		do(t, page, chromedp.SendKeys(chromedp.CSS(`#h-decidedby`), "alice"), js(`document.querySelector("#h-decision").value = ""`),
			chromedp.Click(chromedp.CSS(`form.hfilters button[type=submit]`)),
			until(`location.search === "?view=history&decidedBy=alice"`), until(rows+`.length === 2`))
		// Back: the earlier filter, in the results and in the form.
		do(t, page, chromedp.NavigateBack(), until(`location.search === "?view=history&decision=DECLINED"`),
			until(rows+`.length === 1 && document.querySelector("#h-decision").value === "DECLINED" && document.querySelector("#h-decidedby").value === ""`))
	})

	t.Run("each filter from the URL", func(t *testing.T) {
		for q, want := range map[string][]string{
			"decidedBy=alice":                      {approved.RunID, resumed.RunID},
			"decision=RESUMED":                     {resumed.RunID},
			"decision=APPROVED&decidedBy=alice":    {approved.RunID},
			"status=SUSPENDED":                     {waiting.RunID},
			"status=ANY":                           {approved.RunID, declined.RunID, resumed.RunID, waiting.RunID},
			"agent=support-agent&status=COMPLETED": {approved.RunID, declined.RunID, resumed.RunID},
		} {
			do(t, page, chromedp.Navigate(s.URL+"/?view=history&"+q), until(rows+fmt.Sprintf(`.length === %d`, len(want))))
			for _, id := range want {
				if rowOf(id) == "" {
					t.Errorf("?%s lacks run %s", q, id)
				}
			}
		}
		do(t, page, chromedp.Navigate(s.URL+"/?view=history&agent=support-agent&decision=APPROVED&decidedBy=bob&status=COMPLETED"),
			until(`!!document.querySelector("#history-empty")`))
		form := get(t, page, chromedp.Evaluate[string](`["h-status", "h-agent", "h-decision", "h-decidedby"].map((id) => document.getElementById(id).value).join("|")`))
		if form != "COMPLETED|support-agent|APPROVED|bob" {
			t.Errorf("the form shows %q, want the URL's filters", form)
		}
		if body := bodyText(t, page); !strings.Contains(body, "No runs match these filters") || strings.Contains(body, "No finished runs yet") {
			t.Errorf("a filter with no match says:\n%s", body)
		}
	})

	t.Run("pages keep the filters", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?view=history&agent=support-agent&perPage=1"), until(rows+`.length === 1`))
		if pager := textOf(t, page, `nav.pager`); !strings.Contains(pager, "1–1 of 3") || strings.Contains(pager, "Newer") {
			t.Fatalf("pager %q", pager)
		}
		do(t, page, chromedp.Click(chromedp.CSS(`nav.pager a[rel=next]`)),
			until(`location.search === "?view=history&agent=support-agent&page=1&perPage=1"`), until(`document.querySelector("nav.pager")?.innerText.includes("2–2 of 3")`),
			chromedp.Click(chromedp.CSS(`nav.pager a[rel=next]`)), until(`document.querySelector("nav.pager")?.innerText.includes("3–3 of 3")`))
		if pager := textOf(t, page, `nav.pager`); strings.Contains(pager, "Older") {
			t.Fatalf("the last page offers older runs: %q", pager)
		}
		do(t, page, chromedp.NavigateBack(), until(`document.querySelector("nav.pager")?.innerText.includes("2–2 of 3")`))
	})
}

// TestConsoleTheme: the theme follows the system's prefers-color-scheme, live; the Theme select
// in the header overrides it (Light, Dark) and is remembered across reloads, applied before the
// page's body exists (no flash of the other theme); System goes back to following the system.
func TestConsoleTheme(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "theme.db"))
	page := tab(t, ctx, true)
	if _, err := chromedp.Call(page, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__themeAtBody = "no body seen";
		new MutationObserver((_, o) => { if (document.body) { window.__themeAtBody = document.documentElement.dataset.theme || ""; o.disconnect(); } })
			.observe(document, { childList: true, subtree: true });`}); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		t.Helper()
		return get(t, page, chromedp.Evaluate[string](`[document.documentElement.dataset.theme, document.querySelector("#theme").value,
			localStorage.getItem("interlock.theme"), getComputedStyle(document.body).backgroundColor, window.__themeAtBody].join("|")`))
	}
	choose := func(v string) {
		t.Helper()
		do(t, page, js(`(() => { const s = document.querySelector("#theme"); s.value = "`+v+`"; s.dispatchEvent(new Event("change")); })()`))
	}
	const light, dark = "rgb(246, 247, 249)", "rgb(17, 20, 24)"
	want := func(step, w string) {
		t.Helper()
		if got := state(); got != w {
			t.Errorf("%s: [theme|select|stored|background|theme when <body> appeared] is %s, want %s", step, got, w)
		}
	}

	colorScheme(t, page, "light")
	do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.body.innerText.includes("Nothing waits")`))
	want("a light system", "light|system||"+light+"|light")
	colorScheme(t, page, "dark")
	do(t, page, until(`document.documentElement.dataset.theme === "dark"`))
	want("the system turns dark", "dark|system||"+dark+"|light")
	choose("light")
	want("Light chosen on a dark system", "light|light|light|"+light+"|light")
	do(t, page, chromedp.Reload(), until(`document.body.innerText.includes("Nothing waits")`))
	want("Light, reloaded", "light|light|light|"+light+"|light")
	choose("system")
	want("System chosen", "dark|system||"+dark+"|light")
	colorScheme(t, page, "light")
	choose("dark")
	do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(`!!document.querySelector("#history-empty")`))
	want("Dark chosen on a light system, another page", "dark|dark|dark|"+dark+"|dark")
}

// decideAs takes a decision on a suspended run of s with the token, and waits until the run is
// finished.
func decideAs(t *testing.T, s *apptest.Server, token, mutation string, vars map[string]any) {
	t.Helper()
	s.MustAs(t, token, mutation, vars, nil)
	deadline := time.Now().Add(20 * time.Second)
	for st := runStatusAs(t, s, token, vars["id"].(string)); st != "COMPLETED" && st != "FAILED"; st = runStatusAs(t, s, token, vars["id"].(string)) {
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s", vars["id"], st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
