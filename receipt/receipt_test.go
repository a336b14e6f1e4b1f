package receipt_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"interlock/receipt"
)

// TestArgsDigestIsJCS: the digest is of RFC 8785's canonical form — the RFC's own example
// (appendix B's numbers, its string escapes, key order) — not of the bytes as given.
func TestArgsDigestIsJCS(t *testing.T) {
	t.Parallel()
	in := `{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`
	canonical := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	sum := sha256.Sum256([]byte(canonical))
	got, err := receipt.ArgsDigest([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("ArgsDigest = %s, want %s (SHA-256 of %s)", got, want, canonical)
	}
	// Go's HTML escaping (Interlock's canonical form) and key order do not change it.
	a, _ := receipt.ArgsDigest([]byte(`{"b":"<x>","a":1}`))
	b, _ := receipt.ArgsDigest([]byte(`{"a":1.0,"b":"\u003cx\u003e"}`))
	if a != b {
		t.Errorf("digests of one value differ: %s, %s", a, b)
	}
	if _, err := receipt.ArgsDigest([]byte(`{"a":`)); err == nil {
		t.Error("ArgsDigest of broken JSON succeeded")
	}
}

// memKeys is a KeyStore in memory, for the signer's rules; gormstore's is checked by
// runs/storetest on both dialects.
type memKeys struct {
	mu    sync.Mutex
	keys  []receipt.StoredKey
	adds  int
	reads int
	down  bool // reads fail, as with the database unreachable
}

func (m *memKeys) SigningKeys(context.Context) ([]receipt.StoredKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.down {
		return nil, errors.New("database unreachable")
	}
	out := slices.Clone(m.keys)
	slices.SortFunc(out, func(a, b receipt.StoredKey) int { return int(b.Generation - a.Generation) })
	return out, nil
}

func (m *memKeys) AddSigningKey(_ context.Context, k receipt.StoredKey) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.adds++
	for _, have := range m.keys {
		if have.Generation == k.Generation {
			return false, nil
		}
	}
	m.keys = append(m.keys, k)
	return true, nil
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var t0 = time.Date(2026, 12, 5, 10, 0, 0, 123_456_789, time.UTC)

func newSigner(t *testing.T, keys receipt.KeyStore, c *clock) *receipt.Signer {
	t.Helper()
	s, err := receipt.New(t.Context(), receipt.Config{Issuer: "https://interlock.test", Keys: keys, Now: c.Now,
		Lifetime: 15 * time.Minute, Rotation: 24 * time.Hour, Refresh: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decision(args string) receipt.Decision {
	by := "sue"
	return receipt.Decision{RunID: "r1", ToolCallID: "tc_1", AgentID: "deploy-bot", Tool: "deploy",
		Args: json.RawMessage(args), DecidedBy: &by, DecidedAt: t0}
}

// kidOf is the kid in a compact JWS's header.
func kidOf(t *testing.T, token string) string {
	t.Helper()
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return jws.Signatures[0].Header.KeyID
}

func kids(set jose.JSONWebKeySet) []string {
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KeyID)
	}
	return out
}

// TestSignedReceiptVerifies: the claims the issue names, signed with EdDSA under the kid of a
// published key, expiring Lifetime after the decision; a changed payload does not verify.
func TestSignedReceiptVerifies(t *testing.T) {
	t.Parallel()
	c := &clock{now: t0.Add(2 * time.Second)}
	s := newSigner(t, &memKeys{}, c)
	token, err := s.Sign(t.Context(), decision(`{"version":"1.2.3","service":"api"}`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := s.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, err := receipt.Verify(token, set)
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := receipt.ArgsDigest([]byte(`{"service":"api","version":"1.2.3"}`))
	if got.Issuer != "https://interlock.test" || got.RunID != "r1" || got.ToolCallID != "tc_1" || got.AgentID != "deploy-bot" ||
		got.Tool != "deploy" || got.Decision != "APPROVED" || got.DecidedBy == nil || *got.DecidedBy != "sue" ||
		got.ArgsDigest != digest || got.DecidedAt != "2026-12-05T10:00:00.123Z" || got.IssuedAt != c.Now().Unix() ||
		got.Expires != t0.Add(15*time.Minute).Unix() || len(got.ID) != 22 {
		t.Errorf("claims = %+v", got)
	}
	var header struct{ Alg, Kid, Typ string }
	raw, _ := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.EdDSA})
	header.Alg, header.Kid = raw.Signatures[0].Header.Algorithm, raw.Signatures[0].Header.KeyID
	if header.Alg != "EdDSA" || header.Kid == "" || !slices.Contains(kids(set), header.Kid) {
		t.Errorf("header alg %q kid %q; published %v", header.Alg, header.Kid, kids(set))
	}
	parts := strings.Split(token, ".")
	parts[1] = parts[1][:len(parts[1])-2] + "AA"
	if _, err := receipt.Verify(strings.Join(parts, "."), set); err == nil {
		t.Error("a receipt with a changed payload verified")
	}
	again, _ := s.Sign(t.Context(), decision(`{}`))
	if a, _ := receipt.Verify(again, set); a == nil || a.ID == got.ID {
		t.Error("two receipts share a jti")
	}
}

// TestKeyRotation: the next key is stored once the key that signs is Rotation old, published at
// once, signs 2×Refresh later; the old key stays published until every receipt it signed has
// expired (Lifetime + Refresh + a minute of skew after the takeover), then is dropped.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	c := &clock{now: t0}
	keys := &memKeys{}
	s := newSigner(t, keys, c)
	sign := func() string {
		t.Helper()
		token, err := s.Sign(t.Context(), decision(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		return token
	}
	published := func() []string {
		t.Helper()
		set, err := s.Keys(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return kids(set)
	}
	first := kidOf(t, sign())
	if got := published(); !slices.Equal(got, []string{first}) {
		t.Fatalf("published %v, want [%s]", got, first)
	}
	c.Add(24*time.Hour - time.Second)
	if kidOf(t, sign()) != first || len(keys.keys) != 1 {
		t.Fatal("a key was rotated before Rotation passed")
	}
	c.Add(time.Minute + time.Second) // Rotation passed; the cache (Refresh) too
	if kid := kidOf(t, sign()); kid != first {
		t.Fatalf("the new key signs at once (kid %s): an instance that has not read it yet would not publish it", kid)
	}
	if len(keys.keys) != 2 {
		t.Fatalf("%d keys stored after Rotation, want 2", len(keys.keys))
	}
	second := keys.keys[1].ID
	if got := published(); !slices.Equal(got, []string{second, first}) {
		t.Fatalf("published %v, want the new key and the old one", got)
	}
	c.Add(2 * time.Minute) // 2×Refresh: the new key takes over
	lastOld := c.Now().Add(-time.Second)
	if kid := kidOf(t, sign()); kid != second {
		t.Fatalf("after the takeover kid %s signs, want %s", kid, second)
	}
	// The old key's last receipts expire Lifetime after the takeover (plus Refresh, in which an
	// instance may still sign with it): it is published until then, and a minute of skew.
	c.Add(15*time.Minute + time.Minute + time.Minute - time.Second)
	if got := published(); !slices.Contains(got, first) {
		t.Fatalf("published %v at %s: the old key's receipts (last signed at %s) have not expired", got, c.Now(), lastOld)
	}
	c.Add(time.Minute + 2*time.Second)
	if got := published(); !slices.Equal(got, []string{second}) {
		t.Fatalf("published %v once the old key's receipts expired, want [%s]", got, second)
	}
	if keys.adds != 2 {
		t.Errorf("%d keys made, want 2", keys.adds)
	}
}

// TestConcurrentFirstStart: signers racing on an empty store sign with one key.
func TestConcurrentFirstStart(t *testing.T) {
	t.Parallel()
	keys := &memKeys{}
	c := &clock{now: t0}
	var wg sync.WaitGroup
	tokens := make([]string, 8)
	for i := range tokens {
		wg.Go(func() {
			s := newSigner(t, keys, c)
			tokens[i], _ = s.Sign(context.Background(), decision(`{}`))
		})
	}
	wg.Wait()
	for _, tok := range tokens {
		if kidOf(t, tok) != keys.keys[0].ID {
			t.Fatalf("a signer signed with another key than the one stored")
		}
	}
	if len(keys.keys) != 1 {
		t.Fatalf("%d keys stored, want 1", len(keys.keys))
	}
}

// TestKeyFromTheEnvironment: a key given in PEM signs, is published under its thumbprint, and
// nothing is stored or read.
func TestKeyFromTheEnvironment(t *testing.T) {
	t.Parallel()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	key, err := receipt.ParseKey(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	if err != nil {
		t.Fatal(err)
	}
	s, err := receipt.New(t.Context(), receipt.Config{Issuer: "i", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	token, err := s.Sign(t.Context(), decision(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(res.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.Verify(token, set); err != nil {
		t.Fatalf("verify against the served set: %v", err)
	}
	pub := jose.JSONWebKey{Key: priv.Public()}
	tp, _ := pub.Thumbprint(crypto256)
	if len(set.Keys) != 1 || set.Keys[0].KeyID != b64(tp) || !set.Keys[0].Valid() || !set.Keys[0].IsPublic() {
		t.Errorf("served %+v", set.Keys)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/jwk-set+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if _, err := receipt.ParseKey("not a key"); err == nil {
		t.Error("ParseKey of text that is no PEM succeeded")
	}
}

// TestKeysUnreadable: once the keys are due to be read again and cannot be, a receipt is not
// signed (an approval then fails, with nothing stored: runs' TestAFailedSignatureDecidesNothing),
// the JWK set read last is still served, and requests to it do not query the database more than
// once a second.
func TestKeysUnreadable(t *testing.T) {
	t.Parallel()
	c := &clock{now: t0}
	keys := &memKeys{}
	s := newSigner(t, keys, c)
	srv := httptest.NewServer(s)
	defer srv.Close()
	get := func() jose.JSONWebKeySet {
		t.Helper()
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var set jose.JSONWebKeySet
		if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&set) != nil {
			t.Fatalf("GET the JWK set: %d", res.StatusCode)
		}
		return set
	}
	before := kids(get())
	keys.mu.Lock()
	keys.down, keys.reads = true, 0
	keys.mu.Unlock()
	c.Add(2 * time.Minute)
	if _, err := s.Sign(t.Context(), decision(`{}`)); err == nil {
		t.Fatal("signed with keys that could not be read again")
	}
	for range 20 {
		if got := kids(get()); !slices.Equal(got, before) {
			t.Fatalf("served %v during the outage, want the set read last %v", got, before)
		}
	}
	if keys.reads != 1 {
		t.Errorf("%d reads of the keys within a second of a failure, want 1", keys.reads)
	}
	keys.mu.Lock()
	keys.down = false
	keys.mu.Unlock()
	c.Add(time.Second)
	if _, err := s.Sign(t.Context(), decision(`{}`)); err != nil {
		t.Fatalf("once the keys can be read: %v", err)
	}
}

// BenchmarkSign is the cost a receipt adds to an approval: the JCS digest of small args and an
// Ed25519 signature, with the key read (go test ./receipt -run '^$' -bench Sign).
func BenchmarkSign(b *testing.B) {
	s, err := receipt.New(b.Context(), receipt.Config{Issuer: "interlock", Keys: &memKeys{}})
	if err != nil {
		b.Fatal(err)
	}
	d := decision(`{"service":"api","version":"1.2.3","replicas":3,"note":"canary green for an hour"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(b.Context(), d); err != nil {
			b.Fatal(err)
		}
	}
}
