package web_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"interlock/auth/oidctest"
	"interlock/internal/apptest"
)

// oidcServer starts a server whose auth section has the static tokens of apptest and auth.oidc
// naming idp.
func oidcServer(t *testing.T, idp *oidctest.Provider) *apptest.Server {
	t.Helper()
	return apptest.AuthServer(t, "sqlite:"+filepath.Join(t.TempDir(), "oidc.db"),
		fmt.Sprintf("  oidc:\n    issuer: %s\n    clientID: %s\n", idp.Issuer, idp.ClientID()))
}

// across waits for a JavaScript condition to hold in the tab's page while the tab goes through
// redirects (to the provider and back), which end a chromedp.Poll.
func across(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		deadline := time.Now().Add(20 * time.Second)
		for {
			ok, err := chromedp.Evaluate[bool](expr)(ctx, tg)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			if time.Now().After(deadline) {
				return chromedp.Void{}, fmt.Errorf("waiting for %s: %v", expr, err)
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// TestConsoleOIDCSignIn: with auth.oidc the console signs in with the provider by itself
// (Authorization Code + PKCE, the provider signing its user in at once) and comes back to the
// page it was opened on, shows who is signed in, renews the ID token with the refresh token
// before it expires without reloading the page (what was typed stays), the server taking the
// renewed token, and signs out at the provider's end_session_endpoint.
func TestConsoleOIDCSignIn(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{Lifetime: 15 * time.Second})
	t.Cleanup(idp.Close)
	s := oidcServer(t, idp)
	page := tab(t, browser(t), true)

	do(t, page, chromedp.Navigate(s.URL+"/?view=new"),
		across(`document.getElementById("whoami")?.innerText.includes("Ada Lovelace")`))
	if got := textOf(t, page, "#whoami"); !strings.Contains(got, "Signed in as") || !strings.Contains(got, "approver") {
		t.Fatalf("header says %q, want Signed in as Ada Lovelace · approver", got)
	}
	if search := get(t, page, chromedp.Evaluate[string](`location.search`)); search != "?view=new" {
		t.Fatalf("back at %q, want the page the console was opened on (?view=new), without code or state", search)
	}
	if get(t, page, chromedp.Evaluate[bool](`localStorage.getItem("interlock.token") === null && !!sessionStorage.getItem("interlock.token")`)) != true {
		t.Fatal("the ID token must be kept in sessionStorage only")
	}
	first := get(t, page, chromedp.Evaluate[string](`sessionStorage.getItem("interlock.token")`))
	if r := s.PostAs(t, first, `{ me { subject roles } }`, nil); r.Code != "" || !strings.Contains(string(r.Data), `"u-1"`) {
		t.Fatalf("the console's token: %s %s, want me u-1", r.Code, r.Data)
	}

	// Renewal (a third of the 12 s lifetime before it ends) keeps the page as it is.
	do(t, page, until(`!!document.getElementById("n-thread")`),
		js(`document.getElementById("n-thread").value = "typed before the renewal"; window.__samePage = true`),
		until(fmt.Sprintf(`sessionStorage.getItem("interlock.token") !== %q`, first)))
	if idp.Refreshes() < 1 {
		t.Fatal("the token changed without a refresh_token grant")
	}
	kept := get(t, page, chromedp.Evaluate[bool](`window.__samePage === true && document.getElementById("n-thread").value === "typed before the renewal"`))
	if !kept {
		t.Fatal("the renewal reloaded the page or lost what was typed")
	}
	renewed := get(t, page, chromedp.Evaluate[string](`sessionStorage.getItem("interlock.token")`))
	if r := s.PostAs(t, renewed, `{ me { subject } }`, nil); r.Code != "" {
		t.Fatalf("the renewed token was refused: %s %s", r.Code, r.Msg)
	}
	if get(t, page, chromedp.Evaluate[bool](`document.getElementById("signout").hidden`)) {
		t.Fatal("Sign out is not offered while signed in")
	}

	do(t, page, chromedp.Click(chromedp.CSS(`#signout`)),
		across(`location.pathname === "/" && !document.getElementById("signin").hidden && document.getElementById("whoami").hidden`))
	if idp.Logouts() != 1 {
		t.Fatalf("end_session_endpoint visited %d times, want 1", idp.Logouts())
	}
	if get(t, page, chromedp.Evaluate[bool](`sessionStorage.getItem("interlock.token") === null && sessionStorage.getItem("interlock.oidc") === null`)) != true {
		t.Fatal("tokens kept after Sign out")
	}
	// Signing in again is one click.
	do(t, page, chromedp.Click(chromedp.CSS(`#signin`)),
		across(`document.getElementById("whoami")?.innerText.includes("Ada Lovelace")`))
}

// TestConsoleOIDCRefusesAnotherSignIn: an answer whose ID token carries another sign-in's
// nonce, or whose state is not the pending sign-in's, is refused: no token is kept, the page
// says why and offers Sign in.
func TestConsoleOIDCRefusesAnotherSignIn(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{})
	t.Cleanup(idp.Close)
	s := oidcServer(t, idp)
	page := tab(t, browser(t), true)

	other := "the-nonce-of-another-sign-in"
	idp.SetNonce(&other)
	do(t, page, chromedp.Navigate(s.URL+"/"), across(`!!document.getElementById("signin-error")`))
	if msg := textOf(t, page, "#signin-error"); !strings.Contains(msg, "nonce") {
		t.Fatalf("error %q, want it to name the nonce", msg)
	}
	noToken := `sessionStorage.getItem("interlock.token") === null && localStorage.getItem("interlock.token") === null`
	if !get(t, page, chromedp.Evaluate[bool](noToken)) {
		t.Fatal("a token of another sign-in was kept")
	}
	idp.SetNonce(nil)

	// A code and a state this tab did not ask for (a link planted by someone else).
	do(t, page, chromedp.Navigate(s.URL+"/?code=planted&state=forged"), across(`!!document.getElementById("signin-error")`))
	if msg := textOf(t, page, "#signin-error"); !strings.Contains(msg, "state") {
		t.Fatalf("error %q, want it to name the state", msg)
	}
	if !get(t, page, chromedp.Evaluate[bool](noToken+` && !document.getElementById("signin").hidden`)) {
		t.Fatal("a forged answer was taken, or Sign in is not offered")
	}
	do(t, page, chromedp.Click(chromedp.CSS(`#signin`)),
		across(`document.getElementById("whoami")?.innerText.includes("Ada Lovelace") && !document.getElementById("signin-error")`))
}

// TestConsoleOIDCWithoutRefreshToken: a provider that gives no refresh token cannot renew the
// sign-in from the page; before the ID token ends the console says so and offers Sign in, which
// goes to the provider and back to the same page, signed in with a new token.
func TestConsoleOIDCWithoutRefreshToken(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{Lifetime: 9 * time.Second, NoRefresh: true})
	t.Cleanup(idp.Close)
	s := oidcServer(t, idp)
	page := tab(t, browser(t), true)

	do(t, page, chromedp.Navigate(s.URL+"/?view=history"),
		across(`document.getElementById("whoami")?.innerText.includes("Ada Lovelace")`))
	first := get(t, page, chromedp.Evaluate[string](`sessionStorage.getItem("interlock.token")`))
	do(t, page, until(`!document.getElementById("signin").hidden && !!document.getElementById("signin-error")`))
	if msg := textOf(t, page, "#signin-error"); !strings.Contains(msg, "cannot be renewed") {
		t.Fatalf("notice %q, want it to say the sign-in cannot be renewed", msg)
	}
	if !get(t, page, chromedp.Evaluate[bool](fmt.Sprintf(`sessionStorage.getItem("interlock.token") === %q`, first))) {
		t.Fatal("the token changed before the person signed in again")
	}
	do(t, page, chromedp.Click(chromedp.CSS(`#signin`)),
		across(fmt.Sprintf(`location.search === "?view=history" && !!sessionStorage.getItem("interlock.token") && sessionStorage.getItem("interlock.token") !== %q && document.getElementById("signin").hidden`, first)))
	if idp.Refreshes() != 0 {
		t.Fatalf("%d refresh_token grants from a provider that gives no refresh token", idp.Refreshes())
	}
}

