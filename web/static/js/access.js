// What the signed-in person may do at the desk. A principal who cannot decide tool calls (a
// viewer or an operator, without the approver role or a custom role a tool may name) sees the
// inbox and the run view read-only: no ticks, no bulk bar, no Approve / Decline / Edit / Resume
// controls, and a note saying why. The server refuses such decisions anyway (FORBIDDEN); the
// desk just does not offer them. The rule mirrors the server's (runs/authorize.go mayDecide):
// the approver role (or admin), or any role that is not a built-in one.
import { request } from "./gql.js";
import { el } from "./dom.js";

const BUILTIN = ["viewer", "operator", "approver", "admin", "requester"];

/** Whether me (from the me query; null when authentication is off) may decide tool calls. */
export function decides(me) {
  if (!me) return true;
  return me.roles.some((r) => r === "approver" || r === "admin" || !BUILTIN.includes(r));
}

let drawn = 0; // numbers the views: only the latest one is marked

/**
 * Marks main read-only (data-readonly, styled by desk.css; keys.js offers no decision
 * shortcuts then) for a person who cannot decide, with a note on top, when view is the inbox or
 * a run. Asks the server who is signed in; on any failure nothing is marked (the server still
 * refuses what is not allowed).
 */
export async function markAccess(main, view) {
  const mine = ++drawn;
  delete main.dataset.readonly;
  if (view !== "inbox" && view !== "run") return;
  let me;
  try { me = (await request(`{ me { subject roles } }`)).me; } catch { return; }
  if (mine !== drawn || decides(me)) return;
  main.dataset.readonly = "true";
  main.prepend(el("p", { class: "notice readonly-note", id: "readonly-note" },
    `Read-only: ${me.subject} (${me.roles.join(", ") || "no role"}) can see what waits but not decide it; deciding needs the approver role.`));
}

/** Whether the desk is read-only now. */
export function readOnly() {
  return document.getElementById("main")?.dataset.readonly === "true";
}
