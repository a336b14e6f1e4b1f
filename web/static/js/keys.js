// Keyboard shortcuts and focus keeping, for a person who approves all day.
//
//   inbox     j / ↓ next row, k / ↑ previous row, Enter opens the selected run, x ticks its box,
//             a approves the selected row's one waiting call (rowapprove.js)
//   run view  a approves, d goes to the decline reason (Enter in it declines), r goes to the
//             resume form's first field, e opens "Edit and approve", j / k the next / previous
//             run of the inbox as it was last shown (its filters and page: runNav)
//   anywhere  u undoes the decision held last (hold.js: decisions wait a few seconds with an
//             Undo before they are sent), ? lists the shortcuts (a modal dialog; Escape closes it)
//
// Shortcuts never fire while typing (a text field, a select, a contenteditable) or with Ctrl,
// Alt or Meta held, and a shortcut never types into a field it focuses; opening a run focuses
// no field (see pendingControl). A read-only desk (access.js) has no decision shortcuts. The run view's buttons and fields are found by what run.js gives them
// (.pending button.approve, the reason-<call> input, the Resume form, details.edit).
//
// After a decision focus moves on: run.js dispatches
//   document.dispatchEvent(new CustomEvent("interlock:decided", { detail: { runId } }))
// once a decision succeeds. The next run still waiting, in the order the inbox last showed
// (kept in sessionStorage), is "next"; when none waits, the inbox is, with the focus on the row
// that took the decided one's place. A decision taken from the keyboard goes there at once; one
// taken with the mouse stays on the run (to watch it go on) and focuses a "Next waiting run"
// link instead. Focus never falls to <body>: when the focused element is removed (a view drawn
// anew, a form done with), it goes to the view's natural place instead.
import { el } from "./dom.js";
import { request } from "./gql.js";
import { readOnly } from "./access.js";
import { approveRow } from "./rowapprove.js";
import { tell, undoLast } from "./hold.js";

const ORDER_KEY = "interlock.inbox.order"; // { search, ids }: the inbox as last drawn
const FOCUS_KEY = "interlock.inbox.focus"; // { runId, index }: the row the inbox should focus when next drawn

const main = document.getElementById("main");

/** Notes the inbox's rows, in the order shown, and the address they were shown at. */
export function rememberOrder(search, ids) {
  try { sessionStorage.setItem(ORDER_KEY, JSON.stringify({ search, ids })); } catch { /* storage off: no "next" */ }
}

function storedOrder() {
  try { return JSON.parse(sessionStorage.getItem(ORDER_KEY)) || null; } catch { return null; }
}

/** Asks the inbox, when it is next drawn, to focus the row of runId (or the one at index). */
export function focusRowLater(runId, index) {
  try { sessionStorage.setItem(FOCUS_KEY, JSON.stringify({ runId, index })); } catch { /* no hint */ }
}

/** The hint left by focusRowLater, taken (read once). */
export function takeFocusHint() {
  try {
    const h = JSON.parse(sessionStorage.getItem(FOCUS_KEY));
    sessionStorage.removeItem(FOCUS_KEY);
    return h;
  } catch { return null; }
}

/** Goes to a URL of the console through the router (app.js follows popstate). */
export function go(url) {
  history.pushState(null, "", url);
  dispatchEvent(new PopStateEvent("popstate"));
}

const view = () => (new URLSearchParams(location.search).get("run") ? "run" : new URLSearchParams(location.search).get("view") || "inbox");

/** True when the key press is someone typing, not a shortcut. */
function typing(t) {
  if (!t || !(t instanceof Element)) return false;
  if (t.isContentEditable) return true;
  if (t.tagName === "TEXTAREA" || t.tagName === "SELECT") return true;
  if (t.tagName === "INPUT") return !["checkbox", "radio", "button", "submit", "reset", "range", "color", "file"].includes(t.type);
  return false;
}

// --- the inbox rows ---------------------------------------------------------------------------

const rows = () => [...document.querySelectorAll("#inbox-list a.row[data-run]")];

/** Marks row (an a.row) as the selection and focuses it. */
export function selectRow(row) {
  for (const r of rows()) {
    r.closest("li")?.classList.toggle("selected", r === row);
    if (r === row) r.setAttribute("aria-current", "true");
    else r.removeAttribute("aria-current");
  }
  row?.focus();
}

