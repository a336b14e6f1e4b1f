// Remembered approvals ("approve, and allow similar"): the run view's "Approve and allow
// similar…" dialog and the Grants page (?view=grants&active=all).
//
// The dialog builds a grant from the call in front of the person: its scope (this thread, this
// resource, or any run of the agent), how long it lasts, how many calls it may let through, and
// conditions on each argument the call has (a number: equal, at most or at least a value; any
// other value: equal), each starting from the call's own value. Above the button, one plain
// sentence says exactly what the grant will let through, rewritten at every change; the server
// checks the same grant again (a condition the call itself would fail is refused there too).
// The Grants page lists grants with what each lets through, its uses and its end, and a Revoke
// button (the creator's or an admin's).
import { request } from "./gql.js";
import { el, json, when } from "./dom.js";

const GRANT = `id agentId toolName scope scopeValue resourceId argsMatch expiresAt maxUses uses active createdBy createdAt fromRunId revokedAt revokedBy`;
const LIST = `query Grants($active: Boolean) { grants(active: $active) { ${GRANT} } }`;
const REVOKE = `mutation Revoke($id: ID!) { revokeGrant(id: $id) { ${GRANT} } }`;

const TTLS = [["3600", "1 hour"], ["28800", "8 hours"], ["86400", "1 day"], ["604800", "7 days"], ["", "No end (until revoked)"]];

/** JSON pointer of a top-level argument name (RFC 6901: ~ and / escaped). */
function pointer(name) { return "/" + name.replaceAll("~", "~0").replaceAll("/", "~1"); }

/** The argument name of a top-level pointer. */
function unpointer(p) { return p.slice(1).replaceAll("~1", "/").replaceAll("~0", "~"); }

/** "amount is at most 30 and currency is "EUR"": argsMatch in words (empty: any arguments). */
export function conditionsText(argsMatch) {
  const parts = [];
  for (const [p, cond] of Object.entries(argsMatch || {})) {
    const name = p.lastIndexOf("/") === 0 ? unpointer(p) : p;
    if ("eq" in cond) parts.push(`${name} is ${json(cond.eq)}`);
    if ("lte" in cond && "gte" in cond) parts.push(`${name} is between ${cond.gte} and ${cond.lte}`);
    else if ("lte" in cond) parts.push(`${name} is at most ${cond.lte}`);
    else if ("gte" in cond) parts.push(`${name} is at least ${cond.gte}`);
  }
  return parts.join(" and ");
}

/** What a grant lets through, in one sentence: mine says it to its creator (the dialog). */
export function grantSentence(g, mine = false) {
  const whose = mine ? "you" : "its creator";
  const where = { THREAD: `in thread ${g.scopeValue}`, RESOURCE: `of resource ${g.scopeValue}`, AGENT: `of any run of the agent ${whose} may see` }[g.scope] || "";
  const cond = conditionsText(g.argsMatch);
  const args = cond ? `whose ${cond}` : "with any arguments";
  const until = g.ttl ? `for ${TTLS.find(([v]) => v === String(g.ttl))?.[1] || `${g.ttl} s`}` : g.expiresAt ? `until ${when(g.expiresAt)}` : "with no end";
  const uses = g.maxUses ? `at most ${g.maxUses} ${g.maxUses === 1 ? "time" : "times"}` : "any number of times";
  return `Lets through without asking anyone: calls of ${g.toolName} by ${g.agentId} ${where} ${args}, ${until}, ${uses} — ` +
    `never in runs ${whose} started, and only while ${whose} may approve them.` + (mine ? " Revoke it at any time on the Grants page." : "");
}

/** The "Approve and allow similar…" button of a call, and its dialog; decide is the run view's
 * (it sends the mutation, and says a refusal in the form's .form-error). */
