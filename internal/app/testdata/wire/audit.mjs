// Runs graphql-http's server audits (the GraphQL-over-HTTP spec's checks) against
// INTERLOCK_URL/graphql, sending INTERLOCK_TOKEN with every request, and prints one JSON line:
// the counts by result and every audit that did not pass. Exits non-zero on any warning or error.
import { serverAudits } from 'graphql-http';

const base = process.env.INTERLOCK_URL;
const token = process.env.INTERLOCK_TOKEN;
if (!base) {
  console.error('audit: set INTERLOCK_URL');
  process.exit(2);
}

function fetchWithToken(input, init = {}) {
  const headers = new Headers(init.headers);
  if (token) headers.set('authorization', `Bearer ${token}`);
  return fetch(input, { ...init, headers });
}

const results = await Promise.all(
  serverAudits({ url: `${base}/graphql`, fetchFn: fetchWithToken }).map((a) => a.fn()),
);
const counts = { ok: 0, notice: 0, warn: 0, error: 0 };
const failed = [];
for (const r of results) {
  counts[r.status] = (counts[r.status] ?? 0) + 1;
  if (r.status !== 'ok') {
    let body;
    try {
      body = r.response ? await r.response.text() : undefined;
    } catch {
      body = undefined;
    }
    failed.push({ id: r.id, name: r.name, status: r.status, reason: r.reason, httpStatus: r.response?.status, body });
  }
}
console.log(JSON.stringify({ total: results.length, ...counts, failed }));
process.exit(counts.warn + counts.error > 0 ? 1 : 0);
