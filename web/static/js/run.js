// Run view: what the run waits on, with Approve / Decline (with a reason) / Resume (a form from
// the tool's resumeSchema), and the run's events streaming live, grouped by step.
//
// A pending call is shown so that it can be judged without opening anything: the tool's
// description, what the agent said before asking (its streamed text, as safe Markdown), the
// arguments as a table (the raw JSON a click away), and the thread's earlier messages when the
// run has a thread. Every decision says who took it and when.
//
// An external agent's run (an approval request: requestApproval, POST /approvals, a coding
// agent's hook) has no model and no transcript: it shows who asked (startedBy) and the context
// its caller sent, as safe Markdown (markdown.js: DOM nodes, never HTML; links only http(s)),
// in place of the prompt, the final answer and the thread.
//
// An interrupted call (its outcome unknown: its instance stopped or lost the database, or its
// tool's server did not answer) says whether the tool's answer was recorded late by the
// instance that ran it, and shows that answer beside the call and beside its
// TOOL_CALL_INTERRUPTED event, as text. No event announces a late answer (it is recorded beside
// the run, not in it), so while an interrupted call waits without one the run is read again
// every few seconds.
//
// A CONFLICT (someone decided first), or a call that stops waiting while the person looks at it,
// is said with who decided and when; what the person had typed and can no longer send is shown
// to copy. A FORBIDDEN (this person may not take that decision) is said next to the buttons, with
// what was typed kept. When a model call is made again after a recovery (MODEL_CALL_RETRIED), the
// text it had streamed in that step is dropped. After a decision succeeds the document gets an
// "interlock:decided" event ({detail: {runId, toolCallId}}).
import { request, subscribe } from "./gql.js";
import { el, json, pretty, tooDeep, TOO_DEEP, when, expiresIn, followUpMarkers } from "./dom.js";
import { schemaForm } from "./schemaform.js";
import { markdown } from "./markdown.js";
import { reveal, hiddenIn, markedIn, describeHidden, escapeHidden, mark } from "./hidden.js";
import { allowSimilar } from "./grants.js";
import { argsEditor, holdsInexactNumber, reviewOf } from "./argsform.js";
import { hold } from "./hold.js";
import { runNav } from "./keys.js";
import { claimBox } from "./claims.js";

const LATE = `toolCallId toolName result error suspendPayload instanceId finishedAt recordedAt`;
const RUN = `query Run($id: ID!) { run(runId: $id) {
  runId agentId status threadId resourceId startedBy createdAt updatedAt suspendedAt lastEventSeq output error prompt context external
  toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted interruptedToolCallId expiresAt approvalReason remindAt escalateAt escalatedTo expiringAt followUpsSent lateResult { ${LATE} }
    askedMidCall resumeSchema
    approvals { required count args edited by { subject at } superseded { subject } } }
  decisions { id toolCallId toolName kind decidedBy decidedAt reason resumeData args editedArgs grantId policyRevision approvals { required by { subject at } } }
  lateResults { ${LATE} }
} }`;
const EVENTS = `subscription Events($runId: ID!, $after: Int) { runEvents(runId: $runId, after: $after) {
  seq type at text status error reason decidedBy grantId result toolCall { toolCallId toolName args suspendPayload interrupted interruptedToolCallId approvals { required count by { subject } } } } }`;
/** How often a run is read again while an interrupted call waits without a late answer. */
const LATE_POLL_MS = 4000;
const AGENTS = `{ me { subject } agents { id tools { name description inputSchema resumeSchema approverRoles approvalPolicy approvals { required roles } } } }`;
const APPROVE = `mutation($id: ID!, $c: ID, $a: JSON) { approveToolCall(runId: $id, toolCallId: $c, args: $a) { status toolCalls { toolCallId approvals { required count } } } }`;
const THREAD = `query Thread($id: ID!, $last: Int) { thread(id: $id) { id messageCount messages(last: $last) { id runId role content createdAt } } }`;
const THREAD_LAST = 50;

