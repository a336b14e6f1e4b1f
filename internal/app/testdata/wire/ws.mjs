// graphql-ws's own client against Interlock over graphql-transport-ws: the demo flow
// (flow.mjs) with the token in connection_init, a request error, and a refused token, which the
// server closes with 4401.
//
//   INTERLOCK_URL=http://localhost:8080 INTERLOCK_TOKEN=... node ws.mjs
//
// Prints "ws: OK" and exits 0 when every step checked out; exits 1 naming the step otherwise.
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { base, token, check, demoFlow, subscriber, withTimeout } from './flow.mjs';

function clientWith(authorization, on) {
  return createClient({
    url: `${base.replace(/^http/, 'ws')}/graphql`,
    webSocketImpl: WebSocket, // Node 20 has no global WebSocket
    connectionParams: authorization ? { authorization } : {},
    retryAttempts: 0,
    on,
  });
}

function adapter(client) {
  const subscribe = subscriber(client);
  return {
    subscribe,
    execute: (query, variables) => {
      let result;
      return subscribe(query, variables, (r) => (result = r)).done.then(() => result);
    },
  };
}

try {
  const client = clientWith(token ? `Bearer ${token}` : '');
  try {
    await demoFlow('ws', adapter(client));
    const refused = await withTimeout(
      adapter(client)
        .execute('{ noSuchField }')
        .then((r) => ({ result: r }), (err) => ({ err })),
      'ws: a query of an unknown field',
    );
    const errors = Array.isArray(refused.err) ? refused.err : refused.result?.errors;
    check(errors?.[0]?.extensions?.code === 'GRAPHQL_VALIDATION_FAILED', `ws: an unknown field: ${JSON.stringify(refused)}`);
  } finally {
    await client.dispose();
  }

  // A token the server does not know: the socket is closed with 4401, which graphql-ws reports.
  let closed;
  const bad = clientWith('Bearer not-a-token', { closed: (e) => (closed = e) });
  const outcome = await withTimeout(
    adapter(bad)
      .execute('{ __typename }')
      .then((r) => ({ result: r }), (err) => ({ err })),
    'ws: a refused token',
  );
  await bad.dispose();
  const code = closed?.code ?? outcome.err?.code;
  check(code === 4401, `ws: a refused token closed with ${code}: ${JSON.stringify(outcome)}`);
  console.log('ws: a refused token is closed with 4401');
  console.log('ws: OK');
  process.exit(0);
} catch (err) {
  console.error(`ws: FAIL: ${err?.stack ?? JSON.stringify(err)}`);
  process.exit(1);
}
