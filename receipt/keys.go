package receipt

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// StoredKey is a signing key as the database keeps it.
type StoredKey struct {
	// Generation numbers the keys 1, 2, … in the order they were made; it is unique, so that
	// of instances racing to make the next key exactly one stores it.
	Generation int64
	// ID is the key's kid: its RFC 7638 thumbprint (base64url SHA-256 of its public JWK).
	ID string
	// Seed is the Ed25519 private key's 32-byte seed.
	Seed      []byte
	CreatedAt time.Time
}

// KeyStore keeps the signing keys every instance shares (gormstore implements it beside
// runs.Store; runs/storetest checks it on both dialects).
type KeyStore interface {
	// SigningKeys returns every stored key, newest generation first.
	SigningKeys(ctx context.Context) ([]StoredKey, error)
	// AddSigningKey stores k unless a key of its generation is stored already, and reports
	// whether it stored it. Of instances racing to add one generation, exactly one does; the
	// others get false with nothing stored.
	AddSigningKey(ctx context.Context, k StoredKey) (bool, error)
}

// Config says how receipts are signed.
type Config struct {
	// Issuer is every receipt's iss. Required.
	Issuer string
	// Lifetime is how long after its decision a receipt expires. Default 15 minutes.
	Lifetime time.Duration
	// Rotation is how long a stored key signs before the next one takes over. Default 30 days.
	Rotation time.Duration
	// Key, when set, is the one signing key (given by the environment): nothing is stored, and
	// its rotation is the operator's (give every instance the new key; receipts signed with the
	// old one no longer verify).
	Key ed25519.PrivateKey
	// Keys stores the shared keys when Key is not set. Required then.
	Keys KeyStore
	// Refresh is how long an instance trusts the keys it read before reading them again: a key
	// another instance made is published here within Refresh. Default 1 minute.
	Refresh time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// DefaultLifetime and DefaultRotation are Config's defaults (settings.go shows them).
const (
	DefaultLifetime = 15 * time.Minute
	DefaultRotation = 30 * 24 * time.Hour
)

// skew is how far apart the clocks of instances and verifiers may be: keys are published this
// much longer than the receipts they signed can last.
const skew = time.Minute

// Signer signs receipts (Sign) and serves the public keys (ServeHTTP). With stored keys:
//
//   - A key is published from the moment it is stored, and signs only from 2×Refresh later
//     (the only key signs at once): by then every instance has read it and publishes it, so
//     a receipt never names a key some instance's JWK set lacks.
//   - When the key that signs is Rotation old, the next generation is stored (by one instance:
//     AddSigningKey's race), and takes over 2×Refresh later.
//   - A key that stopped signing stays published for Lifetime + Refresh + a minute of clock skew
//     after its successor took over: until every receipt it signed has expired.
//
// Keys are read again every Refresh, so instances agree on them within that time.
type Signer struct {
	cfg Config

	mu   sync.Mutex
	read time.Time // when the keys below were read
	// failed is when reading them last failed, with err: for retryAfterError after it the
	// error is given again without asking the database, so that requests to the public JWK
	// set cannot turn an outage into a flood of queries.
	failed time.Time
	err    error
	active *key
	set    jose.JSONWebKeySet
	body   []byte // set as JSON
}

// key is a signing key ready to sign.
type key struct {
	id     string
	signer jose.Signer
}

// New returns a Signer, and makes or reads its key now, so that an instance that cannot reach
// its keys fails at start rather than at its first decision.
func New(ctx context.Context, cfg Config) (*Signer, error) {
	if cfg.Lifetime == 0 {
		cfg.Lifetime = DefaultLifetime
	}
	if cfg.Rotation == 0 {
		cfg.Rotation = DefaultRotation
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.Issuer == "":
		return nil, errors.New("receipts: the issuer is empty")
	case cfg.Lifetime < 0 || cfg.Rotation < 0 || cfg.Refresh < 0:
		return nil, errors.New("receipts: lifetime, rotation and refresh must be positive")
	case cfg.Key == nil && cfg.Keys == nil:
		return nil, errors.New("receipts: neither a key nor a key store")
	}
	s := &Signer{cfg: cfg}
	if cfg.Key != nil {
		k, jwk, err := newKey(cfg.Key)
		if err != nil {
			return nil, err
		}
		s.active = k
		if err := s.publish([]jose.JSONWebKey{jwk}); err != nil {
			return nil, err
		}
		return s, nil
	}
	if _, err := s.load(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// load returns the key that signs now: the one read less than Refresh ago, or else the keys read
// (and the next made, when due) again.
func (s *Signer) load(ctx context.Context) (*key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	if s.cfg.Key != nil || s.active != nil && now.Sub(s.read) < s.cfg.Refresh {
		return s.active, nil
	}
	if s.err != nil && now.Sub(s.failed) < retryAfterError {
		return nil, s.err
	}
	k, err := s.reload(ctx, now)
	if err != nil {
		s.failed, s.err = now, err
		return nil, err
	}
	s.err = nil
	return k, nil
}

// retryAfterError is how long after a failed read of the keys they are not read again.
const retryAfterError = time.Second

// reload reads the stored keys (making the next one when due), and makes the key that signs now
// and the set published of them current. The caller holds s.mu.
func (s *Signer) reload(ctx context.Context, now time.Time) (*key, error) {
	stored, err := s.cfg.Keys.SigningKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the receipt signing keys: %w", err)
	}
	if len(stored) == 0 || s.due(stored, now) {
		// The first start, or the key that signs is Rotation old: make the next generation.
		// Of instances racing here one stores it; every one reads back the keys as stored.
		next := int64(1)
		if len(stored) > 0 {
			next = stored[0].Generation + 1
		}
		if err := s.add(ctx, next, now); err != nil {
			return nil, err
		}
		if stored, err = s.cfg.Keys.SigningKeys(ctx); err != nil {
			return nil, fmt.Errorf("read the receipt signing keys: %w", err)
		}
		if len(stored) == 0 {
			return nil, errors.New("read the receipt signing keys: none stored after adding one")
		}
	}
	signs := s.signing(stored, now)
	k, _, err := newKey(ed25519.NewKeyFromSeed(stored[signs].Seed))
	if err != nil {
		return nil, err
	}
	var jwks []jose.JSONWebKey
	for i, sk := range stored {
		if i > signs && now.After(s.takesOver(stored[i-1]).Add(s.cfg.Lifetime+s.cfg.Refresh+skew)) {
			break // it stopped signing long enough ago that its receipts have expired (and so have older keys')
		}
		_, jwk, err := newKey(ed25519.NewKeyFromSeed(sk.Seed))
		if err != nil {
			return nil, err
		}
		jwks = append(jwks, jwk)
	}
	if err := s.publish(jwks); err != nil {
		return nil, err
	}
	s.active, s.read = k, now
	return k, nil
}

// takesOver is when a stored key starts signing: 2×Refresh after it was stored, when every
// instance publishes it.
func (s *Signer) takesOver(k StoredKey) time.Time { return k.CreatedAt.Add(2 * s.cfg.Refresh) }

// signing is the index in stored (newest first) of the key that signs at now: the newest that
// has taken over, or the oldest when none has (a first start).
func (s *Signer) signing(stored []StoredKey, now time.Time) int {
	for i, k := range stored {
		if !now.Before(s.takesOver(k)) {
			return i
		}
	}
	return len(stored) - 1
}

// due reports whether the next key must be made: the newest key is the one that signs, and
// has signed for Rotation.
func (s *Signer) due(stored []StoredKey, now time.Time) bool {
	return s.signing(stored, now) == 0 && !now.Before(stored[0].CreatedAt.Add(s.cfg.Rotation))
}

// add makes a new key and stores it as generation gen, unless another instance did first.
func (s *Signer) add(ctx context.Context, gen int64, now time.Time) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("make a receipt signing key: %w", err)
	}
	_, jwk, err := newKey(priv)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Keys.AddSigningKey(ctx, StoredKey{Generation: gen, ID: jwk.KeyID, Seed: priv.Seed(), CreatedAt: now}); err != nil {
		return fmt.Errorf("store a receipt signing key: %w", err)
	}
	return nil
}

