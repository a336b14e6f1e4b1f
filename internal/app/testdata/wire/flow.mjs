// The demo flow every client here runs, whatever its transport: list the agents, start a run
// that needs an approval, follow its events until it suspends, approve it, follow it to the
// end, and read it back COMPLETED. A client is given as two functions:
//
//   execute(query, variables) -> Promise<ExecutionResult>      (one result)
//   subscribe(query, variables, onNext) -> { done: Promise, stop() }
//
// Each step that does not check out throws an Error naming it.

export const base = (process.env.INTERLOCK_URL ?? '').replace(/\/+$/, '');
export const token = process.env.INTERLOCK_TOKEN ?? '';
if (!base) {
  console.error('set INTERLOCK_URL');
  process.exit(2);
}

const timeoutMs = Number(process.env.INTERLOCK_STEP_TIMEOUT_MS ?? 20000);

export function withTimeout(promise, what) {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: nothing within ${timeoutMs} ms`)), timeoutMs);
    }),
  ]);
}

// subscriber turns a graphql-ws or graphql-sse client (both take a sink of next, error and
// complete) into the subscribe function above.
export function subscriber(client) {
  return (query, variables, onNext) => {
    let stop;
    const done = new Promise((resolve, reject) => {
      stop = client.subscribe(
        { query, variables },
        {
          next: (r) => {
            try {
              onNext(r);
            } catch (err) {
              reject(err);
            }
          },
          error: reject,
          complete: resolve,
        },
      );
    });
    return { done, stop };
  };
}

export function check(ok, message) {
  if (!ok) throw new Error(message);
}

function data(result, what) {
  check(result && !result.errors && result.data, `${what}: ${JSON.stringify(result)}`);
  return result.data;
}

const runEvents = `subscription Follow($runId: ID!) { runEvents(runId: $runId) { seq type } }`;

export async function demoFlow(name, { execute, subscribe }) {
  const agents = data(await withTimeout(execute('{ agents { id } }'), `${name}: agents`), `${name}: agents`);
  check(agents.agents.some((a) => a.id === 'support-agent'), `${name}: agents lists no support-agent`);

  const started = data(
    await withTimeout(
      execute(`mutation Start($input: StartRunInput!) { startRun(input: $input) { runId status } }`, {
        input: { agentId: 'support-agent', prompt: 'refund order 42 for 30' },
      }),
      `${name}: startRun`,
    ),
    `${name}: startRun`,
  );
  const runId = started.startRun.runId;

  const seen = [];
  let suspended;
  const whenSuspended = new Promise((resolve) => (suspended = resolve));
  const follow = subscribe(runEvents, { runId }, (result) => {
    const ev = data(result, `${name}: runEvents`).runEvents;
    seen.push(ev.type);
    if (ev.type === 'RUN_SUSPENDED') suspended();
  });
  await withTimeout(whenSuspended, `${name}: waiting for RUN_SUSPENDED`);

  const approved = data(
    await withTimeout(
      execute(`mutation Approve($runId: ID!) { approveToolCall(runId: $runId) { status } }`, { runId }),
      `${name}: approveToolCall`,
    ),
    `${name}: approveToolCall`,
  );
  check(approved.approveToolCall.status === 'RUNNING', `${name}: approved run is ${approved.approveToolCall.status}`);

  await withTimeout(follow.done, `${name}: waiting for the end of runEvents`);
  check(seen.at(-1) === 'RUN_FINISHED', `${name}: the stream ended after ${JSON.stringify(seen)}, not RUN_FINISHED`);

  const run = data(
    await withTimeout(execute(`query Run($runId: ID!) { run(runId: $runId) { status } }`, { runId }), `${name}: run`),
    `${name}: run`,
  );
  check(run.run.status === 'COMPLETED', `${name}: run ${runId} is ${run.run.status}`);
  console.log(`${name}: run ${runId} streamed ${seen.length} events and completed`);
  return runId;
}