function moveSelection(step) {
  const all = rows();
  if (!all.length) return;
  const current = all.findIndex((r) => r.closest("li").contains(document.activeElement));
  const selected = current >= 0 ? current : all.findIndex((r) => r.getAttribute("aria-current") === "true");
  const i = selected < 0 ? (step > 0 ? 0 : all.length - 1) : Math.min(all.length - 1, Math.max(0, selected + step));
  selectRow(all[i]);
  all[i].scrollIntoView({ block: "nearest" });
}

// --- the run view -----------------------------------------------------------------------------

/**
 * The control a person deciding the run view's first waiting call starts from: its Approve
 * button, or, for a call that waits for an answer, the call's card itself — never a field, where
 * the next shortcut (r, d, e) or any key pressed would type (the issue's "r, M, Enter" sent "rM").
 */
function pendingControl() {
  const approve = document.querySelector(".pending .actions > button.approve:not(:disabled)");
  if (approve && !readOnly()) return approve;
  const card = document.querySelector(".pending");
  if (!card) return null;
  if (!card.hasAttribute("tabindex")) card.tabIndex = -1;
  return card;
}

function runShortcut(key) {
  const card = document.querySelector(".pending");
  if (!card || readOnly()) return false;
  switch (key) {
    case "a": {
      // An interrupted call's tool may have run: approving runs it again, so that takes a click
      // on the button that says so, never a key press (as in the inbox, rowapprove.js).
      if (card.dataset.interrupted === "true") {
        tell("This call was interrupted (its tool may have run; approving runs it again): use its Approve button to decide.", "warn");
        return true;
      }
      const b = card.querySelector(".actions > button.approve");
      if (!b || b.disabled) return false;
      b.click();
      return true;
    }
    case "d": {
      const f = card.querySelector('input[id^="reason-"]');
      if (!f) return false;
      f.focus();
      return true;
    }
    case "r": {
      const f = card.querySelector('form[aria-label="Resume"] :is(input, select, textarea)');
      if (!f) return false;
      f.focus();
      return true;
    }
    case "e": {
      const d = card.querySelector("details.edit");
      if (!d) return false;
      d.open = true;
      // The form's first field (argsform.js), or the raw JSON when the form is not shown.
      [...d.querySelectorAll("input, select, textarea")].find((f) => f.offsetParent !== null)?.focus();
      return true;
    }
  }
  return false;
}

// --- next / previous in the run view ---------------------------------------------------------

/**
 * The run view's links to the previous and next run of the inbox as it was last shown (its
 * filters, sort and page, kept by rememberOrder): "← Previous · 2 of 5 in the inbox · Next →",
 * rel="prev" and rel="next" (j and k follow them), and "Back to the inbox" with its filters.
 * Empty when the run is not in that list (opened from a link).
 */
export function runNav(runId) {
  const nav = el("nav", { class: "run-nav", "aria-label": "Runs of the inbox" });
  const order = storedOrder();
  const ids = order?.ids || [];
  const i = ids.indexOf(runId);
  if (i < 0) return nav;
  const link = (id, rel, text) => el("a", { href: "/?run=" + encodeURIComponent(id), rel, onclick: () => { wantPendingFocus = Date.now(); } }, text);
  nav.append(el("a", { href: "/" + (order.search || ""), class: "back" }, "← Inbox"), " ",
    i > 0 ? link(ids[i - 1], "prev", "‹ Previous (k)") : el("span", { class: "muted" }, "‹ Previous"), " ",
    el("span", { class: "muted position" }, `${i + 1} of ${ids.length} in the inbox`), " ",
    i < ids.length - 1 ? link(ids[i + 1], "next", "Next (j) ›") : el("span", { class: "muted" }, "Next ›"));
  return nav;
}

// --- the shortcuts dialog ---------------------------------------------------------------------

const SHORTCUTS = [
  ["Inbox", [["j or ↓", "Next waiting run"], ["k or ↑", "Previous waiting run"], ["Enter", "Open the selected run"], ["x", "Tick or untick the selected run for a bulk decision"],
    ["a", "Approve the selected run's waiting call"]]],
  ["Run", [["a", "Approve"], ["d", "Go to the decline reason; Enter in it declines"], ["r", "Go to the resume form"], ["e", "Edit the arguments and approve"],
    ["j", "Next run of the inbox"], ["k", "Previous run of the inbox"]]],
  ["Anywhere", [["u", "Undo the decision waiting to be sent"], ["?", "Show these shortcuts"], ["Escape", "Close this dialog"]]],
];
let dialog = null;
let opener = null;

function focusables(root) {
  return [...root.querySelectorAll('button, [href], input, select, textarea, [tabindex]:not([tabindex="-1"])')].filter((n) => !n.disabled);
}