export function runView(main, params) {
  const id = params.get("run");
  let agents = null;
  let lastRun = null; // the run as last drawn
  let threadAsked = false;
  const head = el("div", {});
  const thread = el("div", { class: "thread-box" });
  const summary = el("div", {});
  const notice = el("div", { role: "alert" });
  const lost = el("div", { class: "lost-box" }); // typed text a decision elsewhere made unsendable
  const pending = el("section", { "aria-label": "Waiting for a decision" });
  const stream = el("ol", { class: "stream timeline", "aria-live": "polite", id: "stream" });
  const decisions = el("section", { "aria-label": "Decisions" });
  const claims = claimBox(id); // "I'm on it", and who else is (claims.js)
  main.append(runNav(id), head, claims.node, thread, summary, notice, lost, pending, el("h2", {}, "Live"), el("div", { class: "card" }, stream), decisions);

  const ctx = {
    said: new Map(), // toolCallId → what the agent said in the model call that asked for it
    mine: new Set(), // calls decided (or being decided, or refused as raced) from this page
    lostCall: null,
  };

  let textNode = null; // where the next TEXT_DELTA goes
  let textRaw = ""; // its text so far
  let modelText = ""; // the text of the current model call
  let stepText = []; // the items holding the current step's text, dropped if its model call is made again
  let step = null; // { list, tools } of the step being shown
  let steps = 0;
  let stepDone = true; // STEP_FINISHED seen: the next event starts a new step
  let lastSeq = 0;
  let closed = false;
  let finished = false; // RUN_FINISHED or RUN_FAILED seen: the stream has ended for good
  let asked = 0; // numbers the reads of the run: only the latest one draws
  let sentFor = null; // the call (and suspension) the "Decision sent" notice is about
  let latePoll = null; // the next read of the run while a late answer may still come

  const say = (kind, ...children) => {
    notice.replaceChildren(el("p", { class: `notice ${kind}` }, ...children));
    delete notice.dataset.sent;
  };

  const show = async () => {
    const mine = ++asked;
    let run;
    try {
      run = (await request(RUN, { id })).run;
      if (!agents) {
        const d = await request(AGENTS);
        agents = d.agents;
        ctx.me = d.me?.subject ?? null; // who this console acts for: a quorum counts each person once
      }
    } catch (e) {
      if (mine === asked) say("error", e.message);
      return;
    }
    if (mine !== asked || closed) return;
    if (!run) {
      head.replaceChildren(el("h1", {}, "No such run"), el("p", {}, "It may have been removed by retention. ", el("a", { href: "/" }, "Back to the inbox")));
      return;
    }
    lastRun = run;
    // An external agent's request is one call, not an agent's steps: no "Step 1" headings.
    stream.classList.toggle("one-call", !!run.external);
    renderHead(head, summary, run);
    renderPending(pending, run, agents, decide, ctx);
    renderDecisions(decisions, run);
    fillLate(stream, run);
    clearTimeout(latePoll);
    if (run.status === "SUSPENDED" && run.toolCalls.some((c) => c.interrupted && c.interruptedToolCallId && !c.lateResult)) {
      latePoll = setTimeout(() => { if (!closed) show(); }, LATE_POLL_MS);
    }
    // A "Decision sent" notice is stale once the next call waits or the run has ended.
    if (notice.dataset.sent && sentFor) {
      if (run.status === "COMPLETED" || run.status === "FAILED") {
        notice.replaceChildren(el("p", { class: "notice" }, `Decision sent. The run has finished (${run.status}).`));
        notice.dataset.sent = "ended";
      } else if (run.status === "SUSPENDED" && !waitsOn(run, sentFor)) {
        notice.replaceChildren();
        delete notice.dataset.sent;
        sentFor = null;
      }
    }
    if (run.threadId && !run.external && !threadAsked) {
      threadAsked = true;
      renderThread(thread, run).catch(() => { threadAsked = false; });
    }
  };

  /** Shows what a person typed for a call and can no longer send, with a Copy button. */
  function lostCall(c, typed, run, raced = false) {
    const d = lastDecision(run, c.toolCallId);
    const what = d ? decisionSentence(d) : [`This request is no longer waiting: the run is now ${run.status}.`];
    const call = `${c.toolName} (${c.toolCallId})`;
    if (d?.kind === "EXPIRED") say(raced || typed ? "warn" : "", `Too late for ${call}: `, ...what);
    else if (raced || typed) say("warn", "Someone else decided first: ", ...what, " This is the run as it is now.");
    else say("", `${call} was decided elsewhere: `, ...what);
    if (typed) lost.prepend(lostText(c, typed));
  }
  ctx.lostCall = lostCall;

  /** lostCall for several calls at once (list of [call, typed]): one notice naming each call
   * and its own decision (who, which, when), so that none hides another. */
  let lostSoFar = []; // the calls said decided elsewhere since this page last decided one
  ctx.lostCalls = (list, run) => {
    for (const [c] of list) if (!lostSoFar.some((o) => o.toolCallId === c.toolCallId)) lostSoFar.push(c);
    if (lostSoFar.length === 1) return lostCall(list[0][0], list[0][1], run);
    const typed = list.some(([, t]) => t);
    notice.replaceChildren(el("div", { class: `notice ${typed ? "warn" : ""}` },
      el("p", {}, `${lostSoFar.length} calls were decided elsewhere:`),
      el("ul", { class: "lost-calls" }, lostSoFar.map((c) => {
        const d = lastDecision(run, c.toolCallId);
        return el("li", { "data-call": c.toolCallId }, `${c.toolName} (${c.toolCallId}): `,
          ...(d ? decisionSentence(d) : [`no longer waiting: the run is now ${run.status}.`]));
      }))));
    delete notice.dataset.sent;
    for (const [c, t] of list) if (t) lost.prepend(lostText(c, t));
  };

  // card: the pending call's card; form: the form decided from, if any (its .form-error is
  // where its refusals go).
  const decide = async (mutation, vars, card, form) => {
    const buttons = pending.querySelectorAll("button");
    lostSoFar = [];
    const callId = card.dataset.call;
    const call = pending._calls?.find((c) => c.toolCallId === callId);
    const typed = typedIn(card, call);
    buttons.forEach((b) => { b.disabled = true; });
    notice.replaceChildren();
    delete notice.dataset.sent;
    const refusal = card.querySelector(".decision-error");
    refusal.textContent = "";
    asked++; // a read of the run sent before the decision must not draw its form again
    const decided = pending.dataset.calls;
    const sent = { callId, since: lastRun?.suspendedAt }; // this suspension's call, not a later one of the same id
    ctx.mine.add(callId);
    try {
      // Held a few seconds with an Undo before it is sent (hold.js); nothing is sent when undone.
      const doing = mutation.includes("declineToolCall") ? "Declining" : mutation.includes("resumeRun") ? "Answering" : "Approving";
      const answer = Object.values(await hold({ label: `${doing} ${call?.toolName || "the call"} (${callId})…`, query: mutation, variables: vars,
        send: () => request(mutation, vars) }))[0];
      const still = answer?.status === "SUSPENDED" ? (answer.toolCalls || []).find((c) => c.toolCallId === callId) : null;
      if (still?.approvals) {
        // A quorum's approval that did not meet it: recorded, and the call waits for the others.
        const a = still.approvals;
        const left = a.required - a.count;
        ctx.mine.delete(callId); // the call is decided by someone else's approval, later
        await show();
        say("", `Your approval of ${call?.toolName || "the call"} (${callId}) is recorded: approvals ${a.count} of ${a.required}. The tool runs when ${left} more ${left === 1 ? "person approves" : "people approve"}.`);
        return;
      }
      const others = answer?.status === "SUSPENDED" ? answer.toolCalls || [] : [];
      if (others.length) {
        // One of several calls: the run still waits on the others, so this view stays, drawn
        // again without the decided call, its next call's first control focused.
        const verb = mutation.includes("declineToolCall") ? "Declined" : "Approved";
        await show();
        say("", `${verb} ${call?.toolName || "the call"} (${callId}). ${others.length} more ${others.length === 1 ? "call waits" : "calls wait"} for you; the run goes on once all are decided.`);
        // Its Approve button, or its card: never a field, where a next shortcut would type.
        const next = pending.querySelector(".pending .actions > button.approve:not(:disabled)") || pending.querySelector(".pending");
        if (next && !next.matches("button")) next.tabIndex = -1;
        next?.focus();
        return;
      }
      // Unless the run already waits on something new (drawn meanwhile), the form is done.
      if (pending.dataset.calls === decided) clearPending(pending);
      const now = lastRun;
      if (now && (now.status === "COMPLETED" || now.status === "FAILED")) {
        notice.replaceChildren(el("p", { class: "notice" }, `Decision sent. The run has finished (${now.status}).`));
        notice.dataset.sent = "ended";
      } else if (!(now && now.status === "SUSPENDED" && !waitsOn(now, sent))) {
        notice.replaceChildren(el("p", { class: "notice" }, "Decision sent. The run goes on below."));
        notice.dataset.sent = "1";
      }
      sentFor = sent;
      document.dispatchEvent(new CustomEvent("interlock:decided", { detail: { runId: id, toolCallId: callId } }));
    } catch (e) {
      if (e.code !== "CONFLICT") ctx.mine.delete(callId); // a raced call is said once, here
      buttons.forEach((b) => { b.disabled = false; });
      if (e.code === "UNDONE") {
        say("", `Undone: nothing was sent. ${call?.toolName || "The call"} (${callId}) still waits for you.`);
        if (form) form.querySelector(".form-error").textContent = "";
      } else if (e.code === "CONFLICT") {
        // Who took the decision, and when: read the run as it is now.
        let run = null;
        try { run = (await request(RUN, { id })).run; } catch { /* said below */ }
        if (run && run.status === "SUSPENDED" && run.toolCalls.some((x) => x.toolCallId === callId)) {
          // Still waiting: a quorum's refusal (already approved by you, or its arguments were
          // edited meanwhile), said as the server says it, with the call drawn as it is now.
          ctx.mine.delete(callId);
          say("warn", `Not recorded: ${e.message}.`);
        } else if (run && call) lostCall(call, typed, run, true);
        else say("warn", "Someone else decided first: ", e.message, ". This is the run as it is now.");
        await show();
      } else if (e.code === "FORBIDDEN") {
        // The server's message says who may decide and why; nothing typed is lost.
        const where = form ? form.querySelector(".form-error") : refusal;
        where.textContent = `Not allowed: ${e.message}`;
      } else if (e.code === "BAD_USER_INPUT" && form) {
        form.querySelector(".form-error").textContent = e.message;
        form.querySelector("textarea")?.setAttribute("aria-invalid", "true");
      } else {
        say("error", e.message);
      }
    }
  };

  const newStep = (at) => {
    steps++;
    const tools = el("span", { class: "step-tools muted" });
    const list = el("ol", { class: "step-events" });
    const heading = el("h3", { class: "step-title" }, `Step ${steps}`, " ", stamp(at), tools);
    stream.append(el("li", { class: "step", "data-step": steps }, heading, list));
    step = { list, tools, names: [] };
    stepDone = false;
  };

  const append = (item, at) => {
    if (stepDone || !step) newStep(at);
    step.list.append(item);
  };

  // The text streamed so far becomes Markdown once it is complete (the next event).
  const closeText = () => {
    if (textNode && textRaw) textNode.replaceChildren(markdown(textRaw));
    textNode = null;
    textRaw = "";
  };

  const onEvent = (ev) => {
    if (ev.seq <= lastSeq) return; // already shown (a subscription made again resumes after lastSeq)
    lastSeq = ev.seq;
    if (ev.type === "RUN_FINISHED" || ev.type === "RUN_FAILED") finished = true;
    if (ev.type === "TEXT_DELTA") {
      if (!textNode) {
        textNode = el("div", { class: "text" });
        const item = el("li", { "data-type": "TEXT_DELTA" }, el("span", { class: "kind" }, "assistant"), " ", stamp(ev.at), textNode);
        stepText.push(item);
        append(item, ev.at);
      }
      textRaw += ev.text || "";
      modelText += ev.text || "";
      textNode.replaceChildren(reveal(textRaw));
      return;
    }
    closeText();
    const c = ev.toolCall;
    if (c && ["TOOL_CALL", "TOOL_CALL_APPROVAL", "TOOL_CALL_SUSPENDED"].includes(ev.type) && modelText.trim() && !ctx.said.has(c.toolCallId)) {
      ctx.said.set(c.toolCallId, modelText);
      fillSaid(pending, c.toolCallId, ctx);
    }
    if (ev.type === "MODEL_CALL_RETRIED") stepText.forEach((item) => item.remove());
    if (["MODEL_CALL_RETRIED", "STEP_FINISHED", "RUN_STARTED", "RUN_RESUMED"].includes(ev.type)) { stepText = []; modelText = ""; }
    const item = describe(ev);
    if (item) append(el("li", { "data-type": ev.type }, el("span", { class: "kind" }, item.kind), " ", stamp(ev.at), el("div", { class: "body" }, item.body)), ev.at);
    if (ev.type === "TOOL_CALL_INTERRUPTED" && lastRun) fillLate(stream, lastRun);
    if (ev.type === "TOOL_CALL" && step) { // the step's heading names the tools it called
      step.names.push(c.toolName);
      step.tools.replaceChildren(reveal(` · ${step.names.join(", ")}`));
    }
    if (ev.type === "STEP_FINISHED") stepDone = true;
    // A decision on one of several calls (from another page) changes what waits without a
    // RUN_* event: the run is read again, so the call decided elsewhere leaves the page.
    if (["RUN_SUSPENDED", "RUN_FINISHED", "RUN_FAILED", "RUN_RESUMED", "TOOL_CALL_APPROVED", "TOOL_CALL_DECLINED", "TOOL_CALL_EXPIRED",
      "TOOL_CALL_REMINDER", "TOOL_CALL_ESCALATED", "TOOL_CALL_EXPIRING", "TOOL_CALL_APPROVAL_RECORDED"].includes(ev.type)) show();
  };

  show();
  const unsubscribe = subscribe(EVENTS, () => ({ runId: id, after: lastSeq }), {
    next: (d) => onEvent(d.runEvents),
    error: (e) => { if (!closed) say("error", e.message); },
    resync: show, // the events missed come with the new subscription; the run's state is read again
    done: () => finished,
  });
  return () => { closed = true; clearTimeout(latePoll); unsubscribe(); claims.close(); };
}

