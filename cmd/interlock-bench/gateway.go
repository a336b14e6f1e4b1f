package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/gormstore"
	"interlock/runtype"
)

// The MCP gateway's bench: what held calls cost the server. A call of a gated tool through /mcp
// is a run waiting for a person plus an HTTP request the server holds open until the decision
// (mcpgate); the gateway command holds --calls of them at once, over --sessions MCP sessions of
// the official Go SDK client, and reads what they cost the server process: memory after a
// garbage collection, and the statements it sends to the database and its CPU while they are
// held and nothing happens. Held calls wait on their runs' in-process hub, and one poll reads
// the progress of all followed runs, so the statements should not grow with the number of
// calls; the bench shows whether they do (with --progress, they do: docs/performance.md).

const (
	gatewayAgent = "mcp-gateway"
	gatedTool    = "orders__refund"
	// warmupOrder numbers the warm-up calls' orders, apart from the measured calls' 0…N-1.
	warmupOrder = 1_000_000
	warmupCalls = 10
)

// gatewayConfig is the measured server's config: the bench's upstream as the one re-exposed
// MCP server, its refund gated, held for up to wait; progressInterval when not zero (the
// server's default otherwise).
func gatewayConfig(upstreamURL string, wait, progress time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `mcpServers:
  - name: orders
    url: %s
    requireApproval: [refund]
mcpGateway:
  agentId: %s
  servers: [orders]
  wait: %s
`, upstreamURL, gatewayAgent, wait)
	if progress > 0 {
		fmt.Fprintf(&b, "  progressInterval: %s\n", progress)
	}
	return b.String()
}

// gatewayUpstream is the MCP server behind the gateway, in the bench's process: one tool,
// refund, which answers at once and counts the orders it was called for.
type gatewayUpstream struct {
	URL string
	srv *http.Server

	mu     sync.Mutex
	orders map[int]int
}

