// The console's router: the view and its filters live in the URL (?view=…, ?run=…), so links
// can be shared and the back button works. Each view renders into <main> and returns a cleanup
// function that ends its subscriptions and timers.
//
// Signing in: when the server asks for an access token it was not given, or stops taking the one
// it was (it expired mid-session, or was revoked), a modal dialog asks for one over the page as it
// is: what was typed, the open run, the filters and the scroll stay, and nothing is tried again
// meanwhile (gql.js). A token entered there is checked first (me), then the live updates resume
// and catch up, and the requests that waited are sent. A #token= link whose token differs from
// the stored one asks before replacing it. The header says who is signed in (me), nothing when
// authentication is off.
import { watchStatus, watchAuth, token, setToken, forgetToken, giveUp, checkToken, takeOffered, readLinkToken } from "./gql.js";
import { el } from "./dom.js";
import { inboxView } from "./inbox.js";
import { runView } from "./run.js";
import { newRunView } from "./newrun.js";
import { historyView } from "./history.js";
import { grantsView } from "./grants.js";
import { markAccess } from "./access.js";
import { teamView } from "./team.js";
import { startOIDC } from "./oidc.js";

const main = document.getElementById("main");
const conn = document.getElementById("conn");
const signOut = document.getElementById("signout");
const signIn = document.getElementById("signin");
const who = document.getElementById("whoami");
const themeSelect = document.getElementById("theme");
let cleanup = () => {};
let wanted = false; // the server asked for a token that the console does not have
let oidc = null; // the OIDC sign-in (oidc.js) when the server has auth.oidc
let ending = false; // the OIDC sign-in ends soon and cannot be renewed: Sign in is offered

// The status line (a polite live region, empty when all is well) says when the live updates
// are down and when they are back.
let hideReconnected = null;
watchStatus((state) => {
  clearTimeout(hideReconnected);
  conn.className = `conn ${state}`;
  conn.textContent = { reconnecting: "Reconnecting…", reconnected: "Reconnected", unreachable: "Server unreachable",
    paused: "Live updates paused: sign in again" }[state] || "";
  if (state === "reconnected") hideReconnected = setTimeout(() => { conn.textContent = ""; }, 5000);
});

// The Theme select in the header: System (follow prefers-color-scheme), Light or Dark, kept in
// localStorage. theme.js (a classic script in <head>) applied the kept choice before the first
// paint and applies every change.
const THEME_KEY = "interlock.theme";
themeSelect.value = document.documentElement.dataset.themePref || "system";
themeSelect.addEventListener("change", () => {
  const pref = themeSelect.value;
  try {
    if (pref === "system") localStorage.removeItem(THEME_KEY);
    else localStorage.setItem(THEME_KEY, pref);
  } catch { /* kept for this page only */ }
  document.documentElement.dataset.themePref = pref;
  document.dispatchEvent(new Event("interlock:theme"));
});
document.addEventListener("interlock:theme-pref", () => { themeSelect.value = document.documentElement.dataset.themePref; });

/** Goes to a URL of the console (same document), adding a history entry unless replace. */
export function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route();
}

function route() {
  cleanup();
  cleanup = () => {};
  main.replaceChildren();
  paintAuth();
  const params = new URLSearchParams(location.search);
  const view = params.get("run") ? "run" : params.get("view") || "inbox";
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const views = { inbox: inboxView, run: runView, new: newRunView, history: historyView, grants: grantsView, team: teamView };
  markAccess(main, view in views ? view : "inbox");
  cleanup = (views[view] || inboxView)(main, params, navigate) || (() => {});
}

// Links inside the console navigate without a reload.
document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a[href]");
  if (!a || a.target || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname !== "/") return;
  ev.preventDefault();
  navigate(url.pathname + url.search);
});
window.addEventListener("popstate", route);

// --- who is signed in ----------------------------------------------------------------------------

/** "ada · admin": a principal as the header shows it (the OIDC sign-in's name in place of the subject). */
function named(me) {
  const n = oidc?.name() || me.subject;
  return me.roles.length ? `${n} · ${me.roles.join(", ")}` : n;
}