/** A local time (the date too when not today), with the full date and time in its title. */
export function stamp(iso) {
  if (!iso) return null;
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  const text = today ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" })
    : d.toLocaleString([], { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  return el("time", { datetime: iso, title: d.toLocaleString([], { dateStyle: "full", timeStyle: "long" }) }, text);
}

/** The newest decision on a call of the run, or undefined. */
function lastDecision(run, toolCallId) {
  return run.decisions.filter((d) => d.toolCallId === toolCallId).at(-1);
}

/** "alice approved this at 10:02:13." — who decided, what and when, as nodes ("This was
 * approved at …" when nobody is named: authentication was off). */
function decisionSentence(d) {
  const at = stamp(d.decidedAt);
  if (d.kind === "EXPIRED") return ["This request expired at ", at, " without a decision."];
  if (d.kind === "AUTO_APPROVED") return ["Its policy let this run at ", at, " without asking anyone", d.reason ? `: ${d.reason}.` : "."];
  const verb = { APPROVED: "approved", DECLINED: "declined", RESUMED: "answered" }[d.kind] || "decided";
  const did = d.decidedBy ? `${d.decidedBy} ${verb} this` : `This was ${verb}`;
  const how = d.kind === "APPROVED" && d.editedArgs ? " with edited arguments" : "";
  return [`${did}${how} at `, at, d.kind === "DECLINED" && d.reason ? `: “${d.reason}”.` : "."];
}

/** What was typed in a call's card that would be lost, as one text ("" when nothing was). */
function typedIn(card, c) {
  if (!card || !c) return "";
  const parts = [];
  const reason = card.querySelector(`[id="reason-${CSS.escape(c.toolCallId)}"]`);
  if (reason && reason.value.trim()) parts.push(["Reason for declining", reason.value]);
  const editor = card.querySelector(`[id="args-${CSS.escape(c.toolCallId)}"]`);
  if (editor && editor.value.trim() && editor.value !== editable(c.args)) {
    let same = false;
    try { same = json(JSON.parse(editor.value)) === json(c.args); } catch { /* edited */ }
    if (!same) parts.push(["Edited arguments", editor.value]);
  }
  for (const f of card.querySelectorAll(`form[aria-label="Resume"] input, form[aria-label="Resume"] select, form[aria-label="Resume"] textarea`)) {
    if (f.type === "checkbox") continue;
    const label = f.labels?.[0]?.firstChild?.textContent || f.name || f.id;
    if (f.tagName === "SELECT") { if (f.value !== "") parts.push([label, f.selectedOptions[0]?.textContent || ""]); continue; }
    if (f.tagName === "TEXTAREA" && f.value.trim() === "{}") continue;
    if (f.value.trim()) parts.push([label, f.value]);
  }
  if (!parts.length) return "";
  if (parts.length === 1) return parts[0][1];
  return parts.map(([k, v]) => `${k}: ${v}`).join("\n");
}

let lostSeq = 0;
/** The notice holding text that could not be sent: read-only, with Copy and Dismiss. */
function lostText(c, text) {
  const areaId = `lost-${++lostSeq}`;
  const area = el("textarea", { id: areaId, readonly: true, rows: Math.min(8, text.split("\n").length + 1), class: "lost-text" });
  area.value = text;
  const status = el("span", { class: "muted copy-status", role: "status" });
  const box = el("div", { class: "notice warn lost", "data-call": c.toolCallId },
    el("label", { for: areaId }, `What you typed for ${c.toolName} (${c.toolCallId}) was not sent:`), area,
    el("div", { class: "actions" },
      el("button", { type: "button", class: "copy", onclick: async (e) => {
        const button = e.currentTarget;
        button.disabled = true; // one copy at a time: a late answer must not overwrite the next
        let timer;
        try {
          // A browser that asks for the clipboard permission may never answer (a headless one,
          // a prompt left open): after a moment the text is selected for the person instead.
          const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error("no answer from the clipboard")), 2000); });
          await Promise.race([Promise.resolve().then(() => navigator.clipboard.writeText(text)), late]);
          status.textContent = "Copied.";
        } catch {
          area.focus();
          area.select();
          status.textContent = "Selected: press Ctrl+C (⌘C) to copy.";
        } finally {
          clearTimeout(timer);
          button.disabled = false;
        }
      } }, "Copy"),
      el("button", { type: "button", class: "dismiss", onclick: () => box.remove() }, "Dismiss"), status));
  return box;
}

