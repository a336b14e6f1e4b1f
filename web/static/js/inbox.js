// Inbox: the live list of suspended runs, with filters, sort and pagination in the URL. New
// suspensions and decided runs appear and disappear without a reload (suspendedRunsChanged).
// Built for a person who approves all day: keyboard selection (keys.js), bulk approve/decline
// of the ticked runs, oldest-waiting first, an age mark that turns amber then red, the count in
// the tab's title, and optional desktop notifications while the tab is hidden.
//
// The kind filter (?kind=external or ?kind=internal) keeps the requests of external agents (that
// run elsewhere and ask over requestApproval, POST /approvals or a coding agent's hook) or the
// runs of the agents Interlock runs: the API's `external` argument, on the list and the changes.
//
// Dates in the URL are RFC 3339 instants with their offset (from=2026-12-02T21:00:00+01:00), so
// a shared link means the same runs in every time zone; the offset-less form of older links
// (from=2026-12-02T21:00) is read as the reader's local time. A "to" is inclusive to the end of
// its last stated unit: to=…T21:00 or …T21:00:59 both reach 21:00:59.999.
import { request, subscribe } from "./gql.js";
import { el, short, expiresIn, expiringText, followUpMarkers, when } from "./dom.js";
import { hiddenIn, describeHidden, markText } from "./hidden.js";
import { rememberOrder, takeFocusHint, selectRow, go, openShortcuts } from "./keys.js";
import { bulkDecidable, itemsOf, decideItems, recordedText } from "./bulk.js";
import { paintClaims } from "./claims.js";
import { searchField, savedViewsMenu } from "./search.js";

/** Waiting longer than this is marked amber ("waiting long"). */
export const AMBER_AFTER_MS = 15 * 60 * 1000;
/** Waiting longer than this is marked red ("waiting very long"). */
export const RED_AFTER_MS = 60 * 60 * 1000;
const TITLE = "Interlock";

// Only what the inbox shows or sends back: a page of 500 runs must stay within the default
// --max-query-complexity (10000), and each field costs one per run and per call.
// (createdAt, which it does not show, is left out for followUpsSent and escalatedTo.)
const RUN_FIELDS = `runId agentId threadId resourceId suspendedAt context claims { subject expiresAt }
      toolCalls { toolCallId toolName args requiresApproval suspendPayload interrupted expiresAt followUpsSent escalatedTo lateResult { recordedAt } }`;
const LIST = `query Inbox($agentId: ID, $threadId: ID, $resourceId: ID, $fromDate: DateTime, $toDate: DateTime, $page: Int, $perPage: Int, $external: Boolean, $search: String) {
  suspendedRuns(agentId: $agentId, threadId: $threadId, resourceId: $resourceId, fromDate: $fromDate, toDate: $toDate, page: $page, perPage: $perPage, external: $external, search: $search) {
    total
    runs { ${RUN_FIELDS} }
  }
}`;
const CHANGES = `subscription Changes($agentId: ID, $threadId: ID, $resourceId: ID, $external: Boolean) {
  suspendedRunsChanged(agentId: $agentId, threadId: $threadId, resourceId: $resourceId, external: $external) { kind run { runId agentId toolCalls { toolName } } }
}`;
/** The kind filter's choices: the URL's value, the API's external argument, the label. */
const KINDS = [["", null, "All agents"], ["external", true, "External (approval requests)"], ["internal", false, "Run by Interlock"]];

// --- dates ------------------------------------------------------------------------------------

const WHEN_RE = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})?$/i;

/**
 * Reads a date and time of the URL or of a datetime-local field: RFC 3339 with an offset (Z or
 * ±hh:mm), or without one (then local time), seconds and fraction optional. Returns
 * { time (ms since the epoch), precision: "min" | "s" | "ms", offset: bool }, or null when s is
 * not such a date (or no such day: 2026-02-30).
 */