// TestConsoleOIDCRenewalOutlivesAnOutage: the provider does not answer when the console renews
// its token; the refresh token is kept and the renewal tried again, so once the provider is back
// the sign-in renews without asking the person to sign in again.
func TestConsoleOIDCRenewalOutlivesAnOutage(t *testing.T) {
	t.Parallel()
	idp := oidctest.Start(oidctest.Options{Lifetime: 15 * time.Second})
	t.Cleanup(idp.Close)
	s := oidcServer(t, idp)
	page := tab(t, browser(t), true)

	do(t, page, chromedp.Navigate(s.URL+"/?view=history"),
		across(`document.getElementById("whoami")?.innerText.includes("Ada Lovelace")`))
	first := get(t, page, chromedp.Evaluate[string](`sessionStorage.getItem("interlock.token")`))
	idp.SetDown(true)
	time.Sleep(11 * time.Second) // past the renewal (5 s before the 15 s token ends): it fails, and is tried again
	if idp.Refreshes() != 0 {
		t.Fatalf("%d refreshes while the provider was down", idp.Refreshes())
	}
	idp.SetDown(false)
	do(t, page, until(fmt.Sprintf(`sessionStorage.getItem("interlock.token") !== %q`, first)))
	if shown := get(t, page, chromedp.Evaluate[bool](`!!document.getElementById("signin-error") && !document.getElementById("signin").hidden`)); shown {
		t.Fatalf("the console asks to sign in again after an outage it outlived: %q", textOf(t, page, "#signin-error"))
	}
	if idp.Refreshes() != 1 {
		t.Fatalf("%d refresh_token grants, want the one after the outage", idp.Refreshes())
	}
}
