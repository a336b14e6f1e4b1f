package gqlguard

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"golang.org/x/time/rate"

	"interlock/gqlhttp"
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
// extensions.mutations (how many the request holds); answered as one JSON answer (gqlhttp), it
// is also 429 with a Retry-After header, whatever the media type: a refusal to retry later, not
// a request error. An operation holding more mutations than Burst could never pass: it is a
// request error, BAD_USER_INPUT telling the client to split it (200 as application/json, 400 as
// application/graphql-response+json), with no Retry-After, and costs nothing.
type MutationRate struct {
	rate    rate.Limit
	burst   int
	keyFunc func(context.Context) string
	now     func() time.Time
	// mutationType is the schema's mutation root type, whose fragments count; set by Validate.
	mutationType string

	// items holds the fields that cost a token per so many items of a list argument
	// (CountItems) rather than one; set before serving, read-only after.
	items map[string]itemCost

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

// itemCost is what a batch field costs: one token per perToken items of its list argument arg.
type itemCost struct {
	arg      string
	perToken int
}

// CountItems makes the mutation field named field cost one token per perToken items (rounded
// up) of its list argument arg, instead of one token: a batch of decisions (decideToolCalls)
// is one request that does many small things, and a person's "select all, approve" must pass
// where the same decisions sent one by one would run out of tokens. A batch costs at least one
// token and at most the burst (so it is never refused as too large to ever pass: its own size
// limit is its resolver's). Call it before serving; it returns m.
func (m *MutationRate) CountItems(field, arg string, perToken int) *MutationRate {
	if m.items == nil {
		m.items = map[string]itemCost{}
	}
	m.items[field] = itemCost{arg: arg, perToken: max(perToken, 1)}
	return m
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
	gqlhttp.SetStatus(ctx, http.StatusTooManyRequests, gqlhttp.RetryAfter(secs))
	return &gqlerror.Error{
		Message:    fmt.Sprintf("too many mutations: the request holds %s; retry in %d seconds", plural(n, "mutation"), secs),
		Extensions: map[string]any{"code": CodeRateLimited, "retryAfter": secs, "mutations": n},
	}
}

// Take takes n tokens (at most the burst) for the client of ctx, as a mutation of n fields
// would: it returns 0, or, when the client is over its rate, how long until it may try again
// (taking nothing). Routes that create work outside GraphQL (POST /approvals) count against
// the same bucket as the client's mutations.
func (m *MutationRate) Take(ctx context.Context, n int) time.Duration {
	return m.take(m.key(ctx), min(max(n, 1), m.burst))
}

// Mutations is how many tokens a mutation operation costs: its top-level fields as the
// executor runs them (fragments spread and @skip/@include applied; a field repeated under one
// response name runs once), __typename left out, and at least one; a field made to count its
// items (CountItems) costs a token per so many of them.
func (m *MutationRate) Mutations(opCtx *graphql.OperationContext) int {
	n := 0
	for _, f := range graphql.CollectFields(opCtx, opCtx.Operation.SelectionSet, []string{m.mutationType}) {
		if f.Name == "__typename" {
			continue
		}
		c, ok := m.items[f.Name]
		if !ok {
			n++
			continue
		}
		list, _ := f.ArgumentMap(opCtx.Variables)[c.arg].([]any)
		n += min(max((len(list)+c.perToken-1)/c.perToken, 1), m.burst)
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

// ClientIP is the client address Middleware recorded in ctx (the connection's remote address:
// X-Forwarded-For is not trusted, since any client can send it), or "" without Middleware.
func ClientIP(ctx context.Context) string {
	ip, _ := ctx.Value(clientIPKey{}).(string)
	return ip
}

// Middleware records each request's client IP address, which MutationRate and Connections
// count a request against when it has no principal.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			ip = r.RemoteAddr
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientIPKey{}, ip)))
	})
}