export function allowSimilar(run, c, decide) {
  const id = (s) => `grant-${s}-${c.toolCallId}`;
  const scopes = [];
  if (run.threadId) scopes.push(["THREAD", `This thread (${run.threadId})`]);
  if (run.resourceId) scopes.push(["RESOURCE", `This resource (${run.resourceId})`]);
  scopes.push(["AGENT", `Any run of ${run.agentId}`]);
  const scope = el("select", { id: id("scope"), name: "scope" }, scopes.map(([v, t]) => el("option", { value: v }, t)));
  const ttl = el("select", { id: id("ttl"), name: "ttl" }, TTLS.map(([v, t]) => el("option", { value: v, selected: v === "28800" }, t)));
  const maxUses = el("input", { type: "number", id: id("uses"), name: "maxUses", min: "1", step: "1", placeholder: "no limit" });
  const rows = [];
  const args = c.args && typeof c.args === "object" && !Array.isArray(c.args) ? c.args : {};
  for (const [name, value] of Object.entries(args)) {
    if (value !== null && typeof value === "object") continue; // conditions on top-level values only
    const number = typeof value === "number";
    const op = el("select", { id: id(`op-${name}`), "data-arg": name },
      el("option", { value: "" }, "any value"), el("option", { value: "eq", selected: !number }, "equal to"),
      number ? el("option", { value: "lte", selected: true }, "at most") : null, number ? el("option", { value: "gte" }, "at least") : null);
    const val = el("input", { type: number ? "number" : "text", id: id(`val-${name}`), value: number ? String(value) : String(value), "aria-label": `${name}: value` });
    rows.push({ name, number, value, op, val });
  }
  const sentence = el("p", { class: "grant-sentence", id: id("sentence"), "aria-live": "polite" });
  const err = el("p", { class: "field-error form-error", role: "alert" });

  /** The GrantInput the form describes. */
  const input = () => {
    const m = {};
    for (const r of rows) {
      if (!r.op.value) continue;
      let v = r.val.value;
      if (r.number || r.op.value !== "eq") v = Number(v);
      else if (typeof r.value === "boolean") v = v === "true";
      m[pointer(r.name)] = { [r.op.value]: v };
    }
    const out = { scope: scope.value, argsMatch: m };
    if (ttl.value) out.ttl = Number(ttl.value);
    if (maxUses.value) out.maxUses = Number(maxUses.value);
    return out;
  };
  const paint = () => {
    const g = input();
    const value = { THREAD: run.threadId, RESOURCE: run.resourceId }[g.scope];
    sentence.textContent = "This approves this call, and " +
      grantSentence({ ...g, scopeValue: value, toolName: c.toolName, agentId: run.agentId }, true).replace(/^Lets/, "lets");
  };
  const form = el("form", { novalidate: true, "aria-label": "Approve and allow similar", onsubmit: async (ev) => {
    ev.preventDefault();
    err.textContent = "";
    const g = input();
    for (const [p, cond] of Object.entries(g.argsMatch)) {
      const v = Object.values(cond)[0];
      if (typeof v === "number" && !Number.isFinite(v)) { err.textContent = `Enter a number for ${unpointer(p)}.`; return; }
    }
    if (g.maxUses !== undefined && !(g.maxUses >= 1)) { err.textContent = "At most how many calls: a whole number, 1 or more (empty: no limit)."; return; }
    await decide(`mutation($id: ID!, $c: ID, $g: GrantInput) { approveToolCall(runId: $id, toolCallId: $c, remember: $g) { status toolCalls { toolCallId } } }`,
      { id: run.runId, c: c.toolCallId, g }, form);
    if (!err.textContent) dialog.close();
  } },
  el("div", {}, el("label", { for: scope.id }, "Allow similar calls in"), scope),
  el("div", {}, el("label", { for: ttl.id }, "For"), ttl),
  el("div", {}, el("label", { for: maxUses.id }, "At most how many calls"), maxUses),
  rows.length ? el("fieldset", { class: "grant-args" }, el("legend", {}, "Only when the arguments are"),
    rows.map((r) => el("div", { class: "grant-arg" }, el("label", { for: r.op.id }, r.name), r.op, r.val))) : null,
  sentence, err,
  el("div", { class: "actions" }, el("button", { type: "submit", class: "approve" }, "Approve and allow"),
    el("button", { type: "button", class: "cancel", onclick: () => dialog.close() }, "Cancel")));
  form.addEventListener("input", paint);
  form.addEventListener("change", paint);
  const title = el("h2", { id: id("title") }, `Approve ${c.toolName}, and allow similar calls`);
  const dialog = el("dialog", { class: "grant-dialog", "aria-labelledby": title.id }, title, form);
  paint();
  const open = el("button", { type: "button", class: "allow-similar", onclick: () => {
    if (!dialog.isConnected) document.body.append(dialog);
    err.textContent = "";
    paint();
    dialog.showModal();
    scope.focus();
  } }, "Approve and allow similar…");
  dialog.addEventListener("close", () => { if (open.isConnected) open.focus(); dialog.remove(); });
  return open;
}

/** The Grants page: the grants the person may see, newest first, with Revoke. */
export function grantsView(main, params, navigate) {
  const all = params.get("active") === "all";
  const list = el("div", { id: "grants-list" });
  const notice = el("div", { role: "alert" });
  const filter = el("select", { id: "grants-active", onchange: () => navigate(filter.value ? "/?view=grants&active=all" : "/?view=grants") },
    el("option", { value: "", selected: !all }, "Active grants"), el("option", { value: "all", selected: all }, "All grants (revoked, expired, used up too)"));
  main.append(el("h1", {}, "Grants"),
    el("p", { class: "muted" }, "Approvals remembered with “Approve and allow similar…”: each lets similar calls run without asking anyone, as its sentence says."),
    el("div", { class: "card" }, el("label", { for: filter.id }, "Show"), filter), notice, list);
  let closed = false;
  const show = async () => {
    let grants;
    try {
      grants = (await request(LIST, { active: all ? null : true })).grants;
    } catch (e) {
      notice.replaceChildren(el("p", { class: "notice error" }, e.message));
      return;
    }
    if (closed) return;
    if (!grants.length) {
      list.replaceChildren(el("p", { class: "muted empty" }, all ? "No grants." : "No active grants."));
      return;
    }
    list.replaceChildren(el("ul", { class: "card list grants" }, grants.map((g) => {
      const state = g.revokedAt ? `revoked by ${g.revokedBy || "someone unnamed"} at ${when(g.revokedAt)}` : g.active ? "active" : "no longer applies (expired or used up)";
      const revoke = el("button", { type: "button", class: "decline revoke", disabled: !!g.revokedAt, onclick: async () => {
        revoke.disabled = true;
        try {
          await request(REVOKE, { id: g.id });
          notice.replaceChildren(el("p", { class: "notice" }, `Revoked the grant on ${g.toolName}. It lets nothing through any more, on every server.`));
        } catch (e) {
          notice.replaceChildren(el("p", { class: "notice error" }, `Not revoked: ${e.message}`));
          revoke.disabled = false;
        }
        await show();
      } }, "Revoke");
      return el("li", { class: `grant ${g.active ? "active" : "inactive"}`, "data-grant": g.id },
        el("p", {}, el("strong", {}, g.toolName), " ", el("span", { class: "muted" }, `(${g.agentId}, ${g.scope.toLowerCase()})`), " — ", el("span", { class: "grant-state" }, state)),
        el("p", { class: "grant-sentence" }, grantSentence(g)),
        el("p", { class: "muted" }, `${g.maxUses ? `Used ${g.uses} of ${g.maxUses} ${g.maxUses === 1 ? "time" : "times"}` : `Used ${g.uses} ${g.uses === 1 ? "time" : "times"}`}; created by ${g.createdBy || "someone unnamed"} at ${when(g.createdAt)} approving `,
          el("a", { href: `/?run=${encodeURIComponent(g.fromRunId)}` }, "this run")),
        g.revokedAt ? null : el("div", { class: "actions" }, revoke));
    })));
  };
  show();
  return () => { closed = true; };
}
