// The console's router: the view and its filters live in the URL (?view=…, ?run=…), so links
// can be shared and the back button works. Each view renders into <main> and returns a cleanup
// function that ends its subscriptions and timers. When the server asks for an access token it
// was not given (or refuses the one it was), the view gives way to a token prompt; once a token
// is entered the view is drawn again.
import { watchStatus, watchAuth, token, setToken, forgetToken } from "./gql.js";
import { el } from "./dom.js";
import { inboxView } from "./inbox.js";
import { runView } from "./run.js";
import { newRunView } from "./newrun.js";
import { historyView } from "./history.js";

const main = document.getElementById("main");
const conn = document.getElementById("conn");
const signOut = document.getElementById("signout");
const themeSelect = document.getElementById("theme");
let cleanup = () => {};
let prompting = null; // the token prompt, while it is shown

// The status line (a polite live region, empty when all is well) says when the live updates
// are down and when they are back.
let hideReconnected = null;
watchStatus((state) => {
  clearTimeout(hideReconnected);
  conn.className = `conn ${state}`;
  conn.textContent = { reconnecting: "Reconnecting…", reconnected: "Reconnected", unreachable: "Server unreachable" }[state] || "";
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
  prompting = null;
  main.replaceChildren();
  signOut.hidden = !token();
  const params = new URLSearchParams(location.search);
  const view = params.get("run") ? "run" : params.get("view") || "inbox";
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const views = { inbox: inboxView, run: runView, new: newRunView, history: historyView };
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

// The token prompt. Shown in place of the view; a refusal said in it (an alert), the field
// emptied and focused so the person can try again.
function askForToken({ refused }) {
  signOut.hidden = !token();
  if (prompting) {
    if (refused) prompting.refused();
    return;
  }
  cleanup();
  cleanup = () => {};
  const input = el("input", { type: "password", id: "access-token", name: "token", autocomplete: "off", spellcheck: "false",
    required: true, "aria-describedby": "token-help" });
  const error = el("p", { id: "token-error", class: "field-error", role: "alert" });
  const form = el("form", { class: "card signin", "aria-labelledby": "signin-title", onsubmit: (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) {
      error.textContent = "Enter the access token.";
      input.setAttribute("aria-invalid", "true");
      input.focus();
      return;
    }
    input.value = "";
    setToken(t);
    route(); // the view again, now with the token
  } },
    el("p", { id: "token-help" }, "This server needs an access token. The server printed a link carrying one when it started; or ask your administrator."),
    el("label", { for: "access-token" }, "Access token"), input, error,
    el("div", { class: "actions" }, el("button", { type: "submit", class: "primary" }, "Sign in")));
  main.replaceChildren(el("h1", { id: "signin-title" }, "Sign in"), form);
  prompting = {
    refused() {
      error.textContent = "The token was refused: it may be mistyped, revoked, or from an earlier start of the server. Enter it again or ask for a new one.";
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", "token-error token-help");
      input.focus();
    },
  };
  if (refused) prompting.refused();
  else input.focus();
}
watchAuth(askForToken);

signOut.addEventListener("click", () => {
  forgetToken();
  route(); // the view again, without the token: a server that needs one asks for it
  signOut.hidden = true;
});

route();