/** The header's buttons: Sign out with a token, Sign in when the server wants one and the dialog is closed. */
function paintAuth() {
  signOut.hidden = !token();
  signIn.hidden = !ending && (!!token() || !wanted || !!tokenDialog?.open);
}

/** Shows me (from the me query; null: nobody, or authentication is off) in the header. */
function showWho(me) {
  whoAsked++;
  who.hidden = !me;
  who.replaceChildren(...(me ? [el("span", { class: "visually-hidden" }, "Signed in as "), named(me)] : []));
}

// Reads who the stored token stands for; only the latest read shows.
let whoAsked = 0;
async function refreshWho() {
  const t = token();
  if (!t) { showWho(null); return; }
  const mine = ++whoAsked;
  let me = null;
  try {
    const r = await checkToken(t);
    if (r.ok) me = r.me;
  } catch { /* unreachable: said by the status line */ }
  if (mine === whoAsked && t === token()) showWho(me);
}

/** Takes t (already checked: me is who it stands for) as the token: the live updates resume. */
function useToken(t, me) {
  wanted = false;
  if (tokenDialog?.open) { tokenDialog.dataset.done = "1"; tokenDialog.close(); }
  setToken(t);
  if (me === undefined) refreshWho();
  else showWho(me);
  paintAuth();
}

// --- the token dialog ------------------------------------------------------------------------

// A modal <dialog> over the page: labelled by its title, described by its help; the field is
// focused when it opens and the focus goes back where it was when it closes. Escape or "Not now"
// closes it without a token: the requests that waited fail, and the header's Sign in opens it
// again. A token is checked (me) before it is kept: a refused one is said in the dialog, the field
// emptied and focused.
let tokenDialog = null;
let opener = null;
const REFUSED = "The token was refused: it may be mistyped, revoked, or from an earlier start of the server. Enter it again or ask for a new one.";

function buildTokenDialog() {
  const input = el("input", { type: "password", id: "access-token", name: "token", autocomplete: "off", spellcheck: "false",
    required: true, "aria-describedby": "token-help" });
  const error = el("p", { id: "token-error", class: "field-error", role: "alert" });
  const help = el("p", { id: "token-help" });
  const title = el("h2", { id: "signin-title" }, "Sign in");
  const submit = el("button", { type: "submit", class: "primary" }, "Sign in");
  const fail = (msg) => {
    error.textContent = msg;
    input.value = "";
    input.setAttribute("aria-invalid", "true");
    input.setAttribute("aria-describedby", "token-error token-help");
    input.focus();
  };
  const form = el("form", { class: "signin", novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) { fail("Enter the access token."); return; }
    submit.disabled = true;
    let r;
    try { r = await checkToken(t); } catch (e) { r = { ok: false, message: e.message, unreachable: true }; }
    submit.disabled = false;
    if (!r.ok) {
      fail(r.unreachable ? r.message : /expired/i.test(r.message) ? "That token has expired. Enter a new one, or ask for one." : REFUSED);
      return;
    }
    input.value = "";
    useToken(t, r.me);
  } },
    help,
    el("label", { for: "access-token" }, "Access token"), input, error,
    el("div", { class: "actions" }, submit, el("button", { type: "button", class: "cancel", onclick: () => d.close() }, "Not now")));
  const d = el("dialog", { id: "token-dialog", class: "token-dialog", "aria-labelledby": "signin-title", "aria-describedby": "token-help" }, title, form);
  d.addEventListener("close", () => {
    if (!d.dataset.done) giveUp(); // closed without a token: what waited for one fails
    delete d.dataset.done;
    paintAuth();
    const back = opener && opener.isConnected ? opener : main;
    opener = null;
    back.focus({ preventScroll: true });
  });
  d._show = ({ refused, expired }) => {
    title.textContent = expired ? "Sign in again" : "Sign in";
    help.textContent = expired
      ? "Your access token has expired, so the live updates stopped. Enter a new one to carry on: this page stays as it is, and catches up with what it missed."
      : "This server needs an access token. The server printed a link carrying one when it started; or ask your administrator.";
    error.textContent = "";
    input.value = "";
    input.removeAttribute("aria-invalid");
    input.setAttribute("aria-describedby", "token-help");
    if (refused && !expired) {
      error.textContent = REFUSED;
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", "token-error token-help");
    }
  };
  document.body.append(d);
  return d;
}