/** Opens the list of shortcuts: a modal dialog that keeps the focus until it is closed. */
export function openShortcuts() {
  if (dialog?.open) return;
  opener = document.activeElement && document.activeElement !== document.body ? document.activeElement : null;
  if (!dialog) {
    const close = el("button", { type: "button", class: "close", onclick: () => dialog.close() }, "Close");
    dialog = el("dialog", { id: "shortcuts", class: "shortcuts", role: "dialog", "aria-modal": "true", "aria-labelledby": "shortcuts-title" },
      el("h2", { id: "shortcuts-title" }, "Keyboard shortcuts"),
      el("p", { class: "muted" }, "They do nothing while you type in a field."),
      SHORTCUTS.map(([group, keys]) => el("section", { "aria-label": group }, el("h3", {}, group),
        el("dl", {}, keys.flatMap(([k, what]) => [el("dt", {}, el("kbd", {}, k)), el("dd", {}, what)])))),
      el("div", { class: "actions" }, close));
    dialog.addEventListener("keydown", (ev) => {
      if (ev.key !== "Tab") return;
      const f = focusables(dialog);
      const first = f[0], last = f[f.length - 1];
      if (ev.shiftKey && (document.activeElement === first || !dialog.contains(document.activeElement))) { ev.preventDefault(); last.focus(); }
      else if (!ev.shiftKey && (document.activeElement === last || !dialog.contains(document.activeElement))) { ev.preventDefault(); first.focus(); }
    });
    dialog.addEventListener("close", () => {
      const back = opener && opener.isConnected ? opener : main;
      opener = null;
      back.focus();
    });
    document.body.append(dialog);
  }
  dialog.showModal(); // Escape closes it (the close event gives the focus back)
  dialog.querySelector("button.close").focus();
}

// --- key handling -----------------------------------------------------------------------------

document.addEventListener("keydown", (ev) => {
  if (dialog?.open || document.querySelector("dialog[open]")) return; // a dialog handles its own keys
  if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing) return;
  const t = ev.target;
  // Enter in a decline reason declines (the field is in no form, so Enter would do nothing).
  if (ev.key === "Enter" && t instanceof HTMLInputElement && t.id.startsWith("reason-") && t.closest(".pending")) {
    const b = t.closest(".pending").querySelector("button.decline");
    if (b && !b.disabled) { ev.preventDefault(); b.click(); }
    return;
  }
  if (typing(t)) return;
  if (ev.key === "?") { ev.preventDefault(); openShortcuts(); return; }
  if (ev.shiftKey) return;
  if (ev.key === "u" && undoLast()) { ev.preventDefault(); return; }
  const v = view();
  if (v === "inbox") {
    if (ev.key === "j" || ev.key === "ArrowDown") { ev.preventDefault(); moveSelection(1); }
    else if (ev.key === "k" || ev.key === "ArrowUp") { ev.preventDefault(); moveSelection(-1); }
    else if (ev.key === "x") {
      const row = rows().find((r) => r.closest("li").contains(document.activeElement)) || rows().find((r) => r.getAttribute("aria-current") === "true");
      const box = row?.closest("li").querySelector("input.pick");
      if (box && !box.disabled && !readOnly()) { ev.preventDefault(); box.click(); }
    } else if (ev.key === "a") {
      const row = rows().find((r) => r.closest("li").contains(document.activeElement)) || rows().find((r) => r.getAttribute("aria-current") === "true");
      if (row && !readOnly()) { ev.preventDefault(); approveRow(row); }
    } else if (ev.key === "Enter" && !(t instanceof Element && t.closest("a, button, input, select, textarea, summary"))) {
      // Focus on a row link opens it natively; elsewhere (the page itself) Enter opens the selection.
      const row = rows().find((r) => r.getAttribute("aria-current") === "true");
      if (row) { ev.preventDefault(); row.click(); }
    }
  } else if (v === "run" && ["a", "d", "r", "e"].includes(ev.key)) {
    if (runShortcut(ev.key)) { ev.preventDefault(); swallow = ev.key; }
  } else if (v === "run" && (ev.key === "j" || ev.key === "k")) {
    const link = document.querySelector(`nav.run-nav a[rel="${ev.key === "j" ? "next" : "prev"}"]`);
    if (link) { ev.preventDefault(); wantPendingFocus = Date.now(); go(link.getAttribute("href")); }
  }
});
// A shortcut that moved the focus into a field must not type its own letter there (the
// character event of the same key press comes after the keydown, to the new focus).
let swallow = null;
document.addEventListener("keypress", (ev) => { if (swallow && ev.key === swallow) ev.preventDefault(); swallow = null; }, true);
document.addEventListener("beforeinput", (ev) => { if (swallow && ev.data === swallow) ev.preventDefault(); swallow = null; }, true);
document.addEventListener("keyup", () => { swallow = null; }, true);

