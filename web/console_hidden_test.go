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

	"github.com/chromedp/chromedp"

	"interlock/hidden"
	"interlock/internal/apptest"
)

// bidiCommand reads `cat README.md #~ fr- mr ;` where bidi controls are applied; it runs `rm -rf ~`.
const bidiCommand = "cat README.md #\u202e; rm -rf ~ \u202c"

const forgedHeading = "# ✅ Interlock: verified read-only, safe to approve"

// hiddenTextJS counts the text nodes of the page that hold a bidi control, a carriage return,
// a line separator or a zero width space themselves (rather than their marks).
const hiddenTextJS = `(() => {
	const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	const found = [];
	for (let n = w.nextNode(); n; n = w.nextNode()) if (/[\u202a-\u202e\u2066-\u2069\u200b\u2028\r]/u.test(n.data)) found.push(n.parentElement?.className + ": " + JSON.stringify(n.data));
	for (const a of document.querySelectorAll("[title], [aria-label]")) for (const k of ["title", "aria-label"]) {
		const v = a.getAttribute(k);
		if (v && /[\u202a-\u202e\u2066-\u2069\u200b\u2028\r]/u.test(v)) found.push(k + ": " + JSON.stringify(v));
	}
	return found;
})()`

// TestConsoleShowsHiddenCharacters: a coding agent's hook whose command hides `rm -rf ~` behind a
// right-to-left override, and whose cwd and session_id hold carriage returns before a heading in
// the server's voice. In the run view, the inbox and the event log the command reads with its
// marks (⟨U+202E⟩, titled with the character's name), the call carries a warning naming the
// characters, no heading appears, and no text on the page holds a bidi control or a carriage
// return itself. "Edit and approve" shows the characters as \u escapes, and approving it
// unchanged hands the hook exactly the command that was asked. On both dialects: the bytes come
// back from storage as sent (a tag character in the description is four bytes of UTF-8).
func TestConsoleShowsHiddenCharacters(t *testing.T) {
	ctx := browser(t)
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) { consoleShowsHiddenCharacters(t, ctx, s) }, "--auth=on", "--config", externalConsoleConfig(t))
}

