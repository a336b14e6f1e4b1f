// The console's GraphQL client: queries and mutations over POST, subscriptions over WebSocket
// with the graphql-transport-ws protocol. Subscriptions outlive the server they started on: when
// the socket drops, or the server completes a subscription early (it is shutting down for a
// deploy, or the subscriber fell behind), the client subscribes again after a backoff, asking
// each subscription for fresh variables (so runEvents resumes after the last seq it saw) and
// telling it to resync (re-read what it may have missed).

/** An error from the API: message and extensions.code. */
export class APIError extends Error {
  constructor(message, code) { super(message); this.code = code; }
}

let status = "ok";
let onStatus = () => {};
/**
 * Registers the callback told of the connection state: "ok", "reconnecting", "reconnected"
 * (back after a loss) or "unreachable" (a request failed).
 */
export function watchStatus(fn) { onStatus = fn; }

function setStatus(s) {
  if (s === status) return;
  status = s;
  onStatus(s);
}

/**
 * How long to wait before attempt n (0, 1, …) to reconnect or resubscribe: 250 ms doubling up to
 * 10 s, each time a random point between half and all of it, so that the consoles a deploy cut
 * off do not all come back in the same instant.
 */
function backoff(n) {
  const ceiling = Math.min(10000, 250 * 2 ** n);
  return ceiling / 2 + Math.random() * ceiling / 2;
}

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
    setStatus("unreachable");
    throw new APIError("The server cannot be reached. Check that Interlock is running.", "UNREACHABLE");
  }
  let body;
  try { body = await resp.json(); } catch {
    setStatus("unreachable");
    throw new APIError(`The server answered ${resp.status} without a GraphQL response.`, "UNREACHABLE");
  }
  if (status === "unreachable") setStatus(socket.lost ? "reconnecting" : "ok");
  if (body.errors && body.errors.length) {
    const e = body.errors[0];
    throw new APIError(e.message, (e.extensions && e.extensions.code) || "INTERNAL");
  }
  return body.data;
}

class Socket {
  constructor() {
    this.subs = new Map(); // id → { query, vars, handlers, active, retry, timer, failed }
    this.nextId = 1;
    this.ws = null;
    this.open = false; // connection acknowledged
    this.lost = false; // the connection dropped (or never came up) and is being restored
    this.retry = 0;
  }

  /**
   * Subscribes; vars() is called on every (re)subscribe. handlers: next(data), error(APIError),
   * resync() after subscribing again, done(): true when a completion is the stream's real end
   * (otherwise a completed subscription is made again). Returns a function that ends it.
   */
  subscribe(query, vars, handlers) {
    const id = String(this.nextId++);
    const sub = { query, vars, handlers, active: false, retry: 0, timer: null, failed: false };
    this.subs.set(id, sub);
    if (this.open) this.send(id);
    else this.connect();
    return () => {
      clearTimeout(sub.timer);
      if (this.subs.get(id) !== sub) return;
      this.subs.delete(id);
      if (this.open && sub.active) this.ws.send(JSON.stringify({ id, type: "complete" }));
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
      this.open = false;
      for (const s of this.subs.values()) { s.active = false; clearTimeout(s.timer); }
      if (this.subs.size === 0) {
        // Nothing to follow: connect again when something subscribes.
        this.lost = false;
        if (status === "reconnecting") setStatus("ok");
        return;
      }
      this.lost = true;
      setStatus("reconnecting");
      setTimeout(() => this.connect(), backoff(this.retry++));
    };
  }

  send(id) {
    const s = this.subs.get(id);
    s.active = true;
    this.ws.send(JSON.stringify({ id, type: "subscribe", payload: { query: s.query, variables: s.vars() } }));
  }

  receive(msg) {
    const s = msg.id && this.subs.get(msg.id);
    switch (msg.type) {
      case "connection_ack": {
        this.open = true;
        this.retry = 0;
        const back = this.lost;
        this.lost = false;
        for (const [id, sub] of this.subs) {
          clearTimeout(sub.timer);
          sub.retry = 0;
          this.send(id);
          if (back) sub.handlers.resync?.();
        }
        if (back) setStatus("reconnected");
        break;
      }
      case "ping":
        this.ws.send(JSON.stringify({ type: "pong" }));
        break;
      case "next":
        if (!s) break;
        s.retry = 0;
        if (msg.payload.errors && msg.payload.errors.length) {
          const e = msg.payload.errors[0];
          s.failed = true;
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
        s.active = false;
        if (s.failed || s.handlers.done?.()) {
          this.subs.delete(msg.id);
          break;
        }
        // Ended early by the server: subscribe again after a pause (unless the socket drops
        // meanwhile; then the reconnection subscribes it).
        s.timer = setTimeout(() => {
          if (this.subs.get(msg.id) !== s || !this.open || s.active) return;
          this.send(msg.id);
          s.handlers.resync?.();
        }, backoff(s.retry++));
        break;
    }
  }
}

const socket = new Socket();

/** Starts a subscription on the shared socket; see Socket.subscribe. */
export function subscribe(query, vars, handlers) { return socket.subscribe(query, vars, handlers); }
