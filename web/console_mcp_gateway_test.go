package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
)

// gatewayConsoleConfig is what AuthServer appends to its principals for the MCP gateway: a
// requester, agentbot, whose token the MCP client uses; the upstream up re-exposed as orders,
// whose refund waits for a person; separation of duties, so agentbot never decides its calls.
func gatewayConsoleConfig(up *apptest.MCPUpstream) string {
	return fmt.Sprintf(`
    - {subject: agentbot, role: requester, sha256: %s}
  separationOfDuties: true
mcpServers:
  - name: orders
    url: %s
    requireApproval: [refund]
mcpGateway:
  agentId: mcp-gateway
  servers: [orders]
  wait: 30s
`, apptest.Sha256Hex(apptest.TokenOf("agentbot")), up.URL)
}

// bearerTransport sends its token with every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// gatewaySession connects the official Go SDK's client to the gateway of s as agentbot.
func gatewaySession(t *testing.T, s *apptest.Server) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "console-test", Version: "1.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: apptest.TokenOf("agentbot")}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect to the gateway: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type heldCall struct {
	res *mcp.CallToolResult
	err error
}

// callHeld calls the tool in a goroutine (the gateway holds it until a decision); its answer
// comes on the channel.
func callHeld(cs *mcp.ClientSession, tool string, args map[string]any) <-chan heldCall {
	out := make(chan heldCall, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		out <- heldCall{res, err}
	}()
	return out
}

// answerOf waits for a held call's answer.
func answerOf(t *testing.T, c <-chan heldCall) *mcp.CallToolResult {
	t.Helper()
	select {
	case a := <-c:
		if a.err != nil {
			t.Fatalf("the held MCP call failed: %v", a.err)
		}
		return a.res
	case <-time.After(45 * time.Second):
		t.Fatal("the held MCP call got no answer")
		return nil
	}
}

func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// canonical is v as encoding/json writes it (object keys sorted), to compare values byte for byte.
func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var markRE = regexp.MustCompile(`⟨U\+([0-9A-F]{4,6})⟩`)

// unmark puts back the characters the console shows as marks (⟨U+202E⟩): what a person read,
// as the characters it stands for.
func unmark(s string) string {
	return markRE.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.ParseUint(markRE.FindStringSubmatch(m)[1], 16, 32)
		return string(rune(n))
	})
}