function renderHead(head, summary, run) {
  head.replaceChildren(...[
    el("h1", {}, run.external ? "Approval request " : "Run ", el("span", { class: `badge ${run.status}`, id: "run-status" }, run.status)),
    el("div", { class: "meta" },
      el("span", {}, "agent ", el("strong", {}, run.agentId), run.external ? el("span", { class: "badge external", id: "run-external", title: "The agent runs elsewhere: this run is its request to run one tool call" }, "external") : null),
      run.threadId ? el("span", {}, run.external ? "session " : "thread ", run.threadId) : null,
      run.resourceId ? el("span", {}, "resource ", run.resourceId) : null,
      el("span", {}, run.external ? "asked " : "started ", stamp(run.createdAt)),
      run.startedBy ? el("span", { id: "run-started-by" }, run.external ? "Requested by " : "Started by ", el("strong", {}, run.startedBy)) : null,
      el("span", { class: "short" }, run.runId)),
  ].filter(Boolean));
  if (run.external) {
    // No prompt, transcript or final answer: what the caller said about the call, and the outcome.
    // The context is the requester's text (or, from a coding agent's hook, the agent's values
    // quoted by the server): framed and labelled as such, apart from the console's own words.
    summary.replaceChildren(el("section", { class: "card context agent-text", id: "run-context", "aria-label": "Context from the requester" },
      el("span", { class: "kind muted" }, "context from the requester — its words, not Interlock's"),
      hiddenWarning([...new Set([...hiddenIn(run.context || ""), ...markedIn(run.context)])], "The context holds",
        "An agent's values (a path, a session) that hold them may not be what they seem."),
      run.context ? markdown(run.context) : el("p", { class: "muted" }, "The requester sent no context.")));
    return;
  }
  summary.replaceChildren(...[
    el("div", { class: "card" }, el("span", { class: "kind muted" }, "prompt"), el("p", { class: "plain-text" }, run.prompt)),
    run.status === "COMPLETED" && run.output ? el("div", { class: "card", id: "run-output" }, el("span", { class: "kind muted" }, "final answer"), markdown(run.output)) : null,
    run.status === "FAILED" ? el("p", { class: "notice error" }, "Failed: ", run.error) : null,
  ].filter(Boolean));
}

/** The thread's messages from before this run, collapsed: "Earlier in this thread (N)". */
async function renderThread(box, run) {
  const t = (await request(THREAD, { id: run.threadId, last: THREAD_LAST })).thread;
  if (!t) return;
  const started = Date.parse(run.createdAt);
  const earlier = t.messages.filter((m) => m.runId !== run.runId && Date.parse(m.createdAt) <= started);
  if (!earlier.length) { box.replaceChildren(); return; }
  const more = t.messageCount > t.messages.length ? el("p", { class: "muted" }, `The newest ${t.messages.length} of the thread's ${t.messageCount} messages.`) : null;
  box.replaceChildren(el("details", { class: "thread card", id: "thread-earlier" },
    el("summary", {}, `Earlier in this thread (${earlier.length})`),
    more,
    el("ol", { class: "thread-messages" }, earlier.map((m) =>
      el("li", { class: `msg ${m.role === "user" ? "user" : "assistant"}` },
        el("span", { class: "kind muted" }, m.role), " ", stamp(m.createdAt),
        m.runId !== run.runId ? el("a", { class: "muted msg-run", href: `/?run=${encodeURIComponent(m.runId)}` }, " run") : null,
        markdown(m.content))))));
}

