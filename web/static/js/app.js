// The console's router: the view and its filters live in the URL (?view=…, ?run=…), so links
// can be shared and the back button works. Each view renders into <main> and returns a cleanup
// function that ends its subscriptions and timers.
import { watchStatus } from "./gql.js";
import { inboxView } from "./inbox.js";
import { runView } from "./run.js";
import { newRunView } from "./newrun.js";
import { historyView } from "./history.js";

const main = document.getElementById("main");
const conn = document.getElementById("conn");
let cleanup = () => {};

// The status line (a polite live region, empty when all is well) says when the live updates
// are down and when they are back.
let hideReconnected = null;
watchStatus((state) => {
  clearTimeout(hideReconnected);
  conn.className = `conn ${state}`;
  conn.textContent = { reconnecting: "Reconnecting…", reconnected: "Reconnected", unreachable: "Server unreachable" }[state] || "";
  if (state === "reconnected") hideReconnected = setTimeout(() => { conn.textContent = ""; }, 5000);
});

/** Goes to a URL of the console (same document), adding a history entry unless replace. */
export function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  route();
}

function route() {
  cleanup();
  main.replaceChildren();
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
route();
