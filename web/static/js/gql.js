// The console's GraphQL client: queries and mutations over POST, subscriptions over WebSocket
// with the graphql-transport-ws protocol. Subscriptions outlive the server they started on: when
// the socket drops, or the server completes a subscription early (it is shutting down for a
// deploy, or the subscriber fell behind), the client subscribes again after a backoff, asking
// each subscription for fresh variables (so runEvents resumes after the last seq it saw) and
// telling it to resync (re-read what it may have missed).
//
// Authentication: a server that asks for it gets "Authorization: Bearer <token>" on every request
// and {"authorization": "Bearer <token>"} in every connection_init. The token comes from the link
// the server prints (/#token=…), taken out of the address at once and kept in localStorage, or
// from the token prompt. It never goes back into a URL and is never logged.

/** An error from the API: message and extensions.code. */
export class APIError extends Error {
  constructor(message, code) { super(message); this.code = code; }
}

const TOKEN_KEY = "interlock.token";
let memoryToken = null; // when localStorage is unavailable (a locked-down browser)

/** The access token in use, or null. */
export function token() {
  try { return localStorage.getItem(TOKEN_KEY); } catch { return memoryToken; }
}

function storeToken(t) {
  memoryToken = t || null;
  try {
    if (t) localStorage.setItem(TOKEN_KEY, t);
    else localStorage.removeItem(TOKEN_KEY);
  } catch { /* memoryToken holds it */ }
}

/** Keeps t as the access token and opens the live updates again with it. */
export function setToken(t) {
  storeToken(t.trim());
  socket.restart();
}

/** Forgets the access token (signing out) and opens the live updates again without it. */
export function forgetToken() {
  storeToken(null);
  socket.restart();
}

// A link carrying the token (/#token=…): keep the token, and take it out of the address (and so
// out of the history) before anything else runs. Whatever else the fragment holds stays. The
// token is taken as written, %-escapes decoded: not as a form field, which would read the "+" of
// a base64 token (openssl rand -base64) as a space.
{
  const isToken = (p) => p === "token" || p.startsWith("token=");
  const parts = location.hash.slice(1).split("&");
  const first = parts.find(isToken);
  if (first !== undefined) {
    let t = first.slice("token=".length);
    try { t = decodeURIComponent(t); } catch { /* a "%" that escapes nothing is the token's own */ }
    if (t) storeToken(t);
    const rest = parts.filter((p) => p && !isToken(p)).join("&");
    history.replaceState(history.state, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }
}

let onAuth = () => {};
/**
 * Registers the callback told when the server wants a token it was not given: fn({ refused })
 * where refused says a token was sent and turned down (it is forgotten then).
 */
export function watchAuth(fn) { onAuth = fn; }

// The server turned down a request made with sent (null: none). Unless the token has changed
// since (someone signed in meanwhile), the token is forgotten and the callback told.
function unauthenticated(sent) {
  if (sent !== token()) return;
  if (sent) storeToken(null);
  onAuth({ refused: !!sent });
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
  const sent = token();
  const headers = { "Content-Type": "application/json", "Accept": "application/json" };
  if (sent) headers.Authorization = `Bearer ${sent}`;
  try {
    resp = await fetch("/graphql", {
      method: "POST",
      headers,
      body: JSON.stringify({ query, variables }),
    });
  } catch {
    setStatus("unreachable");
    throw new APIError("The server cannot be reached. Check that Interlock is running.", "UNREACHABLE");
  }
  let body;
  try { body = await resp.json(); } catch {
    if (resp.status === 401) {
      unauthenticated(sent);
      throw new APIError("This server needs an access token.", "UNAUTHENTICATED");
    }
    setStatus("unreachable");
    throw new APIError(`The server answered ${resp.status} without a GraphQL response.`, "UNREACHABLE");
  }
  if (status === "unreachable") setStatus(socket.lost ? "reconnecting" : "ok");
  if (body.errors && body.errors.length) {
    const e = body.errors[0];
    const code = (e.extensions && e.extensions.code) || (resp.status === 401 ? "UNAUTHENTICATED" : "INTERNAL");
    if (code === "UNAUTHENTICATED") unauthenticated(sent);
    throw new APIError(e.message, code);
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
    const sent = token();
    this.ws = ws;
    ws.onopen = () => ws.send(JSON.stringify({ type: "connection_init", payload: sent ? { authorization: `Bearer ${sent}` } : {} }));
    ws.onmessage = (ev) => this.receive(JSON.parse(ev.data));
    ws.onclose = (ev) => {
      this.ws = null;
      this.open = false;
      for (const s of this.subs.values()) { s.active = false; clearTimeout(s.timer); }
      if (ev.code === 4401) {
        // Unauthenticated: no point in trying again with the same token. setToken (the prompt)
        // connects again; so does the next subscription of a view drawn after it.
        this.lost = false;
        if (status === "reconnecting") setStatus("ok");
        unauthenticated(sent);
        return;
      }
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

  /** Closes the socket, if any, and connects again at once (with the token now in use). */
  restart() {
    const ws = this.ws;
    if (ws) {
      ws.onclose = null;
      ws.onmessage = null;
      ws.close(1000, "token changed");
      this.ws = null;
      this.open = false;
      this.lost = false;
      for (const s of this.subs.values()) { s.active = false; clearTimeout(s.timer); }
    }
    if (this.subs.size) this.connect();
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
