// Claims ("I'm on it"): a person marks a waiting run as being looked at, so that the others do
// not all open the same one. The inbox's rows and the run view show who is on a run ("rita is
// on it"), live: a claim or a release is announced on suspendedRunsChanged (kind CHANGED), on
// which both read the run's claims again. A claim lapses three minutes after its last renewal;
// this page renews its person's claim every minute while the run view is open, and hides a
// badge when its expiry passes (a lapse is not announced). A claim reserves nothing: anyone who
// may decide still can.
import { request, subscribe } from "./gql.js";
import { el } from "./dom.js";

const CLAIMS = `query Claims($id: ID!) { me { subject } run(runId: $id) { runId status claims { subject expiresAt } } }`;
const CLAIM = `mutation($id: ID!) { claimRun(runId: $id) { runId status claims { subject expiresAt } } }`;
const RELEASE = `mutation($id: ID!) { releaseClaim(runId: $id) { runId status claims { subject expiresAt } } }`;
const CHANGES = `subscription { suspendedRunsChanged { kind run { runId } } }`;
/** How often the run view renews its person's claim (the server keeps one for three minutes). */
const RENEW_MS = 60 * 1000;

/** The claims of list still in force at now. */
export function liveClaims(list, now = Date.now()) {
  return (list || []).filter((c) => Date.parse(c.expiresAt) > now);
}

/** "rita is on it", "rita and bob are on it", "rita, bob and 2 others are on it"; null for none. */
export function claimText(list, now = Date.now()) {
  const names = liveClaims(list, now).map((c) => c.subject);
  if (!names.length) return null;
  if (names.length === 1) return `${names[0]} is on it`;
  if (names.length <= 3) return `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]} are on it`;
  return `${names.slice(0, 2).join(", ")} and ${names.length - 2} others are on it`;
}

/** A claim badge for list (null when nobody is on it), with the time each claim lapses. */
export function claimBadge(list, now = Date.now()) {
  const text = claimText(list, now);
  if (!text) return null;
  const until = liveClaims(list, now).map((c) => `${c.subject} until ${new Date(c.expiresAt).toLocaleTimeString()}`).join(", ");
  return el("span", { class: "badge claim", title: `Looking at it: ${until}. Anyone who may decide still can.` }, "👀 ", text);
}

/** Draws (or redraws) the claim badge of each row of list (li[data-run]) from runs' claims, which
 * the inbox's page query reads with its runs (one read of claims per response on the server:
 * graph.ClaimsPerResponse). */
export function paintClaims(list, runs, now = Date.now()) {
  for (const r of runs) {
    const li = list.querySelector(`li[data-run="${CSS.escape(r.runId)}"]`);
    if (!li) continue;
    li.querySelector(".badge.claim")?.remove();
    const badge = claimBadge(r.claims, now);
    if (badge) li.querySelector("a.row > span")?.append(" ", badge);
  }
}

/**
 * The run view's claim box: who is on the run and the "I'm on it" / "I'm done looking" button,
 * kept live. Returns { node, close }.
 */
export function claimBox(runId) {
  const badge = el("span", { id: "run-claims", role: "status" });
  const button = el("button", { type: "button", id: "claim", onclick: () => toggle() });
  const error = el("span", { class: "notice error small", id: "claim-error", hidden: true });
  const node = el("div", { class: "claim-box", hidden: true }, button, " ", badge, " ", error);
  let me = null, claims = [], status = null, closed = false, renew = null, lapse = null, busy = false;
  let asked = 0; // numbers the reads and writes: only the latest answer is drawn (an older read is stale)

  const mine = () => liveClaims(claims).some((c) => c.subject === me);
  const paint = () => {
    node.hidden = status !== "SUSPENDED";
    const b = claimBadge(claims);
    badge.replaceChildren(...(b ? [b] : []));
    button.textContent = mine() ? "I'm done looking" : "I'm on it";
    button.title = mine() ? "Let the others know you no longer look at this run" : "Let the others know you are looking at this run (it decides nothing)";
    button.setAttribute("aria-pressed", mine() ? "true" : "false");
    // A badge disappears when its claim lapses, which nobody announces.
    clearTimeout(lapse);
    const next = Math.min(...liveClaims(claims).map((c) => Date.parse(c.expiresAt)));
    if (Number.isFinite(next)) lapse = setTimeout(paint, Math.max(0, next - Date.now()) + 50);
    clearInterval(renew);
    if (mine()) renew = setInterval(() => send(CLAIM, "claimRun"), RENEW_MS);
  };
  const take = (run) => {
    if (closed || !run) return;
    status = run.status;
    claims = run.claims || [];
    paint();
  };
  const read = async () => {
    const mine = ++asked;
    try {
      const d = await request(CLAIMS, { id: runId });
      me = d.me?.subject ?? "anonymous";
      if (mine === asked) take(d.run);
    } catch { /* the run view says what is wrong with the run */ }
  };
  const send = async (mutation, field) => {
    const mine = ++asked;
    try {
      const d = await request(mutation, { id: runId });
      error.hidden = true;
      if (mine === asked) take(d[field]);
    } catch (e) {
      if (closed) return;
      error.textContent = e.message;
      error.hidden = false;
    }
  };
  async function toggle() {
    if (busy) return;
    busy = true;
    button.disabled = true;
    await send(mine() ? RELEASE : CLAIM, mine() ? "releaseClaim" : "claimRun");
    busy = false;
    button.disabled = false;
  }

  read();
  const unsubscribe = subscribe(CHANGES, () => ({}), {
    next: (d) => { if (d.suspendedRunsChanged?.run?.runId === runId) read(); },
    error: () => {}, resync: read,
  });
  const close = () => { closed = true; clearInterval(renew); clearTimeout(lapse); unsubscribe(); };
  return { node, close };
}
