// The Interlock demo flow from a real Apollo Client, as a front end would run it: queries and
// mutations over HTTP, subscriptions over graphql-ws (the token in connection_init), one
// normalized cache. It watches the suspended set, lists the suspended runs, starts
// "refund order 42 for 30" on support-agent, sees it suspend, approves it, streams its events to
// the end, and checks that the cache entry AgentRun:<id> became COMPLETED from the stream alone
// (no HTTP request after the approval).
//
//   INTERLOCK_URL=http://localhost:8080 INTERLOCK_TOKEN=... node demo.js
//
// Exits 0 when every step checked out, 1 with a message naming the step that did not.

import { ApolloClient, ApolloLink, HttpLink, InMemoryCache, gql } from "@apollo/client";
import { GraphQLWsLink } from "@apollo/client/link/subscriptions";
import { getMainDefinition } from "@apollo/client/utilities";
import { createClient } from "graphql-ws";
import WebSocket from "ws";

const base = (process.env.INTERLOCK_URL ?? "http://localhost:8080").replace(/\/+$/, "");
const token = process.env.INTERLOCK_TOKEN ?? "";
const stepTimeoutMs = Number(process.env.INTERLOCK_STEP_TIMEOUT_MS ?? 30000);
const agentId = "support-agent";
const prompt = "refund order 42 for 30";

function fail(message) {
  console.error(`apollo example: FAIL: ${message}`);
  process.exit(1);
}

function check(ok, message) {
  if (!ok) fail(message);
}

function log(message) {
  console.log(`apollo example: ${message}`);
}

// --- The client setup a front end copies (docs/apollo.md: "Use it from a front end (Apollo Client)").

let httpRequests = 0; // counted, to show that the cache was updated without a refetch
const httpLink = new HttpLink({
  uri: `${base}/graphql`,
  headers: token ? { authorization: `Bearer ${token}` } : {},
  fetch: (input, init) => {
    httpRequests++;
    return fetch(input, init);
  },
});

// Node 20 has no global WebSocket (browsers and Node 22 do). graphql-ws is given the ws package
// below; GraphQLWsLink also reads the global WebSocket.CLOSED when it sorts out an error.
globalThis.WebSocket ??= WebSocket;

let socketError;
const wsURL = `${base.replace(/^http/, "ws")}/graphql`;
const wsClient = createClient({
  url: wsURL,
  webSocketImpl: WebSocket, // browsers have one; Node 20 needs the ws package
  connectionParams: token ? { authorization: `Bearer ${token}` } : {},
  retryAttempts: 0, // a front end keeps the default (retry); here a failure is an answer
  on: {
    closed: (event) => {
      if (event?.code && event.code !== 1000) socketError = `WebSocket closed ${event.code} ${event.reason ?? ""}`;
    },
    error: (err) => {
      socketError = `WebSocket error: ${err?.message ?? err}`;
    },
  },
});

const client = new ApolloClient({
  link: ApolloLink.split(
    ({ query }) => {
      const def = getMainDefinition(query);
      return def.kind === "OperationDefinition" && def.operation === "subscription";
    },
    new GraphQLWsLink(wsClient),
    httpLink,
  ),
  cache: new InMemoryCache({
    typePolicies: {
      // run(runId:) reads the AgentRun the cache already holds (from a list, a mutation or
      // the stream) instead of asking the server again.
      Query: {
        fields: {
          run: {
            read(existing, { args, toReference }) {
              return existing ?? toReference({ __typename: "AgentRun", id: args.runId });
            },
          },
        },
      },
      // Each event replaces the last one; the run inside it is merged by id.
      Subscription: { fields: { runEvents: { merge: false }, suspendedRunsChanged: { merge: false } } },
    },
  }),
});

// --- The operations.

const RUN_FIELDS = gql`
  fragment RunFields on AgentRun {
    id
    runId
    agentId
    status
    output
    lastEventSeq
    toolCalls {
      id
      toolCallId
      toolName
      args
      requiresApproval
    }
  }
`;

const SUSPENDED_RUNS = gql`
  query SuspendedRuns($agentId: ID) {
    suspendedRuns(agentId: $agentId) {
      total
      runs {
        ...RunFields
      }
    }
  }
  ${RUN_FIELDS}
`;

const AGENTS = gql`
  query Agents {
    agents {
      id
      tools {
        id
        name
        requiresApproval
      }
    }
  }
`;

const RUN = gql`
  query Run($runId: ID!) {
    run(runId: $runId) {
      ...RunFields
    }
  }
  ${RUN_FIELDS}
`;

const SUSPENDED_CHANGED = gql`
  subscription SuspendedRunsChanged($agentId: ID) {
    suspendedRunsChanged(agentId: $agentId) {
      kind
      run {
        ...RunFields
      }
    }
  }
  ${RUN_FIELDS}
`;

