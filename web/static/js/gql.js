// The console's GraphQL client: queries and mutations over POST, subscriptions over WebSocket
// with the graphql-transport-ws protocol. It reconnects by itself and re-subscribes, asking
// each subscription for fresh variables (so runEvents resumes after the last seq it saw).

/** An error from the API: message and extensions.code. */
export class APIError extends Error {
  constructor(message, code) { super(message); this.code = code; }
}

let onStatus = () => {};
/** Registers the callback told of the connection state: "ok", "reconnecting", "unreachable". */
export function watchStatus(fn) { onStatus = fn; }

/** Runs a query or mutation; resolves with data, rejects with an APIError. */
export async function request(query, variables = {}) {
  let resp;
  try {
    resp = await fetch("/graphql", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify({ query, variables }),
    });
  } catch {
    onStatus("unreachable");
    throw new APIError("The server cannot be reached. Check that Interlock is running.", "UNREACHABLE");
  }
  let body;
  try { body = await resp.json(); } catch {
    onStatus("unreachable");
    throw new APIError(`The server answered ${resp.status} without a GraphQL response.`, "UNREACHABLE");
  }
  if (socket.state !== "reconnecting") onStatus("ok");
  if (body.errors && body.errors.length) {
    const e = body.errors[0];
    throw new APIError(e.message, (e.extensions && e.extensions.code) || "INTERNAL");
  }
  return body.data;
}

class Socket {
  constructor() {
    this.subs = new Map();
    this.nextId = 1;
    this.ws = null;
    this.state = "idle";
    this.retry = 0;
  }

  /**
   * Subscribes; vars() is called on every (re)subscribe. handlers: next(data), error(APIError),
   * complete(). Returns a function that ends the subscription.
   */
  subscribe(query, vars, handlers) {
    const id = String(this.nextId++);
    this.subs.set(id, { query, vars, handlers });
    if (this.state === "open") this.send(id);
    else this.connect();
    return () => {
      if (!this.subs.delete(id)) return;
      if (this.state === "open") this.ws.send(JSON.stringify({ id, type: "complete" }));
    };
  }

  connect() {
    if (this.ws) return;
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/graphql";
    const ws = new WebSocket(url, "graphql-transport-ws");
    this.ws = ws;
    ws.onopen = () => ws.send(JSON.stringify({ type: "connection_init", payload: {} }));
    ws.onmessage = (ev) => this.receive(JSON.parse(ev.data));
    ws.onclose = () => {
      this.ws = null;
      const wasOpen = this.state === "open";
      this.state = "reconnecting";
      if (this.subs.size === 0) { this.state = "idle"; if (wasOpen) onStatus("ok"); return; }
      onStatus("reconnecting");
      const delay = Math.min(10000, 250 * 2 ** this.retry++);
      setTimeout(() => this.connect(), delay);
    };
  }

  send(id) {
    const s = this.subs.get(id);
    this.ws.send(JSON.stringify({ id, type: "subscribe", payload: { query: s.query, variables: s.vars() } }));
  }

  receive(msg) {
    const s = msg.id && this.subs.get(msg.id);
    switch (msg.type) {
      case "connection_ack":
        this.state = "open";
        this.retry = 0;
        onStatus("ok");
        for (const id of this.subs.keys()) this.send(id);
        break;
      case "ping":
        this.ws.send(JSON.stringify({ type: "pong" }));
        break;
      case "next":
        if (!s) break;
        if (msg.payload.errors && msg.payload.errors.length) {
          const e = msg.payload.errors[0];
          s.handlers.error?.(new APIError(e.message, e.extensions?.code || "INTERNAL"));
        } else {
          s.handlers.next(msg.payload.data);
        }
        break;
      case "error":
        if (!s) break;
        this.subs.delete(msg.id);
        s.handlers.error?.(new APIError(msg.payload?.[0]?.message || "subscription failed", msg.payload?.[0]?.extensions?.code || "INTERNAL"));
        break;
      case "complete":
        if (!s) break;
        this.subs.delete(msg.id);
        s.handlers.complete?.();
        break;
    }
  }
}

const socket = new Socket();

/** Starts a subscription on the shared socket; see Socket.subscribe. */
export function subscribe(query, vars, handlers) { return socket.subscribe(query, vars, handlers); }
