// A scripted MCP client on the official TypeScript SDK, so that Go tests can check a server
// (Interlock's MCP gateway) against the client most MCP hosts are built on, not against our own.
//
//   node client.mjs <url> <token> <steps.json>
//
// It connects over Streamable HTTP with "Authorization: Bearer <token>", runs the steps of
// steps.json in order on that one session, and prints one JSON line per event on stdout:
//
//   {"op":"session","id":...}                              after connecting
//   {"op":"list","tools":[...]}                            every tool, as the server sent it
//   {"op":"progress","name":...,"progress":...,"total":...,"message":...}
//   {"op":"result","name":...,"result":{...}}              the whole CallToolResult, as sent
//                                                          (isError, _meta only when present)
//   {"op":"error","name":...,"message":...,"code":...}     a call (or list) that threw
//   {"op":"terminated","id":...}                           after {"op":"terminate"}
//   {"op":"connect-error","message":...,"code":...}        and exit 2
//
// Steps: {"op":"list"}; {"op":"call","name":...,"args":{...},"progress":true,"timeoutMs":n,
// "abortAfterMs":n}; {"op":"terminate"} (DELETE the session); {"parallel":[steps...]}, run at
// once and awaited together. A step's optional "id" is copied onto its lines, to tell apart
// calls of the same tool run in parallel. Exit 0 once every step ran, 1 on a bad steps file.
// Diagnostics (transport errors the SDK reports on the side) go to stderr, never stdout.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, stepsFile] = process.argv.slice(2);
if (!url || !token || !stepsFile) {
  console.error('usage: node client.mjs <url> <token> <steps.json>');
  process.exit(1);
}
const steps = JSON.parse(readFileSync(stepsFile, 'utf8'));

// emit prints one event. Writes to a pipe are synchronous on Linux, so nothing printed is lost
// when the process exits right after.
const emit = (line) => process.stdout.write(JSON.stringify(line) + '\n');

// withID copies the step's id onto a line when the step has one.
const withID = (step, line) => (step.id === undefined ? line : { ...line, id: step.id });

// errorLine describes a thrown error: McpError and the transport's StreamableHTTPError carry a
// code (a JSON-RPC error code, or an HTTP status), an abort carries the SDK's RequestTimeout.
const errorLine = (step, name, err) =>
  withID(step, { op: 'error', name, message: String(err?.message ?? err), code: err?.code ?? null });

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'interlock-mcp-client', version: '1.0.0' });
client.onerror = (err) => console.error(`mcp-client: ${err?.message ?? err}`);

try {
  await client.connect(transport);
} catch (err) {
  emit({ op: 'connect-error', message: String(err?.message ?? err), code: err?.code ?? null });
  process.exit(2);
}
emit({ op: 'session', id: transport.sessionId ?? null });

// list prints every tool, following nextCursor so that a paginated list is whole.
async function list(step) {
  try {
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    emit(withID(step, { op: 'list', tools }));
  } catch (err) {
    emit(errorLine(step, undefined, err));
  }
}

// call calls one tool. With "progress" it asks for progress notifications (the SDK then sends a
// progressToken) and each one restarts the timeout, as a host does for a call that a person may
// take minutes to approve; without it the request carries no progressToken at all.
async function call(step) {
  const options = {};
  if (step.timeoutMs !== undefined) options.timeout = step.timeoutMs;
  if (step.progress) {
    options.resetTimeoutOnProgress = true;
    options.onprogress = (p) =>
      emit(withID(step, { op: 'progress', name: step.name, progress: p.progress, total: p.total, message: p.message }));
  }
  let timer;
  if (step.abortAfterMs !== undefined) {
    // The SDK answers an abort with notifications/cancelled to the server and rejects the call.
    const controller = new AbortController();
    options.signal = controller.signal;
    timer = setTimeout(() => controller.abort(`aborted by the client after ${step.abortAfterMs}ms`), step.abortAfterMs);
  }
  try {
    const result = await client.callTool({ name: step.name, arguments: step.args ?? {} }, undefined, options);
    emit(withID(step, { op: 'result', name: step.name, result }));
  } catch (err) {
    emit(errorLine(step, step.name, err));
  } finally {
    clearTimeout(timer);
  }
}

// terminate ends the session with DELETE, as a host does when it shuts down.
async function terminate(step) {
  const id = transport.sessionId ?? null;
  try {
    await transport.terminateSession();
    emit(withID(step, { op: 'terminated', id }));
  } catch (err) {
    emit(errorLine(step, undefined, err));
  }
}

async function run(step) {
  if (Array.isArray(step.parallel)) return Promise.all(step.parallel.map(run));
  switch (step.op) {
    case 'list': return list(step);
    case 'call': return call(step);
    case 'terminate': return terminate(step);
    default:
      console.error(`mcp-client: unknown step ${JSON.stringify(step)}`);
      process.exit(1);
  }
}

for (const step of steps) await run(step);
await client.close();
// Exit now rather than when the event loop drains: an aborted call's request may still be open.
process.exit(0);
