// The console's GraphQL client: queries and mutations over POST, subscriptions over WebSocket
// with the graphql-transport-ws protocol. Subscriptions outlive the server they started on: when
// the socket drops, or the server completes a subscription early (it is shutting down for a
// deploy, or the subscriber fell behind) or ends it with an UNAVAILABLE error (storage could not
// be read), the client subscribes again after a backoff, asking
// each subscription for fresh variables (so runEvents resumes after the last seq it saw) and
// telling it to resync (re-read what it may have missed).
//
// Authentication: a server that asks for it gets "Authorization: Bearer <token>" on every request
// and {"authorization": "Bearer <token>"} in every connection_init. The token comes from the link
// the server prints (/#token=…), taken out of the address at once and kept in localStorage, or
// from the token dialog. It never goes back into a URL and is never logged.
//
// A token the server stops taking (it expired, or was revoked) does not end the page: the
// WebSocket closed with 4401, or an UNAUTHENTICATED answer to a request or a subscription, tells
// the watchAuth callback (which asks for a new token) and then nothing is tried again with the
// old token: the socket stays closed, its subscriptions are kept, and each request waits. A new
// token (setToken) opens the socket again once, subscribes again with fresh variables (runEvents
// after the last seq seen), resyncs every subscription, and sends the waiting requests again:
// they were refused before they ran, so sending them again does nothing twice. If the person
// gives up (giveUp), the waiting requests fail with UNAUTHENTICATED.
/** An error from the API: message and extensions.code. */
export class APIError extends Error {
  constructor(message, code) { super(message); this.code = code; }
}

const TOKEN_KEY = "interlock.token";
let memoryToken = null; // when localStorage is unavailable (a locked-down browser)
let storage = () => localStorage; // sessionStorage once keepTokenInSession is called

/** The access token in use, or null. */
export function token() {
  try { return storage().getItem(TOKEN_KEY); } catch { return memoryToken; }
}

function storeToken(t) {
  memoryToken = t || null;
  try {
    if (t) storage().setItem(TOKEN_KEY, t);
    else storage().removeItem(TOKEN_KEY);
  } catch { /* memoryToken holds it */ }
}

/**
 * Keeps the token in sessionStorage from now on (this tab only, gone when it closes), as the
 * OIDC sign-in (oidc.js) does: a token in localStorage (a #token= link's) moves there.
 */
export function keepTokenInSession() {
  let kept = null;
  try { kept = localStorage.getItem(TOKEN_KEY); localStorage.removeItem(TOKEN_KEY); } catch { /* none */ }
  storage = () => sessionStorage;
  if (kept && !token()) storeToken(kept);
}

/** Keeps t as the access token, opens the live updates again with it and sends the requests
 * waiting for a token. */
export function setToken(t) {
  storeToken(t.trim());
  socket.restart();
  release(null);
}

/** Forgets the access token (signing out) and opens the live updates again without it. */
export function forgetToken() {
  storeToken(null);
  socket.restart();
  release(null);
}

/** The requests waiting for a token fail with UNAUTHENTICATED: the person closed the dialog. */
export function giveUp() {
  release(new APIError("Not signed in: sign in (in the header) to carry on.", "UNAUTHENTICATED"));
}

// The requests waiting for a new token: resolved (they are sent again) or rejected (giveUp).
let waiters = [];
function release(err) {
  const ws = waiters;
  waiters = [];
  for (const w of ws) { if (err) w.reject(err); else w.resolve(); }
}
function nextToken() { return new Promise((resolve, reject) => waiters.push({ resolve, reject })); }

// A link carrying the token (/#token=…): the token is taken out of the address (and so out of
// the history) before anything else runs. Whatever else the fragment holds stays. The token is
// taken as written, %-escapes decoded: not as a form field, which would read the "+" of a base64
// token (openssl rand -base64) as a space. With no token stored it is kept at once; one that
// differs from the stored token is only offered (takeOffered), for the person to confirm: a link
// must not silently sign the console in as someone else.
let offered = null;

/**
 * Takes a token out of the address's fragment, if there is one: "stored" when it was kept (no
 * token was stored), "offered" when it differs from the stored one (see takeOffered), else null.
 */
