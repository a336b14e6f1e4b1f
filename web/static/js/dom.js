// Tiny DOM helpers: the console builds its elements with el() and never parses HTML strings, so
// nothing a run contains can inject markup. The server sends a strict Content-Security-Policy
// (no inline scripts, styles or handlers), so el() refuses style attributes: use a class.
// Every text el() is given is shown through reveal() (hidden.js): a bidi control, an invisible
// or a control character is a visible mark, never applied — in a title or an aria-label too.
import { reveal, markText } from "./hidden.js";

/** Creates an element with attributes (on* keys become listeners) and children. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "style") throw new Error("style attributes are blocked by the Content-Security-Policy; use a class");
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : k === "title" || k === "aria-label" ? markText(v) : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : reveal(String(c)));
  }
  return node;
}

/** How deeply a value may nest to be shown: the server refuses deeper arguments and resume
 * data, but a tool's result or question may be anything, and JSON.stringify of a value 9,000
 * levels deep exhausts the stack (or, indented, builds a string of tens of megabytes). */
export const MAX_DEPTH = 64;

/** Whether v nests deeper than MAX_DEPTH, found without recursion. */
export function tooDeep(v) {
  const stack = [[v, 0]];
  while (stack.length) {
    const [x, d] = stack.pop();
    if (x === null || typeof x !== "object") continue;
    if (d >= MAX_DEPTH) return true;
    for (const k in x) stack.push([x[k], d + 1]);
  }
  return false;
}

/** What is shown in place of a value nested too deeply. */
export const TOO_DEEP = `(a value nested more than ${MAX_DEPTH} levels deep, not shown)`;

/** JSON text of a value (indented by indent), or TOO_DEEP: never throws. */
export function json(v, indent) {
  if (tooDeep(v)) return TOO_DEEP;
  try { return JSON.stringify(v, null, indent) ?? ""; } catch { return "(a value that cannot be shown)"; }
}

/** Pretty-prints a JSON value. */
export function pretty(v) { return json(v, 2); }

/** A one-line view of a JSON value, cut to n characters. */
export function short(v, n = 80) {
  const s = v === undefined || v === null ? "" : json(v);
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

/** "5 s", "3 min", "2 h", "4 d": how long ago an instant was. */
export function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.floor(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} d`;
}

/** "expires in 12 min", or "expired": how long until a waiting call's deadline. */
export function expiresIn(iso) {
  const s = (Date.parse(iso) - Date.now()) / 1000;
  if (s <= 0) return "expired";
  if (s < 60) return `expires in ${Math.ceil(s)} s`;
  if (s < 3600) return `expires in ${Math.ceil(s / 60)} min`;
  if (s < 86400) return `expires in ${Math.round(s / 3600)} h`;
  return `expires in ${Math.round(s / 86400)} d`;
}

/** expiresIn with a capital: "Expires in 10 min", the text of an expiry warning's marker. */
export function expiringText(iso) {
  const s = expiresIn(iso);
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/**
 * The markers of the follow-up steps sent for waiting calls (each call's followUpsSent, with its
 * escalatedTo and expiresAt): "Reminded", "Escalated to finance-lead", "Expires in 10 min" (the
 * earliest warned call's; repainted by whoever ticks [data-expiring]). Empty when none was sent.
 */
export function followUpMarkers(calls) {
  const sent = (c, k) => (c.followUpsSent || []).includes(k);
  const out = [];
  if (calls.some((c) => sent(c, "REMINDER"))) out.push(el("span", { class: "badge follow-up reminded", title: "The people who may decide were reminded" }, "Reminded"));
  const roles = [...new Set(calls.filter((c) => sent(c, "ESCALATION")).flatMap((c) => c.escalatedTo || []))];
  if (roles.length) out.push(el("span", { class: "badge follow-up escalated", title: `${roles.join(", ")} may decide it too` }, `Escalated to ${roles.join(", ")}`));
  const warned = calls.filter((c) => sent(c, "EXPIRING") && c.expiresAt).map((c) => c.expiresAt).sort()[0];
  if (warned) out.push(el("span", { class: "badge follow-up expiring", "data-expiring": warned, title: when(warned) }, expiringText(warned)));
  return out;
}

/** A local, readable date and time. */
export function when(iso) { return iso ? new Date(iso).toLocaleString() : ""; }