// The server wants a token: asked once while the dialog is open (a refusal often comes twice:
// a subscription's error, then the socket's close).
function askForToken({ refused, expired, message }) {
  if (oidc) { // no token to paste: renew the sign-in, else offer Sign in (oidc.js)
    wanted = true;
    paintAuth();
    oidc.refused(message);
    return;
  }
  wanted = true;
  showWho(null);
  tokenDialog ??= buildTokenDialog();
  if (tokenDialog.open) return;
  const a = document.activeElement;
  opener = a && a !== document.body ? a : null;
  tokenDialog._show({ refused, expired });
  tokenDialog.showModal();
  tokenDialog.querySelector("#access-token").focus();
  paintAuth();
}
watchAuth(askForToken);

signIn.addEventListener("click", () => oidc ? oidc.signIn() : askForToken({ refused: false, expired: false }));

signOut.addEventListener("click", () => {
  if (oidc?.signOut()) return; // off to the provider's end_session_endpoint
  forgetToken();
  showWho(null);
  route(); // the view again, without the token: a server that needs one asks for it
});

// --- a link carrying another token -------------------------------------------------------------

/**
 * Asks whether the token a #token= link carries should replace the stored one, naming who each
 * stands for when the server says. Resolves true to replace. Escape keeps the stored token.
 */
async function confirmReplace(offer) {
  const [now, next] = await Promise.all([token(), offer].map((t) => checkToken(t).catch(() => null)));
  const current = now?.ok && now.me ? `This console is signed in as ${named(now.me)}.`
    : now && !now.ok ? "This console holds an access token that the server no longer takes (it may have expired)."
      : "This console is signed in with another access token.";
  const other = next?.ok && next.me ? `The link you opened carries a different token, for ${named(next.me)}.`
    : next && !next.ok ? "The link you opened carries a different token, which the server refuses."
      : "The link you opened carries a different token.";
  const keep = el("button", { type: "submit", value: "keep", id: "keep-token" }, "Keep the current token");
  const d = el("dialog", { id: "replace-dialog", class: "token-dialog", "aria-labelledby": "replace-title", "aria-describedby": "replace-text" },
    el("h2", { id: "replace-title" }, "Replace the access token?"),
    el("form", { method: "dialog" },
      el("div", { id: "replace-text" }, el("p", {}, current), el("p", {}, other, " Replace the stored token with it?")),
      el("div", { class: "actions" }, keep, el("button", { type: "submit", value: "replace", id: "replace-token", class: "primary" }, "Replace"))));
  document.body.append(d);
  const a = document.activeElement;
  return new Promise((resolve) => {
    d.addEventListener("close", () => {
      d.remove();
      if (a && a !== document.body && a.isConnected) a.focus();
      resolve(d.returnValue === "replace" ? (next?.ok ? { me: next.me } : {}) : null);
    });
    d.showModal();
    keep.focus(); // the safe choice first
  });
}

/** Replaces the stored token with offer (a link's) if the person says so; true when replaced. */
async function offerReplace(offer) {
  const yes = offer && await confirmReplace(offer);
  if (!yes) return false;
  useToken(offer, yes.me);
  return true;
}

// A link opened in the console's own tab (the address changed only after "#"): its token is
// kept (none was stored) or offered in place of the stored one, and the view drawn again.
window.addEventListener("hashchange", async () => {
  const read = readLinkToken();
  if (read === "stored") useToken(token());
  else if (read !== "offered" || !await offerReplace(takeOffered())) return;
  route();
});

// With auth.oidc the console signs in with the provider (oidc.js): it may leave for the
// provider here, or come back from it with a token.
oidc = await startOIDC({
  renewed: () => { wanted = false; ending = false; refreshWho(); paintAuth(); },
  expiring: () => { wanted = true; ending = true; paintAuth(); },
});
if (oidc && !token()) wanted = true;

// The link the console was opened with (gql.js took its token out of the address).
await offerReplace(takeOffered());
refreshWho();
route();