export function readLinkToken() {
  const isToken = (p) => p === "token" || p.startsWith("token=");
  const parts = location.hash.slice(1).split("&");
  const first = parts.find(isToken);
  if (first === undefined) return null;
  let t = first.slice("token=".length);
  try { t = decodeURIComponent(t); } catch { /* a "%" that escapes nothing is the token's own */ }
  const rest = parts.filter((p) => p && !isToken(p)).join("&");
  history.replaceState(history.state, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  t = t.trim();
  if (!t || t === token()) return null;
  if (!token()) { storeToken(t); return "stored"; }
  offered = t;
  return "offered";
}
readLinkToken();

/** The token a link offered in place of the stored one, once (null when none). */
export function takeOffered() {
  const t = offered;
  offered = null;
  return t;
}

let onAuth = () => {};
/**
 * Registers the callback told when the server wants a token it was not given, or no longer
 * takes the one it was: fn({ refused, expired }) where refused says a token was sent and turned
 * down (it is forgotten then) and expired that the server said it had expired.
 */
export function watchAuth(fn) { onAuth = fn; }

// The server turned down a request made with sent (null: none), saying message. Unless the token
// has changed since (someone signed in meanwhile), the token is forgotten and the callback told.
function unauthenticated(sent, message) {
  if (sent !== token()) return;
  if (sent) storeToken(null);
  onAuth({ refused: !!sent, expired: /expired/i.test(message || ""), message });
}

/**
 * Asks the server who t stands for ({ me { subject roles } }), without waiting or telling
 * anyone: { ok: true, me } (me null when authentication is off), or { ok: false, message } when
 * the server refuses t. Rejects with an APIError when the server cannot be reached.
 */
export async function checkToken(t) {
  const { status: code, body } = await post("{ me { subject roles } }", {}, t);
  const e = body?.errors?.[0];
  if (e) {
    if (e.extensions?.code === "UNAUTHENTICATED" || code === 401) return { ok: false, message: e.message };
    throw new APIError(e.message, e.extensions?.code || "INTERNAL");
  }
  if (!body) {
    if (code === 401) return { ok: false, message: "unauthenticated" };
    throw new APIError(`The server answered ${code} without a GraphQL response.`, "UNREACHABLE");
  }
  return { ok: true, me: body.data?.me ?? null };
}

let status = "ok";
let onStatus = () => {};
/**
 * Registers the callback told of the connection state: "ok", "reconnecting", "reconnected"
 * (back after a loss or a pause), "unreachable" (a request failed) or "paused" (the server
 * refused the token: the live updates wait for a new one).
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

// One POST of an operation with the token t (none when null): { status, body } (body null when
// the answer is not JSON). Rejects with an APIError when the server cannot be reached.
async function post(query, variables, t) {
  const headers = { "Content-Type": "application/json", "Accept": "application/json" };
  if (t) headers.Authorization = `Bearer ${t}`;
  let resp;
  try {
    resp = await fetch("/graphql", { method: "POST", headers, body: JSON.stringify({ query, variables }) });
  } catch {
    setStatus("unreachable");
    throw new APIError("The server cannot be reached. Check that Interlock is running.", "UNREACHABLE");
  }
  let body = null;
  try { body = await resp.json(); } catch { /* said by the caller */ }
  return { status: resp.status, body };
}

/**
 * Runs a query or mutation; resolves with data, rejects with an APIError. Refused as
 * UNAUTHENTICATED, it waits for a new token and is sent again (see the top of this file).
 */
export async function request(query, variables = {}) {
  for (;;) {
    const sent = token();
    const { status: code, body } = await post(query, variables, sent);
    if (!body) {
      if (code === 401) {
        await refused(sent, "");
        continue;
      }
      setStatus("unreachable");
      throw new APIError(`The server answered ${code} without a GraphQL response.`, "UNREACHABLE");
    }
    if (status === "unreachable") setStatus(socket.lost ? "reconnecting" : socket.halted ? "paused" : "ok");
    if (body.errors && body.errors.length) {
      const e = body.errors[0];
      const c = (e.extensions && e.extensions.code) || (code === 401 ? "UNAUTHENTICATED" : "INTERNAL");
      if (c === "UNAUTHENTICATED") {
        await refused(sent, e.message);
        continue;
      }
      throw new APIError(e.message, c);
    }
    return body.data;
  }
}

// A request made with sent was refused: unless the token changed meanwhile (then it is sent again
// at once), the server's refusal is told and the request waits for the next token.
async function refused(sent, message) {
  if (sent !== token()) return;
  const wait = nextToken();
  unauthenticated(sent, message);
  await wait;
}

class Socket {
  constructor() {
    this.subs = new Map(); // id → { query, vars, handlers, active, retry, timer, failed, behind }
    this.nextId = 1;
    this.ws = null;
    this.sent = null; // the token the socket was opened with
    this.open = false; // connection acknowledged
    this.lost = false; // the connection dropped (or never came up) and is being restored
    this.halted = false; // the server refused the token: nothing is tried until the token changes
    this.retry = 0;
  }

