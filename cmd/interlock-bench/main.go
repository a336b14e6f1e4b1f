// Command interlock-bench is Interlock's load program: it seeds a database with a data set of
// runs (default a million: 100,000 suspended, over 1,000 threads, 100 resources, 5 agents and
// 30 days) through a bulk path that writes the rows the run service writes, then starts a real
// server on it and measures, over HTTP, the suspendedRuns queries that matter, each beside the
// time of the same SQL run straight on the database (the floor). Other subcommands measure the
// rest of the path: run creation, approve → first event, open subscriptions, decisions, memory
// and start time. docs/performance.md gives the method and the figures.
//
//	go run ./cmd/interlock-bench --db 'mysql://root@127.0.0.1:3306/interlock_bench' all
//	go run ./cmd/interlock-bench --runs 100000 --suspended 10000 query
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runBench(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "interlock-bench:", err)
		os.Exit(1)
	}
}

const usage = `usage: interlock-bench [flags] COMMAND...

Commands (run in the order given):
  seed     write the data set into --db (resumable: chunks already there are skipped)
  query    start a server on --db and measure the suspendedRuns shapes against their SQL
  all      seed, then query
  create   run creation rate: startRun of runs the demo model completes, for --duration
  approve  approve → first event on the same instance, over a WebSocket (--samples runs)
  subs     open --subs runEvents subscriptions over WebSockets and read the server's RSS
  decide   decisions per second: approve --decisions seeded suspended runs concurrently
  start    idle RSS and start-to-ready time of a server on --db (--samples starts)
  gateway  --calls gated MCP gateway calls held at once over --sessions sessions: the server's
           memory, statements (MySQL) and CPU while they wait; then they are approved

Flags:
`

