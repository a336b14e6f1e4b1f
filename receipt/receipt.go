// Package receipt signs the receipts of decisions that let a tool call run, and publishes the
// keys that verify them.
//
// Interlock cannot stop an agent that runs elsewhere from skipping its approval; the service the
// tool calls can, when it can check that a person (or a policy) approved exactly these
// arguments. So every decision that lets a call run — approve, edit and approve, approval by
// policy — carries a receipt: a compact JWS signed with EdDSA (Ed25519) whose payload names the
// run, the call, the agent, the tool and the SHA-256 of the arguments that run (ArgsDigest), and
// expires soon after the decision. The public keys are served as a JWK set at
// /.well-known/jwks.json (Signer.ServeHTTP), so a service verifies receipts with any JOSE library.
//
// The signing key is shared by every instance: it is stored in the database (KeyStore), created
// by the first instance that starts, or given by the environment. Stored keys rotate (Signer
// documents when a key is published, signs and stops being published).
package receipt

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Algorithm is the JWS algorithm of every receipt (RFC 8037: EdDSA over Ed25519).
const Algorithm = "EdDSA"

// Approved is the decision of every receipt: only a decision that lets a call run has one.
const Approved = "APPROVED"

// Claims are a receipt's payload. The names are the interface verifiers read: keep them.
type Claims struct {
	// Issuer is the server's issuer name (Config.Issuer): a verifier checks it, so that
	// receipts of another Interlock are refused even if it shares a key by mistake.
	Issuer     string `json:"iss"`
	RunID      string `json:"runId"`
	ToolCallID string `json:"toolCallId"`
	AgentID    string `json:"agentId"`
	Tool       string `json:"tool"`
	// ArgsDigest is ArgsDigest of the arguments the call runs with (the edited ones when a
	// person edited them).
	ArgsDigest string `json:"argsDigest"`
	// Decision is always Approved.
	Decision string `json:"decision"`
	// DecidedBy is the subject of who approved; null for an approval by policy, or by a server
	// whose authentication is off (the API's decidedBy, the same value).
	DecidedBy *string `json:"decidedBy"`
	// DecidedAt is when, as the API shows it (RFC 3339, UTC, milliseconds).
	DecidedAt string `json:"decidedAt"`
	// IssuedAt and Expires are NumericDates (seconds), as JWT libraries check them: Expires is
	// the decision's time plus Config.Lifetime.
	IssuedAt int64 `json:"iat"`
	Expires  int64 `json:"exp"`
	// ID is unique per receipt (128 random bits, base64url), for verifiers that refuse replays.
	ID string `json:"jti"`
}

// Decision is what a receipt is signed for: a decision that lets one call run.
type Decision struct {
	RunID, ToolCallID, AgentID, Tool string
	// Args are the arguments the call runs with, as stored (JSON).
	Args      json.RawMessage
	DecidedBy *string
	DecidedAt time.Time
}

// TimeFormat is how DecidedAt is written: the API's DateTime.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Sign returns the receipt of d: a compact JWS (header alg EdDSA, kid, typ JWT) over its Claims,
// signed with the current key. It fails only when the key cannot be read or made (storage) or
// the arguments are not JSON.
func (s *Signer) Sign(ctx context.Context, d Decision) (string, error) {
	digest, err := ArgsDigest(d.Args)
	if err != nil {
		return "", err
	}
	k, err := s.load(ctx)
	if err != nil {
		return "", err
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("receipt id: %w", err)
	}
	at := d.DecidedAt.UTC().Truncate(time.Millisecond)
	payload, err := json.Marshal(Claims{
		Issuer: s.cfg.Issuer, RunID: d.RunID, ToolCallID: d.ToolCallID, AgentID: d.AgentID, Tool: d.Tool,
		ArgsDigest: digest, Decision: Approved, DecidedBy: d.DecidedBy, DecidedAt: at.Format(TimeFormat),
		IssuedAt: s.cfg.Now().Unix(), Expires: at.Add(s.cfg.Lifetime).Unix(),
		ID: base64.RawURLEncoding.EncodeToString(jti[:]),
	})
	if err != nil {
		return "", fmt.Errorf("receipt claims: %w", err)
	}
	jws, err := k.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign receipt: %w", err)
	}
	return jws.CompactSerialize()
}

// Verify checks a receipt's signature against keys (a JWK set as served) and returns its claims.
// It checks neither the issuer nor the expiry nor the digest: that is the verifier's policy. For
// tests and tools of this module; a service uses its own JOSE library (see the README).
func Verify(token string, keys jose.JSONWebKeySet) (*Claims, error) {
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, fmt.Errorf("parse receipt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a receipt has exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	found := keys.Key(kid)
	if len(found) == 0 {
		return nil, fmt.Errorf("no published key has kid %q", kid)
	}
	payload, err := jws.Verify(found[0])
	if err != nil {
		return nil, fmt.Errorf("verify receipt: %w", err)
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("receipt claims: %w", err)
	}
	return &c, nil
}

// ParseKey reads a signing key given by the environment: an Ed25519 private key in PEM
// (PKCS #8, "PRIVATE KEY", as `openssl genpkey -algorithm ed25519` writes it).
func ParseKey(pemText string) (ed25519.PrivateKey, error) {
	return parsePEM([]byte(pemText))
}
