// History: recent runs with their outcome and the decisions taken (what, by whom, when), filtered
// by status, agent, kind of agent, outcome (the kind of a decision) and decider, with pagination;
// the filters live in the URL (?view=history&status=…&agent=…&kind=…&decision=…&decidedBy=…&page=…).
// An external agent's run (an approval request) is listed as any run, with what it asked to run
// in place of a prompt.
import { request } from "./gql.js";
import { el, when } from "./dom.js";
import { searchField, savedViewsMenu } from "./search.js";

const RECENT = `query History($statuses: [RunStatus!], $agentId: ID, $decision: DecisionKind, $decidedBy: String, $page: Int, $perPage: Int, $external: Boolean, $search: String) {
  recentRuns(statuses: $statuses, agentId: $agentId, decision: $decision, decidedBy: $decidedBy, page: $page, perPage: $perPage, external: $external, search: $search) {
    total runs { runId parentRunId agentId status prompt output error updatedAt external startedBy toolCalls { toolName } decisions { kind toolName reason decidedBy decidedAt } }
  }
}`;

// The status choices: "" is the server's default (finished: completed or failed).
const STATUSES = [["", "Finished"], ["COMPLETED", "Completed"], ["FAILED", "Failed"],
  ["SUSPENDED", "Waiting (suspended)"], ["RUNNING", "Running"], ["ANY", "Any status"]];
const ALL_STATUSES = ["RUNNING", "SUSPENDED", "COMPLETED", "FAILED"];
const DECISIONS = [["", "Any outcome"], ["APPROVED", "Approved"], ["AUTO_APPROVED", "Auto-approved (a policy or a grant let it through)"], ["DECLINED", "Declined"], ["RESUMED", "Resumed (answered)"],
  ["EXPIRED", "Expired (nobody decided in time)"]];
const KINDS = [["", "All agents"], ["external", "External (approval requests)"], ["internal", "Run by Interlock"]];
const PER_PAGE = 20;

/** The history's filters as the URL has them; values the API would refuse are dropped. */
function filters(params) {
  const status = (params.get("status") || "").toUpperCase();
  const decision = (params.get("decision") || "").toUpperCase();
  return {
    status: STATUSES.some(([v]) => v === status) ? status : "",
    agent: params.get("agent") || "",
    kind: KINDS.some(([v]) => v && v === params.get("kind")) ? params.get("kind") : "",
    decision: DECISIONS.some(([v]) => v === decision) ? decision : "",
    decidedBy: (params.get("decidedBy") || "").trim(),
    q: (params.get("q") || "").trim(),
    page: Math.max(0, Math.floor(Number(params.get("page"))) || 0),
    perPage: Math.min(100, Math.max(1, Math.floor(Number(params.get("perPage"))) || PER_PAGE)),
  };
}

/** The URL of the history with the filters f. */
function historyURL(f) {
  const q = new URLSearchParams({ view: "history" });
  for (const k of ["q", "status", "agent", "kind", "decision", "decidedBy"]) if (f[k]) q.set(k, f[k]);
  if (f.page) q.set("page", f.page);
  if (f.perPage !== PER_PAGE) q.set("perPage", f.perPage);
  return "/?" + q;
}

export function historyView(main, params, navigate) {
  const f = filters(params);
  const filtered = !!(f.status || f.agent || f.kind || f.decision || f.decidedBy || f.q);
  const list = el("div", { id: "history-list" });
  const agentSelect = el("select", { id: "h-agent", name: "agent" }, el("option", { value: "" }, "All agents"),
    f.agent ? el("option", { value: f.agent, selected: true }, f.agent) : null);
  const select = (id, name, label, choices, value) => el("div", {}, el("label", { for: id }, label),
    el("select", { id, name }, choices.map(([v, text]) => el("option", { value: v, selected: v === value }, text))));
  const form = el("form", { class: "card hfilters", "aria-label": "History filters", onsubmit: (ev) => {
    ev.preventDefault();
    const d = new FormData(form);
    navigate(historyURL({ status: d.get("status"), agent: d.get("agent"), kind: d.get("kind"), decision: d.get("decision"),
      decidedBy: String(d.get("decidedBy") || "").trim(), q: String(d.get("q") || "").trim(), page: 0, perPage: f.perPage }));
  } },
    searchField("h-q", f.q),
    select("h-status", "status", "Status", STATUSES, f.status),
    el("div", {}, el("label", { for: "h-agent" }, "Agent"), agentSelect),
    select("h-kind", "kind", "Kind of agent", KINDS, f.kind),
    select("h-decision", "decision", "Outcome", DECISIONS, f.decision),
    el("div", {}, el("label", { for: "h-decidedby" }, "Decided by (part of a name, any case)"),
      el("input", { id: "h-decidedby", name: "decidedBy", type: "text", value: f.decidedBy, autocomplete: "off", spellcheck: "false" })),
    el("div", { class: "buttons" }, el("button", { type: "submit", class: "primary" }, "Apply"),
      filtered ? el("a", { href: "/?view=history" }, "Clear filters") : null));
  main.append(el("div", { class: "inbox-head" }, el("h1", {}, "History"), el("div", { class: "inbox-tools" }, savedViewsMenu(navigate))), form, list);

  request(`{ agents { id name } }`).then((d) => {
    agentSelect.replaceChildren(el("option", { value: "" }, "All agents"),
      ...d.agents.map((a) => el("option", { value: a.id, selected: a.id === f.agent }, `${a.name} (${a.id})`)));
    if (f.agent && !d.agents.some((a) => a.id === f.agent)) agentSelect.append(el("option", { value: f.agent, selected: true }, f.agent));
  }).catch(() => {});

  const vars = {
    statuses: f.status === "ANY" ? ALL_STATUSES : f.status ? [f.status] : null,
    agentId: f.agent || null, decision: f.decision || null, decidedBy: f.decidedBy || null, search: f.q || null,
    external: f.kind === "external" ? true : f.kind === "internal" ? false : null,
    page: f.page, perPage: f.perPage,
  };
  request(RECENT, vars).then((d) => render(list, d.recentRuns, f, filtered))
    .catch((e) => list.replaceChildren(el("p", { class: "notice error", role: "alert" }, e.message)));
}

