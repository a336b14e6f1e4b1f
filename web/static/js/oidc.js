// Signing in with the organisation's OpenID Connect provider, when the server has auth.oidc
// (GET /console.json says so). The console is a public client: Authorization Code with PKCE
// (S256), a state and a nonce per sign-in, and no client secret anywhere in the browser.
//
//   - Sign in: the discovery document names the endpoints; the browser goes to the provider and
//     comes back to the console's root with ?code&state. The state must be this tab's pending
//     sign-in's, the ID token's nonce its nonce, its iss the issuer and its aud the client id, or
//     the answer is refused (it belongs to another sign-in). Then the address is put back to the
//     page the person left.
//   - The ID token is the bearer token (gql.js sends it on every request and in connection_init);
//     it and the refresh token are kept in sessionStorage: this tab only, gone when it closes.
//   - Renewal: before the ID token expires (a third of its lifetime before, at most a minute), the
//     refresh token buys a new one without leaving the page: nothing typed, open or scrolled is
//     lost; the live updates reopen with it and catch up (gql.js setToken). Without a refresh
//     token (the provider gave none: offline_access not granted), the header's Sign in appears
//     before the token ends, and signing in again leaves the page for the provider and back.
//   - Sign out forgets the tokens and, when the provider has an end_session_endpoint, ends the
//     provider's session too. After a sign-out the console does not sign in again by itself.
import { keepTokenInSession, setToken, forgetToken, token } from "./gql.js";

const SESSION = "interlock.oidc"; // { idToken, refreshToken, lifetime, until, name }
const PENDING = "interlock.oidc.pending"; // { state, nonce, verifier, returnTo }
const SIGNED_OUT = "interlock.oidc.signedOut";
const RENEW_MAX = 60; // seconds before expiry, at most, that renewal starts

function b64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function random() { return b64url(crypto.getRandomValues(new Uint8Array(32))); }
/** The claims of a JWT, unverified (the server verifies it; the console reads nonce, exp, name). */
function claimsOf(jwt) {
  const part = (jwt || "").split(".")[1] || "";
  const text = atob(part.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((part.length + 3) % 4));
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(text, (c) => c.charCodeAt(0))));
}
function load(key) { try { return JSON.parse(sessionStorage.getItem(key)); } catch { return null; } }
function save(key, v) { try { if (v) sessionStorage.setItem(key, JSON.stringify(v)); else sessionStorage.removeItem(key); } catch { /* this page only */ } }

/** A sign-in failure shown above the page (an alert), or removed with null. */
function showError(msg) {
  let p = document.getElementById("signin-error");
  if (!msg) { p?.remove(); return; }
  if (!p) {
    p = document.createElement("p");
    p.id = "signin-error";
    p.className = "notice error";
    p.setAttribute("role", "alert");
    document.getElementById("main")?.before(p);
  }
  p.textContent = msg;
}

/**
 * Starts the OIDC sign-in when the server has one: null without it (the console keeps its
 * pasted-token dialog and printed link). hooks.renewed() is called after each new token,
 * hooks.expiring() when the token will end and cannot be renewed. Otherwise resolves to
 * { signIn(), signOut(), refused(), name() }.
 */
