package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"interlock/internal/apptest"
)

// TestConsoleRunShowsDeepValuesSafely: a tool's result and a tool's question 9,000 levels deep
// (values the server does not bound: tools answer what they answer) are shown as a notice, and
// the run view keeps its Approve, Decline and Resume controls.
func TestConsoleRunShowsDeepValuesSafely(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	model := apptest.ScriptedModel(t,
		[]apptest.ScriptedCall{{ID: "call_1", Tool: "probe", Args: `{}`}},
		[]apptest.ScriptedCall{{ID: "call_1", Tool: "refund", Args: `{"orderId":"7"}`}},
		[]apptest.ScriptedCall{{ID: "call_1", Tool: "ask", Args: `{}`}})
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/probe":
			io.WriteString(w, `{"result":`+apptest.DeepJSON(9000)+`}`)
		case "/ask":
			io.WriteString(w, `{"suspend":`+apptest.DeepJSON(9000)+`}`)
		default:
			io.WriteString(w, `{"result":"refunded"}`)
		}
	}))
	t.Cleanup(tool.Close)
	file := apptest.WriteConfig(t, `
agents:
  - id: deep
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [probe, refund, ask]
tools:
  - {name: probe, description: Probe, inputSchema: {type: object}, http: {url: `+tool.URL+`/probe, timeout: 5s}}
  - {name: refund, description: Refund, inputSchema: {type: object}, requireApproval: true, http: {url: `+tool.URL+`/refund, timeout: 5s}}
  - {name: ask, description: Ask, inputSchema: {type: object}, http: {url: `+tool.URL+`/ask, timeout: 5s}}
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "deep.db"), "--config", file)
	run := s.StartRun(t, "go deep", map[string]any{"agentId": "deep"})
	s.WaitStatus(t, run.RunID, "SUSPENDED")
	page := tab(t, ctx, false)
	const notice = "nested more than 64 levels deep"
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID),
		chromedp.WaitVisible(chromedp.CSS(`.pending button.approve`)), chromedp.WaitVisible(chromedp.CSS(`.pending button.decline`)),
		until(`document.body.innerText.includes("`+notice+`")`))

	do(t, page, chromedp.Click(chromedp.CSS(`.pending button.approve`)))
	s.WaitStatus(t, run.RunID, "SUSPENDED")
	do(t, page, chromedp.WaitVisible(chromedp.CSS(`.pending form button[type=submit]`)),
		until(`[...document.querySelectorAll(".pending")].some((p) => p.innerText.includes("`+notice+`"))`))
	if body := bodyText(t, page); strings.Count(body, notice) < 2 {
		t.Fatalf("the page shows the notice %d times, want for the result and the question:\n%.2000s", strings.Count(body, notice), body)
	}
}
