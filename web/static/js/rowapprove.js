// Approving from the inbox: `a` on the selected row approves its one waiting call, held a few
// seconds with an Undo (hold.js) before it is sent. It decides only what the row stands for
// without doubt: a run waiting on one call that asks for an approval. A run with several calls,
// one that waits for an answer, an interrupted call (approving runs its tool again, though it
// may have run), a quorum's call whose arguments someone edited (approving means approving
// those, which the row does not show) or that this person approved already — each is said, and
// opened with Enter instead. A quorum's approval that does not meet it says so: "recorded, 1 of
// 2", not "approved".
import { request } from "./gql.js";
import { hold, tell } from "./hold.js";

const READ = `query($id: ID!) { me { subject } run(runId: $id) { runId status toolCalls { toolCallId toolName requiresApproval interrupted lateResult { recordedAt }
  approvals { required count edited by { subject } } } } }`;
const APPROVE = `mutation($id: ID!, $c: ID) { approveToolCall(runId: $id, toolCallId: $c) { status toolCalls { toolCallId approvals { required count } } } }`;

/** Why the row's run cannot be approved with `a`, or "" when it can. */
export function whyNot(run, me) {
  if (!run || run.status !== "SUSPENDED") return "It no longer waits for a decision.";
  const calls = run.toolCalls;
  if (calls.length !== 1) return `${calls.length} calls wait in this run: open it (Enter) to decide each.`;
  const c = calls[0];
  if (!c.requiresApproval) return `${c.toolName} waits for an answer, not an approval: open it (Enter).`;
  if (c.interrupted || c.lateResult) return `${c.toolName} was interrupted (its tool may have run; approving runs it again): open it (Enter) to decide.`;
  const q = c.approvals && c.approvals.required > 1 ? c.approvals : null;
  if (q?.edited) return `The arguments of ${c.toolName} being approved were edited: open it (Enter) to approve what it shows.`;
  if (q && me && q.by.some((b) => b.subject === me)) return `You approved ${c.toolName} already (approvals ${q.count} of ${q.required}); it waits for others.`;
  return "";
}

/** Approves the one waiting call of the inbox row (an a.row[data-run]). */
export async function approveRow(row) {
  const runId = row.dataset.run;
  let d;
  try { d = await request(READ, { id: runId }); } catch (e) { tell(`Not approved: ${e.message}`, "error"); return; }
  const why = whyNot(d.run, d.me?.subject);
  if (why) { tell(why, "warn"); return; }
  const c = d.run.toolCalls[0];
  const q = c.approvals && c.approvals.required > 1 ? c.approvals : null;
  const label = q ? `Recording your approval of ${c.toolName} (${q.count + 1} of ${q.required})…` : `Approving ${c.toolName} (${runId})…`;
  const vars = { id: runId, c: c.toolCallId };
  let told = false;
  const outcome = (answer, e) => {
    if (e) return e.code === "UNDONE" ? null : [`Not approved: ${e.message}`, e.code === "CONFLICT" ? "warn" : "error"];
    const still = answer?.status === "SUSPENDED" ? (answer.toolCalls || []).find((x) => x.toolCallId === c.toolCallId) : null;
    if (still?.approvals && still.approvals.count < still.approvals.required) {
      const left = still.approvals.required - still.approvals.count;
      return [`Your approval of ${c.toolName} is recorded: approvals ${still.approvals.count} of ${still.approvals.required}. It runs when ${left} more ${left === 1 ? "person approves" : "people approve"}.`, ""];
    }
    return [`Approved ${c.toolName} (${runId}).`, ""];
  };
  const after = (notice, v, e) => {
    told = true;
    const o = outcome(v && Object.values(v)[0], e);
    if (o) { notice.replaceChildren(o[0]); notice.dataset.state = e ? "failed" : "done"; if (o[1]) notice.classList.add(o[1]); }
  };
  try {
    const v = await hold({ label, query: APPROVE, variables: vars, send: () => request(APPROVE, vars), after });
    if (!told) { const [text, kind] = outcome(Object.values(v)[0], null); tell(text, kind).dataset.state = "done"; }
  } catch (e) {
    if (!told && e.code !== "UNDONE") { const [text, kind] = outcome(null, e); tell(text, kind).dataset.state = "failed"; }
    if (e.code === "UNDONE" && row.isConnected) row.focus();
  }
}