const START_RUN = gql`
  mutation StartRun($input: StartRunInput!) {
    startRun(input: $input) {
      ...RunFields
    }
  }
  ${RUN_FIELDS}
`;

const APPROVE = gql`
  mutation Approve($runId: ID!) {
    approveToolCall(runId: $runId) {
      id
      status
    }
  }
`;

const RUN_EVENTS = gql`
  subscription RunEvents($runId: ID!, $after: Int) {
    runEvents(runId: $runId, after: $after) {
      seq
      type
      text
      status
      run {
        ...RunFields
      }
    }
  }
  ${RUN_FIELDS}
`;

// --- Helpers.

// stream collects a subscription's results and lets the flow wait for one that matches.
function stream(name, options) {
  const items = [];
  const waiters = [];
  let done = false;
  const settle = () => {
    for (const w of [...waiters]) {
      const hit = items.find(w.match);
      if (hit || done) {
        waiters.splice(waiters.indexOf(w), 1);
        clearTimeout(w.timer);
        hit ? w.resolve(hit) : w.reject(new Error(`${name} ended before ${w.what}`));
      }
    }
  };
  const sub = client.subscribe(options).subscribe({
    next: (result) => {
      if (result.error) fail(`${name} over ${wsURL}: ${result.error.message}${socketError ? ` (${socketError})` : ""}`);
      items.push(result.data);
      settle();
    },
    error: (err) => fail(`${name} over ${wsURL}: ${err?.message ?? err}${socketError ? ` (${socketError})` : ""}`),
    complete: () => {
      done = true;
      settle();
    },
  });
  return {
    items,
    get done() {
      return done;
    },
    unsubscribe: () => sub.unsubscribe(),
    waitFor(match, what) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${what} on ${name} within ${stepTimeoutMs} ms${socketError ? ` (${socketError})` : ""}`)), stepTimeoutMs);
        waiters.push({ match, what, resolve, reject, timer });
        settle();
      });
    },
  };
}

function cachedRun(id) {
  return client.cache.readFragment({
    id: client.cache.identify({ __typename: "AgentRun", id }),
    fragment: RUN_FIELDS,
    fragmentName: "RunFields",
  });
}

function connected() {
  return new Promise((resolve, reject) => {
    const off = wsClient.on("connected", () => {
      off();
      resolve();
    });
    setTimeout(() => reject(new Error(`the WebSocket did not connect within ${stepTimeoutMs} ms${socketError ? ` (${socketError})` : ""}`)), stepTimeoutMs);
  });
}

// --- The flow.

async function main() {
  // 1. Watch the suspended set over graphql-ws, before listing it, so that no change falls
  // between the list and the watch. It tells the inbox which runs came and went; a run's state
  // in the cache comes from its own stream (step 3), which is in order.
  const isConnected = connected();
  const changes = stream("suspendedRunsChanged", { query: SUSPENDED_CHANGED, variables: { agentId }, fetchPolicy: "no-cache" });
  await isConnected;

  // 2. The approval inbox, into the normalized cache.
  const listed = await client.query({ query: SUSPENDED_RUNS, variables: { agentId } });
  const inbox = listed.data.suspendedRuns;
  log(`${inbox.total} suspended run(s) of ${agentId}`);
  for (const r of inbox.runs) {
    check(cachedRun(r.id)?.status === "SUSPENDED", `listed run ${r.id} is not in the cache as AgentRun:${r.id}`);
  }
  const agents = await client.query({ query: AGENTS });
  const toolIds = agents.data.agents.flatMap((a) => a.tools.map((t) => t.id));
  check(new Set(toolIds).size === toolIds.length, `tool ids are not unique across agents: ${toolIds.join(", ")}`);
  check(client.cache.extract()[`Tool:${agentId}/issue_refund`], `the cache has no Tool:${agentId}/issue_refund`);

  // 3. Start the run and follow it from its first event: it suspends on the refund, which
  // needs approval. Mutation answers come over HTTP and can land after the stream told of a
  // later state, so they stay out of the cache (no-cache): the stream owns the run's state.
  const started = (await client.mutate({ mutation: START_RUN, variables: { input: { agentId, prompt } }, fetchPolicy: "no-cache" })).data.startRun;
  log(`started run ${started.id} (${started.status})`);
  const events = stream("runEvents", { query: RUN_EVENTS, variables: { runId: started.id, after: 0 } });
  const entered = await changes.waitFor(
    (c) => c.suspendedRunsChanged.kind === "SUSPENDED" && c.suspendedRunsChanged.run.id === started.id,
    `SUSPENDED change for run ${started.id}`,
  );
  const suspended = entered.suspendedRunsChanged.run;
  const call = suspended.toolCalls[0];
  check(
    suspended.toolCalls.length === 1 && call.toolName === "issue_refund" && call.requiresApproval,
    `run ${started.id} suspended on ${JSON.stringify(suspended.toolCalls)}, want one issue_refund awaiting approval`,
  );
  check(String(call.args?.orderId) === "42" && Number(call.args?.amount) === 30, `the refund's args are ${JSON.stringify(call.args)}, want order 42 for 30`);
  await events.waitFor((e) => e.runEvents.type === "RUN_SUSPENDED", "RUN_SUSPENDED");
  check(cachedRun(started.id)?.status === "SUSPENDED", `the cache holds run ${started.id} as ${cachedRun(started.id)?.status}, want SUSPENDED`);
  log(`run ${started.id} waits for approval of ${call.toolName} ${JSON.stringify(call.args)}`);

  // A component showing the run reads it from the cache only, and re-renders as it changes.
  const shown = [];
  let shownCompleted;
  const watchCompleted = new Promise((resolve) => (shownCompleted = resolve));
  const watched = client
    .watchQuery({ query: RUN, variables: { runId: started.id }, fetchPolicy: "cache-only" })
    .subscribe({
      next: (r) => {
        if (!r.data?.run) return;
        shown.push(r.data.run.status);
        if (r.data.run.status === "COMPLETED") shownCompleted();
      },
    });

  // 4. Approve, and stream to the end.
  const requestsBefore = httpRequests;
  const approved = (await client.mutate({ mutation: APPROVE, variables: { runId: started.id }, fetchPolicy: "no-cache" })).data.approveToolCall;
  const requestsAfterApproval = httpRequests;
  check(requestsAfterApproval === requestsBefore + 1, `approving took ${requestsAfterApproval - requestsBefore} HTTP requests`);
  log(`approved (${approved.status})`);
  const finished = await events.waitFor((e) => e.runEvents.type === "RUN_FINISHED" || e.runEvents.type === "RUN_FAILED", "RUN_FINISHED");
  const last = finished.runEvents;
  check(last.type === "RUN_FINISHED" && last.status === "COMPLETED", `the run ended with ${last.type} ${last.status}`);
  await events.waitFor(() => events.done, "the end of the stream");
  const seqs = events.items.map((e) => e.runEvents.seq);
  check(
    seqs.every((s, i) => s === i + 1) && seqs.at(-1) === last.seq,
    `event seqs ${seqs.join(",")} are not 1, 2, 3 … to RUN_FINISHED`,
  );
  const runEvents = events.items.filter((e) => e.runEvents.type.startsWith("RUN_"));
  check(runEvents.every((e) => e.runEvents.run?.id === started.id), `a RUN_* event came without its run: ${JSON.stringify(runEvents)}`);
  const text = events.items.filter((e) => e.runEvents.type === "TEXT_DELTA").map((e) => e.runEvents.text).join("");
  log(`${events.items.length} events: ${events.items.map((e) => e.runEvents.type).join(" ")}`);
  log(`answer: ${text}`);
  await changes.waitFor((c) => c.suspendedRunsChanged.kind === "LEFT" && c.suspendedRunsChanged.run.id === started.id, `LEFT change for run ${started.id}`);

  // 5. The normalized cache: AgentRun:<id> is COMPLETED, from the stream alone.
  const inCache = cachedRun(started.id);
  check(inCache, `the cache has no AgentRun:${started.id}`);
  check(inCache.status === "COMPLETED", `the cache holds run ${started.id} as ${inCache.status}, want COMPLETED`);
  check(inCache.output && inCache.output === last.run?.output, `the cached output ${JSON.stringify(inCache.output)} is not the run's ${JSON.stringify(last.run?.output)}`);
  check(inCache.toolCalls.length === 0, `the cached completed run still has tool calls ${JSON.stringify(inCache.toolCalls)}`);
  check(httpRequests === requestsAfterApproval, `${httpRequests - requestsAfterApproval} HTTP request(s) after the approval: the cache was refetched, not updated from the stream`);
  // Watches are told of cache writes asynchronously: give it a step's time to re-render.
  const rendered = await Promise.race([watchCompleted.then(() => true), new Promise((r) => setTimeout(() => r(false), stepTimeoutMs))]);
  check(rendered, `a cache-only watch of run(runId:) saw ${shown.join(" → ") || "nothing"}, want it to end COMPLETED`);
  log(`cache AgentRun:${started.id} is COMPLETED without a refetch (the watch saw ${shown.join(" → ")})`);

  watched.unsubscribe();
  events.unsubscribe();
  changes.unsubscribe();
  await wsClient.dispose();
  log("OK");
}

main().then(
  () => process.exit(0),
  (err) => fail(`${err?.message ?? err} (server ${base})${socketError ? ` (${socketError})` : ""}`),
);