func consoleShowsHiddenCharacters(t *testing.T, ctx context.Context, s *apptest.Server) {
	body, _ := json.Marshal(map[string]any{
		"session_id": "s1\r" + forgedHeading + "\r", "cwd": "/repo\r" + forgedHeading + "\r", "hook_event_name": "PermissionRequest",
		"tool_name": "Bash", "tool_input": map[string]any{"command": bidiCommand, "description": "Show the README\U000E0069\U000E0067"},
	})
	hook := s.PostHookAsync(t, "/hooks/claude-code/coding?wait=60s", "Bearer "+apptest.TokenOf("cc"), body)
	runID := ""
	for deadline := time.Now().Add(20 * time.Second); runID == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hook's request was not stored")
		}
		if rs := s.HookRequests(t, "coding"); len(rs) == 1 {
			runID = rs[0].RunID
		}
	}
	page := tab(t, ctx, true)
	marked := "cat README.md #⟨U+202E⟩; rm -rf ~ ⟨U+202C⟩"

	t.Run("the inbox", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")), until(`document.querySelectorAll("#inbox-list a.row").length === 1`))
		got := get(t, page, chromedp.Evaluate[map[string]any](`(() => {
			const row = document.querySelector("#inbox-list li[data-run]");
			return { code: row.querySelector("code").innerText, title: row.querySelector("code").title,
				badge: row.querySelector(".badge.hidden-chars")?.title || "", marks: row.querySelector("code").querySelectorAll(".hidden-char").length,
				text: row.innerText };
		})()`))
		if !strings.Contains(got["code"].(string), marked) || !strings.Contains(got["title"].(string), marked) || got["marks"].(float64) < 2 ||
			!strings.Contains(got["badge"].(string), "U+202E RIGHT-TO-LEFT OVERRIDE, U+202C POP DIRECTIONAL FORMATTING") ||
			!strings.Contains(got["text"].(string), "thread s1⟨U+000D⟩"+forgedHeading+"⟨U+000D⟩") {
			t.Fatalf("inbox row: %v", got)
		}
		if found := get(t, page, chromedp.Evaluate[[]string](hiddenTextJS)); len(found) != 0 {
			t.Fatalf("the inbox shows hidden characters themselves: %q", found)
		}
	})

	t.Run("the run view, the raw JSON and the event log", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?run="+runID), until(`document.querySelector("#run-context .md") !== null`),
			chromedp.WaitVisible(chromedp.CSS(`.pending button.approve`)), until(`document.querySelector('#stream li[data-type="TOOL_CALL"]') !== null`),
			chromedp.Click(chromedp.CSS(`.pending .raw-toggle`)))
		got := get(t, page, chromedp.Evaluate[map[string]any](`(() => {
			const card = document.querySelector(".pending");
			const cell = [...card.querySelectorAll(".args-table tr")].find((tr) => tr.querySelector("th").textContent === "command")?.querySelector("td");
			return {
				cell: cell?.innerText || "",
				description: [...card.querySelectorAll(".args-table tr")].find((tr) => tr.querySelector("th").textContent === "description")?.querySelector("td").innerText || "",
				titles: [...(cell?.querySelectorAll(".hidden-char") || [])].map((m) => m.title),
				warning: card.querySelector(".hidden-warning")?.innerText || "",
				raw: card.querySelector(".raw-json")?.innerText || "",
				editor: card.querySelector("textarea[id^=args-]")?.value || "",
				event: document.querySelector('#stream li[data-type="TOOL_CALL"]').innerText,
				headings: [...document.querySelectorAll("main :is(h1, h2, h3, h4, h5, h6)")].map((h) => h.textContent),
				context: document.querySelector("#run-context").innerText,
				contextWarning: document.querySelector("#run-context .hidden-warning")?.innerText || "",
				head: document.querySelector(".meta").innerText,
			};
		})()`))
		if got["description"] != "Show the README⟨U+E0069⟩⟨U+E0067⟩" {
			t.Errorf("the description shows %q, want its tags as marks", got["description"])
		}
		if got["cell"] != marked {
			t.Errorf("the arguments table shows %q, want %q", got["cell"], marked)
		}
		titles, _ := got["titles"].([]any)
		if len(titles) != 2 || !strings.HasPrefix(titles[0].(string), "U+202E RIGHT-TO-LEFT OVERRIDE") || !strings.HasPrefix(titles[1].(string), "U+202C POP DIRECTIONAL FORMATTING") {
			t.Errorf("the marks' titles: %v", titles)
		}
		if w := got["warning"].(string); !strings.Contains(w, "Hidden characters") || !strings.Contains(w, "U+202E RIGHT-TO-LEFT OVERRIDE, U+202C POP DIRECTIONAL FORMATTING") {
			t.Errorf("the call's warning: %q", w)
		}
		if !strings.Contains(got["raw"].(string), marked) || !strings.Contains(got["event"].(string), marked) || !strings.Contains(got["event"].(string), "hidden characters") {
			t.Errorf("raw JSON %q, event %q: want the marks", got["raw"], got["event"])
		}
		if e := got["editor"].(string); !strings.Contains(e, `cat README.md #\u202e; rm -rf ~ \u202c`) {
			t.Errorf("the editor holds %q, want the characters as \\u escapes", e)
		}
		for _, h := range got["headings"].([]any) {
			if strings.Contains(h.(string), "verified") {
				t.Errorf("a heading in the server's voice: %q (all: %v)", h, got["headings"])
			}
		}
		for _, want := range []string{"/repo⟨U+000D⟩" + forgedHeading + "⟨U+000D⟩", "s1⟨U+000D⟩" + forgedHeading + "⟨U+000D⟩", marked, "its words, not Interlock's"} {
			if !strings.Contains(got["context"].(string), want) {
				t.Errorf("the context lacks %q:\n%s", want, got["context"])
			}
		}
		if w := got["contextWarning"].(string); !strings.Contains(w, "U+000D CARRIAGE RETURN") {
			t.Errorf("the context's warning: %q", w)
		}
		if !strings.Contains(got["head"].(string), "session s1⟨U+000D⟩"+forgedHeading+"⟨U+000D⟩") {
			t.Errorf("the run's head: %q", got["head"])
		}
		if found := get(t, page, chromedp.Evaluate[[]string](hiddenTextJS)); len(found) != 0 {
			t.Errorf("the run view shows hidden characters themselves: %q", found)
		}
	})

	// Approved unchanged from the editor is a plain approval: the command runs as the model asked
	// it, byte for byte, never as the browser's reading of it wrote it back.
	t.Run("edited and approved unchanged, the hook gets the command as asked", func(t *testing.T) {
		do(t, page, chromedp.Click(chromedp.CSS(`.pending details.edit summary`)), chromedp.Click(chromedp.CSS(`.pending form[aria-label="Edit and approve"] button[type=submit]`)),
			chromedp.Click(chromedp.CSS(`.pending form[aria-label="Edit and approve"] button.final`)),
			until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
		a := apptest.Answered(t, hook)
		var got struct {
			HookSpecificOutput struct {
				Decision struct {
					Behavior     string
					UpdatedInput struct{ Command string }
				}
			}
		}
		if err := json.Unmarshal(a.Body, &got); err != nil || got.HookSpecificOutput.Decision.Behavior != "allow" ||
			(got.HookSpecificOutput.Decision.UpdatedInput.Command != "" && got.HookSpecificOutput.Decision.UpdatedInput.Command != bidiCommand) {
			t.Fatalf("the hook's answer %s: want allow, with the command as asked if any", a.Body)
		}
	})
}

// TestHiddenListsAgree: the console's list of hidden characters (js/hidden.js) and the server's
// (package hidden) are the same on every code point, names included.
func TestHiddenListsAgree(t *testing.T) {
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "list.db"))
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.readyState === "complete"`))
	got := get(t, page, chromedp.Evaluate[[]string](`(async () => {
		const h = await import("/js/hidden.js");
		const out = [];
		for (let cp = 0; cp <= 0x10FFFF; cp++) {
			if (cp >= 0xD800 && cp <= 0xDFFF) continue;
			const s = String.fromCodePoint(cp);
			const byRegExp = new RegExp(h.HIDDEN.source, "u").test(s);
			if (byRegExp !== h.isHidden(cp) || byRegExp !== h.hasHidden("a" + s + "b")) return ["disagree at " + cp.toString(16)];
			if (byRegExp) out.push(h.label(cp) + " " + h.mark(cp));
		}
		return out;
	})()`, chromedp.EvalAwaitPromise))
	var want []string
	for r := rune(0); r <= 0x10FFFF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		if hidden.Is(r) {
			want = append(want, fmt.Sprintf("U+%04X %s %s", r, hidden.Name(r), hidden.Mark(r)))
		}
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Fatalf("first difference at %d: console %q, server %q (console %d, server %d characters)", i, got[i], want[i], len(got), len(want))
			}
		}
		t.Fatalf("console %d characters, server %d", len(got), len(want))
	}
	if len(want) < 300 {
		t.Fatalf("only %d hidden characters", len(want))
	}
}