func startGatewayUpstream() (*gatewayUpstream, error) {
	u := &gatewayUpstream{orders: map[int]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	type refundIn struct {
		Order  int     `json:"order" jsonschema:"the order number"`
		Amount float64 `json:"amount" jsonschema:"the amount to refund"`
	}
	type refundOut struct {
		Order    int     `json:"order"`
		Refunded float64 `json:"refunded"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "refund", Description: "Refund an order"},
		func(_ context.Context, _ *mcp.CallToolRequest, in refundIn) (*mcp.CallToolResult, refundOut, error) {
			u.mu.Lock()
			u.orders[in.Order]++
			u.mu.Unlock()
			return nil, refundOut{Order: in.Order, Refunded: in.Amount}, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the upstream MCP server: %w", err)
	}
	u.URL = "http://" + ln.Addr().String() + "/mcp"
	u.srv = &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)}
	go u.srv.Serve(ln)
	return u, nil
}

// ran counts the calls of orders from..to-1 and how many of them ran more than once.
func (u *gatewayUpstream) ran(from, to int) (distinct, twice int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for o, n := range u.orders {
		if o >= from && o < to {
			distinct++
			if n > 1 {
				twice++
			}
		}
	}
	return distinct, twice
}

func (u *gatewayUpstream) Close() { u.srv.Close() }

// gatewayRun is a server with the gateway, and what the bench reads of it.
type gatewayRun struct {
	b       *bench
	srv     *server
	counter *sqlCounter // nil on SQLite
	gql     *gqlClient
	hc      *http.Client
	gc      gcTrace
}

// gateway measures held gateway calls; see the comment at the top of this file.
func (b *bench) gateway(ctx context.Context) (_ []pathResult, err error) {
	bin, err := b.binary()
	if err != nil {
		return nil, err
	}
	up, err := startGatewayUpstream()
	if err != nil {
		return nil, err
	}
	defer up.Close()
	cfg := filepath.Join(b.dir, "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(gatewayConfig(up.URL, b.o.Hold, b.o.ProgressInterval)), 0o644); err != nil {
		return nil, err
	}
	g := &gatewayRun{b: b, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	db := b.o.DB
	if b.db.Dialector.Name() == gormstore.DialectMySQL {
		u, err := parseMySQLAddr(db)
		if err != nil {
			return nil, err
		}
		if g.counter, err = startSQLCounter(u); err != nil {
			return nil, err
		}
		defer g.counter.Close()
		if db, err = g.counter.through(db); err != nil {
			return nil, err
		}
	}
	// gctrace: the server prints each collection's live heap, so that memory is read right
	// after one (the server has no endpoint that forces a collection).
	if g.srv, err = startServerEnv(ctx, bin, db, cfg, []string{"GODEBUG=gctrace=1"}); err != nil {
		return nil, err
	}
	defer g.srv.Stop()
	defer func() {
		if err != nil {
			fmt.Fprintf(b.log, "the server's log (collections left out):\n%s", withoutGC(g.srv.out.String()))
		}
	}()
	g.gql = newGQLClient(g.srv.URL)
	g.gc.srv = g.srv

	base, err := g.suspended(ctx)
	if err != nil {
		return nil, err
	}
	// Warm up: a few calls held and approved, so that what is made once (pools, caches, the
	// upstream session's buffers) is made before the first reading.
	fmt.Fprintf(b.log, "gateway: warming up (%d calls held and approved)…\n", warmupCalls)
	warm, err := g.connect(ctx, 1)
	if err != nil {
		return nil, err
	}
	if _, err := g.holdAndApprove(ctx, warm, warmupOrder, warmupCalls, base, nil); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	closeSessions(warm)
	// Each reading is of the connections in use only: the client's idle keep-alive ones
	// (each a goroutine and buffers on the server) are closed first.
	g.hc.CloseIdleConnections()

	fmt.Fprintln(b.log, "gateway: memory with no session (waiting for a garbage collection)…")
	m0, err := g.gc.after(ctx, time.Now().Add(2*time.Second))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.log, "gateway: opening %d sessions (%s)…\n", b.o.Sessions, b.o.MCPVersion)
	sessions, err := g.connect(ctx, b.o.Sessions)
	if err != nil {
		return nil, err
	}
	defer closeSessions(sessions)
	fmt.Fprintf(b.log, "gateway: %d sessions, no call: statements and CPU for %s…\n", len(sessions), b.o.Window)
	g.hc.CloseIdleConnections()
	w1, err := g.window(ctx, time.Now().Add(2*time.Second))
	if err != nil {
		return nil, err
	}
	m1, err := g.gc.after(ctx, time.Now())
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(b.log, "gateway: making %d gated calls…\n", b.o.Calls)
	var w2 idleWindow
	var m2 memSnap
	held, err := g.holdAndApprove(ctx, sessions, 0, b.o.Calls, base, func() error {
		fmt.Fprintf(b.log, "gateway: %d calls held: statements and CPU for %s…\n", b.o.Calls, b.o.Window)
		g.hc.CloseIdleConnections()
		if w2, err = g.window(ctx, time.Now().Add(2*time.Second)); err != nil {
			return err
		}
		fmt.Fprintln(b.log, "gateway: memory with the calls held (waiting for a garbage collection)…")
		m2, err = g.gc.after(ctx, time.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	distinct, twice := up.ran(0, b.o.Calls)
	if distinct != b.o.Calls || twice != 0 {
		return nil, fmt.Errorf("the upstream ran %d distinct calls of %d (%d more than once)", distinct, b.o.Calls, twice)
	}

	g.print(m0, m1, m2, w1, w2, len(sessions))
	n, s := float64(b.o.Calls), float64(len(sessions))
	note := fmt.Sprintf("%d calls over %d sessions (%s)%s, %s", b.o.Calls, len(sessions), b.o.MCPVersion, g.progressNote(), b.db.Dialector.Name())
	rs := []pathResult{
		{"server heap after GC, no session", mib(m0.HeapAlloc), "MiB", note},
		{"server heap after GC, sessions open", mib(m1.HeapAlloc), "MiB", note},
		{"server heap after GC, calls held", mib(m2.HeapAlloc), "MiB", note},
		{"server RSS, no session", mib(m0.RSS), "MiB", note},
		{"server RSS, sessions open", mib(m1.RSS), "MiB", note},
		{"server RSS, calls held", mib(m2.RSS), "MiB", note},
		{"held calls: heap + stacks, all of them", mib(m2.heapStacks() - m1.heapStacks()), "MiB", note},
		{"held calls: RSS, all of them", mib(m2.RSS - m1.RSS), "MiB", note},
		{"per held call: heap", float64(m2.HeapAlloc-m1.HeapAlloc) / n / 1024, "KiB", note},
		{"per held call: goroutine stacks", float64(m2.StackInuse-m1.StackInuse) / n / 1024, "KiB", note},
		{"per held call: goroutines", (m2.Goroutines - m1.Goroutines) / n, "goroutines", note},
		{"per session: heap + stacks", float64(m1.heapStacks()-m0.heapStacks()) / s / 1024, "KiB", note},
		{"per session: goroutines", (m1.Goroutines - m0.Goroutines) / s, "goroutines", note},
		{"server CPU, idle, sessions open", w1.ServerCPU * 1000, "ms/s", note},
		{"server CPU, idle, calls held", w2.ServerCPU * 1000, "ms/s", note},
		{"first call → all SUSPENDED", held.ramp.Seconds(), "s", note},
		{"first approval → all answered (16 clients approving)", held.approved.Seconds(), "s", note},
	}
	if g.counter != nil {
		rs = append(rs,
			pathResult{"statements/s, idle, sessions open", w1.perSecond(), "statements/s", note},
			pathResult{"statements/s, idle, calls held", w2.perSecond(), "statements/s", note})
	}
	return rs, nil
}

// withoutGC is a server's output without gctrace's lines.
func withoutGC(out string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if !gcLine.MatchString(l) {
			b.WriteString(l)
		}
	}
	return b.String()
}

func (g *gatewayRun) progressNote() string {
	made := ""
	if g.b.o.AtOnce > 0 {
		made = fmt.Sprintf(", made %d at a time", g.b.o.AtOnce)
	}
	if !g.b.o.Progress {
		return made
	}
	every := g.b.o.ProgressInterval
	if every == 0 {
		return made + ", progress tokens (the server's default interval)"
	}
	return made + fmt.Sprintf(", progress tokens every %s", every)
}

// parseMySQLAddr is the host:port of a mysql:// setting.
func parseMySQLAddr(setting string) (string, error) {
	rest, ok := strings.CutPrefix(setting, "mysql://")
	if !ok {
		return "", fmt.Errorf("--db %q is not a mysql:// URL", setting)
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	host, _, _ := strings.Cut(rest, "/")
	if !strings.Contains(host, ":") {
		host += ":3306"
	}
	return host, nil
}

// connect opens n MCP sessions (clients, for the sessionless protocol) to the gateway.
func (g *gatewayRun) connect(ctx context.Context, n int) ([]*mcp.ClientSession, error) {
	var out []*mcp.ClientSession
	for i := range n {
		c := mcp.NewClient(&mcp.Implementation{Name: "interlock-bench", Version: "1"}, nil)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cs, err := c.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: g.srv.URL + "/mcp", HTTPClient: g.hc, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: g.b.o.MCPVersion})
		cancel()
		if err != nil {
			closeSessions(out)
			return nil, fmt.Errorf("connect MCP session %d: %w", i, err)
		}
		out = append(out, cs)
	}
	return out, nil
}

func closeSessions(ss []*mcp.ClientSession) {
	for _, s := range ss {
		s.Close()
	}
}

// suspended is suspendedRuns' total for the gateway's agent.
func (g *gatewayRun) suspended(ctx context.Context) (int, error) {
	var out struct{ SuspendedRuns struct{ Total int } }
	err := g.gql.do(ctx, `query($a: ID!) { suspendedRuns(agentId: $a) { total } }`, map[string]any{"a": gatewayAgent}, &out)
	return out.SuspendedRuns.Total, err
}

// heldCalls is what holdAndApprove timed.
type heldCalls struct {
	// ramp is from the first call until all were SUSPENDED; approved, from the first approval
	// until every call was answered.
	ramp, approved time.Duration
}

// holdAndApprove makes n gated calls, of orders first…first+n-1 (distinct arguments: each its
// own request), spread over sessions, waits until the gateway's agent has n more suspended runs
// than base, calls whileHeld (when not nil), then approves every suspended run of the agent from
// 16 clients and waits until each call is answered with the upstream's result.
func (g *gatewayRun) holdAndApprove(ctx context.Context, sessions []*mcp.ClientSession, first, n, base int, whileHeld func() error) (heldCalls, error) {
	var h heldCalls
	cctx, cancel := context.WithCancel(ctx)
	errs := make([]error, n)
	var answered atomic.Int64
	var wg sync.WaitGroup
	// On the way out (an error among them), calls still held are given up first.
	defer func() { cancel(); wg.Wait() }()
	begin := time.Now()
	call := func(i int) {
		wg.Go(func() {
			defer answered.Add(1)
			p := &mcp.CallToolParams{Name: gatedTool, Arguments: map[string]any{"order": first + i, "amount": 1}}
			if g.b.o.Progress {
				p.SetProgressToken(fmt.Sprintf("bench-%d", first+i))
			}
			res, err := sessions[i%len(sessions)].CallTool(cctx, p)
			errs[i] = checkAnswer(first+i, res, err)
		})
	}
	// With --at-once k, k calls are made at a time, each k once the last k are suspended. It
	// worked around a MySQL deadlock of new requests made at once (a locking read of each one's
	// idempotency key locked the gap of agent_runs its run goes into), fixed since in
	// gormstore/claim.go. Held, the calls are the same however they were made.
	wave := n
	if k := g.b.o.AtOnce; k > 0 {
		wave = k
	}
	for from := 0; from < n; from += wave {
		to := min(from+wave, n)
		for i := from; i < to; i++ {
			call(i)
		}
		if err := g.waitSuspended(ctx, base+to, &answered, errs, cancel, &wg); err != nil {
			return h, err
		}
	}
	h.ramp = time.Since(begin)
	if whileHeld != nil {
		if err := whileHeld(); err != nil {
			return h, err
		}
	}
	if a := answered.Load(); a > 0 {
		cancel()
		wg.Wait()
		return h, fmt.Errorf("%d of %d calls were answered before any approval (is --hold long enough?): %w", a, n, errors.Join(errs...))
	}
	var ids []string
	if err := g.b.db.WithContext(ctx).Model(&gormstore.Run{}).Where("agent_id = ? AND status = ?", gatewayAgent, runtype.StatusSuspended).
		Pluck("id", &ids).Error; err != nil {
		return h, err
	}
	begin = time.Now()
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var approvers sync.WaitGroup
	for range 16 {
		approvers.Go(func() {
			for i := int(next.Add(1) - 1); i < len(ids) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if err := g.gql.do(ctx, approveMutation, map[string]any{"runId": ids[i]}, nil); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("approve %s: %w", ids[i], err) })
				}
			}
		})
	}
	approvers.Wait()
	if firstErr != nil {
		return h, firstErr
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return h, fmt.Errorf("%d of %d calls unanswered 5 minutes after their approval", int64(n)-answered.Load(), n)
	}
	h.approved = time.Since(begin)
	return h, errors.Join(errs...)
}

// waitSuspended waits until the gateway's agent has want suspended runs; when a call is
// answered meanwhile (refused), it cancels the calls and returns their errors.
func (g *gatewayRun) waitSuspended(ctx context.Context, want int, answered *atomic.Int64, errs []error, cancel func(), wg *sync.WaitGroup) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		got, err := g.suspended(ctx)
		if err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if a := answered.Load(); a > 0 {
			cancel()
			wg.Wait()
			return fmt.Errorf("%d calls were answered before any approval: %w", a, errors.Join(errs...))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d runs suspended after 10 minutes", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkAnswer checks that the call of order was answered with the upstream's result.
func checkAnswer(order int, res *mcp.CallToolResult, err error) error {
	if err != nil {
		return fmt.Errorf("call of order %d: %w", order, err)
	}
	meta, _ := res.Meta["io.interlock/approval"].(map[string]any)
	if res.IsError || meta["status"] != "APPROVED" {
		var text strings.Builder
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				text.WriteString(t.Text)
			}
		}
		return fmt.Errorf("call of order %d answered %v (error %t): %s", order, meta, res.IsError, text.String())
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if o, _ := sc["order"].(float64); int(o) != order {
		return fmt.Errorf("call of order %d got the result %v", order, res.StructuredContent)
	}
	return nil
}

// idleWindow is what the server did during a window in which the bench sent it nothing.
type idleWindow struct {
	Took                time.Duration
	Stmts               countDelta
	ServerCPU, DBCPU    float64 // seconds of CPU per second of the window
	DBCPUKnown, Counted bool
}

func (w idleWindow) perSecond() float64 { return float64(w.Stmts.Statements) / w.Took.Seconds() }

// window waits until start, then, for --window, sends the server nothing and counts its
// statements (MySQL), its CPU and the database server's (when it runs on this machine).
func (g *gatewayRun) window(ctx context.Context, start time.Time) (idleWindow, error) {
	var w idleWindow
	select {
	case <-time.After(time.Until(start)):
	case <-ctx.Done():
		return w, ctx.Err()
	}
	cpu0, err := procCPU(g.srv.cmd.Process.Pid)
	if err != nil {
		return w, err
	}
	dbPid := databasePid()
	db0, dbErr := procCPU(dbPid)
	var c0 map[string]int64
	if g.counter != nil {
		c0 = g.counter.snapshot()
	}
	t0 := time.Now()
	select {
	case <-time.After(g.b.o.Window):
	case <-ctx.Done():
		return w, ctx.Err()
	}
	cpu1, err := procCPU(g.srv.cmd.Process.Pid)
	if err != nil {
		return w, err
	}
	db1, dbErr1 := procCPU(dbPid)
	w.Took = time.Since(t0)
	if g.counter != nil {
		w.Stmts, w.Counted = diffCounts(c0, g.counter.snapshot()), true
	}
	w.ServerCPU = (cpu1 - cpu0) / w.Took.Seconds()
	if dbPid > 0 && dbErr == nil && dbErr1 == nil {
		w.DBCPU, w.DBCPUKnown = (db1-db0)/w.Took.Seconds(), true
	}
	return w, nil
}

// print writes the details: the readings, and what the statements of each window were.
func (g *gatewayRun) print(m0, m1, m2 memSnap, w1, w2 idleWindow, sessions int) {
	out := g.b.stdout
	fmt.Fprintf(out, "MCP gateway, held calls (%s, %d calls, %d sessions, %s%s)\n", g.b.db.Dialector.Name(), g.b.o.Calls, sessions, g.b.o.MCPVersion, g.progressNote())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "reading\tGC #\tlive heap (gctrace) MiB\theap alloc MiB\theap in use MiB\tstacks MiB\tgoroutines\tRSS MiB\t")
	for _, r := range []struct {
		name string
		m    memSnap
	}{{"no session", m0}, {fmt.Sprintf("%d sessions", sessions), m1}, {fmt.Sprintf("%d calls held", g.b.o.Calls), m2}} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.0f\t%.1f\t\n", r.name, r.m.GC, r.m.LiveMB, mib(r.m.HeapAlloc), mib(r.m.HeapInuse), mib(r.m.StackInuse), r.m.Goroutines, mib(r.m.RSS))
	}
	tw.Flush()
	for _, w := range []struct {
		name string
		w    idleWindow
	}{{"sessions only", w1}, {"calls held", w2}} {
		fmt.Fprintf(out, "idle window, %s: %.1fs, server CPU %.1f ms/s", w.name, w.w.Took.Seconds(), w.w.ServerCPU*1000)
		if w.w.DBCPUKnown {
			fmt.Fprintf(out, ", database CPU %.1f ms/s", w.w.DBCPU*1000)
		}
		if !w.w.Counted {
			fmt.Fprintf(out, "; %v\n", errNoCounter)
			continue
		}
		fmt.Fprintf(out, ", %d statements (%.1f/s) and %d transaction starts/ends:\n", w.w.Stmts.Statements, w.w.perSecond(), w.w.Stmts.TxControl)
		for _, k := range w.w.Stmts.Kinds {
			fmt.Fprintf(out, "    %8d  %6.1f/s  %s\n", k.N, float64(k.N)/w.w.Took.Seconds(), k.Kind)
		}
	}
	fmt.Fprintln(out)
}