// newKey is the signer of priv and its public JWK, both named by the key's thumbprint.
func newKey(priv ed25519.PrivateKey) (*key, jose.JSONWebKey, error) {
	pub := jose.JSONWebKey{Key: priv.Public(), Algorithm: Algorithm, Use: "sig"}
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, pub, fmt.Errorf("receipt key thumbprint: %w", err)
	}
	pub.KeyID = base64.RawURLEncoding.EncodeToString(tp)
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: priv, KeyID: pub.KeyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, pub, fmt.Errorf("receipt signer: %w", err)
	}
	return &key{id: pub.KeyID, signer: sig}, pub, nil
}

// publish makes keys the JWK set served.
func (s *Signer) publish(keys []jose.JSONWebKey) error {
	set := jose.JSONWebKeySet{Keys: keys}
	body, err := json.Marshal(set)
	if err != nil {
		return fmt.Errorf("receipt JWK set: %w", err)
	}
	s.set, s.body = set, body
	return nil
}

// Keys returns the JWK set of the public keys that verify receipts, read again when Refresh has
// passed.
func (s *Signer) Keys(ctx context.Context) (jose.JSONWebKeySet, error) {
	if _, err := s.load(ctx); err != nil {
		return jose.JSONWebKeySet{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set, nil
}

// ServeHTTP serves the JWK set (GET /.well-known/jwks.json, without authentication: public keys
// are public). Verifiers may cache it for a minute; a receipt naming a kid they lack tells them
// to fetch it again. When the keys cannot be read again it serves the set it read last.
func (s *Signer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	_, _ = s.load(r.Context()) // on failure the last set read stays served
	s.mu.Lock()
	body := s.body
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "public, max-age=60")
	// Public keys: any page may read them, so a verifier can run in a browser too.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(body)
}

// parsePEM reads an Ed25519 private key in PEM (PKCS #8).
func parsePEM(b []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New(`not a PEM "PRIVATE KEY" (PKCS #8) block`)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("PKCS #8 private key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the key is %T, not an Ed25519 key", k)
	}
	return priv, nil
}
