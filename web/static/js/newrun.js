// New run: choose an agent, write a prompt, optionally thread, resource and requireToolApproval.
import { request } from "./gql.js";
import { el } from "./dom.js";

const START = `mutation Start($input: StartRunInput!) { startRun(input: $input) { runId } }`;

export function newRunView(main, params, navigate) {
  const agent = el("select", { id: "n-agent", name: "agent", required: true });
  const prompt = el("textarea", { id: "n-prompt", name: "prompt", required: true }, "refund order 42 for 30");
  const thread = el("input", { id: "n-thread", name: "thread", type: "text" });
  const resource = el("input", { id: "n-resource", name: "resource", type: "text" });
  const approval = el("input", { id: "n-approval", name: "requireToolApproval", type: "checkbox" });
  const error = el("p", { class: "field-error", role: "alert" });
  const form = el("form", { class: "card", onsubmit: async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    try {
      const d = await request(START, { input: {
        agentId: agent.value, prompt: prompt.value, threadId: thread.value || null, resourceId: resource.value || null,
        requireToolApproval: approval.checked,
      } });
      navigate(`/?run=${encodeURIComponent(d.startRun.runId)}`);
    } catch (e) { error.textContent = e.message; }
  } },
    el("label", { for: "n-agent" }, "Agent"), agent,
    el("label", { for: "n-prompt" }, "Prompt", el("span", { class: "hint" }, "Try “refund orders 7 and 8”, “ask the customer for their size” or “what is the status of order 5”.")), prompt,
    el("div", { class: "filters" },
      el("div", {}, el("label", { for: "n-thread" }, "Thread (optional)"), thread),
      el("div", {}, el("label", { for: "n-resource" }, "Resource (optional)"), resource)),
    el("p", {}, approval, " ", el("label", { for: "n-approval", class: "inline" }, "Every tool call waits for approval (requireToolApproval)")),
    error,
    el("div", { class: "actions" }, el("button", { type: "submit", class: "primary" }, "Start run")));
  main.append(el("h1", {}, "New run"), form);
  // External agents run elsewhere: they ask for approvals (requestApproval) and are not started here.
  // The first agent chosen is the first that is no supervisor (one with sub-agents hands work on
  // and is rarely what a person starts by hand), else the first.
  request(`{ agents { id name description external subAgents { id } } }`).then((d) => {
    const runnable = d.agents.filter((a) => !a.external);
    const first = runnable.find((a) => !a.subAgents?.length) || runnable[0];
    for (const a of runnable) agent.append(el("option", { value: a.id, selected: a === first }, `${a.name} (${a.id})${a.subAgents?.length ? " — supervisor" : ""}`));
  }).catch((e) => { error.textContent = e.message; });
}
