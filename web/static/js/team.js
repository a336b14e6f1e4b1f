// Team: the decisions of a period summed up for a team lead (the teamFigures query): how many,
// of which kind, by whom, on which tools, and how long calls waited for a person (median and
// 90th percentile). The period is whole days in UTC, from the first to the last included; it
// lives in the URL (?view=team&from=YYYY-MM-DD&to=YYYY-MM-DD). The audit export of the same
// period (GET /audit, with the console's token) downloads as CSV or NDJSON.
import { request, token } from "./gql.js";
import { el } from "./dom.js";

const FIGURES = `query Team($from: DateTime!, $to: DateTime!) {
  teamFigures(from: $from, to: $to) {
    byPolicy
    total { ...row }
    people { ...row }
    tools { ...row }
  }
}
fragment row on DecisionFigures { name decisions approved edited declined resumed expired waiting { count medianSeconds p90Seconds } }`;

const DAY = 86400000;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** A day (YYYY-MM-DD, UTC) d days from today's. */
function day(d) { return new Date(Date.now() + d * DAY).toISOString().slice(0, 10); }

/** The period as the URL has it: the last 7 days by default; a bad day takes the default. */
function period(params) {
  let from = params.get("from") || "", to = params.get("to") || "";
  if (!DATE.test(to) || isNaN(Date.parse(to))) to = day(0);
  if (!DATE.test(from) || isNaN(Date.parse(from))) from = new Date(Date.parse(to) - 6 * DAY).toISOString().slice(0, 10);
  return { from, to };
}

/** The instants of a period of days: from the first day's midnight to the midnight after the last. */
function instants(p) {
  return { from: `${p.from}T00:00:00Z`, to: new Date(Date.parse(p.to) + DAY).toISOString() };
}

/** A wait in seconds, as a person reads it: "45 s", "3 min 20 s", "2 h 5 min", "1 d 3 h". */
export function duration(s) {
  if (s === null || s === undefined) return "–";
  if (s < 60) return `${Math.round(s * 10) / 10} s`;
  const m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  if (h === 0) return `${m} min ${Math.round(s - m * 60)} s`;
  if (d === 0) return `${h} h ${m - h * 60} min`;
  return `${d} d ${h - d * 24} h`;
}

export function teamView(main, params, navigate) {
  const p = period(params);
  const out = el("div", { id: "team-figures", "aria-live": "polite" }, el("p", { class: "muted" }, "Loading…"));
  const form = el("form", { class: "card hfilters", "aria-label": "Period", onsubmit: (ev) => {
    ev.preventDefault();
    const d = new FormData(form);
    navigate("/?" + new URLSearchParams({ view: "team", from: d.get("from"), to: d.get("to") }));
  } },
    el("div", {}, el("label", { for: "t-from" }, "From (UTC day)"), el("input", { id: "t-from", name: "from", type: "date", value: p.from, required: true })),
    el("div", {}, el("label", { for: "t-to" }, "To (UTC day, included)"), el("input", { id: "t-to", name: "to", type: "date", value: p.to, required: true })),
    el("div", { class: "buttons" }, el("button", { type: "submit", class: "primary" }, "Apply"),
      el("button", { type: "button", id: "t-export-csv", onclick: () => download(p, "csv", out) }, "Export CSV"),
      el("button", { type: "button", id: "t-export-ndjson", onclick: () => download(p, "ndjson", out) }, "Export NDJSON")));
  main.append(el("h1", {}, "Team"), form, out);
  request(FIGURES, instants(p)).then((d) => render(out, d.teamFigures, p))
    .catch((e) => out.replaceChildren(el("p", { class: "notice error", role: "alert" }, e.message)));
}

function render(out, f, p) {
  const t = f.total;
  if (!t.decisions) {
    out.replaceChildren(el("div", { class: "card empty", id: "team-empty" },
      el("p", {}, el("strong", {}, `No decisions from ${p.from} to ${p.to}.`)),
      el("p", { class: "muted" }, "Decisions appear here once someone approves, declines or answers a call, or one expires.")));
    return;
  }
  const stat = (id, label, value, note) => el("div", { class: "stat", id }, el("span", { class: "muted block" }, label),
    el("strong", { class: "block" }, String(value)), note ? el("span", { class: "muted block" }, note) : null);
  out.replaceChildren(
    el("section", { class: "card stats", "aria-label": "Totals" },
      stat("t-decisions", "Decisions", t.decisions, f.byPolicy ? `${f.byPolicy} by policy` : null),
      stat("t-approved", "Approved", t.approved, t.edited ? `${t.edited} edited` : null),
      stat("t-declined", "Declined", t.declined),
      stat("t-resumed", "Answered", t.resumed),
      stat("t-expired", "Expired", t.expired),
      stat("t-median", "Median wait", duration(t.waiting.medianSeconds), `${t.waiting.count} waits`),
      stat("t-p90", "90th percentile wait", duration(t.waiting.p90Seconds))),
    table("team-people", "By person", "Person", f.people, (r) => r.name ?? "nobody (expiry, policy, or no sign-in)"),
    table("team-tools", "By tool", "Tool", f.tools, (r) => r.name));
}

function table(id, caption, first, rows, name) {
  const cols = ["Decisions", "Approved", "Edited", "Declined", "Answered", "Expired", "Median wait", "90th pct wait"];
  return el("table", { class: "card figures", id },
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, first), cols.map((c) => el("th", { scope: "col" }, c)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, el("th", { scope: "row" }, name(r)),
      [r.decisions, r.approved, r.edited, r.declined, r.resumed, r.expired, duration(r.waiting.medianSeconds), duration(r.waiting.p90Seconds)]
        .map((v) => el("td", {}, String(v)))))));
}

/** Downloads the audit export of the period with the console's token (a plain link would send none). */
async function download(p, format, out) {
  const q = new URLSearchParams({ ...instants(p), format });
  const headers = token() ? { Authorization: `Bearer ${token()}` } : {};
  try {
    const resp = await fetch(`/audit?${q}`, { headers });
    if (!resp.ok) {
      let msg = `The export failed (${resp.status}).`;
      try { msg = (await resp.json()).error.message; } catch { /* the status says it */ }
      throw new Error(msg);
    }
    const url = URL.createObjectURL(await resp.blob());
    const a = el("a", { href: url, download: `interlock-audit-${p.from}-${p.to}.${format}` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) {
    out.prepend(el("p", { class: "notice error", role: "alert" }, e.message));
  }
}
