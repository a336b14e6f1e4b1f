package gqlguard

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"golang.org/x/time/rate"
)

// CodeRateLimited refuses a mutation over its client's rate; extensions.retryAfter says in how
// many seconds (an integer, at least 1) the next one will be accepted.
const CodeRateLimited = "RATE_LIMITED"

// DefaultMaxRateKeys is how many clients' limiters MutationRate keeps by default.
const DefaultMaxRateKeys = 10_000

// CodeBadUserInput refuses a request that can never pass as sent: one holding more mutations
// than a client may send at once. It is the run service's code for a request to fix, not retry.
const CodeBadUserInput = "BAD_USER_INPUT"

// MutationRate limits how often each client may run mutations, over every transport: a token
// bucket of Burst mutations refilled at Rate a second, per key. Each top-level field of a
// mutation operation costs one token (aliases, fragments and inline fragments included, as the
// executor collects them): `a: startRun(…) b: startRun(…)` is two mutations, each a paid model
// call on a real provider, not one request. An operation that needs more tokens than are left
// is refused as a whole before any of its fields runs. The key is what KeyFunc returns for the
// operation's context (the authenticated principal), or else the client's IP address as
// Middleware recorded it. Queries and subscriptions are not limited. It keeps at most MaxKeys
// limiters, dropping the least recently used: a client dropped is one idle for longest, and
// comes back with a full bucket, which is no more than it had.
//
// A refused mutation is an error with code RATE_LIMITED, extensions.retryAfter and
// extensions.mutations (how many the request holds); over plain HTTP, Middleware also makes its
// status 429 with a Retry-After header. An operation holding more mutations than Burst could
// never pass: it is BAD_USER_INPUT (HTTP 422) telling the client to split it, with no
// Retry-After, and costs nothing.
type MutationRate struct {
	rate    rate.Limit
	burst   int
	keyFunc func(context.Context) string
	now     func() time.Time
	// mutationType is the schema's mutation root type, whose fragments count; set by Validate.
	mutationType string

	mu       sync.Mutex // makes get-or-add of a limiter atomic
	limiters *lru.Cache[string, *rate.Limiter]
}

var (
	_ graphql.HandlerExtension        = (*MutationRate)(nil)
	_ graphql.OperationContextMutator = (*MutationRate)(nil)
)

// NewMutationRate limits each key to burst mutations, refilled at perSecond a second (both must
// be positive: Validate says so when the extension is added). keyFunc may be nil, or return ""
// for a context it cannot name; the client IP is used then. maxKeys ≤ 0 means
// DefaultMaxRateKeys.
func NewMutationRate(perSecond float64, burst int, keyFunc func(context.Context) string, maxKeys int) *MutationRate {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxRateKeys
	}
	cache, _ := lru.New[string, *rate.Limiter](maxKeys) // fails only for a size below 1
	return &MutationRate{rate: rate.Limit(perSecond), burst: burst, keyFunc: keyFunc, now: time.Now, limiters: cache, mutationType: "Mutation"}
}

func (*MutationRate) ExtensionName() string { return "MutationRate" }

// Validate checks the rate and burst when the extension is added, and learns the name of the
// schema's mutation type.
func (m *MutationRate) Validate(es graphql.ExecutableSchema) error {
	if m.rate <= 0 || m.burst < 1 {
		return fmt.Errorf("MutationRate: the rate and burst must be positive")
	}
	if es != nil {
		if s := es.Schema(); s != nil && s.Mutation != nil {
			m.mutationType = s.Mutation.Name
		}
	}
	return nil
}

