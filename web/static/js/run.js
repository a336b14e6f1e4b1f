// Run view: what the run waits on, with Approve / Decline (with a reason) / Resume (a form from
// the tool's resumeSchema), and the run's events streaming live. A CONFLICT (someone decided
// first) is shown plainly and the view shows the run as it now is; a FORBIDDEN (this person may
// not take that decision) is said next to the buttons, with what was typed kept. When a model call is made
// again after a recovery (MODEL_CALL_RETRIED), the text it had streamed in that step is dropped.
import { request, subscribe } from "./gql.js";
import { el, pretty, when, expiresIn } from "./dom.js";
import { schemaForm } from "./schemaform.js";

const RUN = `query Run($id: ID!) { run(runId: $id) {
  runId agentId status threadId resourceId startedBy createdAt updatedAt suspendedAt lastEventSeq output error prompt
  toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted expiresAt }
  decisions { id toolCallId toolName kind decidedBy decidedAt reason resumeData args editedArgs }
} }`;
const EVENTS = `subscription Events($runId: ID!, $after: Int) { runEvents(runId: $runId, after: $after) {
  seq type at text status error reason decidedBy result toolCall { toolCallId toolName args suspendPayload interrupted }
} }`;

export function runView(main, params) {
  const id = params.get("run");
  let agents = null;
  const head = el("div", {});
  const notice = el("div", { role: "alert" });
  const pending = el("section", { "aria-label": "Waiting for a decision" });
  const stream = el("ol", { class: "stream", "aria-live": "polite", id: "stream" });
  const decisions = el("section", { "aria-label": "Decisions" });
  main.append(head, notice, pending, el("h2", {}, "Live"), el("div", { class: "card" }, stream), decisions);

  let textNode = null; // where the next TEXT_DELTA goes
  let stepText = []; // the items holding the current step's text, dropped if its model call is made again
  let lastSeq = 0;
  let closed = false;
  let finished = false; // RUN_FINISHED or RUN_FAILED seen: the stream has ended for good
  let asked = 0; // numbers the reads of the run: only the latest one draws

  const show = async () => {
    const mine = ++asked;
    let run;
    try {
      run = (await request(RUN, { id })).run;
      agents ??= (await request(`{ agents { id tools { name resumeSchema } } }`)).agents;
    } catch (e) {
      if (mine === asked) notice.replaceChildren(el("p", { class: "notice error" }, e.message));
      return;
    }
    if (mine !== asked || closed) return;
    if (!run) {
      head.replaceChildren(el("h1", {}, "No such run"), el("p", {}, "It may have been removed by retention. ", el("a", { href: "/" }, "Back to the inbox")));
      return;
    }
    renderHead(head, run);
    renderPending(pending, run, agents, decide);
    renderDecisions(decisions, run);
  };

  // card: the pending call's card; form: the form decided from, if any (its .field-error is
  // where its refusals go).
  const decide = async (mutation, vars, card, form) => {
    const buttons = pending.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    notice.replaceChildren();
    const refusal = card.querySelector(".decision-error");
    refusal.textContent = "";
    asked++; // a read of the run sent before the decision must not draw its form again
    const decided = pending.dataset.calls;
    try {
      await request(mutation, vars);
      // Unless the run already waits on something new (drawn meanwhile), the form is done.
      if (pending.dataset.calls === decided) clearPending(pending);
      notice.replaceChildren(el("p", { class: "notice" }, "Decision sent. The run goes on below."));
      document.dispatchEvent(new CustomEvent("interlock:decided", { detail: { runId: id } })); // keys.js moves on to the next waiting run
    } catch (e) {
      buttons.forEach((b) => { b.disabled = false; });
      if (e.code === "CONFLICT") {
        notice.replaceChildren(el("p", { class: "notice warn" }, "Someone else decided first: ", e.message, ". This is the run as it is now."));
        await show();
      } else if (e.code === "FORBIDDEN") {
        // The server's message says who may decide and why; nothing typed is lost.
        const where = form ? form.querySelector(".field-error") : refusal;
        where.textContent = `Not allowed: ${e.message}`;
      } else if (e.code === "BAD_USER_INPUT" && form) {
        form.querySelector(".field-error").textContent = e.message;
        form.querySelector("textarea")?.setAttribute("aria-invalid", "true");
      } else {
        notice.replaceChildren(el("p", { class: "notice error" }, e.message));
      }
    }
  };

  const onEvent = (ev) => {
    if (ev.seq <= lastSeq) return; // already shown (a subscription made again resumes after lastSeq)
    lastSeq = ev.seq;
    if (ev.type === "RUN_FINISHED" || ev.type === "RUN_FAILED") finished = true;
    if (ev.type === "TEXT_DELTA") {
      if (!textNode) {
        textNode = el("span", { class: "text" });
        const item = el("li", {}, el("span", { class: "kind" }, "assistant"), el("br"), textNode);
        stepText.push(item);
        stream.append(item);
      }
      textNode.textContent += ev.text || "";
      return;
    }
    textNode = null;
    if (ev.type === "MODEL_CALL_RETRIED") stepText.forEach((item) => item.remove());
    if (["MODEL_CALL_RETRIED", "STEP_FINISHED", "RUN_STARTED", "RUN_RESUMED"].includes(ev.type)) stepText = [];
    const item = describe(ev);
    if (item) stream.append(el("li", { "data-type": ev.type }, el("span", { class: "kind" }, item.kind), el("br"), item.body));
    if (["RUN_SUSPENDED", "RUN_FINISHED", "RUN_FAILED", "RUN_RESUMED"].includes(ev.type)) show();
  };

  show();
  const unsubscribe = subscribe(EVENTS, () => ({ runId: id, after: lastSeq }), {
    next: (d) => onEvent(d.runEvents),
    error: (e) => { if (!closed) notice.replaceChildren(el("p", { class: "notice error" }, e.message)); },
    resync: show, // the events missed come with the new subscription; the run's state is read again
    done: () => finished,
  });
  return () => { closed = true; unsubscribe(); };
}