// The pending calls are drawn anew only when they change (another call, or one now marked
// interrupted), never on a mere refresh: the person may be typing a reason or an answer. When
// they do change, what was typed in a field that is still there (same call, same field) is
// carried over, and so is the focus. A call that stops waiting without this page deciding it is
// said so (who decided, when), with what was typed for it to copy.
function renderPending(section, run, agents, decide, ctx) {
  const calls = run.status === "SUSPENDED" ? run.toolCalls : [];
  // A supervisor waits again on its delegate call, under the same id, for its sub-agent's next
  // call: the suspension's time tells the two apart.
  const key = JSON.stringify([run.suspendedAt, calls.map((c) => [c.toolCallId, c.requiresApproval, c.interrupted, c.expiresAt, c.followUpsSent, c.lateResult?.recordedAt, c.approvals?.count, c.approvals?.by.map((b) => b.subject), JSON.stringify(c.approvals?.args)])]);
  if (section.dataset.calls === key) return;
  const before = section._calls || [];
  const gone = [];
  for (const old of before) {
    if (calls.some((c) => c.toolCallId === old.toolCallId) || ctx.mine.has(old.toolCallId)) continue;
    const card = section.querySelector(`[data-call="${CSS.escape(old.toolCallId)}"]`);
    gone.push([old, typedIn(card, old)]);
  }
  if (gone.length) ctx.lostCalls(gone, run);
  const typed = saveFields(section);
  clearPending(section);
  section.dataset.calls = key;
  section._calls = calls;
  if (!calls.length) return;
  section.append(el("h2", {}, "Waiting for you"));
  for (const c of calls) {
    const card = el("div", { class: "card pending", "data-call": c.toolCallId, "data-interrupted": c.interrupted ? "true" : null });
    const tool = findTool(agents, run.agentId, c.toolName);
    card.append(el("p", { class: "call-head" }, el("strong", {}, c.toolName), " ", el("span", { class: "muted" }, c.toolCallId),
      c.interrupted ? el("span", { class: "badge FAILED" }, " interrupted: its outcome is unknown — approve to run it again") : null,
      c.expiresAt ? el("span", { class: "muted expires", title: when(c.expiresAt) }, ` ${expiresIn(c.expiresAt)} (at ${when(c.expiresAt)}); then ${run.external ? "the requester is told it expired" : "the model is told the request timed out"}`) : null,
      " ", followUpMarkers([c])));
    const plan = followUpPlan(c);
    if (plan) card.append(plan);
    if (holdsInexactNumber(c.args)) {
      card.append(el("p", { class: "notice warn inexact-number", role: "note" }, el("strong", {}, "⚠ A number too large to show exactly: "),
        "these arguments hold a whole number past 2^53, which a browser rounds; its last digits here may differ from those the tool runs with. ",
        "Read the arguments' exact text through the API (the run's toolCalls.args) before approving; they can be approved or declined, not edited here."));
    }
    const hiddenChars = hiddenIn(c.toolName, c.args, c.suspendPayload);
    if (hiddenChars.length) card.append(hiddenWarning(hiddenChars, c.requiresApproval ? "This call's arguments hold" : "This question holds"));
    if (tool?.description) card.append(el("p", { class: "tool-description" }, tool.description));
    if (tool?.approverRoles?.length) card.append(el("p", { class: "muted approver-roles" }, `May be decided by: ${tool.approverRoles.join(", ")} (or an admin)`));
    if (c.approvalReason) card.append(el("p", { class: "approval-reason" }, "Why you are asked: ", el("span", {}, c.approvalReason)));
    if (tool?.approvalPolicy) card.append(el("p", { class: "muted tool-policy" }, "The tool's policy (true asks a person): ", el("code", {}, tool.approvalPolicy)));
    card.append(el("div", { class: "said-slot" }));
    fillSaid(card, c.toolCallId, ctx);
    if (c.interrupted && c.interruptedToolCallId) card.append(lateBox(c));
    if (c.requiresApproval) {
      const q = c.approvals && c.approvals.required > 1 ? c.approvals : null; // a quorum
      if (q?.edited) {
        // An approval edited them: everyone approves the same arguments, these.
        const editor = q.by[0]?.subject;
        card.append(el("p", { class: "muted label" }, `Arguments being approved (edited${editor ? ` by ${editor}` : ""})`), argsView(q.args, `raw-${c.toolCallId}`),
          el("details", { class: "model-args" }, el("summary", {}, "The model's arguments"), argsView(c.args, `model-${c.toolCallId}`)));
      } else {
        card.append(el("p", { class: "muted label" }, "Arguments"), argsView(c.args, `raw-${c.toolCallId}`));
      }
      if (q) card.append(quorumLine(q, tool));
      const reasonId = `reason-${c.toolCallId}`;
      const reason = el("input", { type: "text", id: reasonId, placeholder: run.external ? "optional, the requester sees it" : "optional, the model sees it" });
      card.append(el("div", { class: "actions" },
        q && ctx.me && q.by.some((b) => b.subject === ctx.me)
          ? el("button", { class: "approve", disabled: true, title: "Each person's approval counts once" }, `You approved (${q.count} of ${q.required}) — waiting for others`)
          : el("button", { class: "approve", onclick: () => decide(APPROVE, { id: run.runId, c: c.toolCallId, a: q?.edited ? q.args : null }, card) }, approveLabel(q)),
        c.interrupted || q ? null : allowSimilar(run, c, (m, v, form) => decide(m, v, card, form)), // a grant never stands for a quorum
        el("div", { class: "grow" }, el("label", { for: reasonId }, "Reason for declining"), reason),
        el("button", { class: "decline", onclick: () => decide(`mutation($id: ID!, $c: ID, $r: String) { declineToolCall(runId: $id, toolCallId: $c, reason: $r) { status toolCalls { toolCallId } } }`, { id: run.runId, c: c.toolCallId, r: reason.value || null }, card) }, "Decline")),
        el("p", { class: "field-error decision-error", role: "alert" }));
      card.append(editAndApprove(run, c, tool, (m, v, form) => decide(m, v, card, form)));
    } else {
      card.append(el("p", { class: "muted label" }, "The tool asks"), argsView(c.suspendPayload, `raw-${c.toolCallId}`));
      const sf = schemaForm(c.resumeSchema || tool?.resumeSchema, `resume-${c.toolCallId}`);
      const form = el("form", { novalidate: true, "aria-label": "Resume", onsubmit: (ev) => {
        ev.preventDefault();
        const formError = form.querySelector(".form-error");
        formError.textContent = "";
        if (!sf.check()) return;
        let data;
        try { data = sf.value(); } catch (e) { formError.textContent = e.message; return; }
        decide(`mutation($id: ID!, $c: ID, $d: JSON!) { resumeRun(runId: $id, toolCallId: $c, resumeData: $d) { status } }`, { id: run.runId, c: c.toolCallId, d: data }, card, form);
      } }, sf.node, el("p", { class: "field-error form-error", role: "alert" }), el("div", { class: "actions" }, el("button", { type: "submit", class: "primary" }, "Resume")));
      card.append(form);
      if (c.askedMidCall) card.append(declineQuestion(run, c, (m, v) => decide(m, v, card))); // its call runs on: the server is answered "decline"
      card.append(el("p", { class: "field-error decision-error", role: "alert" }));
    }
    section.append(card);
  }
  restoreFields(section, typed);
}

/**
 * Decline for a question a tool asked in the middle of its call (askedMidCall): the tool's server
 * is answered "decline" and its call goes on; the reason is kept with the decision.
 */
function declineQuestion(run, c, decide) {
  const reasonId = `reason-${c.toolCallId}`;
  const reason = el("input", { type: "text", id: reasonId, placeholder: "optional, kept with the decision" });
  return el("div", { class: "actions decline-question" },
    el("div", { class: "grow" }, el("label", { for: reasonId }, "Reason for declining the question"), reason),
    el("button", { class: "decline", title: "The tool is told you declined to answer; its call goes on",
      onclick: () => decide(`mutation($id: ID!, $c: ID, $r: String) { declineToolCall(runId: $id, toolCallId: $c, reason: $r) { status } }`, { id: run.runId, c: c.toolCallId, r: reason.value || null }) }, "Decline"));
}

/** The tool by name: the run's agent's first, then any agent's (a supervisor shows a sub-agent's call). */
function findTool(agents, agentId, name) {
  const own = agents?.find((a) => a.id === agentId)?.tools.find((t) => t.name === name);
  return own || agents?.flatMap((a) => a.tools).find((t) => t.name === name);
}

/** Fills a pending card's "The agent said" from what the run streamed before asking. */
function fillSaid(root, toolCallId, ctx) {
  const card = root.matches?.(`[data-call]`) ? root : root.querySelector(`[data-call="${CSS.escape(toolCallId)}"]`);
  const slot = card?.querySelector(".said-slot");
  const text = ctx.said.get(toolCallId);
  if (!slot || !text || slot.childElementCount) return;
  slot.append(el("section", { class: "said agent-text", "aria-label": "The agent said" }, el("p", { class: "muted label" }, "The agent said"), markdown(text)));
}

/** A JSON value as a readable table (key | value, nested objects indented), the raw JSON behind a
 * disclosure button. */
export function argsView(value, rawId) {
  const raw = el("pre", { id: rawId, class: "raw-json", hidden: true }, pretty(value));
  const toggle = el("button", { type: "button", class: "raw-toggle", "aria-expanded": "false", "aria-controls": rawId, onclick: () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "Hide raw JSON" : "Show raw JSON";
    raw.hidden = !open;
  } }, "Show raw JSON");
  if (tooDeep(value)) return el("div", { class: "args" }, el("p", { class: "muted too-deep" }, TOO_DEEP));
  return el("div", { class: "args" }, valueView(value, 0), el("div", { class: "raw-actions" }, toggle), raw);
}

function valueView(v, depth) {
  if (v === null || v === undefined) return el("span", { class: "v-null" }, "none");
  if (typeof v === "string") return v === "" ? el("span", { class: "v-null" }, "(empty text)") : el("span", { class: "v-str" }, v);
  if (typeof v !== "object") return el("code", { class: "v-scalar" }, String(v));
  if (depth >= 4) return el("code", { class: "v-compact" }, json(v));
  if (Array.isArray(v)) {
    if (!v.length) return el("span", { class: "v-null" }, "(empty list)");
    if (v.every((x) => x === null || typeof x !== "object")) return el("span", { class: "v-list" }, v.flatMap((x, i) => [i ? ", " : "", valueView(x, depth + 1)]));
    return el("ol", { class: "v-items" }, v.map((x) => el("li", {}, valueView(x, depth + 1))));
  }
  const keys = Object.keys(v);
  if (!keys.length) return el("span", { class: "v-null" }, "(nothing)");
  return el("table", { class: depth ? "args-table nested" : "args-table" }, el("tbody", {}, keys.map((k) =>
    el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, valueView(v[k], depth + 1))))));
}

/** A value as JSON to edit: pretty, its hidden characters as \u escapes (a text field would apply a
 * bidi control, not show it), which parse back to the same value. */
function editable(v) { return escapeHidden(pretty(v)); }

/** The warning on a call whose tool name, arguments or context (what) hold hidden characters
 * (found, code points), or null: which ones, and that each is shown as a mark, not applied. */
function hiddenWarning(found, what, then = "What runs holds the characters themselves: read it as marked.") {
  if (!found.length) return null;
  return el("p", { class: "notice warn hidden-warning", role: "note" }, el("strong", {}, "⚠ Hidden characters: "),
    `${what} characters that change how text reads without showing themselves: ${describeHidden(found)}. `,
    "Each is shown where it is as a mark such as ", el("span", { class: "hidden-char" }, mark(found[0])), `, not applied. ${then}`);
}

/** "Edit and approve": the call's arguments in a form built from the tool's inputSchema (the raw
 * JSON a click away, argsform.js), then what changed against the arguments shown and the exact
 * JSON that runs, then Approve. The server checks them against the schema; its refusal is shown
 * in the form, back to editing, and the run stays waiting. */
