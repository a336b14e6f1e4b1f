// History: recent finished runs with their outcome and the decisions taken (and by whom).
import { request } from "./gql.js";
import { el, short, when } from "./dom.js";

const RECENT = `query History($page: Int, $perPage: Int) { recentRuns(page: $page, perPage: $perPage) {
  total runs { runId agentId status prompt output error updatedAt decisions { kind toolName reason decidedBy decidedAt } }
} }`;

export function historyView(main, params) {
  const page = Math.max(0, Number(params.get("page")) || 0);
  const perPage = 20;
  const list = el("div", {});
  main.append(el("h1", {}, "History"), list);
  request(RECENT, { page, perPage }).then((d) => {
    const r = d.recentRuns;
    if (!r.total) {
      list.replaceChildren(el("div", { class: "card empty" }, el("p", {}, "No finished runs yet."), el("a", { href: "/?view=new" }, "Start a run")));
      return;
    }
    const rows = r.runs.map((run) => el("li", {}, el("a", { class: "row", href: `/?run=${encodeURIComponent(run.runId)}` },
      el("span", {}, el("span", { class: `badge ${run.status}` }, run.status), el("span", { class: "muted block" }, run.agentId)),
      el("span", {}, el("span", { class: "short" }, run.prompt), el("span", { class: "short muted" }, short(run.output || run.error, 100))),
      el("span", {}, run.decisions.length ? run.decisions.map((x) => `${x.kind.toLowerCase()} ${x.toolName}${x.decidedBy ? ` by ${x.decidedBy}` : ""}${x.reason ? ` (“${x.reason}”)` : ""}`).join(", ") : el("span", { class: "muted" }, "no decisions")),
      el("span", { class: "muted" }, when(run.updatedAt)))));
    list.replaceChildren(
      el("nav", { class: "pager", "aria-label": "Pages" },
        el("span", {}, `${page * perPage + 1}–${page * perPage + r.runs.length} of ${r.total}`),
        page > 0 ? el("a", { href: `/?view=history&page=${page - 1}` }, "← Newer") : null,
        (page + 1) * perPage < r.total ? el("a", { href: `/?view=history&page=${page + 1}` }, "Older →") : null),
      el("ul", { class: "list" }, rows));
  }).catch((e) => list.replaceChildren(el("p", { class: "notice error", role: "alert" }, e.message)));
}