function render(list, r, f, filtered) {
  if (!r.total) {
    list.replaceChildren(filtered
      ? el("div", { class: "card empty", id: "history-empty" }, el("p", {}, el("strong", {}, "No runs match these filters.")),
        el("p", { class: "muted" }, describeFilters(f)), el("p", {}, el("a", { href: "/?view=history" }, "Clear the filters")))
      : el("div", { class: "card empty", id: "history-empty" }, el("p", {}, el("strong", {}, "No finished runs yet.")),
        el("p", { class: "muted" }, "Runs appear here once they complete or fail, with who decided what."),
        el("p", {}, el("a", { href: "/?view=new" }, "Start a run"))));
    return;
  }
  const first = f.page * f.perPage;
  const pager = el("nav", { class: "pager", "aria-label": "Pages" },
    el("span", {}, r.runs.length ? `${first + 1}–${first + r.runs.length} of ${r.total}` : `none on this page, ${r.total} in all`),
    f.page > 0 ? el("a", { href: historyURL({ ...f, page: Math.min(f.page - 1, Math.ceil(r.total / f.perPage) - 1) }), rel: "prev" }, "← Newer") : null,
    first + r.runs.length < r.total ? el("a", { href: historyURL({ ...f, page: f.page + 1 }), rel: "next" }, "Older →") : null);
  list.replaceChildren(pager, el("ul", { class: "list history" }, nest(r.runs)));
}

/**
 * The page's rows, each sub-agent run under its supervisor's when that is on the page too (in
 * a list of its own, "sub-agent runs"), else in its place with a link to its supervisor.
 */
function nest(runs) {
  const here = new Set(runs.map((r) => r.runId));
  const children = new Map();
  for (const r of runs) {
    if (r.parentRunId && here.has(r.parentRunId)) children.set(r.parentRunId, [...(children.get(r.parentRunId) || []), r]);
  }
  const item = (r) => {
    const li = row(r);
    const subs = children.get(r.runId);
    if (subs) li.append(el("ul", { class: "list sub-runs", "aria-label": "Sub-agent runs" }, subs.map(item)));
    return li;
  };
  return runs.filter((r) => !(r.parentRunId && here.has(r.parentRunId))).map(item);
}

/** One run: its status and agent, prompt and outcome, its decisions, when it last changed. */
function row(run) {
  return el("li", { "data-run": run.runId }, run.parentRunId ? el("p", { class: "muted small sub-of" }, "sub-agent run of ",
    el("a", { href: `/?run=${encodeURIComponent(run.parentRunId)}` }, "its supervisor's run")) : null,
  el("a", { class: "row", href: `/?run=${encodeURIComponent(run.runId)}` },
    el("span", {}, el("span", { class: `badge ${run.status}` }, run.status), el("span", { class: "muted block" }, run.agentId)),
    el("span", {}, run.external
      ? el("span", { class: "block prompt" }, el("span", { class: "badge external" }, "external"), " asked to run ",
        el("strong", {}, run.toolCalls[0]?.toolName || run.decisions[0]?.toolName || "a tool"), run.startedBy ? ` (requested by ${run.startedBy})` : "")
      : el("span", { class: "block prompt" }, run.prompt),
      run.output || run.error ? el("span", { class: "block muted" }, cut(String(run.output || run.error), 140)) : null),
    run.decisions.length
      ? el("ul", { class: "decisions", "aria-label": "Decisions" }, run.decisions.map(decision))
      : el("span", { class: "muted" }, "no decisions"),
    el("span", { class: "muted" }, "updated ", el("time", { datetime: run.updatedAt }, when(run.updatedAt)))));
}

/** "approved issue_refund by alice, 3/4/2025, 10:02:11 (“reason”)". */
function decision(x) {
  const auto = x.kind === "AUTO_APPROVED"; // a policy's, not a person's: its rule is not quoted as anyone's words
  return el("li", {}, el("span", { class: `badge ${x.kind}` }, auto ? "auto-approved by policy" : x.kind.toLowerCase()), " ", x.toolName,
    x.decidedBy ? [" by ", el("strong", {}, x.decidedBy)] : x.kind === "EXPIRED" ? " (nobody decided in time)" : null,
    x.decidedAt ? [", ", el("time", { datetime: x.decidedAt, class: "muted" }, when(x.decidedAt))] : null,
    x.reason ? (auto ? el("span", { class: "muted policy-rule" }, ` — ${x.reason}`) : ` (“${x.reason}”)`) : null);
}

function describeFilters(f) {
  const parts = [];
  if (f.status) parts.push(`status ${STATUSES.find(([v]) => v === f.status)[1].toLowerCase()}`);
  if (f.agent) parts.push(`agent ${f.agent}`);
  if (f.kind) parts.push(KINDS.find(([v]) => v === f.kind)[1].toLowerCase());
  if (f.decision) parts.push(`outcome ${f.decision.toLowerCase()}`);
  if (f.decidedBy) parts.push(`decided by ${f.decidedBy}`);
  if (f.q) parts.push(`search “${f.q}”`);
  return `Filters: ${parts.join(" · ")}.`;
}

function cut(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }
