// Inbox: the live list of suspended runs, with filters and pagination in the URL. New
// suspensions and decided runs appear and disappear without a reload (suspendedRunsChanged).
import { request, subscribe } from "./gql.js";
import { el, short, ago, expiresIn, when } from "./dom.js";

const LIST = `query Inbox($agentId: ID, $threadId: ID, $resourceId: ID, $fromDate: DateTime, $toDate: DateTime, $page: Int, $perPage: Int) {
  suspendedRuns(agentId: $agentId, threadId: $threadId, resourceId: $resourceId, fromDate: $fromDate, toDate: $toDate, page: $page, perPage: $perPage) {
    total
    runs { id runId agentId threadId resourceId createdAt suspendedAt
      toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted expiresAt } }
  }
}`;
const CHANGES = `subscription Changes($agentId: ID, $threadId: ID, $resourceId: ID) {
  suspendedRunsChanged(agentId: $agentId, threadId: $threadId, resourceId: $resourceId) { kind run { runId } }
}`;

export function inboxView(main, params, navigate) {
  const f = {
    agentId: params.get("agent") || "", threadId: params.get("thread") || "", resourceId: params.get("resource") || "",
    from: params.get("from") || "", to: params.get("to") || "",
    page: Math.max(0, Number(params.get("page")) || 0), perPage: Math.min(500, Math.max(1, Number(params.get("perPage")) || 20)),
  };
  const list = el("div", { "aria-live": "polite", id: "inbox-list" });
  const agentSelect = el("select", { id: "f-agent", name: "agent" }, el("option", { value: "" }, "All agents"));
  const input = (id, name, label, value, type = "text") =>
    el("div", {}, el("label", { for: id }, label), el("input", { id, name, type, value }));
  const form = el("form", { class: "card filters", "aria-label": "Filters", onsubmit: (ev) => {
    ev.preventDefault();
    const d = new FormData(form);
    const q = new URLSearchParams();
    for (const k of ["agent", "thread", "resource", "from", "to"]) if (d.get(k)) q.set(k, d.get(k));
    if (Number(d.get("perPage")) !== 20) q.set("perPage", d.get("perPage"));
    navigate("/" + (q.toString() ? "?" + q : ""));
  } },
    el("div", {}, el("label", { for: "f-agent" }, "Agent"), agentSelect),
    input("f-thread", "thread", "Thread", f.threadId),
    input("f-resource", "resource", "Resource", f.resourceId),
    input("f-from", "from", "Created from", f.from, "datetime-local"),
    input("f-to", "to", "Created to", f.to, "datetime-local"),
    input("f-perpage", "perPage", "Per page", String(f.perPage), "number"),
    el("div", {}, el("button", { type: "submit", class: "primary" }, "Apply"), " ", el("a", { href: "/" }, "Clear")));
  main.append(el("h1", {}, "Waiting for you"), form, list);

  request(`{ agents { id name } }`).then((d) => {
    for (const a of d.agents) agentSelect.append(el("option", { value: a.id, selected: a.id === f.agentId }, a.name));
  }).catch(() => {});

  const vars = {
    agentId: f.agentId || null, threadId: f.threadId || null, resourceId: f.resourceId || null,
    fromDate: f.from ? new Date(f.from).toISOString() : null, toDate: f.to ? new Date(f.to + ":59.999").toISOString() : null,
    page: f.page, perPage: f.perPage,
  };
  let timer = null;
  const load = async () => {
    try {
      const d = await request(LIST, vars);
      renderList(list, d.suspendedRuns, f, params);
    } catch (e) {
      list.replaceChildren(el("p", { class: "notice error", role: "alert" }, e.message));
    }
  };
  const reload = () => { clearTimeout(timer); timer = setTimeout(load, 50); };
  load();
  const unsubscribe = subscribe(CHANGES, () => ({ agentId: vars.agentId, threadId: vars.threadId, resourceId: vars.resourceId }), {
    next: reload, error: () => {}, resync: load, // changes missed while the subscription was down
  });
  const tick = setInterval(() => {
    list.querySelectorAll("[data-since]").forEach((n) => { n.textContent = "waiting " + ago(n.dataset.since); });
    list.querySelectorAll("[data-expires]").forEach((n) => { n.textContent = expiresIn(n.dataset.expires); });
  }, 15000);
  return () => { unsubscribe(); clearInterval(tick); clearTimeout(timer); };
}

function renderList(list, result, f, params) {
  if (result.total === 0) {
    list.replaceChildren(el("div", { class: "card empty" },
      el("p", {}, el("strong", {}, "Nothing waits for a decision.")),
      el("p", { class: "muted" }, "When a run needs an approval or an answer it shows up here at once."),
      el("p", {}, el("a", { href: "/?view=new" }, "Start a run"))));
    return;
  }
  const rows = result.runs.map((r) => {
    const c = r.toolCalls[0] || {};
    const what = c.requiresApproval ? short(c.args) : short(c.suspendPayload);
    return el("li", {}, el("a", { class: "row", href: `/?run=${encodeURIComponent(r.runId)}`, "data-run": r.runId },
      el("span", {}, el("span", { class: "tool" }, c.toolName || "?"), " ",
        el("span", { class: "badge SUSPENDED" }, c.requiresApproval ? (c.interrupted ? "interrupted · approve again" : "approval") : "needs input"),
        el("span", { class: "muted block" }, r.agentId)),
      el("code", { title: what }, what),
      el("span", { class: "muted" }, r.threadId ? `thread ${r.threadId}` : "no thread", el("br"), r.resourceId ? `resource ${r.resourceId}` : ""),
      el("span", {}, el("span", { "data-since": r.suspendedAt }, "waiting " + ago(r.suspendedAt)),
        c.expiresAt ? el("span", { class: "muted block expires", "data-expires": c.expiresAt, title: when(c.expiresAt) }, expiresIn(c.expiresAt)) : null)));
  });
  const first = f.page * f.perPage;
  const pageURL = (p) => { const q = new URLSearchParams(params); q.set("page", p); return "/?" + q; };
  const pager = el("nav", { class: "pager", "aria-label": "Pages" },
    el("span", {}, result.runs.length ? `${first + 1}–${first + result.runs.length} of ${result.total}` : `none on this page, ${result.total} in all`),
    f.page > 0 ? el("a", { href: pageURL(f.page - 1) }, "← Newer") : null,
    first + result.runs.length < result.total ? el("a", { href: pageURL(f.page + 1) }, "Older →") : null);
  list.replaceChildren(pager, el("ul", { class: "list" }, rows));
}
