// graphql-sse's own client against Interlock, in both of its modes: distinct connections (one
// SSE stream per operation) and single connection (PUT reserves a stream; operations are POSTed
// with its token and stream back through it; DELETE stops one). Each mode runs the demo flow
// (flow.mjs), an operation the server refuses, and a subscription the client stops.
//
//   INTERLOCK_URL=http://localhost:8080 INTERLOCK_TOKEN=... node sse.mjs
//
// Prints "sse: OK" and exits 0 when every step checked out; exits 1 naming the step otherwise.
import { createClient } from 'graphql-sse';
import { base, token, check, demoFlow, subscriber, withTimeout } from './flow.mjs';

function clientFor(singleConnection) {
  return createClient({
    url: `${base}/graphql`,
    headers: token ? { authorization: `Bearer ${token}` } : {},
    singleConnection,
    retryAttempts: 0, // a refusal is an answer here, not something to wait out
  });
}

function adapter(client) {
  return {
    execute: (query, variables) => {
      const it = client.iterate({ query, variables });
      return it.next().then(async (r) => {
        await it.return?.();
        return r.value;
      });
    },
    subscribe: subscriber(client),
  };
}

async function mode(name, singleConnection) {
  const client = clientFor(singleConnection);
  try {
    await demoFlow(name, adapter(client));

    // A request error: over a distinct stream it is a result with errors (graphql-sse reports
    // validation through the accepted stream); a single connection's POST is answered as any
    // GraphQL-over-HTTP request (not 202), which this client reports as a failed request.
    const refused = await withTimeout(
      adapter(client)
        .execute('{ noSuchField }')
        .then((r) => ({ result: r }), (err) => ({ err })),
      `${name}: a query of an unknown field`,
    );
    if (singleConnection) {
      // The client aborts the request before its body can be read; the Go tests read it.
      const status = refused.err?.response?.status;
      check(refused.err && status && status !== 202, `${name}: an unknown field was accepted: ${JSON.stringify(refused)}`);
    } else {
      check(
        refused.result?.errors?.[0]?.extensions?.code === 'GRAPHQL_VALIDATION_FAILED' && !('data' in refused.result),
        `${name}: an unknown field: ${JSON.stringify(refused)}`,
      );
    }

    // A subscription the client stops before it ends: it completes on the client's side at once
    // (single connection: DELETE), and the connection stays usable.
    const sub = adapter(client).subscribe('subscription { suspendedRunsChanged { kind } }', {}, () => {});
    sub.stop();
    const again = await withTimeout(adapter(client).execute('{ __typename }'), `${name}: a query after a stop`);
    check(again?.data?.__typename === 'Query', `${name}: after a stop: ${JSON.stringify(again)}`);
    console.log(`${name}: OK`);
  } finally {
    client.dispose();
  }
}

try {
  await mode('sse distinct connections', false);
  await mode('sse single connection', true);
  console.log('sse: OK');
  process.exit(0);
} catch (err) {
  console.error(`sse: FAIL: ${err?.stack ?? err}`);
  process.exit(1);
}
