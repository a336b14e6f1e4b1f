// Undo: a decision taken in the console is held for a few seconds, with an Undo button, before
// it is sent; until it is sent it has not taken effect, and Undo drops it (nothing reaches the
// server). Once sent it cannot be undone: the tool may be running.
//
// How long is localStorage "interlock.undo.ms" (milliseconds; 5000 when unset, 0 sends at
// once with no Undo). A decision still held when the person leaves the page (closes the tab,
// follows a link out, reloads) is sent then, with fetch keepalive, so that it outlives the
// page: what a person decided is not lost because they moved on. Moving between the console's
// own views does not leave the page: the hold runs on, its notice stays on screen.
import { el } from "./dom.js";
import { token } from "./gql.js";

const KEY = "interlock.undo.ms";
/** How long a decision is held when nothing is configured. */
export const DEFAULT_UNDO_MS = 5000;

/** How long a decision is held before it is sent (ms). */
export function undoMs() {
  try {
    const v = localStorage.getItem(KEY);
    const n = v === null || v.trim() === "" ? NaN : Number(v);
    return Number.isFinite(n) && n >= 0 ? n : DEFAULT_UNDO_MS;
  } catch { return DEFAULT_UNDO_MS; }
}

/** The error a held decision rejects with when it was undone (code "UNDONE"). */
export class Undone extends Error {
  constructor() { super("Undone: nothing was sent."); this.code = "UNDONE"; }
}

const held = new Set(); // { query, variables, fire } of the decisions held now
let region = null;

function notices() {
  if (!region || !region.isConnected) {
    region = el("div", { id: "held-decisions", class: "held-decisions", role: "status", "aria-live": "polite" });
    document.body.append(region);
  }
  return region;
}

/**
 * Holds the decision sent by send() (the mutation query and variables it sends, for a send on
 * leaving the page) for undoMs(), saying what is held (label) with an Undo button; then calls
 * send() and resolves with what it resolves with. Undone, it rejects with Undone. With no
 * delay, send() is called at once and nothing is shown. after(notice, result or error) may
 * put its outcome in the notice (it is removed a while later).
 */
export function hold({ label, query, variables, send, after }) {
  const ms = undoMs();
  if (ms <= 0) return send();
  return new Promise((resolve, reject) => {
    const left = el("span", { class: "held-left" });
    const undo = el("button", { type: "button", class: "undo" }, "Undo");
    const notice = el("p", { class: "notice held", "data-state": "held" }, el("span", { class: "held-label" }, label), " ", left, " ", undo);
    notices().append(notice);
    const until = Date.now() + ms;
    const paint = () => { left.textContent = `— sending in ${Math.max(1, Math.ceil((until - Date.now()) / 1000))} s`; };
    paint();
    const ticker = setInterval(paint, 250);
    const entry = { query, variables };
    const done = () => { clearInterval(ticker); clearTimeout(timer); held.delete(entry); undo.remove(); left.remove(); };
    const fade = () => setTimeout(() => notice.remove(), 8000);
    entry.fire = () => { // sent now (its time came, or the page is being left)
      done();
      notice.dataset.state = "sent";
      Promise.resolve().then(send).then((v) => { after?.(notice, v, null); fade(); resolve(v); },
        (e) => { after?.(notice, null, e); fade(); reject(e); });
    };
    const timer = setTimeout(() => { if (held.has(entry)) entry.fire(); }, ms);
    entry.left = () => { done(); notice.dataset.state = "sent"; notice.replaceChildren(`${label.replace(/…$/, "")}: sent as you left the page.`); };
    undo.addEventListener("click", () => {
      done();
      notice.dataset.state = "undone";
      notice.replaceChildren(`Undone: ${label.replace(/…$/, "")} was not sent.`);
      fade();
      reject(new Undone());
    });
    entry.undo = () => undo.click();
    held.add(entry);
  });
}

/** Undoes the decision held last (the `u` key); false when none is held. */
export function undoLast() {
  const last = [...held].pop();
  if (!last) return false;
  last.undo();
  return true;
}

/** Says text in the notices' region (kind: "", "warn" or "error") for a while. */
export function tell(text, kind = "") {
  const notice = el("p", { class: `notice held ${kind}`, "data-state": "told" }, text);
  notices().append(notice);
  setTimeout(() => notice.remove(), 8000);
  return notice;
}

// Leaving the page: every held decision is sent now, in a request that outlives the page.
addEventListener("pagehide", () => {
  for (const entry of [...held]) {
    entry.left(); // no longer held: its timer will not send it again
    const headers = { "Content-Type": "application/json", "Accept": "application/json" };
    const t = token();
    if (t) headers.Authorization = `Bearer ${t}`;
    try {
      fetch("/graphql", { method: "POST", headers, keepalive: true, body: JSON.stringify({ query: entry.query, variables: entry.variables }) });
    } catch { /* nothing more can be done from a page going away */ }
  }
});