// TestConsoleMCPGatewayApproval: a tool call made through the MCP gateway (the official Go SDK
// client, as agentbot) is held and shows in the console's inbox as the gateway agent's external
// request for orders__refund; its run view shows exactly the arguments sent — the right-to-left
// override in the note as its mark, with a warning, in the table, the raw JSON and the editor —
// and who asked. Approved there by alice, the held call gets the upstream's result with alice as
// decidedBy, and the upstream ran refund once, with the arguments as sent and the receipt.
// Declined there with a reason, the held call is an error carrying the reason, and the upstream
// does not run.
func TestConsoleMCPGatewayApproval(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	up := apptest.NewMCPUpstream(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "gateway.db"), gatewayConsoleConfig(up))
	cs := gatewaySession(t, s)
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/#token="+apptest.TokenOf("alice")), until(`document.body.innerText.includes("Nothing waits")`))

	// openRow waits for the one request in the inbox (failing at once should the held call be
	// answered first: refused), checks its row and opens its run view.
	openRow := func(t *testing.T, held <-chan heldCall, wantArgs string) string {
		t.Helper()
		do(t, page, chromedp.Navigate(s.URL+"/"), until(`document.querySelector("#inbox-list") !== null`))
		for deadline := time.Now().Add(20 * time.Second); ; {
			select {
			case a := <-held:
				if a.err != nil {
					t.Fatalf("the MCP call ended before it showed in the inbox: %v", a.err)
				}
				t.Fatalf("the MCP call was answered before it showed in the inbox: %q %v", toolText(a.res), a.res.Meta)
			case <-time.After(50 * time.Millisecond):
			}
			if get(t, page, chromedp.Evaluate[bool](`document.querySelectorAll("#inbox-list a.row[data-run]").length === 1 && document.querySelector("#inbox-list .badge.external") !== null`)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the inbox does not show the one request:\n%s", bodyText(t, page))
			}
		}
		row := get(t, page, chromedp.Evaluate[map[string]string](`(() => {
			const li = document.querySelector("#inbox-list li[data-run]");
			return { run: li.dataset.run, tool: li.querySelector(".tool").textContent,
				agent: li.querySelector("[data-agent]").dataset.agent, code: li.querySelector("code").innerText,
				hidden: li.querySelector(".badge.hidden-chars")?.title || "" };
		})()`))
		if row["tool"] != "orders__refund" || row["agent"] != "mcp-gateway" || row["code"] != wantArgs ||
			strings.Contains(wantArgs, "⟨U+202E⟩") != strings.Contains(row["hidden"], "U+202E RIGHT-TO-LEFT OVERRIDE") {
			t.Fatalf("inbox row %v, want tool orders__refund of agent mcp-gateway, arguments %s, marked for hidden characters when they hold one", row, wantArgs)
		}
		do(t, page, chromedp.Click(chromedp.CSS(`#inbox-list a.row[data-run]`)), until(`location.search === "?run=`+row["run"]+`"`),
			until(`document.querySelector("#run-context .md") !== null`), chromedp.WaitVisible(chromedp.CSS(`.pending button.approve`)))
		return row["run"]
	}

	t.Run("approved in the console, the held call gets the upstream's result", func(t *testing.T) {
		sent := map[string]any{"order": 42, "amount": 30, "note": "refund \u202egnp.exe"}
		held := callHeld(cs, "orders__refund", sent)
		runID := openRow(t, held, `{"amount":30,"note":"refund ⟨U+202E⟩gnp.exe","order":42}`)
		if n := len(up.Calls("refund")); n != 0 {
			t.Fatalf("the upstream ran refund %d times before anyone approved it", n)
		}

		do(t, page, chromedp.Click(chromedp.CSS(`.pending .raw-toggle`)))
		var got struct {
			Title, Agent, External, By, Context, Tool, Warning, Raw, Editor string
			Table                                                           map[string]string
			Marks                                                           []string
		}
		evalJSON(t, page, `JSON.stringify((() => {
			const card = document.querySelector(".pending");
			const table = {};
			for (const tr of card.querySelectorAll(".args > .args-table > tbody > tr")) table[tr.querySelector("th").textContent] = tr.querySelector("td").innerText;
			return {
				title: document.querySelector("h1").textContent,
				agent: document.querySelector(".meta strong").textContent,
				external: document.querySelector("#run-external")?.textContent || "",
				by: document.querySelector("#run-started-by")?.textContent || "",
				context: document.querySelector("#run-context").innerText,
				tool: card.querySelector(".call-head strong").textContent,
				warning: card.querySelector(".hidden-warning")?.innerText || "",
				raw: card.querySelector(".raw-json").innerText,
				editor: card.querySelector("textarea[id^=args-]").value,
				table,
				marks: [...card.querySelectorAll(".args-table .hidden-char")].map((m) => m.title),
			};
		})())`, &got)
		if !strings.HasPrefix(got.Title, "Approval request") || got.Agent != "mcp-gateway" || got.External != "external" || got.By != "Requested by agentbot" || got.Tool != "orders__refund" {
			t.Errorf("the request's head: %+v", got)
		}
		if !strings.Contains(got.Context, "Called through the MCP gateway by an MCP client that names itself console-test.") {
			t.Errorf("the context: %q", got.Context)
		}
		wantTable := map[string]string{"order": "42", "amount": "30", "note": "refund ⟨U+202E⟩gnp.exe"}
		if canonical(t, got.Table) != canonical(t, wantTable) {
			t.Errorf("the arguments table shows %v, want %v", got.Table, wantTable)
		}
		if len(got.Marks) != 1 || !strings.HasPrefix(got.Marks[0], "U+202E RIGHT-TO-LEFT OVERRIDE") {
			t.Errorf("the marks' titles: %q", got.Marks)
		}
		if !strings.Contains(got.Warning, "Hidden characters") || !strings.Contains(got.Warning, "U+202E RIGHT-TO-LEFT OVERRIDE") {
			t.Errorf("the call's warning: %q", got.Warning)
		}
		// The raw JSON, its marks read back as the characters, and the editor's JSON (\u
		// escapes) are the arguments sent, byte for byte once canonical.
		for name, text := range map[string]string{"raw JSON": unmark(got.Raw), "editor": got.Editor} {
			var shown map[string]any
			if err := json.Unmarshal([]byte(text), &shown); err != nil {
				t.Fatalf("the %s is not JSON: %v\n%s", name, err, text)
			}
			if canonical(t, shown) != canonical(t, sent) {
				t.Errorf("the %s holds %s, want %s", name, canonical(t, shown), canonical(t, sent))
			}
		}
		if !strings.Contains(got.Raw, "⟨U+202E⟩") {
			t.Errorf("the raw JSON does not mark the override: %q", got.Raw)
		}
		if found := get(t, page, chromedp.Evaluate[[]string](hiddenTextJS)); len(found) != 0 {
			t.Errorf("the run view shows hidden characters themselves: %q", found)
		}
		screenshot(t, page, "mcp-gateway-run.png")

		do(t, page, chromedp.Click(chromedp.CSS(`.pending button.approve`)), until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
			until(`document.querySelector('section[aria-label="Decisions"]')?.innerText.includes("Approved by alice")`))
		res := answerOf(t, held)
		meta, _ := res.Meta["io.interlock/approval"].(map[string]any)
		if res.IsError || meta["decidedBy"] != "alice" || meta["runId"] != runID {
			t.Fatalf("the approved call's answer: error %v, _meta %v, text %q", res.IsError, res.Meta, toolText(res))
		}
		if sc := canonical(t, res.StructuredContent); sc != `{"order":42,"refunded":30}` {
			t.Errorf("the approved call's structured result = %s", sc)
		}
		calls := up.Calls("refund")
		if len(calls) != 1 {
			t.Fatalf("the upstream ran refund %d times, want once", len(calls))
		}
		if a, w := canonical(t, calls[0].Args), canonical(t, sent); a != w {
			t.Errorf("the upstream got %s, want %s", a, w)
		}
		if m, _ := calls[0].Meta["io.interlock/approval"].(map[string]any); m == nil || m["receipt"] == nil || m["receipt"] != meta["receipt"] {
			t.Errorf("the upstream call's _meta = %v, want the approval's receipt (%v)", calls[0].Meta, meta["receipt"])
		}
		// The run view's event log shows the decision and what the upstream answered.
		do(t, page, until(`document.querySelector('#stream li[data-type="TOOL_RESULT"]') !== null`))
		approved := textOf(t, page, `#stream li[data-type="TOOL_CALL_APPROVED"]`)
		result := textOf(t, page, `#stream li[data-type="TOOL_RESULT"]`)
		if !strings.Contains(approved, "orders__refund by alice") || !strings.Contains(result, `"refunded": 30`) {
			t.Errorf("the event log shows %q and %q, want alice's approval and the upstream's result", approved, result)
		}
	})

	t.Run("declined in the console, the held call is an error with the reason", func(t *testing.T) {
		sent := map[string]any{"order": 43, "amount": 5}
		held := callHeld(cs, "orders__refund", sent)
		openRow(t, held, `{"amount":5,"order":43}`)
		do(t, page, chromedp.SendKeys(chromedp.CSS(`.pending input[id^="reason-"]`), "order 43 was never paid"),
			chromedp.Click(chromedp.CSS(`.pending button.decline`)), until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
			until(`document.querySelector('section[aria-label="Decisions"]')?.innerText.includes("Declined by alice")`))
		res := answerOf(t, held)
		meta, _ := res.Meta["io.interlock/approval"].(map[string]any)
		if !res.IsError || !strings.Contains(toolText(res), "order 43 was never paid") || meta["status"] != "DECLINED" || meta["decidedBy"] != "alice" {
			t.Fatalf("the declined call's answer: error %v, _meta %v, text %q", res.IsError, res.Meta, toolText(res))
		}
		if n := len(up.Calls("refund")); n != 1 {
			t.Fatalf("the upstream ran refund %d times after a decline, want still once", n)
		}
	})
}