// MutateOperationContext takes a token for each of a mutation's fields, or refuses it whole.
func (m *MutationRate) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation == nil || opCtx.Operation.Operation != ast.Mutation {
		return nil
	}
	n := m.Mutations(opCtx)
	if n > m.burst {
		if slot, ok := ctx.Value(limitedKey{}).(*limitedSlot); ok {
			slot.set(http.StatusUnprocessableEntity, 0)
		}
		return &gqlerror.Error{
			Message: fmt.Sprintf("the request holds %d mutations, more than the %d one client may send at once: it can never be accepted as it is; split it into requests of at most %d mutations",
				n, m.burst, m.burst),
			Extensions: map[string]any{"code": CodeBadUserInput, "mutations": n, "maxMutations": m.burst},
		}
	}
	wait := m.take(m.key(ctx), n)
	if wait <= 0 {
		return nil
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	if slot, ok := ctx.Value(limitedKey{}).(*limitedSlot); ok {
		slot.set(http.StatusTooManyRequests, secs)
	}
	return &gqlerror.Error{
		Message:    fmt.Sprintf("too many mutations: the request holds %s; retry in %d seconds", plural(n, "mutation"), secs),
		Extensions: map[string]any{"code": CodeRateLimited, "retryAfter": secs, "mutations": n},
	}
}

// Mutations is how many tokens a mutation operation costs: its top-level fields as the
// executor runs them (fragments spread and @skip/@include applied; a field repeated under one
// response name runs once), __typename left out, and at least one.
func (m *MutationRate) Mutations(opCtx *graphql.OperationContext) int {
	n := 0
	for _, f := range graphql.CollectFields(opCtx, opCtx.Operation.SelectionSet, []string{m.mutationType}) {
		if f.Name != "__typename" {
			n++
		}
	}
	return max(n, 1)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// key names the client of ctx: its principal, or its IP address.
func (m *MutationRate) key(ctx context.Context) string {
	if m.keyFunc != nil {
		if k := m.keyFunc(ctx); k != "" {
			return "key:" + k
		}
	}
	return "ip:" + ClientIP(ctx)
}

// take takes n tokens from key's bucket at once and returns 0, or, when there are fewer, how
// long until there are n (taking nothing). n must not exceed the burst.
func (m *MutationRate) take(key string, n int) time.Duration {
	m.mu.Lock()
	lim, ok := m.limiters.Get(key)
	if !ok {
		lim = rate.NewLimiter(m.rate, m.burst)
		m.limiters.Add(key, lim)
	}
	m.mu.Unlock()
	now := m.now()
	res := lim.ReserveN(now, n)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}

// Keys is how many clients' limiters are kept.
func (m *MutationRate) Keys() int { return m.limiters.Len() }

type clientIPKey struct{}

type limitedKey struct{}

// limitedSlot is where MutationRate tells Middleware that it refused the request's mutation:
// the status to answer with and, for a refusal to retry later, in how many seconds.
type limitedSlot struct {
	mu         sync.Mutex
	status     int
	retryAfter int
}

func (s *limitedSlot) set(status, retryAfter int) {
	s.mu.Lock()
	s.status, s.retryAfter = status, retryAfter
	s.mu.Unlock()
}

func (s *limitedSlot) get() (status, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, s.retryAfter
}

// ClientIP is the client address Middleware recorded in ctx (the connection's remote address:
// X-Forwarded-For is not trusted, since any client can send it), or "" without Middleware.
func ClientIP(ctx context.Context) string {
	ip, _ := ctx.Value(clientIPKey{}).(string)
	return ip
}

// Middleware records each request's client IP address for MutationRate and Connections and, for
// a plain HTTP request (not a WebSocket or an event stream, whose status is long sent when an
// operation is refused), turns the answer to a refused mutation into 429 Too Many Requests with
// Retry-After, or 422 for one that holds more mutations than the burst.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		ctx := context.WithValue(r.Context(), clientIPKey{}, ip)
		if r.Header.Get("Upgrade") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		slot := &limitedSlot{}
		ctx = context.WithValue(ctx, limitedKey{}, slot)
		next.ServeHTTP(&limitedWriter{ResponseWriter: w, slot: slot}, r.WithContext(ctx))
	})
}

// limitedWriter changes the status of a refused mutation's answer.
type limitedWriter struct {
	http.ResponseWriter
	slot  *limitedSlot
	wrote bool
}

func (w *limitedWriter) WriteHeader(status int) {
	if !w.wrote {
		w.wrote = true
		if refused, secs := w.slot.get(); refused != 0 {
			status = refused
			if secs > 0 {
				w.Header().Set("Retry-After", fmt.Sprint(secs))
			}
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *limitedWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines, flushing).
func (w *limitedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