  /**
   * Subscribes; vars() is called on every (re)subscribe. handlers: next(data), error(APIError),
   * resync() after subscribing again, done(): true when a completion is the stream's real end
   * (otherwise a completed subscription is made again). Returns a function that ends it.
   */
  subscribe(query, vars, handlers) {
    const id = String(this.nextId++);
    const sub = { query, vars, handlers, active: false, retry: 0, timer: null, failed: false, behind: false };
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
    if (this.ws || this.halted) return;
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/graphql";
    const ws = new WebSocket(url, "graphql-transport-ws");
    const sent = token();
    this.ws = ws;
    this.sent = sent;
    ws.onopen = () => ws.send(JSON.stringify({ type: "connection_init", payload: sent ? { authorization: `Bearer ${sent}` } : {} }));
    ws.onmessage = (ev) => this.receive(JSON.parse(ev.data));
    ws.onclose = (ev) => {
      this.ws = null;
      this.open = false;
      for (const s of this.subs.values()) { s.behind ||= s.active; s.active = false; clearTimeout(s.timer); }
      if (ev.code === 4401) {
        // Unauthenticated (the token expired, or was never good): no point in trying again with
        // the same token. setToken (the dialog) connects again.
        this.refused(sent, ev.reason);
        return;
      }
      if (this.halted) return;
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

  // The server refused the token sent (its reason or message said why): the socket stays closed,
  // and its subscriptions kept, until the token changes. Told twice (a subscription's error, then
  // the close), the callback is told twice; it asks once.
  refused(sent, why) {
    const now = token();
    if (now && now !== sent) { // a new token came meanwhile: open with it
      if (!this.ws) this.connect();
      return;
    }
    this.halted = true;
    this.lost = false;
    for (const s of this.subs.values()) clearTimeout(s.timer);
    setStatus("paused");
    if (sent) storeToken(null);
    onAuth({ refused: !!sent, expired: /expired/i.test(why || "") });
  }

  /** Closes the socket, if any, and connects again at once (with the token now in use); every
   * subscription is made again and resyncs. */
  restart() {
    const ws = this.ws;
    this.halted = false;
    if (ws) {
      ws.onclose = null;
      ws.onmessage = null;
      ws.close(1000, "token changed");
      this.ws = null;
      this.open = false;
      this.lost = false;
    }
    for (const s of this.subs.values()) { s.behind = true; s.active = false; clearTimeout(s.timer); }
    if (this.subs.size) this.connect();
    else if (status === "paused") setStatus("ok");
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
        const back = this.lost || status === "paused";
        this.lost = false;
        for (const [id, sub] of this.subs) {
          clearTimeout(sub.timer);
          sub.retry = 0;
          const behind = sub.behind;
          sub.behind = false;
          this.send(id);
          if (back || behind) sub.handlers.resync?.();
        }
        if (back) setStatus("reconnected");
        break;
      }
      case "ping":
        this.ws.send(JSON.stringify({ type: "pong" }));
        break;
      case "next":
        if (!s) break;
        if (msg.payload.errors && msg.payload.errors.length) {
          const e = msg.payload.errors[0];
          if (e.extensions?.code === "UNAVAILABLE") {
            // The server could not read storage: the stream ends (complete follows) and is made
            // again after a backoff that grows while storage stays down, with fresh variables
            // (runEvents after the last seq seen), so nothing is lost and nothing is shown twice.
            break;
          }
          s.retry = 0;
          if (e.extensions?.code === "UNAUTHENTICATED") {
            // The token expired under the subscription: it is kept, to be made again (after
            // what it has seen) with the next token.
            s.active = false;
            s.behind = true;
            this.refused(this.sent, e.message);
            break;
          }
          s.failed = true;
          s.handlers.error?.(new APIError(e.message, e.extensions?.code || "INTERNAL"));
        } else {
          s.retry = 0;
          s.handlers.next(msg.payload.data);
        }
        break;
      case "error": {
        if (!s) break;
        const e = msg.payload?.[0];
        if (e?.extensions?.code === "UNAUTHENTICATED") {
          s.active = false;
          s.behind = true;
          this.refused(this.sent, e.message);
          break;
        }
        this.subs.delete(msg.id);
        s.handlers.error?.(new APIError(e?.message || "subscription failed", e?.extensions?.code || "INTERNAL"));
        break;
      }
      case "complete":
        if (!s) break;
        s.active = false;
        if (s.behind && this.halted) break; // ended by the token's expiry: made again with the next
        if (s.failed || s.handlers.done?.()) {
          this.subs.delete(msg.id);
          break;
        }
        // Ended early by the server: subscribe again after a pause (unless the socket drops
        // meanwhile; then the reconnection subscribes it).
        s.timer = setTimeout(() => {
          if (this.subs.get(msg.id) !== s || !this.open || s.active || this.halted) return;
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