// The skip link: the router would treat "#main" as a navigation and draw the view again;
// here it just moves the focus to <main>.
document.querySelector(".skip")?.addEventListener("click", (ev) => {
  ev.preventDefault();
  ev.stopPropagation();
  main.focus();
});

// --- after a decision -------------------------------------------------------------------------

// How the person last acted: "key" or "pointer". A decision taken from the keyboard moves on at
// once (the next run opens, its first control focused); one taken with the mouse leaves the run
// on screen, to watch it go on, with a focused "Next waiting run" link above it.
let lastInput = "pointer";
document.addEventListener("keydown", (ev) => { if (!["Shift", "Control", "Alt", "Meta"].includes(ev.key)) lastInput = "key"; }, true);
document.addEventListener("pointerdown", () => { lastInput = "pointer"; }, true);

document.addEventListener("interlock:decided", async (ev) => {
  const runId = ev.detail?.runId;
  const byKey = lastInput === "key";
  const order = storedOrder();
  const search = order?.search ?? "";
  const ids = order?.ids ?? [];
  const i = ids.indexOf(runId);
  // The runs after it first, then those before it: whatever still waits on the page.
  const candidates = (i >= 0 ? [...ids.slice(i + 1), ...ids.slice(0, i)] : ids.filter((id) => id !== runId)).slice(0, 50);
  let next = null;
  if (candidates.length) {
    try {
      const q = `query(${candidates.map((_, n) => `$r${n}: ID!`).join(", ")}) { ${candidates.map((_, n) => `r${n}: run(runId: $r${n}) { status toolCalls { toolName } }`).join(" ")} }`;
      const d = await request(q, Object.fromEntries(candidates.map((id, n) => [`r${n}`, id])));
      const n = candidates.findIndex((_, n) => d[`r${n}`]?.status === "SUSPENDED");
      if (n >= 0) next = { runId: candidates[n], tool: d[`r${n}`].toolCalls[0]?.toolName };
    } catch { /* unknown: back to the inbox, which reads the truth */ }
  }
  if (view() !== "run" || new URLSearchParams(location.search).get("run") !== runId) return; // the person moved on meanwhile
  const url = next ? "/?run=" + encodeURIComponent(next.runId) : "/" + search;
  const onward = () => {
    if (next) wantPendingFocus = Date.now();
    else focusRowLater(runId, Math.max(0, i));
  };
  if (byKey) {
    onward();
    go(url);
    return;
  }
  document.getElementById("next-up")?.remove();
  const link = el("a", { href: url, id: "next-up-link", onclick: onward },
    next ? `Next waiting run: ${next.tool || next.runId} →` : "Back to the inbox: nothing else waits here →");
  const box = el("p", { class: "notice next-up", id: "next-up" }, link);
  const pending = main.querySelector('section[aria-label="Waiting for a decision"]');
  if (pending) pending.before(box);
  else main.prepend(box);
  const a = document.activeElement;
  if (!a || a === document.body || a === main) link.focus();
});

// --- focus never falls to <body> --------------------------------------------------------------

let lastFocused = null;
let wantPendingFocus = 0; // when set (a time), the run view's first control takes the focus once drawn
document.addEventListener("focusin", (ev) => { lastFocused = ev.target; });
// A row opened from the keyboard or by a click: the run view, once drawn, focuses its first control.
// Coming back (the back button), the inbox focuses that row again.
document.addEventListener("click", (ev) => {
  const row = ev.target instanceof Element && ev.target.closest("#inbox-list a.row[data-run]");
  if (!row) return;
  wantPendingFocus = Date.now();
  focusRowLater(row.dataset.run, rows().indexOf(row));
}, true);

function rescue() {
  const a = document.activeElement;
  const lost = !a || a === document.body;
  if (view() === "run" && (lost || a === main) && wantPendingFocus && Date.now() - wantPendingFocus < 10000) {
    const c = pendingControl();
    if (c) { wantPendingFocus = 0; c.focus(); return; }
  }
  if (lost && lastFocused && !lastFocused.isConnected && !dialog?.open) {
    // The focused element was removed (not a click on nothing): the view's heading area.
    main.focus({ preventScroll: true });
  }
}
new MutationObserver(rescue).observe(main, { childList: true, subtree: true });