function renderHead(head, run) {
  head.replaceChildren(...[
    el("h1", {}, "Run ", el("span", { class: `badge ${run.status}`, id: "run-status" }, run.status)),
    el("div", { class: "meta" },
      el("span", {}, "agent ", el("strong", {}, run.agentId)),
      run.threadId ? el("span", {}, "thread ", run.threadId) : null,
      run.resourceId ? el("span", {}, "resource ", run.resourceId) : null,
      el("span", {}, "started ", when(run.createdAt)),
      run.startedBy ? el("span", { id: "run-started-by" }, "Started by ", el("strong", {}, run.startedBy)) : null,
      el("span", { class: "short" }, run.runId)),
    el("div", { class: "card" }, el("span", { class: "kind muted" }, "prompt"), el("p", {}, run.prompt)),
    run.status === "COMPLETED" && run.output ? el("div", { class: "card", id: "run-output" }, el("span", { class: "kind muted" }, "final answer"), el("p", {}, run.output)) : null,
    run.status === "FAILED" ? el("p", { class: "notice error" }, "Failed: ", run.error) : null,
  ].filter(Boolean));
}

// The pending calls are drawn anew only when they change (another call, or one now marked
// interrupted), never on a mere refresh: the person may be typing a reason or an answer. When
// they do change, what was typed in a field that is still there (same call, same field) is
// carried over, and so is the focus.
function renderPending(section, run, agents, decide) {
  const calls = run.status === "SUSPENDED" ? run.toolCalls : [];
  const key = JSON.stringify(calls.map((c) => [c.toolCallId, c.requiresApproval, c.interrupted, c.expiresAt]));
  if (section.dataset.calls === key) return;
  const typed = saveFields(section);
  clearPending(section);
  section.dataset.calls = key;
  if (!calls.length) return;
  section.append(el("h2", {}, "Waiting for you"));
  for (const c of calls) {
    const card = el("div", { class: "card pending", "data-call": c.toolCallId });
    card.append(el("p", {}, el("strong", {}, c.toolName), " ", el("span", { class: "muted" }, c.toolCallId),
      c.interrupted ? el("span", { class: "badge FAILED" }, " interrupted: its server stopped while it ran — approve to run it again") : null,
      c.expiresAt ? el("span", { class: "muted expires", title: when(c.expiresAt) }, ` ${expiresIn(c.expiresAt)} (at ${when(c.expiresAt)}); then the model is told the request timed out`) : null));
    if (c.requiresApproval) {
      card.append(el("p", { class: "muted" }, "Arguments"), el("pre", {}, pretty(c.args)));
      const reasonId = `reason-${c.toolCallId}`;
      const reason = el("input", { type: "text", id: reasonId, placeholder: "optional, the model sees it" });
      card.append(el("div", { class: "actions" },
        el("button", { class: "approve", onclick: () => decide(`mutation($id: ID!, $c: ID) { approveToolCall(runId: $id, toolCallId: $c) { status } }`, { id: run.runId, c: c.toolCallId }, card) }, "Approve"),
        el("div", { class: "grow" }, el("label", { for: reasonId }, "Reason for declining"), reason),
        el("button", { class: "decline", onclick: () => decide(`mutation($id: ID!, $c: ID, $r: String) { declineToolCall(runId: $id, toolCallId: $c, reason: $r) { status } }`, { id: run.runId, c: c.toolCallId, r: reason.value || null }, card) }, "Decline")),
        el("p", { class: "field-error decision-error", role: "alert" }));
      card.append(editAndApprove(run, c, (m, v, form) => decide(m, v, card, form)));
    } else {
      card.append(el("p", { class: "muted" }, "The tool asks"), el("pre", {}, pretty(c.suspendPayload)));
      const tool = agents.find((a) => a.id === run.agentId)?.tools.find((t) => t.name === c.toolName);
      const sf = schemaForm(tool?.resumeSchema, `resume-${c.toolCallId}`);
      const form = el("form", { novalidate: true, "aria-label": "Resume", onsubmit: (ev) => {
        ev.preventDefault();
        let data;
        try { data = sf.value(); } catch (e) { form.querySelector(".field-error").textContent = e.message; return; }
        decide(`mutation($id: ID!, $c: ID, $d: JSON!) { resumeRun(runId: $id, toolCallId: $c, resumeData: $d) { status } }`, { id: run.runId, c: c.toolCallId, d: data }, card, form);
      } }, sf.node, el("p", { class: "field-error", role: "alert" }), el("div", { class: "actions" }, el("button", { type: "submit", class: "primary" }, "Resume")));
      card.append(form, el("p", { class: "field-error decision-error", role: "alert" }));
    }
    section.append(card);
  }
  restoreFields(section, typed);
}