function editAndApprove(run, c, tool, decide) {
  const shown = c.approvals?.edited ? c.approvals.args : c.args;
  const editor = argsEditor(tool?.inputSchema, shown, `args-${c.toolCallId}`);
  const err = el("p", { class: "field-error form-error", id: `args-${c.toolCallId}-form-error`, role: "alert" });
  const review = el("div", { class: "args-review-box", hidden: true });
  const editing = el("div", { class: "args-editing" }, editor.node, err,
    el("div", { class: "actions" }, el("button", { type: "submit", class: "approve review" }, "Review changes and approve")));
  const back = () => { review.hidden = true; editing.hidden = false; editor.focus(); };
  const form = el("form", { novalidate: true, "aria-label": "Edit and approve", onsubmit: (ev) => {
    ev.preventDefault();
    err.textContent = "";
    const r = editor.read();
    if (r.error) return;
    const { changes, node } = reviewOf(shown, r.args);
    if (changes.length && holdsInexactNumber(shown)) {
      err.textContent = "These arguments hold a whole number larger than the console can hold exactly (past 2^53): sending them edited would change it. Approve or decline them as they are.";
      return;
    }
    // Changed: sent as reviewed, so what the tool runs with is what the review shows. Unchanged:
    // a plain approval, so the tool runs with the model's own bytes (a number the browser cannot
    // hold exactly, such as an integer past 2^53, is never rewritten by its reading of it).
    const a = changes.length ? r.args : (c.approvals?.edited ? c.approvals.args : null);
    const approve = el("button", { type: "button", class: "approve final", onclick: async () => {
      await decide(APPROVE, { id: run.runId, c: c.toolCallId, a }, form);
      if (form.isConnected && err.textContent) { editor.refused(); back(); } // refused: back to the fields, the message kept
    } }, changes.length ? "Approve with these arguments" : "Approve as they are");
    review.replaceChildren(node, el("div", { class: "actions" }, approve, el("button", { type: "button", class: "back", onclick: back }, "Back to editing")));
    editing.hidden = true;
    review.hidden = false;
    approve.focus();
  } }, editing, review);
  return el("details", { class: "edit" }, el("summary", {}, "Edit and approve"), form);
}

/** What an Approve button does: on a call whose tool needs several approvals, which one this
 * is and whether it runs the tool ("Approve (2 of 2) — runs the tool"). */
function approveLabel(q) {
  if (!q) return "Approve";
  const n = q.count + 1;
  return n >= q.required ? `Approve (${n} of ${q.required}) — runs the tool` : `Approve (${n} of ${q.required}) — records your approval`;
}

/** "Approvals: 1 of 2 — alice": how many of a quorum are recorded, whose, and who may approve. */
function quorumLine(q, tool) {
  const who = q.by.map((b) => `${b.subject} (${when(b.at)})`).join(", ");
  const roles = tool?.approvals?.roles?.length ? ` Only ${tool.approvals.roles.join(", ")} (or an admin) may approve or decline.` : "";
  const reset = q.superseded?.length ? ` ${q.superseded.map((b) => b.subject).join(", ")} approved other arguments before they were edited: that no longer counts.` : "";
  return el("p", { class: "approvals", "data-count": q.count, "data-required": q.required },
    el("strong", {}, `Approvals: ${q.count} of ${q.required}`), who ? ` — ${who}` : " — none yet",
    el("br"), el("span", { class: "muted" }, `Each approver counts once; the run's starter never does; one decline declines.${roles}${reset}`));
}

/** Empties the pending section, so that the next refresh draws it whatever it holds. */
/** Whether the run still waits on the call of sent ({callId, since}) in the same suspension. */
function waitsOn(run, sent) {
  return run.toolCalls.some((c) => c.toolCallId === sent.callId) && run.suspendedAt === sent.since;
}

function clearPending(section) {
  section.replaceChildren();
  delete section.dataset.calls;
}

/** The values of the section's fields by id, and which one has the focus. */
function saveFields(section) {
  const values = new Map();
  for (const f of section.querySelectorAll("input[id], select[id], textarea[id]")) values.set(f.id, { value: f.value, checked: f.checked });
  const a = document.activeElement;
  return { values, focus: a && a.id && section.contains(a) ? a.id : null };
}

function restoreFields(section, { values, focus }) {
  for (const f of section.querySelectorAll("input[id], select[id], textarea[id]")) {
    const v = values.get(f.id);
    if (v) { f.value = v.value; f.checked = v.checked; }
  }
  if (focus) section.querySelector(`[id="${CSS.escape(focus)}"]`)?.focus();
}

/** The audit trail: who decided what, and when; an expiry says nobody did. */
function renderDecisions(section, run) {
  section.replaceChildren();
  if (!run.decisions.length) return;
  // In the order they were taken (the API lists them by call): who decided what, when.
  const byTime = [...run.decisions].sort((a, b) => Date.parse(a.decidedAt) - Date.parse(b.decidedAt) || Number(a.id) - Number(b.id));
  section.append(el("h2", {}, "Decisions"), el("ul", { class: "card list decisions-list" }, byTime.map((d) => {
    const at = stamp(d.decidedAt);
    const who = d.decidedBy ? ` by ${d.decidedBy}` : "";
    const lead = {
      APPROVED: [`Approved${who} at `, at],
      DECLINED: [`Declined${who} at `, at],
      RESUMED: [`Resumed${who} at `, at],
      EXPIRED: ["Expired at ", at, " without a decision"],
      AUTO_APPROVED: d.grantId ? ["Auto-approved at ", at, " by grant ", el("a", { href: "/?view=grants&active=all", class: "grant-link" }, d.grantId)]
        : ["Auto-approved by policy at ", at],
    }[d.kind] || [`${d.kind.toLowerCase()}${who} at `, at];
    return el("li", { class: `decision ${d.kind}`, "data-kind": d.kind },
      el("span", { class: "decided" }, ...lead), " — ", el("strong", {}, d.toolName), " ", el("span", { class: "muted" }, `(${d.toolCallId})`),
      d.kind === "DECLINED" ? (d.reason ? `: “${d.reason}”` : ": no reason given") : "",
      d.kind === "EXPIRED" && d.reason ? el("span", { class: "muted" }, `; the model was told: ${d.reason}`) : "",
      d.kind === "AUTO_APPROVED" ? el("span", { class: "muted policy-rule", title: d.policyRevision || "" }, d.reason ? `: ${d.reason}` : "") : "",
      d.resumeData ? ` with ${json(d.resumeData)}` : "",
      d.editedArgs ? ` with edited arguments ${json(d.editedArgs)} (the model asked for ${json(d.args)})` : "",
      d.approvals?.by.length ? el("span", { class: "muted decision-approvals" }, ` — approvals: ${d.approvals.by.map((b) => `${b.subject} at ${when(b.at)}`).join(", ")}`) : "");
  })));
}