export function parseWhen(s) {
  const m = WHEN_RE.exec(s || "");
  if (!m) return null;
  const [y, mo, d, h, mi] = m.slice(1, 6).map(Number);
  const sec = m[6] === undefined ? 0 : Number(m[6]);
  const ms = m[7] ? Math.floor(Number("0" + m[7]) * 1000) : 0;
  const daysInMonth = new Date(Date.UTC(y, mo, 0)).getUTCDate();
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth || h > 23 || mi > 59 || sec > 59) return null;
  let time;
  const off = m[8];
  if (off) {
    let minutes = 0;
    if (off.toUpperCase() !== "Z") {
      const oh = Number(off.slice(1, 3)), om = Number(off.slice(4, 6));
      if (oh > 23 || om > 59) return null;
      minutes = (off[0] === "-" ? -1 : 1) * (oh * 60 + om);
    }
    time = Date.UTC(y, mo - 1, d, h, mi, sec, ms) - minutes * 60000;
  } else {
    time = new Date(y, mo - 1, d, h, mi, sec, ms).getTime();
  }
  return { time, precision: m[7] ? "ms" : m[6] !== undefined ? "s" : "min", offset: !!off };
}

const p2 = (n) => String(n).padStart(2, "0");

/** An instant as RFC 3339 in local time with its offset: 2026-12-02T21:00:30+01:00. */
export function withOffset(time) {
  const d = new Date(time);
  const off = -d.getTimezoneOffset();
  const zone = off === 0 ? "Z" : `${off < 0 ? "-" : "+"}${p2(Math.floor(Math.abs(off) / 60))}:${p2(Math.abs(off) % 60)}`;
  return `${d.getFullYear()}-${p2(d.getMonth() + 1)}-${p2(d.getDate())}T${p2(d.getHours())}:${p2(d.getMinutes())}:${p2(d.getSeconds())}${zone}`;
}

/** The value of a datetime-local field showing w (from parseWhen) in local time. */
function localField(w, isTo) {
  const d = new Date(w.time);
  const minute = `${d.getFullYear()}-${p2(d.getMonth() + 1)}-${p2(d.getDate())}T${p2(d.getHours())}:${p2(d.getMinutes())}`;
  const s = d.getSeconds();
  // A from at :00 or a to at :59 (the end of the minute) is shown as the minute it stands for.
  if (w.precision === "min" || (w.precision === "s" && s === (isTo ? 59 : 0))) return { value: minute, step: null };
  return { value: `${minute}:${p2(s)}`, step: "1" };
}

/** The instant a filter stands for: a from as written, a to at the end of its last unit. */
function filterInstant(w, isTo) {
  if (!isTo) return w.time;
  return w.time + (w.precision === "min" ? 59999 : w.precision === "s" ? 999 : 0);
}

// --- age --------------------------------------------------------------------------------------

/** "fresh", "amber" (past AMBER_AFTER_MS) or "red" (past RED_AFTER_MS): how long a run has waited. */
export function ageLevel(iso, now = Date.now()) {
  const waited = now - Date.parse(iso);
  return waited > RED_AFTER_MS ? "red" : waited > AMBER_AFTER_MS ? "amber" : "fresh";
}

/** Draws a run's waiting time into span (data-since): text, a mark and a color that agree. */
export function paintAge(span, now = Date.now()) {
  const level = ageLevel(span.dataset.since, now);
  span.className = `age ${level}`;
  span.dataset.age = level;
  const mark = { fresh: null, amber: ["◷", "waiting long: "], red: ["⚠", "waiting very long: "] }[level];
  span.replaceChildren(...[
    mark ? el("span", { class: "age-mark", "aria-hidden": "true" }, mark[0], " ") : null,
    mark ? el("span", { class: "visually-hidden" }, mark[1]) : null,
    "waiting " + agoAt(span.dataset.since, now),
    level === "red" ? el("span", { class: "age-word" }, " · over 1 h") : level === "amber" ? el("span", { class: "age-word" }, " · over 15 min") : null,
  ].filter(Boolean));
  return level;
}