export async function startOIDC(hooks = {}) {
  let cfg;
  try { cfg = (await (await fetch("/console.json", { cache: "no-store" })).json()).oidc; } catch { return null; }
  if (!cfg?.issuer) return null;
  keepTokenInSession();
  const redirectURI = location.origin + "/";
  let discovery = null;
  async function discover() {
    if (discovery) return discovery;
    const r = await fetch(cfg.issuer.replace(/\/$/, "") + "/.well-known/openid-configuration");
    if (!r.ok) throw new Error(`the identity provider answered ${r.status}`);
    const d = await r.json();
    if (d.issuer !== cfg.issuer) throw new Error("the identity provider's discovery document names another issuer");
    discovery = d;
    return d;
  }

  async function tokenRequest(params) {
    const d = await discover();
    const r = await fetch(d.token_endpoint, { method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ client_id: cfg.clientID, ...params }) });
    const body = await r.json().catch(() => ({}));
    if (!r.ok || !body.id_token) {
      const e = new Error(body.error_description || body.error || `the token endpoint answered ${r.status}`);
      e.grantRefused = body.error === "invalid_grant"; // the refresh token is no longer good
      throw e;
    }
    return body;
  }

  // Checks an ID token's iss, aud and (for a code exchange) nonce, keeps it, and uses it.
  function accept(body, nonce, previous) {
    const c = claimsOf(body.id_token);
    const aud = [].concat(c.aud);
    if (c.iss !== cfg.issuer || !aud.includes(cfg.clientID)) throw new Error("the ID token is for another issuer or client");
    if (nonce !== undefined && c.nonce !== nonce) throw new Error("the ID token belongs to another sign-in (its nonce differs)");
    const s = { idToken: body.id_token, refreshToken: body.refresh_token || previous?.refreshToken || null,
      // The lifetime as the provider counts it (exp - iat, else expires_in), from now as this
      // browser counts it: a browser clock that is off does not make it renew in a loop.
      lifetime: Math.max(1, c.iat ? c.exp - c.iat : Number(body.expires_in) || 300), until: 0,
      name: c.name || c.preferred_username || c.email || c.sub };
    s.until = Date.now() + s.lifetime * 1000;
    save(SESSION, s);
    showError(null);
    accepted = Date.now();
    setToken(s.idToken);
    schedule();
    hooks.renewed?.();
  }

  let accepted = 0; // when the last token was taken
  let timer = null;
  function schedule() {
    clearTimeout(timer);
    const s = load(SESSION);
    if (!s) return;
    const lead = Math.min(RENEW_MAX, s.lifetime / 3);
    const wait = Math.max(1000, s.until - lead * 1000 - Date.now()); // at most one renewal a second
    timer = setTimeout(renew, wait);
  }
  // A tab in the background has its timers slowed: coming back checks at once.
  document.addEventListener("visibilitychange", () => { if (!document.hidden) schedule(); });

  // No renewal possible: say when the sign-in ends, and offer Sign in (a round trip to the
  // provider and back to this page).
  function ending(s) {
    showError(s.until > Date.now()
      ? `Your sign-in ends at ${new Date(s.until).toLocaleTimeString()} and cannot be renewed from this page: Sign in again to carry on.`
      : "Your sign-in has ended and cannot be renewed from this page: Sign in again to carry on.");
    hooks.expiring?.();
  }

  /** How long after a renewal that failed for want of an answer it is tried again, at most (half
   * the time the token still holds, when that is less). */
  const RETRY_MS = 5000;
  let renewing = null;
  /** Renews the token with the refresh token; false when there is none or it failed. */
  function renew() {
    renewing ??= (async () => {
      const s = load(SESSION);
      if (!s) { hooks.expiring?.(); return false; } // not signed in: Sign in is the way
      if (!s.refreshToken) { ending(s); return false; }
      try {
        accept(await tokenRequest({ grant_type: "refresh_token", refresh_token: s.refreshToken }), undefined, s);
        return true;
      } catch (e) {
        // Only the provider's word that the refresh token is spent ends it; a network blip or
        // an outage is tried again in a few seconds while the token in hand still holds.
        const left = s.until - Date.now();
        if (!e?.grantRefused && left > 1000) {
          clearTimeout(timer);
          timer = setTimeout(renew, Math.min(RETRY_MS, left / 2));
          return false;
        }
        if (e?.grantRefused) save(SESSION, { ...s, refreshToken: null });
        ending(s);
        return false;
      }
    })().finally(() => { renewing = null; });
    return renewing;
  }

  async function signIn(returnTo = location.pathname + location.search + location.hash) {
    save(SIGNED_OUT, null);
    showError(null);
    let d;
    try { d = await discover(); } catch (e) { showError(`Cannot sign in: ${e.message}.`); return; }
    const p = { state: random(), nonce: random(), verifier: random(), returnTo };
    save(PENDING, p);
    const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(p.verifier)));
    const u = new URL(d.authorization_endpoint);
    for (const [k, v] of Object.entries({ response_type: "code", client_id: cfg.clientID, redirect_uri: redirectURI,
      scope: cfg.scopes.join(" "), state: p.state, nonce: p.nonce, code_challenge: challenge, code_challenge_method: "S256" })) {
      u.searchParams.set(k, v);
    }
    location.assign(u.href);
  }

  function signOut() {
    clearTimeout(timer);
    const s = load(SESSION);
    save(SESSION, null);
    save(SIGNED_OUT, true);
    forgetToken();
    if (discovery?.end_session_endpoint && s) {
      const u = new URL(discovery.end_session_endpoint);
      u.searchParams.set("id_token_hint", s.idToken);
      u.searchParams.set("client_id", cfg.clientID);
      u.searchParams.set("post_logout_redirect_uri", redirectURI);
      location.assign(u.href);
      return true;
    }
    return false;
  }

  // The provider's answer to a sign-in: ?code&state (or ?error) on the console's root.
  const q = new URLSearchParams(location.search);
  if (q.has("state") && (q.has("code") || q.has("error"))) {
    const p = load(PENDING);
    save(PENDING, null);
    history.replaceState(null, "", p?.returnTo || "/");
    try {
      if (q.has("error")) throw new Error(q.get("error_description") || q.get("error"));
      if (!p || q.get("state") !== p.state) throw new Error("the answer belongs to another sign-in (its state differs)");
      accept(await tokenRequest({ grant_type: "authorization_code", code: q.get("code"), redirect_uri: redirectURI,
        code_verifier: p.verifier }), p.nonce);
    } catch (e) {
      save(SIGNED_OUT, true); // no sign-in by itself after a failed one: say why, offer Sign in
      showError(`Sign-in refused: ${e.message}. Sign in again.`);
    }
  } else if (load(SESSION)) {
    const s = load(SESSION);
    if (token() !== s.idToken) setToken(s.idToken);
    if (s.until - Date.now() < Math.min(RENEW_MAX, s.lifetime / 3) * 1000) await renew();
    else schedule();
  } else if (!token() && !load(SIGNED_OUT)) {
    await signIn(); // staff sign in without pasting anything: off to the provider
    await new Promise(() => {}); // the page is leaving
  }

  return {
    signIn: () => signIn(),
    signOut,
    /**
     * The server refused the token (saying message): renewed if possible, unless the token was
     * new (a renewed one would be refused alike: said above the page); else Sign in is the way.
     */
    refused: (message) => {
      if (Date.now() - accepted < 10000) {
        showError(`The server refused your sign-in: ${message || "unauthenticated"}.`);
        hooks.expiring?.();
        return Promise.resolve(false);
      }
      return renew();
    },
    /** The signed-in person's name from the ID token, or null. */
    name: () => load(SESSION)?.name || null,
  };
}