/** "Edit and approve": the call's arguments in an editor, approved as edited. The server checks
 * them against the tool's schema; its refusal is shown on the field and the run stays waiting. */
function editAndApprove(run, c, decide) {
  const fieldId = `args-${c.toolCallId}`;
  const errId = `${fieldId}-error`;
  const editor = el("textarea", { id: fieldId, rows: 6, spellcheck: "false", "aria-describedby": errId });
  editor.value = pretty(c.args);
  const err = el("p", { class: "field-error", id: errId, role: "alert" });
  const fail = (msg) => { err.textContent = msg; editor.setAttribute("aria-invalid", "true"); editor.focus(); };
  const form = el("form", { novalidate: true, "aria-label": "Edit and approve", onsubmit: async (ev) => {
    ev.preventDefault();
    let args;
    try { args = JSON.parse(editor.value); } catch (e) { fail(`The arguments are not valid JSON: ${e.message}`); return; }
    if (args === null || typeof args !== "object" || Array.isArray(args)) { fail("The arguments must be a JSON object, like the model's."); return; }
    err.textContent = "";
    editor.removeAttribute("aria-invalid");
    decide(`mutation($id: ID!, $c: ID, $a: JSON) { approveToolCall(runId: $id, toolCallId: $c, args: $a) { status } }`, { id: run.runId, c: c.toolCallId, a: args }, form);
  } }, el("label", { for: fieldId }, "Arguments to run the tool with"), editor, err,
    el("div", { class: "actions" }, el("button", { type: "submit", class: "approve" }, "Approve with these arguments")));
  return el("details", { class: "edit" }, el("summary", {}, "Edit and approve"), form);
}

