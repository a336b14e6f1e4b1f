package web_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleArgumentsAsAForm: "Edit and approve" is a form built from the tool's inputSchema
// (a text field for orderId, a number field for amount) holding the model's arguments; an
// emptied required number is refused on its field, nothing sent. The raw JSON is one click
// away and carries the form's edits; a key the schema does not name comes back to the form as a
// JSON field. Before the final Approve the review lists what changed (amount changed, note
// added) and the exact JSON that runs; the tool runs with those bytes, as the decision records.
func TestConsoleArgumentsAsAForm(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "argsform.db"))
	run := suspended(t, s, "refund order 42 for 30")
	page := tab(t, ctx, false)
	const f = `.pending details.edit`
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(f+` summary`)),
		chromedp.Click(chromedp.CSS(f+` summary`)), chromedp.WaitVisible(chromedp.CSS(`#args-tc_1-f-amount`)))
	form := get(t, page, chromedp.Evaluate[map[string]any](`(() => {
		const q = (s) => document.querySelector(s);
		return { order: q("#args-tc_1-f-orderId").value, orderType: q("#args-tc_1-f-orderId").type, amount: q("#args-tc_1-f-amount").value,
			amountType: q("#args-tc_1-f-amount").type, rawShown: q("`+f+` .args-raw").offsetParent !== null,
			toggle: q("`+f+` .args-toggle").textContent };
	})()`))
	if form["order"] != "42" || form["orderType"] != "text" || form["amount"] != "30" || form["amountType"] != "number" || form["rawShown"] != false || form["toggle"] != "Edit as raw JSON" {
		t.Fatalf("the form from the schema: %v", form)
	}

	// A required number emptied: refused on its field, nothing sent, no review.
	do(t, page, js(`document.querySelector("#args-tc_1-f-amount").value = ""`), chromedp.Click(chromedp.CSS(f+` button[type=submit]`)),
		until(`document.querySelector("#args-tc_1-f-amount-error").textContent === "Enter a number"`))
	if inv := get(t, page, chromedp.Evaluate[string](`document.querySelector("#args-tc_1-f-amount").getAttribute("aria-invalid") || ""`)); inv != "true" {
		t.Fatalf("aria-invalid = %q on the emptied amount", inv)
	}
	if review := get(t, page, chromedp.Evaluate[bool](`document.querySelector("`+f+` .args-review-box").hidden`)); !review {
		t.Fatal("the review opened on a refused form")
	}

	// 12.5 in the form; the raw JSON carries it; a note added there comes back as a JSON field.
	do(t, page, js(`document.querySelector("#args-tc_1-f-amount").value = "12.5"`), chromedp.Click(chromedp.CSS(f+` .args-toggle`)),
		until(`document.querySelector("`+f+` .args-raw textarea").offsetParent !== null`))
	raw := get(t, page, chromedp.Evaluate[string](`JSON.stringify(JSON.parse(document.querySelector("`+f+` .args-raw textarea").value))`))
	if raw != `{"amount":12.5,"orderId":"42"}` {
		t.Fatalf("the raw JSON after the form's edit: %s", raw)
	}
	do(t, page, js(`document.querySelector("`+f+` .args-raw textarea").value = '{"orderId": "42", "amount": 12.5, "note": "<b>call first</b>"}'`),
		chromedp.Click(chromedp.CSS(f+` .args-toggle`)), until(`document.querySelector("#args-tc_1-f-note")?.tagName === "TEXTAREA"`),
		chromedp.Click(chromedp.CSS(f+` button[type=submit]`)), until(`!document.querySelector("`+f+` .args-review-box").hidden`))
	review := get(t, page, chromedp.Evaluate[map[string]any](`(() => {
		const box = document.querySelector("`+f+` .args-review-box");
		return { changes: [...box.querySelectorAll(".args-diff li")].map((li) => li.dataset.kind + " " + li.dataset.path + ": " + li.innerText.split(": ").slice(1).join(": ")),
			final: box.querySelector("pre.args-final").textContent, button: box.querySelector("button.final").textContent };
	})()`))
	changes, _ := review["changes"].([]any)
	var got []string
	for _, c := range changes {
		got = append(got, c.(string))
	}
	if strings.Join(got, " | ") != `changed amount: 30 → 12.5 | added note: "<b>call first</b>"` || review["button"] != "Approve with these arguments" {
		t.Fatalf("the review: %v", review)
	}
	shown, _ := review["final"].(string)
	if r := s.Run(t, run.RunID); r.Status != "SUSPENDED" {
		t.Fatalf("before the final Approve the run is %s", r.Status)
	}
	do(t, page, chromedp.Click(chromedp.CSS(f+` button.final`)), until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
	var out struct {
		Run struct {
			Decisions []struct {
				Kind       string
				EditedArgs json.RawMessage
			}
		}
	}
	s.Must(t, `query($id: ID!) { run(runId: $id) { decisions { kind editedArgs } } }`, map[string]any{"id": run.RunID}, &out)
	var edited []string
	for _, d := range out.Run.Decisions {
		if d.Kind == "APPROVED" {
			edited = append(edited, string(d.EditedArgs))
		}
	}
	if len(edited) != 1 || edited[0] != shown || shown != `{"amount":12.5,"note":"\u003cb\u003ecall first\u003c/b\u003e","orderId":"42"}` {
		t.Fatalf("the tool ran with %v; the review showed %s", edited, shown)
	}
}
