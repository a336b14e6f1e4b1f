package web_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleEditAndApprove: a person opens "Edit and approve", is refused arguments the tool's
// schema rejects (on the field, the run still waiting), and approves with a smaller amount; the
// tool runs with it and the decisions show both.
func TestConsoleEditAndApprove(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "edit.db"))
	run := suspended(t, s, "refund order 42 for 30")
	page := tab(t, ctx, false)
	const editor = `.pending details.edit .args-raw textarea`
	setArgs := func(v string) chromedp.Action[chromedp.Void] {
		b, _ := json.Marshal(v)
		return js(`document.querySelector("` + editor + `").value = ` + string(b))
	}
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID), chromedp.WaitVisible(chromedp.CSS(`.pending details.edit summary`)),
		chromedp.Click(chromedp.CSS(`.pending details.edit summary`)), chromedp.Click(chromedp.CSS(`.pending details.edit .args-toggle`)),
		chromedp.WaitVisible(chromedp.CSS(editor)))
	submit := chromedp.Click(chromedp.CSS(`.pending details.edit button[type=submit]`))
	final := chromedp.Click(chromedp.CSS(`.pending details.edit button.final`))
	if v := get(t, page, chromedp.Evaluate[string](`JSON.stringify(JSON.parse(document.querySelector("`+editor+`").value))`)); v != `{"amount":30,"orderId":"42"}` {
		t.Fatalf("the editor starts with %s, want the call's arguments", v)
	}

	do(t, page, setArgs(`{"orderId": "42", "amount": "lots"}`), submit, final,
		until(`document.querySelector(".pending details.edit .form-error").textContent.includes("inputSchema of issue_refund")`),
		until(`!document.querySelector(".pending details.edit .args-editing").hidden`))
	if inv := get(t, page, chromedp.Evaluate[string](`document.querySelector("`+editor+`").getAttribute("aria-invalid") || ""`)); inv != "true" {
		t.Fatalf("aria-invalid = %q on refused arguments", inv)
	}
	do(t, page, setArgs(`{"orderId": "42", "amount": 10`), submit,
		until(`document.querySelector(".pending details.edit .args-raw .field-error").textContent.includes("not valid JSON")`))
	if r := s.Run(t, run.RunID); r.Status != "SUSPENDED" {
		t.Fatalf("after refused arguments the run is %s", r.Status)
	}

	do(t, page, setArgs(`{"orderId": "42", "amount": 10}`), submit, final,
		until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
		until(`document.body.innerText.includes("with edited arguments")`))
	var out struct {
		Run struct {
			Decisions []struct{ Args, EditedArgs json.RawMessage }
		}
	}
	s.Must(t, `query($id: ID!) { run(runId: $id) { decisions { args editedArgs } } }`, map[string]any{"id": run.RunID}, &out)
	if d := out.Run.Decisions; len(d) != 1 || string(d[0].EditedArgs) != `{"amount":10,"orderId":"42"}` || string(d[0].Args) != `{"amount":30,"orderId":"42"}` {
		t.Fatalf("decisions %+v", d)
	}
	if txt := bodyText(t, page); !strings.Contains(txt, `"amount":10`) {
		t.Fatalf("the page does not show the edited arguments: %q", txt)
	}
}