/** Empties the pending section, so that the next refresh draws it whatever it holds. */
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

function renderDecisions(section, run) {
  section.replaceChildren();
  if (!run.decisions.length) return;
  section.append(el("h2", {}, "Decisions"), el("ul", { class: "card list" }, run.decisions.map((d) =>
    el("li", {}, `${d.kind.toLowerCase()} ${d.toolName} (${d.toolCallId})`, d.reason ? `: “${d.reason}”` : "",
      d.resumeData ? ` with ${JSON.stringify(d.resumeData)}` : "",
      d.editedArgs ? ` with edited arguments ${JSON.stringify(d.editedArgs)} (the model asked for ${JSON.stringify(d.args)})` : "", " — ", el("span", { class: "decided" }, d.decidedBy ? `by ${d.decidedBy}, ` : "", el("time", { datetime: d.decidedAt }, when(d.decidedAt)))))));
}

function describe(ev) {
  const c = ev.toolCall;
  switch (ev.type) {
    case "RUN_STARTED": return { kind: "started", body: when(ev.at) };
    case "TOOL_CALL": return { kind: "tool call", body: `${c.toolName} ${JSON.stringify(c.args)}` };
    case "TOOL_CALL_APPROVAL": return { kind: "waiting for approval", body: c.toolName };
    case "TOOL_CALL_SUSPENDED": return { kind: "waiting for input", body: `${c.toolName} ${JSON.stringify(c.suspendPayload)}` };
    case "TOOL_CALL_INTERRUPTED": return { kind: "interrupted", body: ev.reason };
    case "RUN_SUSPENDED": return { kind: "suspended", body: "waiting for a person" };
    case "TOOL_CALL_APPROVED": return { kind: "approved", body: c.toolName + (ev.decidedBy ? ` by ${ev.decidedBy}` : "") };
    case "TOOL_CALL_DECLINED": return { kind: "declined", body: c.toolName + (ev.decidedBy ? ` by ${ev.decidedBy}` : "") + (ev.reason ? `: ${ev.reason}` : "") };
    case "TOOL_CALL_EXPIRED": return { kind: "expired", body: c.toolName + (ev.reason ? `: ${ev.reason}` : "") };
    case "RUN_RESUMED": return { kind: "resumed", body: "running again" + (ev.decidedBy ? ` (decided by ${ev.decidedBy})` : "") };
    case "TOOL_RESULT": return { kind: ev.error ? "tool error" : "tool result", body: el("pre", {}, ev.error || pretty(ev.result)) };
    case "MODEL_CALL_RETRIED": return { kind: "model call repeated", body: "its server stopped mid-answer; the partial text was dropped" };
    case "STEP_FINISHED": return null;
    case "RUN_FINISHED": return { kind: "finished", body: el("span", { class: "badge COMPLETED" }, "COMPLETED") };
    case "RUN_FAILED": return { kind: "failed", body: el("span", { class: "badge FAILED" }, "FAILED: " + (ev.error || "")) };
    default: return { kind: ev.type.toLowerCase(), body: "" };
  }
}
