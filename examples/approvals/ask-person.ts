// Ask a person before an agent acts: Interlock's POST /approvals from TypeScript (Node 20 fetch).
//
//   npm ci && npx tsc && INTERLOCK_URL=http://localhost:8080 INTERLOCK_TOKEN=<requester token> node ask-person.js

export type Answer = {
  runId: string; status: "PENDING" | "APPROVED" | "DECLINED" | "EXPIRED"; args: Record<string, unknown>;
  reason: string | null; decidedBy: string | null; decidedAt: string | null; expiresAt: string | null; url: string;
  receipt: string | null; // APPROVED: the signed receipt to hand to the tool's service (docs/receipts.md)
};

// askPerson asks whether `agent` may call `tool` with `args`, and waits until a person decides. On
// APPROVED, run the tool with answer.args (a person may have edited them).
export async function askPerson(agent: string, tool: string, args: object, context = ""): Promise<Answer> {
  const url = process.env.INTERLOCK_URL ?? "http://localhost:8080";
  const headers = { Authorization: `Bearer ${process.env.INTERLOCK_TOKEN}`, "Content-Type": "application/json" };
  const body = JSON.stringify({ agentId: agent, toolName: tool, args, context, idempotencyKey: crypto.randomUUID() });
  // 4 minutes a request: Node's fetch gives up on a server that sends no headers for 5.
  let res = await fetch(`${url}/approvals?wait=240s`, { method: "POST", headers, body });
  for (;;) {
    if (!res.ok) throw new Error(`Interlock answered ${res.status}: ${await res.text()}`);
    const answer = (await res.json()) as Answer;
    if (answer.status !== "PENDING") return answer;
    console.log("waiting for a person:", answer.url);
    res = await fetch(`${url}/approvals/${answer.runId}?wait=240s`, { headers });
  }
}

const answer = await askPerson("deploy-bot", "deploy", { service: "api", version: "1.2.3" },
  "Deploying **api** 1.2.3: the canary has been green for an hour.");
if (answer.status === "APPROVED") console.log("APPROVED by", answer.decidedBy, "- deploying", JSON.stringify(answer.args));
else console.log(answer.status, "by", answer.decidedBy, "-", answer.reason);
