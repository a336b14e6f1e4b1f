// Bulk decisions of the inbox: the ticked runs' waiting calls decided with decideToolCalls, one
// request per 500 calls (the API's batch limit) rather than one request per call. Each call is
// its own item with its own result: a call someone else decided first (CONFLICT, naming who and
// when), one this person may not decide (FORBIDDEN) or one gone (NOT_FOUND) never stops the
// others, and the other call of a two-call run is still decided. A request that fails whole
// (the server unreachable, over the mutation rate) fails each of its items with its error, so
// that "Retry the failed ones" sends exactly those again.
//
// An approval of a call that needs several (a quorum) may be recorded without running the tool
// (recorded, approvalsCount of approvalsRequired): the report says so apart from approvals that
// ran it (recordedText).
//
// Interrupted calls (their outcome unknown: the tool may have run) are never decided in bulk:
// approving one runs the tool again, so each needs its own look in the run view.
import { request } from "./gql.js";

const DECIDE = `mutation Decide($d: [DecisionInput!]!) { decideToolCalls(decisions: $d) { runId toolCallId ok code message decidedBy decidedAt recorded approvalsCount approvalsRequired } }`;
/** The most decisions decideToolCalls takes at once (runs.MaxDecisionBatch). */
export const MAX_BATCH = 500;

/** Whether a run may be ticked for a bulk decision: it waits for approvals, and none of its
 * calls is an interrupted one (the tool may have run: approving runs it again). */
export function bulkDecidable(r) {
  return r.toolCalls.some((c) => c.requiresApproval) && !r.toolCalls.some((c) => c.interrupted || c.lateResult);
}

/** The items deciding every waiting call of runs: { run, call, input } in the runs' order. */
export function itemsOf(runs, kind, reason) {
  return runs.flatMap((run) => run.toolCalls.filter((c) => c.requiresApproval && !c.interrupted).map((call) => ({
    run, call,
    input: { runId: run.runId, toolCallId: call.toolCallId, kind: kind === "approve" ? "APPROVE" : "DECLINE", reason: kind === "decline" && reason ? reason : null },
  })));
}

/**
 * Sends items (from itemsOf) and resolves with one outcome per item, in order: the item with
 * ok, code, message, decidedBy and decidedAt. Never rejects.
 */
export async function decideItems(items) {
  const out = [];
  for (let i = 0; i < items.length; i += MAX_BATCH) {
    const chunk = items.slice(i, i + MAX_BATCH);
    try {
      const res = (await request(DECIDE, { d: chunk.map((it) => it.input) })).decideToolCalls;
      chunk.forEach((it, n) => out.push({ ...it, ...res[n] }));
    } catch (e) {
      chunk.forEach((it) => out.push({ ...it, ok: false, code: e.code, message: e.message }));
    }
  }
  return out;
}

/** "2 approvals recorded (1 of 2)": the quorum approvals among ok outcomes that did not run
 * their tool, with each distinct count; "" when there are none. */
export function recordedText(outcomes) {
  const rec = outcomes.filter((o) => o.ok && o.recorded);
  if (!rec.length) return "";
  const counts = [...new Set(rec.map((o) => `${o.approvalsCount} of ${o.approvalsRequired}`))].join(", ");
  return `${rec.length} ${rec.length === 1 ? "approval" : "approvals"} recorded (${counts})`;
}