// options are the command line.
type options struct {
	seedParams
	DB, Server, JSON              string
	Iterations, Samples, Subs     int
	Decisions, Concurrency, PerWS int
	DeepPage                      int
	Explain                       bool
	Duration                      time.Duration
	// The gateway command's.
	Calls, Sessions, AtOnce        int
	Progress                       bool
	Hold, Window, ProgressInterval time.Duration
	MCPVersion                     string
	commands                       []string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("interlock-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	o := &options{}
	end := fs.String("end", "2026-12-01T00:00:00Z", "creation time of the newest seeded run (RFC 3339); fixed, so that a seed can be resumed")
	fs.StringVar(&o.DB, "db", "sqlite:interlock-bench.db", "database: sqlite:FILE or mysql://USER:PASS@HOST:PORT/DB")
	fs.IntVar(&o.Runs, "runs", 1_000_000, "runs to seed")
	fs.IntVar(&o.Suspended, "suspended", 100_000, "of which suspended (waiting for approval)")
	fs.IntVar(&o.Threads, "threads", 1000, "memory threads the runs are spread over")
	fs.IntVar(&o.Resources, "resources", 100, "resources the threads belong to")
	fs.IntVar(&o.Agents, "agents", 5, "agents the runs are spread over")
	fs.IntVar(&o.Days, "days", 30, "days the runs' creation times are spread over")
	fs.IntVar(&o.Chunk, "chunk", 2000, "runs written per transaction")
	fs.StringVar(&o.Server, "server", "", "the interlock binary to measure (default: go build the repository's)")
	fs.IntVar(&o.Iterations, "iterations", 300, "measured iterations per query shape (after a tenth as many to warm up)")
	fs.IntVar(&o.DeepPage, "deep-page", 1000, "the deep page of the inbox that query measures (of 50 runs)")
	fs.BoolVar(&o.Explain, "explain", false, "print the EXPLAIN of each shape's statements")
	fs.StringVar(&o.JSON, "json", "", "also write the results as JSON to this file")
	fs.DurationVar(&o.Duration, "duration", 20*time.Second, "how long create keeps starting runs")
	fs.IntVar(&o.Concurrency, "concurrency", 16, "clients at once for create and decide")
	fs.IntVar(&o.Samples, "samples", 200, "approve: runs timed; start: server starts timed")
	fs.IntVar(&o.Subs, "subs", 10_000, "subscriptions subs opens")
	fs.IntVar(&o.PerWS, "subs-per-socket", 100, "subscriptions per WebSocket for subs (the server's default limit is 100)")
	fs.IntVar(&o.Decisions, "decisions", 2000, "seeded suspended runs decide approves")
	fs.IntVar(&o.Calls, "calls", 1000, "gateway: gated calls held at once")
	fs.IntVar(&o.Sessions, "sessions", 10, "gateway: MCP sessions (clients) the calls are spread over")
	fs.BoolVar(&o.Progress, "progress", false, "gateway: the calls ask for progress notifications (a progress token each)")
	fs.IntVar(&o.AtOnce, "at-once", 0, "gateway: make the calls this many at a time, each batch once the last is suspended (0: all at once)")
	fs.DurationVar(&o.ProgressInterval, "progress-interval", 0, "gateway: the gateway's progressInterval (0: the server's default)")
	fs.DurationVar(&o.Hold, "hold", 10*time.Minute, "gateway: the gateway's wait (how long a call is held before it is answered pending)")
	fs.DurationVar(&o.Window, "window", 30*time.Second, "gateway: how long statements and CPU are counted while nothing happens")
	fs.StringVar(&o.MCPVersion, "mcp-version", "2025-11-25", "gateway: the MCP protocol version the clients speak (2026-07-28: sessionless)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339Nano, *end)
	if err != nil {
		return nil, fmt.Errorf("--end: %q is not an RFC 3339 time", *end)
	}
	o.End = t.UTC()
	for _, c := range []struct {
		name string
		v    int
	}{{"--runs", o.Runs}, {"--threads", o.Threads}, {"--resources", o.Resources}, {"--agents", o.Agents}, {"--days", o.Days}, {"--chunk", o.Chunk},
		{"--iterations", o.Iterations}, {"--deep-page", o.DeepPage}, {"--samples", o.Samples}, {"--subs", o.Subs}, {"--subs-per-socket", o.PerWS}, {"--decisions", o.Decisions}, {"--concurrency", o.Concurrency},
		{"--calls", o.Calls}, {"--sessions", o.Sessions}} {
		if c.v < 1 {
			return nil, fmt.Errorf("%s must be at least 1, not %d", c.name, c.v)
		}
	}
	if o.Suspended < 0 || o.Suspended > o.Runs {
		return nil, fmt.Errorf("--suspended must be between 0 and --runs (%d), not %d", o.Runs, o.Suspended)
	}
	o.commands = fs.Args()
	if len(o.commands) == 0 {
		fs.Usage()
		return nil, errors.New("no command given")
	}
	for _, c := range o.commands {
		switch c {
		case "seed", "query", "all", "create", "approve", "subs", "decide", "start", "gateway":
		default:
			return nil, fmt.Errorf("unknown command %q (see --help)", c)
		}
	}
	return o, nil
}

// results is what --json writes: one field per command that ran.
type results struct {
	DB      string        `json:"db"`
	Runs    int           `json:"runs"`
	Queries []shapeResult `json:"queries,omitempty"`
	Path    []pathResult  `json:"path,omitempty"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	db, err := gormstore.Open(ctx, o.DB)
	if err != nil {
		return fmt.Errorf("--db: %w", err)
	}
	defer func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	}()
	if err := gormstore.Migrate(ctx, db); err != nil {
		return fmt.Errorf("--db: %w", err)
	}
	b := &bench{o: o, db: db, stdout: stdout, log: stderr}
	defer b.close()
	res := results{DB: o.DB, Runs: o.Runs}
	for _, c := range o.commands {
		switch c {
		case "seed":
			err = seed(ctx, db, o.seedParams, stderr)
		case "all":
			if err = seed(ctx, db, o.seedParams, stderr); err == nil {
				res.Queries, err = b.queries(ctx)
			}
		case "query":
			res.Queries, err = b.queries(ctx)
		default:
			var r []pathResult
			r, err = b.path(ctx, c)
			res.Path = append(res.Path, r...)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
	}
	if len(res.Path) > 0 {
		printPath(stdout, res.Path)
	}
	if o.JSON != "" {
		raw, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.JSON, append(raw, '\n'), 0o644); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	return nil
}

// bench holds what the commands share: the database, and the server binary and tool
// endpoint, made when first needed.
type bench struct {
	o      *options
	db     *gorm.DB
	stdout io.Writer
	log    io.Writer
	dir    string
	bin    string
	refund *refundServer
	cfg    string
}

// binary returns the server to measure (--server, or the repository's, built once into the
// bench's temporary directory).
func (b *bench) binary() (string, error) {
	if b.dir == "" {
		dir, err := os.MkdirTemp("", "interlock-bench-")
		if err != nil {
			return "", err
		}
		b.dir = dir
	}
	if b.bin == "" {
		b.bin = b.o.Server
		if b.bin == "" {
			fmt.Fprintln(b.log, "building the server…")
			bin, err := buildServer(b.dir)
			if err != nil {
				return "", err
			}
			b.bin = bin
		}
	}
	return b.bin, nil
}

// start starts a server on the bench database, building it and the tool endpoint first if
// needed.
func (b *bench) start(ctx context.Context, extra ...string) (*server, error) {
	if _, err := b.binary(); err != nil {
		return nil, err
	}
	if b.refund == nil {
		r, err := startRefundServer()
		if err != nil {
			return nil, err
		}
		b.refund = r
		b.cfg = filepath.Join(b.dir, "agents.yaml")
		if err := os.WriteFile(b.cfg, []byte(agentConfig(b.o.Agents, r.URL)), 0o644); err != nil {
			return nil, err
		}
	}
	return startServer(ctx, b.bin, b.o.DB, b.cfg, extra...)
}

func (b *bench) close() {
	if b.refund != nil {
		b.refund.Close()
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// queries measures the suspendedRuns shapes on a server over the seeded database.
func (b *bench) queries(ctx context.Context) ([]shapeResult, error) {
	srv, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	rs, err := measureQueries(ctx, b.db, srv, b.o.seedParams, b.o.DeepPage, b.o.Iterations, b.o.Explain, b.log)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(b.stdout, "suspendedRuns over HTTP against the same SQL (%s, %d runs, %d suspended, %d iterations each)\n", b.db.Dialector.Name(), b.o.Runs, b.o.Suspended, b.o.Iterations)
	printQueries(b.stdout, rs)
	if b.o.Explain {
		for _, r := range rs {
			fmt.Fprintf(b.stdout, "\n## %s\n%s", r.Shape, r.Explain)
		}
	}
	return rs, nil
}
