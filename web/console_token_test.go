package web_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/golang-jwt/jwt/v5"

	"interlock/internal/apptest"
)

// jwtServer starts a server that takes HS256 JWTs (and no static tokens) and returns it with a
// function signing a token for subject with role that is good for life (a negative life: expired).
// The server's leeway is 30 s: a token is expired at exp + 30 s, for requests and streams alike.
func jwtServer(t *testing.T) (*apptest.Server, func(subject, role string, life time.Duration) string) {
	t.Helper()
	const secret = jwtSecret
	file := apptest.WriteConfig(t, `
auth:
  jwt: {hs256SecretEnv: INTERLOCK_TEST_JWT, issuer: https://idp.test/, audience: interlock}
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "jwt.db"), "--auth=on", "--config", file)
	return s, func(subject, role string, life time.Duration) string {
		claims := jwt.MapClaims{"iss": "https://idp.test/", "aud": "interlock", "sub": subject, "roles": role,
			"exp": time.Now().Add(life - 30*time.Second).Unix()}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
}

// countSockets counts, server-side, the WebSocket handshakes h is asked for.
func countSockets(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/graphql" && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			n.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

// noteSubscribes makes every page the tab loads record the variables of each runEvents subscribe
// message its WebSocket sends (window.__subs); the run view's other subscriptions (claims seen
// live) are left out.
func noteSubscribes(t *testing.T, page context.Context) {
	t.Helper()
	_, err := chromedp.Call(page, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__subs = [];
		const send = WebSocket.prototype.send;
		WebSocket.prototype.send = function (data) {
			try {
				const m = JSON.parse(data);
				if (m.type === "subscribe" && /\brunEvents\b/.test(m.payload.query)) window.__subs.push(m.payload.variables || {});
			} catch {}
			return send.call(this, data);
		};`})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConsoleAsksAgainWhenTheTokenExpires: a JWT expires while the console follows a run (the
// server closes the socket with 4401 and ends the subscription UNAUTHENTICATED). The console asks
// for a new token in a modal dialog over the page as it was: the run view and the decline reason
// half typed stay, nothing reconnects while it asks (handshakes counted server-side). With a new
// token the socket opens once more, runEvents resumes after the last seq seen, and a decision
// taken through the API afterwards shows up live; the header names who is signed in.
func TestConsoleAsksAgainWhenTheTokenExpires(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s, sign := jwtServer(t)
	var sockets atomic.Int64
	url := serve(t, countSockets(s.App.Handler(), &sockets))
	admin := sign("ada", "admin", time.Hour)
	run := s.SuspendAs(t, admin, "refund order 42 for 30", nil)

	page := tab(t, ctx, true)
	noteSubscribes(t, page)
	expiring := sign("ada", "admin", 8*time.Second)
	reason := fmt.Sprintf(`document.querySelector('[id="reason-%s"]')`, run.ToolCalls[0].ToolCallID)
	do(t, page, chromedp.Navigate(url+"/?run="+run.RunID+"#token="+expiring), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
		js(reason+`.focus()`), chromedp.KeyEvent("half typed"))

	do(t, page, until(`!!document.querySelector("#token-dialog")?.open`))
	state := get(t, page, chromedp.Evaluate[string](`[
		document.activeElement.id, document.querySelector("#signin-title").textContent,
		document.querySelector("#token-dialog").getAttribute("aria-labelledby"),
		`+reason+`.value, location.search, document.querySelector("#run-status")?.textContent,
		!!document.querySelector(".pending button.approve"), document.querySelector("#conn").textContent,
		document.querySelector("#whoami").hidden].join("|")`))
	want := strings.Join([]string{"access-token", "Sign in again", "signin-title", "half typed", "?run=" + run.RunID, "SUSPENDED", "true",
		"Live updates paused: sign in again", "true"}, "|")
	if state != want {
		t.Fatalf("with the dialog open [focus|title|labelled by|reason|address|status|approve shown|status line|who hidden]\n got %q\nwant %q", state, want)
	}
	if help := textOf(t, page, `#token-help`); !strings.Contains(help, "expired") {
		t.Errorf("the dialog says %q, not that the token expired", help)
	}
	screenshot(t, page, "token-expired.png")
	time.Sleep(2 * time.Second) // a loop would have reconnected many times by now
	if n := sockets.Load(); n != 1 {
		t.Fatalf("%d WebSocket handshakes while the dialog asks, want the first one only", n)
	}

	do(t, page, chromedp.SendKeys(chromedp.CSS(`#access-token`), sign("ada", "admin", time.Hour)),
		chromedp.Click(chromedp.CSS(`#token-dialog button[type=submit]`)),
		until(`!document.querySelector("#token-dialog").open`),
		until(`document.querySelector("#whoami")?.textContent === "Signed in as ada · admin"`),
		until(`window.__subs.length === 2`))
	back := get(t, page, chromedp.Evaluate[string](`[document.activeElement === `+reason+`, `+reason+`.value,
		JSON.stringify(window.__subs.map((v) => v.after))].join("|")`))
	if want := fmt.Sprintf("true|half typed|[0,%d]", run.LastEventSeq); back != want {
		t.Fatalf("after the new token [focus back on the reason|reason|runEvents after] = %q, want %q", back, want)
	}

	s.MustAs(t, admin, approveAs, map[string]any{"id": run.RunID}, nil)
	do(t, page, until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`),
		until(`document.querySelectorAll('#stream li[data-type="RUN_FINISHED"]').length === 1`))
	if n := get(t, page, chromedp.Evaluate[int](`document.querySelectorAll('#stream li[data-type="RUN_SUSPENDED"]').length`)); n != 1 {
		t.Errorf("RUN_SUSPENDED is shown %d times, want once", n)
	}
	if n := sockets.Load(); n != 2 {
		t.Errorf("%d WebSocket handshakes in all, want 2: the first, and one with the new token", n)
	}
}

// TestConsoleRequestWaitsForANewToken: a request the server refuses UNAUTHENTICATED (here the
// stored token is one it does not take) opens the token dialog over the page. Escape closes it:
// the decline fails saying so, what was typed stays, and the header offers Sign in. Asked again,
// the decline waits while the dialog is open and is sent with the new token, reason and all.
func TestConsoleRequestWaitsForANewToken(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "wait.db"), "")
	run := s.SuspendAs(t, apptest.TokenOf("root"), "refund order 42 for 30", nil)
	page := tab(t, ctx, true)
	reason := fmt.Sprintf(`document.querySelector('[id="reason-%s"]')`, run.ToolCalls[0].ToolCallID)
	do(t, page, chromedp.Navigate(s.URL+"/?run="+run.RunID+"#token="+apptest.TokenOf("alice")), chromedp.WaitVisible(chromedp.CSS(`button.approve`)),
		chromedp.SendKeys(chromedp.CSS(`.pending input[type=text]`), "no receipt"),
		js(`localStorage.setItem("interlock.token", "revoked")`),
		chromedp.Click(chromedp.CSS(`button.decline`)),
		until(`!!document.querySelector("#token-dialog")?.open`))
	if msg := textOf(t, page, `#token-error`); !strings.Contains(msg, "The token was refused") {
		t.Fatalf("the dialog says %q, want the refusal", msg)
	}

	do(t, page, key(kb.Escape), until(`!document.querySelector("#token-dialog").open`),
		until(`document.body.innerText.includes("Not signed in")`))
	state := get(t, page, chromedp.Evaluate[string](`[`+reason+`.value, document.activeElement !== document.body,
		!document.querySelector("#signin").hidden, document.querySelector("#signout").hidden].join("|")`))
	if state != "no receipt|true|true|true" {
		t.Fatalf("after Escape [reason|focus kept off <body>|Sign in shown|Sign out hidden] = %q", state)
	}
	if st := runStatusAs(t, s, apptest.TokenOf("root"), run.RunID); st != "SUSPENDED" {
		t.Fatalf("after Escape the run is %s", st)
	}

	do(t, page, chromedp.Click(chromedp.CSS(`#signin`)), until(`!!document.querySelector("#token-dialog")?.open`),
		chromedp.SendKeys(chromedp.CSS(`#access-token`), "still-wrong"), chromedp.Click(chromedp.CSS(`#token-dialog button[type=submit]`)),
		until(`document.querySelector("#token-error").textContent.includes("The token was refused")`),
		js(`localStorage.setItem("interlock.token", "revoked")`),
		chromedp.Click(chromedp.CSS(`#token-dialog button.cancel`)),
		chromedp.Click(chromedp.CSS(`button.decline`)), until(`!!document.querySelector("#token-dialog")?.open`))
	if st := runStatusAs(t, s, apptest.TokenOf("root"), run.RunID); st != "SUSPENDED" {
		t.Fatalf("a refused token decided: the run is %s", st)
	}
	do(t, page, chromedp.SendKeys(chromedp.CSS(`#access-token`), apptest.TokenOf("alice")), chromedp.Click(chromedp.CSS(`#token-dialog button[type=submit]`)),
		until(`document.querySelector("#run-status")?.textContent === "COMPLETED"`))
	if ds := decisionsAs(t, s, apptest.TokenOf("root"), run.RunID); len(ds) != 1 || ds[0]["kind"] != "DECLINED" || ds[0]["decidedBy"] != "alice" {
		t.Fatalf("decisions %v, want one DECLINED by alice", ds)
	}
	var out struct {
		Run struct{ Decisions []struct{ Reason string } }
	}
	s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { decisions { reason } } }`, map[string]any{"id": run.RunID}, &out)
	if got := out.Run.Decisions[0].Reason; got != "no receipt" {
		t.Fatalf("the decline was sent with reason %q, want the one typed", got)
	}
	if who := get(t, page, chromedp.Evaluate[string](`document.querySelector("#whoami").textContent`)); who != "Signed in as alice · approver" {
		t.Fatalf("the header says %q", who)
	}
}

// TestConsoleLinkAsksBeforeReplacingTheToken: a #token= link whose token differs from the stored
// one asks first, naming who is signed in now and whom the link signs in; declining keeps the
// stored token, accepting takes the link's; either way the token leaves the address. The same
// token, or none stored, asks nothing. The header shows who is signed in, and nothing after
// signing out.
func TestConsoleLinkAsksBeforeReplacingTheToken(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "link.db"), "")
	alice, bob := apptest.TokenOf("alice"), apptest.TokenOf("bob")
	page := tab(t, ctx, true)
	signedIn := func(t *testing.T, want string) {
		t.Helper()
		do(t, page, until(`document.querySelector("#whoami")?.textContent === "Signed in as `+want+`"`))
	}
	noToken := func(t *testing.T) {
		t.Helper()
		if href := get(t, page, chromedp.Evaluate[string](`location.href`)); strings.Contains(href, "token") {
			t.Fatalf("the address still carries the token: %s", href)
		}
	}
	stored := func(t *testing.T, want string) {
		t.Helper()
		if got := get(t, page, chromedp.Evaluate[string](storedToken)); got != want {
			t.Fatalf("localStorage holds %q, want %q", got, want)
		}
	}

	t.Run("none stored: not asked", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?view=history#token="+alice), until(`!!document.querySelector("#history-empty")`))
		signedIn(t, "alice · approver")
		if get(t, page, chromedp.Evaluate[bool](`!!document.querySelector("#replace-dialog")`)) {
			t.Fatal("asked to replace a token when none was stored")
		}
		stored(t, alice)
		noToken(t)
	})
	t.Run("differs: asked; declined keeps the stored token", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?view=new#token="+bob), until(`!!document.querySelector("#replace-dialog")?.open`))
		text := get(t, page, chromedp.Evaluate[string](`[document.querySelector("#replace-title").textContent,
			document.querySelector("#replace-text").innerText, document.activeElement.id].join("|")`))
		if !strings.Contains(text, "Replace the access token?") || !strings.Contains(text, "signed in as alice · approver") ||
			!strings.Contains(text, "for bob · approver") || !strings.HasSuffix(text, "|keep-token") {
			t.Fatalf("the question [title|text|focus]: %q", text)
		}
		noToken(t) // out of the address while the question is open
		screenshot(t, page, "token-replace.png")
		do(t, page, chromedp.Click(chromedp.CSS(`#keep-token`)), until(`!document.querySelector("#replace-dialog")`),
			until(`!!document.querySelector("#n-agent option")`))
		stored(t, alice)
		signedIn(t, "alice · approver")
		noToken(t)
	})
	t.Run("differs: Escape keeps it too", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?view=history#token="+bob), until(`!!document.querySelector("#replace-dialog")?.open`),
			key(kb.Escape), until(`!document.querySelector("#replace-dialog")`), until(`!!document.querySelector("#history-empty")`))
		stored(t, alice)
		noToken(t)
	})
	t.Run("differs: accepted takes the link's token", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?view=new#token="+bob), until(`!!document.querySelector("#replace-dialog")?.open`),
			chromedp.Click(chromedp.CSS(`#replace-token`)), until(`!document.querySelector("#replace-dialog")`),
			until(`!!document.querySelector("#n-agent option")`))
		stored(t, bob)
		signedIn(t, "bob · approver")
		noToken(t)
	})
	t.Run("a link opened in the console's own tab asks too", func(t *testing.T) {
		do(t, page, js(`location.hash = "#token=`+alice+`"`), until(`!!document.querySelector("#replace-dialog")?.open`))
		noToken(t)
		do(t, page, chromedp.Click(chromedp.CSS(`#replace-token`)), until(`!document.querySelector("#replace-dialog")`))
		stored(t, alice)
		signedIn(t, "alice · approver")
	})
	t.Run("same token: not asked", func(t *testing.T) {
		do(t, page, chromedp.Navigate(s.URL+"/?view=history#token="+alice), until(`!!document.querySelector("#history-empty")`))
		signedIn(t, "alice · approver")
		if get(t, page, chromedp.Evaluate[bool](`!!document.querySelector("#replace-dialog")`)) {
			t.Fatal("asked to replace the token with itself")
		}
		noToken(t)
	})
	t.Run("signing out empties the header", func(t *testing.T) {
		do(t, page, chromedp.Click(chromedp.CSS(`#signout`)), until(`!!document.querySelector("#token-dialog")?.open`))
		if got := get(t, page, chromedp.Evaluate[string](`(() => { const w = document.querySelector("#whoami"); return w.hidden + "|" + w.textContent; })()`)); got != "true|" {
			t.Fatalf("after signing out the header's who is %q", got)
		}
	})
}

// TestConsoleHeaderWithoutAuthentication: with authentication off, me is null and the header
// names nobody.
func TestConsoleHeaderWithoutAuthentication(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "off.db"), "--auth=off")
	page := tab(t, ctx, true)
	do(t, page, chromedp.Navigate(s.URL+"/?view=history"), until(`!!document.querySelector("#history-empty")`))
	time.Sleep(300 * time.Millisecond) // me answered by now
	if got := get(t, page, chromedp.Evaluate[string](`(() => { const w = document.querySelector("#whoami"); return w ? w.hidden + "|" + w.textContent : "none"; })()`)); got != "true|" {
		t.Fatalf("with authentication off the header's who is %q, want hidden and empty", got)
	}
}
