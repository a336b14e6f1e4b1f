package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"interlock/runtype"
)

// Signing algorithms accepted. A JWKS holds public keys, so its tokens may only use
// asymmetric algorithms: were HS256 allowed, a token "signed" with the public key's bytes as
// an HMAC secret would pass.
var (
	jwksMethods  = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
	secretMethod = []string{"HS256"}
)

const (
	// leeway absorbs clock skew between the identity provider and this server.
	leeway = 30 * time.Second
	// minSecretLen is HS256's key size: shorter secrets can be guessed offline from any token.
	minSecretLen = 32
	// jwksTimeout bounds one fetch of the key set.
	jwksTimeout = 10 * time.Second
	// unknownKIDEvery is how often a token naming an unknown key may trigger a refresh, so
	// tokens with made-up kids cannot make the server hammer the identity provider.
	unknownKIDEvery = time.Minute
)

type jwtVerifier struct {
	parser  *jwt.Parser
	methods []string
	claims  Claims
	issuer  string
	keyfunc func(ctx context.Context) jwt.Keyfunc
}

func newJWTVerifier(ctx context.Context, c *JWT, opts Options) (*jwtVerifier, error) {
	v := &jwtVerifier{claims: c.Claims.WithDefaults(), issuer: c.Issuer}
	if c.HS256SecretEnv != "" {
		secret := os.Getenv(c.HS256SecretEnv)
		switch {
		case secret == "":
			return nil, fmt.Errorf("auth.jwt.hs256SecretEnv: the environment variable %s is not set", c.HS256SecretEnv)
		case len(secret) < minSecretLen:
			return nil, fmt.Errorf("auth.jwt.hs256SecretEnv: the secret in %s is shorter than %d bytes", c.HS256SecretEnv, minSecretLen)
		}
		key := []byte(secret)
		v.methods = secretMethod
		v.keyfunc = func(context.Context) jwt.Keyfunc {
			return func(*jwt.Token) (any, error) { return key, nil }
		}
	} else {
		logger := opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		fetchOnStart := false // NoErrorReturnFirstHTTPReq: false makes a failed first fetch an error
		kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{c.JWKSURL}, keyfunc.Override{
			Client:                    opts.Client,
			HTTPTimeout:               jwksTimeout,
			NoErrorReturnFirstHTTPReq: &fetchOnStart,
			RefreshUnknownKID:         rate.NewLimiter(rate.Every(unknownKIDEvery), 1),
			// jwkset gives the refresh of an unknown kid one deadline for both the wait for the
			// limiter and the fetch, so it must leave the fetch its time. A wait that would end
			// past it fails at once (rate.Limiter does not wait beyond a deadline): only a token
			// arriving in the last jwksTimeout before the limiter refills is held, at most that.
			RateLimitWaitMax: jwksTimeout,
			RefreshErrorHandlerFunc: func(u string) func(context.Context, error) {
				return func(ctx context.Context, err error) {
					logger.WarnContext(ctx, "auth: cannot refresh the JWKS", "url", u, "error", err)
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("auth.jwt.jwksURL: cannot fetch the key set from %s: %w", c.JWKSURL, err)
		}
		v.methods = jwksMethods
		v.keyfunc = kf.KeyfuncCtx
	}
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(v.methods),
		jwt.WithIssuer(c.Issuer),
		jwt.WithAudience(c.Audience),
		jwt.WithExpirationRequired(),
		// A token issued in the future (beyond the leeway) was not made by a provider whose
		// clock agrees with ours, or was made ahead of time to outlive a revocation.
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
	}
	if opts.NowFunc != nil {
		popts = append(popts, jwt.WithTimeFunc(opts.NowFunc))
	}
	v.parser = jwt.NewParser(popts...)
	return v, nil
}

// verify checks a JWT's signature and claims and reads its principal.
func (v *jwtVerifier) verify(ctx context.Context, raw string) (*runtype.Principal, error) {
	claims := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(raw, claims, v.keyfunc(ctx))
	if err != nil {
		return nil, v.explain(tok, claims, err)
	}
	p := &runtype.Principal{}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		// The one instant the token is expired at, for validation and streams alike: the
		// parser accepts it until exp plus the leeway, so a stream lasts as long too (a
		// request accepted in the leeway and then cut off at exp was "cancelled").
		p.Expires = exp.Time.Add(leeway)
	}
	if sub, ok := claims[v.claims.Subject].(string); ok && sub != "" {
		p.Subject = sub
	} else {
		return nil, &Error{Message: fmt.Sprintf("token has no subject (claim %q)", v.claims.Subject)}
	}
	roles, ok := stringClaim(claims, v.claims.Roles)
	if !ok {
		return nil, &Error{Message: fmt.Sprintf("token claim %q must be a role or a list of roles", v.claims.Roles)}
	}
	for _, r := range roles {
		p.Roles = append(p.Roles, runtype.Role(r))
	}
	if v.claims.Resources != "" {
		res, ok := stringClaim(claims, v.claims.Resources)
		if !ok {
			return nil, &Error{Message: fmt.Sprintf("token claim %q must be a resource id or a list of them", v.claims.Resources)}
		}
		p.Resources = append([]string{}, res...) // never nil: without the claim, nothing is visible
	}
	if v.claims.Agents != "" {
		ids, ok := stringClaim(claims, v.claims.Agents)
		if !ok {
			return nil, &Error{Message: fmt.Sprintf("token claim %q must be an agent id or a list of them", v.claims.Agents)}
		}
		p.Agents = append([]string{}, ids...) // never nil: without the claim, no agent
	}
	return p, nil
}

// stringClaim reads a claim holding a string or a list of strings (absent: none); empty strings
// are dropped. ok is false for any other shape.
func stringClaim(claims jwt.MapClaims, name string) (list []string, ok bool) {
	switch v := claims[name].(type) {
	case nil:
		return nil, true
	case string:
		if v == "" {
			return nil, true
		}
		return []string{v}, true
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			if s != "" {
				list = append(list, s)
			}
		}
		return list, true
	}
	return nil, false
}

// explain turns jwt's error into one a client may read. A token whose claims failed has a
// verified signature, so its claims may be looked at to say which one is missing.
func (v *jwtVerifier) explain(tok *jwt.Token, claims jwt.MapClaims, err error) *Error {
	e := func(msg string) *Error { return &Error{Message: msg, cause: err} }
	has := func(name string) bool { _, ok := claims[name]; return ok }
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return e("token is malformed")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if tok != nil && tok.Method != nil && !slices.Contains(v.methods, tok.Method.Alg()) {
			return e("token signing algorithm is not accepted")
		}
		return e("token signature is invalid")
	case errors.Is(err, jwkset.ErrKeyNotFound) || errors.Is(err, keyfunc.ErrKeyfunc):
		// No key of that kid (even after a refresh, or with refreshes rate-limited), or
		// none for the token's alg.
		return e("token is signed by an unknown key")
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		if tok != nil && tok.Method == nil {
			return e("token signing algorithm is not accepted")
		}
		return e("token cannot be verified")
	case !errors.Is(err, jwt.ErrTokenInvalidClaims):
		return e("token is invalid")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer) || !has("iss"):
		return e("token issuer is not trusted")
	case errors.Is(err, jwt.ErrTokenInvalidAudience) || !has("aud"):
		return e("token has the wrong audience")
	case errors.Is(err, jwt.ErrTokenExpired):
		return e("token expired")
	case !has("exp"):
		return e("token has no expiry (exp)")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return e("token is not valid yet")
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return e("token is issued in the future (iat)")
	}
	return e("token claims are invalid")
}