/** What is known of the answer of an interrupted call's execution (c.interruptedToolCallId):
 * the answer the instance that ran it recorded late, or that none is recorded yet. */
function lateBox(c) {
  const was = c.interruptedToolCallId;
  if (!c.lateResult) {
    return el("p", { class: "muted late-none", "data-late": was },
      `No answer of ${c.toolName} (${was}) is recorded. If the server instance that ran it holds one, it records it once it reaches the database, and it appears here.`);
  }
  return el("section", { class: "late", "aria-label": "The tool's answer, recorded late", "data-late": was }, lateView(c.lateResult),
    el("p", { class: "muted" }, "Approving runs the tool again. To go on without running it, decline, with what it did in your reason: the model is told the reason."));
}

/** When a waiting call's follow-up steps that are not sent yet are due, in one line; or null. */
function followUpPlan(c) {
  const sent = c.followUpsSent || [];
  const steps = [];
  if (c.remindAt && !sent.includes("REMINDER")) steps.push(`a reminder at ${when(c.remindAt)}`);
  if (c.escalateAt && !sent.includes("ESCALATION")) steps.push(`escalation to ${(c.escalatedTo || []).join(", ")} at ${when(c.escalateAt)}`);
  if (c.expiringAt && !sent.includes("EXPIRING")) steps.push(`a warning at ${when(c.expiringAt)}`);
  return steps.length ? el("p", { class: "muted follow-up-plan" }, `Unless decided first: ${steps.join("; ")}.`) : null;
}

/** A late result: what the tool answered (text, never markup) and who recorded it when. */
function lateView(l) {
  return el("div", { class: "late-result" },
    el("p", { class: "label" }, `${l.toolName} (${l.toolCallId}) ran: its answer, recorded late by instance ${l.instanceId}`),
    l.error ? el("div", { class: "result-text error" }, `It failed: ${l.error}`)
      : l.suspendPayload != null ? el("div", {}, el("p", {}, "It asked for input (it suspended with):"), resultView(l.suspendPayload))
      : resultView(l.result),
    el("p", { class: "muted late-when" }, "The tool answered at ", stamp(l.finishedAt), "; recorded at ", stamp(l.recordedAt), "."));
}

/** Shows each TOOL_CALL_INTERRUPTED event's late answer in the timeline, once it is known. */
function fillLate(stream, run) {
  for (const slot of stream.querySelectorAll(".late-slot[data-late]:empty")) {
    const l = run.lateResults.find((r) => r.toolCallId === slot.dataset.late);
    if (l) slot.append(lateView(l));
  }
}

/** A tool's result: text as text (a string "a\nb" is two lines), anything else as JSON. */
function resultView(v) {
  if (typeof v === "string") return el("div", { class: "result-text" }, v);
  return el("pre", {}, pretty(v));
}

/** A badge on an event whose call holds hidden characters, naming them; or null. */
function hiddenBadge(...values) {
  const found = hiddenIn(...values);
  return found.length ? el("span", { class: "badge hidden-chars", title: describeHidden(found) }, " ⚠ hidden characters") : null;
}

function describe(ev) {
  const c = ev.toolCall;
  switch (ev.type) {
    case "RUN_STARTED": return { kind: "started", body: when(ev.at) };
    case "TOOL_CALL": return { kind: "tool call", body: [`${c.toolName} ${json(c.args)}`, hiddenBadge(c.toolName, c.args)] };
    case "TOOL_CALL_APPROVAL": return { kind: "waiting for approval", body: c.toolName };
    case "TOOL_CALL_SUSPENDED": return { kind: "waiting for input", body: [`${c.toolName} ${json(c.suspendPayload)}`, hiddenBadge(c.toolName, c.suspendPayload)] };
    case "TOOL_CALL_INTERRUPTED": return { kind: "interrupted", body: [el("div", {}, ev.reason),
      c?.interruptedToolCallId ? el("div", { class: "late-slot", "data-late": c.interruptedToolCallId }) : null] };
    case "RUN_SUSPENDED": return { kind: "suspended", body: "waiting for a person" };
    case "TOOL_CALL_APPROVAL_RECORDED": return { kind: "approval recorded", body: `${c.toolName} by ${ev.decidedBy}: approvals ${c.approvals?.count} of ${c.approvals?.required}` };
    case "TOOL_CALL_APPROVED": return ev.grantId ? { kind: "auto-approved", body: `${c.toolName} by grant ${ev.grantId}, without asking anyone` }
      : { kind: "approved", body: c.toolName + (ev.decidedBy ? ` by ${ev.decidedBy}` : "") };
    case "TOOL_CALL_DECLINED": return { kind: "declined", body: c.toolName + (ev.decidedBy ? ` by ${ev.decidedBy}` : "") + (ev.reason ? `: ${ev.reason}` : "") };
    case "TOOL_CALL_EXPIRED": return { kind: "expired", body: `${c.toolName}: expired without a decision` + (ev.reason ? `; the model was told: ${ev.reason}` : "") };
    case "TOOL_CALL_REMINDER": return { kind: "reminder", body: ev.reason || `${c.toolName} still waits for a decision` };
    case "TOOL_CALL_ESCALATED": return { kind: "escalated", body: ev.reason || `${c.toolName}: escalated to ${(c.escalatedTo || []).join(", ")}` };
    case "TOOL_CALL_EXPIRING": return { kind: "expiring", body: ev.reason || `${c.toolName} expires soon` };
    case "RUN_RESUMED": return { kind: "resumed", body: "running again" + (ev.decidedBy ? ` (decided by ${ev.decidedBy})` : "") };
    case "TOOL_RESULT": return { kind: ev.error ? "tool error" : "tool result", body: [el("span", { class: "muted" }, c ? `${c.toolName} ` : ""), ev.error ? el("div", { class: "result-text error" }, ev.error) : resultView(ev.result)] };
    case "MODEL_CALL_RETRIED": return { kind: "model call repeated", body: "its server stopped mid-answer; the partial text was dropped" };
    case "STEP_FINISHED": return null;
    case "RUN_FINISHED": return { kind: "finished", body: el("span", { class: "badge COMPLETED" }, "COMPLETED") };
    case "RUN_FAILED": return { kind: "failed", body: el("span", { class: "badge FAILED" }, "FAILED: " + (ev.error || "")) };
    default: return { kind: ev.type.toLowerCase(), body: "" };
  }
}