/** "5 s", "3 min", "2 h", "4 d" (as dom.js's ago) at the instant now. */
function agoAt(iso, now) {
  const s = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.floor(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} d`;
}

// --- paging -----------------------------------------------------------------------------------

/**
 * Reads one page of the inbox in the order asked. The server answers newest createdAt first
 * (index 0 the newest of `total`). Oldest first, page p of n holds the reversed list's
 * [p·n, p·n+n): the server's indices [total−(p+1)·n, total−p·n), cut at 0. Those lie on at most
 * two of the server's pages of n (⌊start/n⌋ and ⌊(end−1)/n⌋), read together and reversed. The
 * total comes first (the last known one, else a read of one run); if a run arrived or left
 * between the reads (the answers' totals differ from it) everything is read again.
 * "Oldest waiting" is by createdAt, the only order the server pages by: for a run that waited
 * before and waits again, its start, not its latest suspension, places it.
 */
async function readPage(vars, sort, knownTotal) {
  if (sort === "newest") return (await request(LIST, vars)).suspendedRuns;
  const n = vars.perPage, p = vars.page;
  for (let attempt = 0; ; attempt++) {
    const total = attempt === 0 && knownTotal != null ? knownTotal : (await request(LIST, { ...vars, page: 0, perPage: 1 })).suspendedRuns.total;
    const end = total - p * n, start = Math.max(0, total - (p + 1) * n);
    if (end <= 0) {
      if (attempt === 0 && knownTotal != null) continue; // the known total may be stale
      return { total, runs: [] };
    }
    const pages = [...new Set([Math.floor(start / n), Math.floor((end - 1) / n)])];
    const answers = await Promise.all(pages.map((page) => request(LIST, { ...vars, page, perPage: n })));
    if (answers.some((a) => a.suspendedRuns.total !== total) && attempt < 3) continue;
    const runs = answers.flatMap((a) => a.suspendedRuns.runs);
    const base = pages[0] * n;
    return { total: answers[0].suspendedRuns.total, runs: runs.slice(start - base, end - base).reverse() };
  }
}

let refocus = null; // the id of a control to focus when the view is drawn again (the sort, Apply)

// --- the view ---------------------------------------------------------------------------------

export function inboxView(main, params, navigate) {
  const f = {
    agentId: params.get("agent") || "", threadId: params.get("thread") || "", resourceId: params.get("resource") || "",
    kind: KINDS.some(([v]) => v && v === params.get("kind")) ? params.get("kind") : "",
    from: params.get("from") || "", to: params.get("to") || "", q: (params.get("q") || "").trim(),
    sort: params.get("sort") === "newest" ? "newest" : "oldest",
    page: Math.max(0, Math.floor(Number(params.get("page"))) || 0), perPage: Math.min(500, Math.max(1, Math.floor(Number(params.get("perPage"))) || 20)),
  };
  const filtered = !!(f.agentId || f.threadId || f.resourceId || f.from || f.to || f.kind || f.q);
  let closed = false;

  // The dates of the link, read (or the message saying which is wrong and what is expected).
  const problems = [];
  const dates = {};
  for (const [key, label] of [["from", "Created from"], ["to", "Created to"]]) {
    if (!f[key]) continue;
    const w = parseWhen(f[key]);
    if (!w) {
      problems.push({ key, text: `“${label}” in this link is “${f[key]}”, which is not a date and time. Expected one with its offset, like ${withOffset(Date.now())} (or ${withOffset(Date.now()).slice(0, 16)} for your local time).` });
    } else dates[key] = w;
  }
  if (dates.from && dates.to && filterInstant(dates.from, false) > filterInstant(dates.to, true)) {
    problems.push({ key: "from", text: `“Created from” (${when(new Date(dates.from.time))}) is after “Created to” (${when(new Date(filterInstant(dates.to, true)))}), so no run can match. Change one of them.` });
  }

  const list = el("div", { id: "inbox-list" });
  const status = el("p", { id: "inbox-status", class: "visually-hidden", role: "status" });
  const agentSelect = el("select", { id: "f-agent", name: "agent" }, el("option", { value: "" }, "All agents"));
  const kindSelect = el("select", { id: "f-kind", name: "kind" }, KINDS.map(([v, , label]) => el("option", { value: v, selected: v === f.kind }, label)));
  const input = (id, name, label, value, type = "text", extra = {}) =>
    el("div", {}, el("label", { for: id }, label), el("input", { id, name, type, value, ...extra }));
  const dateInput = (key, label) => {
    const shown = dates[key] ? localField(dates[key], key === "to") : { value: "", step: null };
    const bad = problems.find((p) => p.key === key);
    return input(`f-${key}`, key, label, shown.value, "datetime-local",
      { step: shown.step, "aria-invalid": bad ? "true" : null, "aria-describedby": bad ? "filter-error" : null });
  };
  const sortSelect = el("select", { id: "f-sort", name: "sort", onchange: () => { refocus = "f-sort"; form.requestSubmit(); } },
    el("option", { value: "oldest", selected: f.sort === "oldest" }, "Oldest first"),
    el("option", { value: "newest", selected: f.sort === "newest" }, "Newest first"));
  const form = el("form", { class: "card filters", "aria-label": "Filters", onsubmit: (ev) => {
    ev.preventDefault();
    const d = new FormData(form);
    const q = new URLSearchParams();
    for (const k of ["q", "agent", "kind", "thread", "resource"]) if (String(d.get(k) || "").trim()) q.set(k, String(d.get(k)).trim());
    // The field's local date and time, written with its offset (a to up to the end of its minute).
    for (const k of ["from", "to"]) {
      const w = d.get(k) && parseWhen(d.get(k));
      if (!w) continue;
      q.set(k, withOffset(k === "to" && w.precision === "min" ? w.time + 59000 : w.time));
    }
    if (Number(d.get("perPage")) !== 20) q.set("perPage", d.get("perPage"));
    if (d.get("sort") === "newest") q.set("sort", "newest");
    if (refocus !== "f-sort") refocus = "f-apply";
    navigate("/" + (q.toString() ? "?" + q : ""));
  } },
    searchField("f-q", f.q),
    el("div", {}, el("label", { for: "f-agent" }, "Agent"), agentSelect),
    el("div", {}, el("label", { for: "f-kind" }, "Kind of agent"), kindSelect),
    input("f-thread", "thread", "Thread", f.threadId),
    input("f-resource", "resource", "Resource", f.resourceId),
    dateInput("from", "Created from"),
    dateInput("to", "Created to"),
    input("f-perpage", "perPage", "Per page", String(f.perPage), "number", { min: "1", max: "500" }),
    el("div", {}, el("label", { for: "f-sort" }, "Order (by when the run started)"), sortSelect),
    el("div", {}, el("button", { type: "submit", class: "primary", id: "f-apply" }, "Apply"), " ", el("a", { href: "/" }, "Clear")));

  // Desktop notifications, asked for by the person, used while the tab is hidden.
  const canNotify = "Notification" in window;
  const notifyButton = canNotify ? el("button", { type: "button", id: "notify", onclick: async () => {
    try { await Notification.requestPermission(); } catch { /* an old browser's callback form: ignore */ }
    paintNotify();
  } }) : null;
  const paintNotify = () => {
    if (!notifyButton) return;
    const p = Notification.permission;
    notifyButton.textContent = p === "granted" ? "Notifications on" : p === "denied" ? "Notifications blocked" : "Notify me";
    notifyButton.disabled = p !== "default";
    notifyButton.title = p === "granted" ? "A notification comes for each new waiting run while this tab is hidden" :
      p === "denied" ? "The browser blocks them for this site: allow them in its site settings" : "A notification for each new waiting run while this tab is hidden";
  };
  paintNotify();

  // The bulk bar: shown while runs are ticked; outside the list so that live redraws keep what
  // is typed in its reason.
  const picked = new Map(); // runId → the run as it was when ticked
  const bulkCount = el("span", { id: "bulk-count" });
  const bulkReason = el("input", { type: "text", id: "bulk-reason", placeholder: "optional, every model sees it" });
  const approveN = el("button", { type: "button", class: "approve", id: "bulk-approve", onclick: () => bulk("approve") });
  const declineN = el("button", { type: "button", class: "decline", id: "bulk-decline", onclick: () => bulk("decline") });
  const bar = el("section", { class: "card bulk", id: "bulk", "aria-label": "Decide the selected runs", hidden: true },
    el("div", { class: "actions" }, bulkCount, approveN,
      el("div", { class: "grow" }, el("label", { for: "bulk-reason" }, "Reason for declining (for all of them)"), bulkReason), declineN),
    el("p", { class: "muted small" }, "Each call is decided on its own: if someone decides one first, the others still go through. Runs waiting for an answer (resume data) and interrupted calls (the tool may have run) can't be decided in bulk; open them one by one."));
  const result = el("div", { id: "bulk-result", tabindex: "-1", role: "status" });

  const paintBar = () => {
    const n = picked.size;
    bar.hidden = n === 0;
    bulkCount.textContent = `${n} selected`;
    approveN.textContent = `Approve ${n}`;
    declineN.textContent = `Decline ${n}`;
    const all = list.querySelector("#pick-all");
    if (all) {
      const boxes = [...list.querySelectorAll("input.pick:not(:disabled)")];
      const on = boxes.filter((b) => b.checked).length;
      all.checked = boxes.length > 0 && on === boxes.length;
      all.indeterminate = on > 0 && on < boxes.length;
    }
  };

  main.append(
    el("div", { class: "inbox-head" }, el("h1", { id: "inbox-title", tabindex: "-1" }, "Waiting for you"),
      el("div", { class: "inbox-tools" }, savedViewsMenu(navigate), notifyButton,
        el("button", { type: "button", id: "show-shortcuts", "aria-keyshortcuts": "?", onclick: openShortcuts }, "Shortcuts ", el("kbd", {}, "?")))),
    form, status, result, bar, list);
  if (refocus) { document.getElementById(refocus)?.focus(); refocus = null; }

  const externalAgents = new Set(); // ids of the agents that run elsewhere: their rows are marked
  const quorumTools = new Set(); // "<agent>/<tool>" of the tools that need several approvals
  const agentsRead = request(`{ agents { id name external tools { name approvals { required } } } }`).then((d) => {
    for (const a of d.agents) {
      agentSelect.append(el("option", { value: a.id, selected: a.id === f.agentId }, a.name));
      if (a.external) externalAgents.add(a.id);
      for (const t of a.tools) if (t.approvals.required > 1) quorumTools.add(`${a.id}/${t.name}`);
    }
    for (const span of list.querySelectorAll("[data-agent]")) markExternal(span, externalAgents);
  }).catch(() => {});

  if (problems.length) {
    list.replaceChildren(el("div", { class: "notice error", role: "alert", id: "filter-error" },
      problems.map((p) => el("p", {}, p.text)), el("p", {}, el("a", { href: "/" }, "Clear the filters"))));
    return () => { closed = true; };
  }

  const vars = {
    agentId: f.agentId || null, threadId: f.threadId || null, resourceId: f.resourceId || null,
    fromDate: dates.from ? new Date(filterInstant(dates.from, false)).toISOString() : null,
    toDate: dates.to ? new Date(filterInstant(dates.to, true)).toISOString() : null,
    page: f.page, perPage: f.perPage, external: KINDS.find(([v]) => v === f.kind)[1], search: f.q || null,
  };
  let timer = null;
  let total = null;
  let firstDraw = true;
  let asked = 0;
  let lastRuns = [];
  const load = async () => {
    const mine = ++asked;
    try {
      const d = await readPage(vars, f.sort, total);
      await agentsRead;
      await readApprovals(d.runs, quorumTools);
      if (closed || mine !== asked) return;
      total = d.total;
      lastRuns = d.runs;
      document.title = total ? `(${total}) ${TITLE}` : TITLE;
      status.textContent = total === 1 ? "1 run waiting" : `${total} runs waiting`;
      draw();
    } catch (e) {
      if (closed || mine !== asked) return;
      list.replaceChildren(el("p", { class: "notice error", role: "alert" }, e.message));
    }
  };

  const draw = () => {
    // Where the focus is in the list, to put it back on the same run's row, or the next one.
    const a = document.activeElement;
    let keep = null;
    if (a && list.contains(a)) {
      const li = a.closest("li[data-run]");
      if (li) keep = { runId: li.dataset.run, index: [...list.querySelectorAll("li[data-run]")].indexOf(li), part: a.matches("input.pick") ? "pick" : a.matches("button") ? "button" : "row" };
      else if (a.id) keep = { id: a.id };
      else keep = { index: 0, part: "row" };
    } else if (firstDraw) {
      const hint = takeFocusHint();
      if (hint && (!a || a === document.body || a === main)) keep = { ...hint, part: "row" };
    }
    const selected = list.querySelector("a.row[aria-current=true]")?.dataset.run;
    firstDraw = false;
    renderList(list, { total, runs: lastRuns }, f, params, filtered, picked, { onPick: paintBar, approveAll });
    for (const span of list.querySelectorAll("[data-agent]")) markExternal(span, externalAgents);
    paintClaims(list, lastRuns);
    rememberOrder(location.search, lastRuns.map((r) => r.runId));
    const rowLinks = [...list.querySelectorAll("a.row[data-run]")];
    const again = rowLinks.find((r) => r.dataset.run === selected);
    if (again) { again.setAttribute("aria-current", "true"); again.closest("li").classList.add("selected"); }
    if (keep) {
      if (keep.id && document.getElementById(keep.id)) document.getElementById(keep.id).focus();
      else {
        const li = list.querySelector(`li[data-run="${CSS.escape(keep.runId || "")}"]`) ||
          list.querySelectorAll("li[data-run]")[Math.min(keep.index ?? 0, rowLinks.length - 1)];
        if (li) {
          const target = keep.part === "pick" ? li.querySelector("input.pick:not(:disabled)") : keep.part === "button" ? li.querySelector("button") : null;
          if (target) target.focus();
          else selectRow(li.querySelector("a.row"));
        } else {
          list.querySelector(".empty")?.focus();
        }
      }
    }
    paintBar();
  };

  // Approving every waiting call of one run (the row's "Approve all N calls"): one batch.
  async function approveAll(run, button) {
    button.disabled = true;
    const outcomes = await decideItems(itemsOf([run], "approve", null));
    report("approve", outcomes, []);
    button.disabled = false;
    reload();
  }

  async function bulk(kind) {
    const runs = [...picked.values()];
    const decidable = runs.filter(bulkDecidable);
    const skipped = runs.filter((r) => !bulkDecidable(r));
    const items = itemsOf(decidable, kind, bulkReason.value.trim());
    approveN.disabled = declineN.disabled = true;
    result.replaceChildren(el("p", { class: "notice" }, `${kind === "approve" ? "Approving" : "Declining"} ${items.length}…`));
    const outcomes = await decideItems(items);
    if (closed) return;
    approveN.disabled = declineN.disabled = false;
    picked.clear();
    for (const b of list.querySelectorAll("input.pick")) b.checked = false;
    if (kind === "decline") bulkReason.value = "";
    report(kind, outcomes, skipped);
    paintBar();
    reload();
  }

  // Says how a bulk decision went, call by call: how many went through, which someone else
  // decided first (CONFLICT: who and when), which failed otherwise, with the server's words,
  // and a button that sends the failed ones again. The focus goes to it.
  function report(kind, outcomes, skipped) {
    const ok = outcomes.filter((o) => o.ok);
    const conflicts = outcomes.filter((o) => !o.ok && o.code === "CONFLICT");
    const failed = outcomes.filter((o) => !o.ok && o.code !== "CONFLICT");
    // What sending again may cure (the server unreachable or busy, over the rate), not a refusal.
    const retryable = failed.filter((o) => !["FORBIDDEN", "NOT_FOUND", "BAD_USER_INPUT"].includes(o.code));
    const many = new Set(outcomes.map((o) => o.run.runId)).size < outcomes.length; // a run with several calls
    const item = (o) => el("li", { "data-run": o.run.runId, "data-call": o.call.toolCallId },
      el("a", { href: `/?run=${encodeURIComponent(o.run.runId)}` },
        (o.call.toolName || "run") + " ", el("span", { class: "short inline" }, o.run.runId), many ? ` (${o.call.toolCallId})` : ""),
      o.message ? `: ${o.message}` : "");
    const retry = async (button) => {
      button.disabled = true;
      result.querySelector(".bulk-summary").append(" Retrying…");
      const again = await decideItems(retryable);
      if (closed) return;
      report(kind, again, []);
      reload();
    };
    result.replaceChildren(el("div", { class: `notice ${failed.length ? "error" : conflicts.length ? "warn" : ""}` },
      el("p", { class: "bulk-summary" }, el("strong", {}, recordedText(ok) ? `${ok.filter((o) => !o.recorded).length} approved, ${recordedText(ok)}.` : `${ok.length} ${kind === "approve" ? "approved" : "declined"}.`),
        conflicts.length ? ` ${conflicts.length} decided by someone else first.` : "", failed.length ? ` ${failed.length} failed.` : ""),
      conflicts.length ? [el("p", {}, "Decided by someone else first:"), el("ul", { class: "bulk-conflicts" }, conflicts.map(item))] : null,
      failed.length ? [el("p", {}, "Failed:"), el("ul", { class: "bulk-failed" }, failed.map(item))] : null,
      skipped.length ? el("p", {}, `${skipped.length} skipped: they wait for an answer (resume data), or were interrupted (the tool may have run); open them one by one.`) : null,
      el("p", {},
        retryable.length ? [el("button", { type: "button", id: "bulk-retry", onclick: (ev) => retry(ev.currentTarget) }, `Retry the ${retryable.length} failed`), " "] : null,
        el("button", { type: "button", class: "link", onclick: () => { result.replaceChildren(); document.getElementById("inbox-title").focus(); } }, "Dismiss"))));
    result.focus();
  }

  const reload = () => { clearTimeout(timer); timer = setTimeout(load, 50); };
  load();
  const unsubscribe = subscribe(CHANGES, () => ({ agentId: vars.agentId, threadId: vars.threadId, resourceId: vars.resourceId, external: vars.external }), {
    next: (d) => { notify(d.suspendedRunsChanged); reload(); },
    error: () => {}, resync: load, // changes missed while the subscription was down
  });
  const tick = setInterval(() => {
    const now = Date.now();
    list.querySelectorAll(".age[data-since]").forEach((n) => paintAge(n, now));
    list.querySelectorAll("[data-expires]").forEach((n) => { n.textContent = expiresIn(n.dataset.expires); });
    list.querySelectorAll("[data-expiring]").forEach((n) => { n.textContent = expiringText(n.dataset.expiring); });
    paintClaims(list, lastRuns, now);
  }, 15000);
  return () => { closed = true; unsubscribe(); clearInterval(tick); clearTimeout(timer); document.title = TITLE; };
}

/** Marks a row's agent (span[data-agent]) as external when it is one. */
function markExternal(span, externalAgents) {
  if (!externalAgents.has(span.dataset.agent) || span.querySelector(".badge.external")) return;
  span.append(el("span", { class: "badge external", title: "The agent runs elsewhere: this is its request to run one tool call" }, "external"));
}

/** A desktop notification for a run that starts waiting, when allowed and the tab is hidden. */
function notify(change) {
  if (!change || change.kind !== "SUSPENDED" || !("Notification" in window) || Notification.permission !== "granted" || !document.hidden) return;
  const run = change.run;
  const n = new Notification(markText(run.toolCalls?.[0]?.toolName || "A run waits for you"), { body: markText(run.agentId), tag: run.runId });
  n.onclick = () => { window.focus(); n.close(); go(`/?run=${encodeURIComponent(run.runId)}`); };
}

/** An external request's context, its first non-empty line, cut to fit a row (its hidden
 * characters shown as marks); null for a run without one. */
function contextLine(r) {
  const first = (r.context || "").split("\n").map((l) => l.replace(/^[#>*\s-]+/, "").trim()).find(Boolean);
  if (!first) return null;
  const text = markText(first.length > 120 ? first.slice(0, 119) + "…" : first);
  return el("span", { class: "block context-line", title: markText(r.context) }, text);
}

/** Reads the approvals of the calls of runs whose tool needs several (quorumTools) and puts them
 * on the calls (call.approvals): in a query of their own, because each field of the page's
 * query costs once per run and a page of 500 must stay within the server's complexity limit.
 * Unread approvals leave the rows without the count. */
async function readApprovals(runs, quorumTools) {
  const ids = runs.filter((r) => r.toolCalls.some((c) => c.requiresApproval && quorumTools.has(`${r.agentId}/${c.toolName}`))).map((r) => r.runId);
  for (let i = 0; i < ids.length; i += 100) {
    const chunk = ids.slice(i, i + 100);
    const q = `query(${chunk.map((_, n) => `$r${n}: ID!`).join(", ")}) { ${chunk.map((_, n) => `r${n}: run(runId: $r${n}) { runId toolCalls { toolCallId approvals { required count by { subject } } } }`).join(" ")} }`;
    let d;
    try { d = await request(q, Object.fromEntries(chunk.map((id, n) => [`r${n}`, id]))); } catch { return; }
    for (const got of Object.values(d)) {
      const r = got && runs.find((x) => x.runId === got.runId);
      for (const c of r?.toolCalls || []) c.approvals = got.toolCalls.find((x) => x.toolCallId === c.toolCallId)?.approvals;
    }
  }
}

function renderList(list, result, f, params, filtered, picked, { onPick, approveAll }) {
  if (result.total === 0) {
    const clear = "/" + (f.sort === "newest" ? "?sort=newest" : "");
    list.replaceChildren(filtered
      ? el("div", { class: "card empty no-match", tabindex: "-1" },
        el("p", {}, el("strong", {}, "No waiting runs match these filters.")),
        el("p", { class: "muted" }, "Other runs may be waiting."), el("p", {}, el("a", { href: clear }, "Clear the filters")))
      : el("div", { class: "card empty", tabindex: "-1" },
        el("p", {}, el("strong", {}, "Nothing waits for a decision.")),
        el("p", { class: "muted" }, "When a run needs an approval or an answer it shows up here at once."),
        el("p", {}, el("a", { href: "/?view=new" }, "Start a run"))));
    return;
  }
  // A ticked run that left the list stays ticked (its decision is then reported as taken by
  // someone else); one still here is refreshed.
  const now = Date.now();
  const rows = result.runs.map((r) => {
    const c = r.toolCalls[0] || {};
    const what = c.requiresApproval ? short(c.args) : short(c.suspendPayload);
    const hiddenChars = hiddenIn(...r.toolCalls.flatMap((x) => [x.toolName, x.args, x.suspendPayload]));
    const decidable = bulkDecidable(r);
    const ranLate = r.toolCalls.some((x) => x.lateResult);
    const interrupted = r.toolCalls.some((x) => x.interrupted);
    if (picked.has(r.runId)) picked.set(r.runId, r);
    const age = el("span", { "data-since": r.suspendedAt });
    paintAge(age, now);
    const noteId = `note-${r.runId}`;
    const box = el("input", { type: "checkbox", class: "pick", id: `pick-${r.runId}`, checked: picked.has(r.runId), disabled: !decidable,
      "aria-label": `Select ${c.toolName || "run"} ${r.runId}`, "aria-describedby": decidable ? null : noteId,
      onchange: (ev) => { if (ev.target.checked) picked.set(r.runId, r); else picked.delete(r.runId); onPick(); } });
    const many = r.toolCalls.length > 1;
    const allApproval = many && decidable && r.toolCalls.every((x) => x.requiresApproval);
    return el("li", { class: "inbox-item", "data-run": r.runId }, box,
      el("a", { class: "row", href: `/?run=${encodeURIComponent(r.runId)}`, "data-run": r.runId },
        el("span", {}, el("span", { class: "tool" }, c.toolName || "?"), " ",
          el("span", { class: "badge SUSPENDED" }, c.requiresApproval ? (c.interrupted ? (c.lateResult ? "interrupted · it ran: see its answer" : "interrupted · approve again") : "approval") : "needs input"),
          many ? el("span", { class: "badge calls" }, `${r.toolCalls.length} calls`) : null,
          hiddenChars.length ? el("span", { class: "badge hidden-chars", title: `Holds characters that change how text reads, shown as marks: ${describeHidden(hiddenChars)}` }, "⚠ hidden characters") : null,
          followUpMarkers(r.toolCalls),
          el("span", { class: "muted block", "data-agent": r.agentId }, r.agentId),
          contextLine(r)),
        el("code", { title: what }, what),
        el("span", { class: "muted" }, r.threadId ? `thread ${r.threadId}` : "no thread", el("br"), r.resourceId ? `resource ${r.resourceId}` : ""),
        el("span", {}, age,
          c.approvals?.required > 1 ? el("span", { class: "block approvals", "data-count": c.approvals.count },
            `Approvals: ${c.approvals.count} of ${c.approvals.required}`, c.approvals.by.length ? ` — ${c.approvals.by.map((b) => b.subject).join(", ")}` : "") : null,
          c.expiresAt ? el("span", { class: "muted block expires", "data-expires": c.expiresAt, title: when(c.expiresAt) }, expiresIn(c.expiresAt)) : null,
          decidable ? null : el("span", { class: "muted block", id: noteId }, ranLate ? "its tool ran after all: open it" : interrupted ? "interrupted: open it to decide" : "needs an answer: open it"))),
      allApproval ? el("button", { type: "button", class: "approve-all", onclick: (ev) => approveAll(r, ev.currentTarget) }, `Approve all ${r.toolCalls.length} calls`) : null);
  });
  const first = f.page * f.perPage;
  const pageURL = (p) => { const q = new URLSearchParams(params); q.set("page", p); return "/?" + q; };
  const [back, forward] = f.sort === "newest" ? ["← Newer", "Older →"] : ["← Older", "Newer →"];
  const pager = el("nav", { class: "pager", "aria-label": "Pages" },
    el("span", {}, result.runs.length ? `${first + 1}–${first + result.runs.length} of ${result.total}` : `none on this page, ${result.total} in all`),
    f.page > 0 ? el("a", { href: pageURL(f.page - 1) }, back) : null,
    first + result.runs.length < result.total ? el("a", { href: pageURL(f.page + 1) }, forward) : null);
  const all = el("input", { type: "checkbox", id: "pick-all", onchange: (ev) => {
    const on = ev.target.checked; // read once: each box's change repaints this one
    for (const b of list.querySelectorAll("input.pick:not(:disabled)")) {
      if (b.checked === on) continue;
      b.checked = on;
      b.dispatchEvent(new Event("change"));
    }
  } });
  list.replaceChildren(pager,
    result.runs.length ? el("div", { class: "pick-all" }, all, " ", el("label", { for: "pick-all", class: "inline" }, "Select all on this page")) : null,
    el("ul", { class: "list" }, rows));
}
