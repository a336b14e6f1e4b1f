// Package auth establishes who a request acts for: a static API token (kept as its SHA-256)
// or a JSON Web Token from an identity provider, turned into a runtype.Principal. It answers
// every failure with an *Error whose message is safe to show the client; it never logs or
// echoes a token or a secret.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"interlock/runtype"
)

// Error is why a request could not be authenticated (UNAUTHENTICATED). Message names the
// problem in plain words and is safe to show the client: it never holds the token, key
// material or a library's own text.
type Error struct {
	Message string
	// Missing is true when the request presented no credentials at all.
	Missing bool

	cause error // for errors.Is on jwt's errors; never part of Message
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the underlying cause, such as jwt.ErrTokenExpired (nil for most).
func (e *Error) Unwrap() error { return e.cause }

func fail(msg string) *Error { return &Error{Message: msg} }

// Messages of the failures that do not depend on the token's contents.
const (
	msgMissing   = "missing bearer token"
	msgMalformed = `malformed Authorization header: expected "Bearer <token>"`
	msgUnknown   = "unknown token"
)

// maxTokenLen bounds what is hashed or parsed; real tokens are far shorter.
const maxTokenLen = 16 << 10

// Options are what New needs besides the config. The zero value is fine.
type Options struct {
	// Client fetches the JWKS (default: http.DefaultClient, with a 10s timeout per fetch).
	Client *http.Client
	// Logger receives failed JWKS refreshes (default slog.Default()).
	Logger *slog.Logger
	// NowFunc is the clock tokens' exp and nbf are checked against (default time.Now).
	NowFunc func() time.Time
}

// Authenticator turns an Authorization header into a principal. It is safe for concurrent
// use; Close stops its JWKS refresh.
type Authenticator struct {
	tokens []staticToken
	jwt    *jwtVerifier  // nil: JWTs are unknown tokens
	oidc   *oidcVerifier // nil: no OIDC provider
	cancel context.CancelFunc
}

type staticToken struct {
	digest    [sha256.Size]byte
	principal runtype.Principal
}

// New checks cfg and builds its authenticator. With a JWKS it fetches the key set once before
// returning (an error if it cannot) and refreshes it until ctx ends or Close is called. With
// hs256SecretEnv the variable must be set, to at least 32 bytes. With oidc it reads the
// provider's discovery document, and when the provider does not answer it still returns: the
// provider's tokens are refused until a retry in the background reaches it.
func New(ctx context.Context, cfg *Config, opts Options) (*Authenticator, error) {
	if cfg == nil {
		return nil, errors.New("auth: no config")
	}
	if p := cfg.Problems("auth"); len(p) > 0 {
		return nil, errors.New(strings.Join(p, "; "))
	}
	a := &Authenticator{cancel: func() {}}
	for _, t := range cfg.Tokens {
		st := staticToken{principal: runtype.Principal{
			Subject:   t.Subject,
			Roles:     slices.Clone([]runtype.Role(t.Role)),
			Resources: slices.Clone(t.Resources),
			Agents:    slices.Clone(t.Agents),
		}}
		raw, _ := hex.DecodeString(t.SHA256) // Problems checked it is 32 bytes of hex
		copy(st.digest[:], raw)
		a.tokens = append(a.tokens, st)
	}
	if cfg.JWT == nil && cfg.OIDC == nil {
		return a, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	if cfg.JWT != nil {
		v, err := newJWTVerifier(ctx, cfg.JWT, opts)
		if err != nil {
			cancel()
			return nil, err
		}
		a.jwt = v
	}
	if cfg.OIDC != nil {
		// Never an error: a provider that is down now is tried again in the background, and
		// the static tokens and JWTs work meanwhile.
		a.oidc = newOIDCVerifier(ctx, cfg.OIDC, opts)
	}
	return a, nil
}

// Generated makes a random admin token (32 bytes from crypto/rand, base64url) and an
// authenticator accepting only it, as subject "admin" with role admin: the server's own
// credentials when the config has no auth section.
func Generated() (token string, a *Authenticator) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand since Go 1.24)
	token = base64.RawURLEncoding.EncodeToString(b)
	a = &Authenticator{
		tokens: []staticToken{{
			digest:    sha256.Sum256([]byte(token)),
			principal: runtype.Principal{Subject: "admin", Roles: []runtype.Role{runtype.RoleAdmin}},
		}},
		cancel: func() {},
	}
	return token, a
}

// Close stops the JWKS refresh. Authenticate keeps working with the keys already fetched.
func (a *Authenticator) Close() { a.cancel() }

// Authenticate returns the principal an Authorization header value ("Bearer <token>", the
// scheme in any case) stands for. A static token is looked up by its SHA-256; a token that
// is not one and has the shape of a JWT is verified as one when jwt is configured. A JWT
// without roles yields a principal holding none (every operation forbidden), not an error.
// Every failure is an *Error.
func (a *Authenticator) Authenticate(ctx context.Context, header string) (*runtype.Principal, error) {
	token, err := bearer(header)
	if err != nil {
		return nil, err
	}
	if p := a.static(token); p != nil {
		return p, nil
	}
	if (a.jwt != nil || a.oidc != nil) && strings.Count(token, ".") == 2 {
		p, err := a.verifyJWT(ctx, token)
		if err == nil && a.isStaticSubject(p.Subject) {
			// A subject names one principal: who decided, who started a run, whose
			// idempotency keys and retried decisions. A JWT naming a static token's subject
			// would be taken for that token's holder.
			return nil, fail(fmt.Sprintf("token subject %q is the subject of a configured API token; the identity provider's subjects must differ from them", p.Subject))
		}
		return p, err
	}
	return nil, fail(msgUnknown)
}

// verifyJWT verifies a token of the shape of a JWT: as an ID token of the OIDC provider when
// its (unverified) iss is the provider's, else as a JWT of auth.jwt. When both name the same
// issuer, an ID token that fails is tried as a JWT of auth.jwt.
func (a *Authenticator) verifyJWT(ctx context.Context, token string) (*runtype.Principal, error) {
	if a.oidc != nil && (a.jwt == nil || unverifiedIssuer(token) == a.oidc.cfg.Issuer) {
		p, err := a.oidc.verify(ctx, token)
		if err == nil || a.jwt == nil || a.jwt.issuer != a.oidc.cfg.Issuer {
			return p, err
		}
		if p, jerr := a.jwt.verify(ctx, token); jerr == nil {
			return p, nil
		}
		return nil, err
	}
	return a.jwt.verify(ctx, token)
}

// bearer returns the token of an Authorization header value.
func bearer(header string) (string, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", &Error{Message: msgMissing, Missing: true}
	}
	scheme, token, _ := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > maxTokenLen ||
		strings.ContainsFunc(token, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", fail(msgMalformed)
	}
	return token, nil
}

// isStaticSubject reports whether a configured static token has that subject, or one that
// differs from it only by case or by spaces around it: a person reading " Bot" or "BOT" as
// decidedBy or startedBy (in the console, a webhook, the audit trail) takes it for "bot".
func (a *Authenticator) isStaticSubject(subject string) bool {
	subject = strings.TrimSpace(subject)
	for i := range a.tokens {
		if strings.EqualFold(strings.TrimSpace(a.tokens[i].principal.Subject), subject) {
			return true
		}
	}
	return false
}

// static finds the static token whose digest is the token's, comparing with every configured
// digest in constant time so the time taken tells nothing about them.
func (a *Authenticator) static(token string) *runtype.Principal {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	p := a.tokens[found].principal
	return &runtype.Principal{Subject: p.Subject, Roles: slices.Clone(p.Roles), Resources: slices.Clone(p.Resources), Agents: slices.Clone(p.Agents)}
}
