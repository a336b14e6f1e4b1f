// Command interlock is the Interlock server: a GraphQL API that runs AI agents and holds their
// risky tool calls for a person. This file is configuration, wiring and routes; nothing else.
package main

//go:generate go tool gqlgen generate

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/99designs/gqlgen/graphql/playground"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/auth"
	"interlock/config"
	"interlock/gormstore"
	"interlock/gqlguard"
	"interlock/graph"
	"interlock/health"
	"interlock/httpguard"
	"interlock/llm"
	"interlock/observe"
	"interlock/runs"
	"interlock/web"
)

// version is the server's version, told to MCP servers; set at build time with
// -ldflags "-X main.version=…".
var version = "dev"

// Config is the server's configuration. Each field can be set by a flag or an environment
// variable (the flag wins); the default is given with each.
type Config struct {
	// Addr is the listen address (--addr, INTERLOCK_ADDR). Default ":8080".
	Addr string
	// DB names the database (--db, INTERLOCK_DB): sqlite:FILE or mysql://USER:PASS@HOST:PORT/DB.
	// Default "sqlite:interlock.db".
	DB string
	// MaxPerPage is the largest perPage of suspendedRuns (--max-per-page, INTERLOCK_MAX_PER_PAGE).
	// Default 500.
	MaxPerPage int
	// AllowedOrigins are extra browser origins (host patterns) allowed to open WebSockets
	// (--allowed-origins, INTERLOCK_ALLOWED_ORIGINS, comma-separated). Default: same origin only.
	AllowedOrigins []string
	// LeaseTTL is how long a run's lease lasts unrenewed: after an instance dies, others recover
	// its runs this long after its last renewal (--lease-ttl, INTERLOCK_LEASE_TTL). Default 30s.
	LeaseTTL time.Duration
	// ShutdownTimeout bounds a graceful stop on SIGTERM/SIGINT (--shutdown-timeout,
	// INTERLOCK_SHUTDOWN_TIMEOUT). Default 10s.
	ShutdownTimeout time.Duration
	// Retention is how long finished runs and their events are kept (--retention,
	// INTERLOCK_RETENTION). Default 168h (7 days).
	Retention time.Duration
	// TextFlushInterval and TextFlushBytes batch streamed model text: it is stored (and sent to
	// followers) at most this often, or once this many bytes wait (--text-flush-interval,
	// INTERLOCK_TEXT_FLUSH_INTERVAL, default 50ms; --text-flush-bytes, INTERLOCK_TEXT_FLUSH_BYTES,
	// default 1024; 1 stores every piece as it comes).
	TextFlushInterval time.Duration
	TextFlushBytes    int
	// ConfigFile is the YAML file of agents, models and tools (--config, INTERLOCK_CONFIG; see
	// config/ and examples/interlock.yaml). Default: none, which serves the demo agent.
	ConfigFile string
	// MaxQueryTokens is the most lexical tokens a query may have; larger ones are refused before
	// validation (--max-query-tokens, INTERLOCK_MAX_QUERY_TOKENS). Default 10000 (a full
	// introspection query has about 200).
	MaxQueryTokens int
	// MaxSubscriptionsPerConnection is how many operations may be active at once on one
	// WebSocket; the next gets an error message (--max-subscriptions-per-connection,
	// INTERLOCK_MAX_SUBSCRIPTIONS_PER_CONNECTION). Default 100.
	MaxSubscriptionsPerConnection int
	// WSInitTimeout closes (4408) a WebSocket that sends no connection_init this long after it
	// opened (--ws-init-timeout, INTERLOCK_WS_INIT_TIMEOUT). Default 10s.
	WSInitTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (--read-timeout,
	// INTERLOCK_READ_TIMEOUT); WriteTimeout bounds answering it (--write-timeout,
	// INTERLOCK_WRITE_TIMEOUT); IdleTimeout closes a keep-alive connection idle this long
	// (--idle-timeout, INTERLOCK_IDLE_TIMEOUT). Defaults 30s, 60s, 120s. WebSocket and SSE
	// subscriptions are spared the first two: they last as long as they are wanted.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// Auth turns authentication on or off (--auth, INTERLOCK_AUTH: on or off). Default on: the
	// config file's auth section says who may do what, and without one the server makes a
	// random admin token at start and prints a console link carrying it. Off serves everyone
	// as an unrestricted principal, with a warning at start.
	Auth bool
	// ModelDelay slows every demo model answer, to watch runs step by step (--demo-delay,
	// INTERLOCK_DEMO_DELAY). Default 0.
	ModelDelay time.Duration
	// MaxQueryDepth is how deep an operation's fields may nest (--max-query-depth,
	// INTERLOCK_MAX_QUERY_DEPTH). Default 15 (introspection queries are 13–14 deep; the console's, 4).
	MaxQueryDepth int
	// MaxQueryComplexity bounds an operation's cost: each field 1 plus what it selects, times the
	// page size for fields with perPage or last, 20 when not given (--max-query-complexity,
	// INTERLOCK_MAX_QUERY_COMPLEXITY). Default 10000 (a console page of 500 runs costs about 8000).
	MaxQueryComplexity int
	// CORSOrigins are the exact origins (https://console.example.com) whose pages may call
	// /graphql cross-origin, without cookies (--cors-origins, INTERLOCK_CORS_ORIGINS,
	// comma-separated; "*" is refused). Default: none, no cross-origin calls.
	CORSOrigins []string
	// Introspection serves __schema and __type (--introspection, INTERLOCK_INTROSPECTION).
	// Default true.
	Introspection bool
	// MutationRate is how many mutations a second each principal (or client IP, without
	// authentication) may run, with bursts of MutationBurst (--mutation-rate,
	// INTERLOCK_MUTATION_RATE: a number, or N/s, N/m, N/h; --mutation-burst,
	// INTERLOCK_MUTATION_BURST). Defaults 20/s and 100 (a script deciding a batch of calls at
	// once, or every user behind one NAT address with authentication off); a rate of 0 turns the
	// limit off.
	MutationRate  float64
	MutationBurst int
	// LogFormat is how the log is written (--log-format, INTERLOCK_LOG_FORMAT): json, text, or
	// auto (text on a terminal, JSON otherwise). Default auto. LogLevel is the least level
	// logged (--log-level, INTERLOCK_LOG_LEVEL: debug, info, warn, error). Default info.
	LogFormat string
	LogLevel  slog.Level
	// MetricsAddr, when set, serves /metrics on this address only, off the API's port
	// (--metrics-addr, INTERLOCK_METRICS_ADDR). Default: /metrics on the API's port.
	MetricsAddr string
	// DrainDelay is how long a stopping server keeps serving with /readyz at 503 before it
	// stops accepting connections, for load balancers to notice (--drain-delay,
	// INTERLOCK_DRAIN_DELAY). Default 0s.
	DrainDelay time.Duration
}

func parseConfig(args []string, getenv func(string) string) (Config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("interlock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg Config
	var origins string
	fs.StringVar(&cfg.Addr, "addr", env("INTERLOCK_ADDR", ":8080"), "listen address")
	fs.StringVar(&cfg.ConfigFile, "config", env("INTERLOCK_CONFIG", ""), "YAML file of agents, models and tools")
	fs.StringVar(&cfg.DB, "db", env("INTERLOCK_DB", "sqlite:interlock.db"), "database: sqlite:FILE or mysql://USER:PASS@HOST:PORT/DB")
	perPage := fs.String("max-per-page", env("INTERLOCK_MAX_PER_PAGE", "500"), "largest perPage of suspendedRuns")
	flushBytes := fs.String("text-flush-bytes", env("INTERLOCK_TEXT_FLUSH_BYTES", "1024"), "store streamed text once this many bytes wait")
	flushEvery := fs.String("text-flush-interval", env("INTERLOCK_TEXT_FLUSH_INTERVAL", "50ms"), "store streamed text at most this often")
	maxTokens := fs.String("max-query-tokens", env("INTERLOCK_MAX_QUERY_TOKENS", "10000"), "most tokens in one query")
	maxSubs := fs.String("max-subscriptions-per-connection", env("INTERLOCK_MAX_SUBSCRIPTIONS_PER_CONNECTION", "100"), "most operations active at once on one WebSocket")
	wsInit := fs.String("ws-init-timeout", env("INTERLOCK_WS_INIT_TIMEOUT", "10s"), "close a WebSocket that sends no connection_init within this")
	readTimeout := fs.String("read-timeout", env("INTERLOCK_READ_TIMEOUT", "30s"), "bound on reading one request")
	writeTimeout := fs.String("write-timeout", env("INTERLOCK_WRITE_TIMEOUT", "60s"), "bound on answering one request (not subscriptions)")
	idleTimeout := fs.String("idle-timeout", env("INTERLOCK_IDLE_TIMEOUT", "120s"), "close keep-alive connections idle this long")
	delay := fs.String("demo-delay", env("INTERLOCK_DEMO_DELAY", "0s"), "delay before each demo model answer")
	lease := fs.String("lease-ttl", env("INTERLOCK_LEASE_TTL", "30s"), "run lease duration")
	shutdown := fs.String("shutdown-timeout", env("INTERLOCK_SHUTDOWN_TIMEOUT", "10s"), "graceful stop deadline")
	retention := fs.String("retention", env("INTERLOCK_RETENTION", "168h"), "how long finished runs are kept")
	authMode := fs.String("auth", env("INTERLOCK_AUTH", "on"), "authentication: on or off")
	fs.StringVar(&origins, "allowed-origins", env("INTERLOCK_ALLOWED_ORIGINS", ""), "extra WebSocket origins, comma-separated")
	maxDepth := fs.String("max-query-depth", env("INTERLOCK_MAX_QUERY_DEPTH", "15"), "deepest field nesting of one operation")
	maxComplexity := fs.String("max-query-complexity", env("INTERLOCK_MAX_QUERY_COMPLEXITY", "10000"), "highest complexity of one operation")
	corsOrigins := fs.String("cors-origins", env("INTERLOCK_CORS_ORIGINS", ""), "origins allowed to call /graphql cross-origin, comma-separated")
	introspect := fs.String("introspection", env("INTERLOCK_INTROSPECTION", "true"), "serve schema introspection")
	mutationRate := fs.String("mutation-rate", env("INTERLOCK_MUTATION_RATE", "20/s"), "mutations per second of each principal or client IP (0: no limit)")
	mutationBurst := fs.String("mutation-burst", env("INTERLOCK_MUTATION_BURST", "100"), "mutations each principal or client IP may send at once")
	fs.StringVar(&cfg.LogFormat, "log-format", env("INTERLOCK_LOG_FORMAT", observe.LogAuto), "log format: auto, json or text")
	logLevel := fs.String("log-level", env("INTERLOCK_LOG_LEVEL", "info"), "least level logged: debug, info, warn or error")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", env("INTERLOCK_METRICS_ADDR", ""), "serve /metrics on this address instead of the API's")
	drainDelay := fs.String("drain-delay", env("INTERLOCK_DRAIN_DELAY", "0s"), "keep serving this long with /readyz at 503 when stopping")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var err error
	if err := observe.CheckLogFormat(cfg.LogFormat); err != nil {
		return cfg, fmt.Errorf("--log-format / INTERLOCK_LOG_FORMAT: %w", err)
	}
	if cfg.LogLevel, err = observe.ParseLogLevel(*logLevel); err != nil {
		return cfg, fmt.Errorf("--log-level / INTERLOCK_LOG_LEVEL: %w", err)
	}
	switch *authMode {
	case "on":
		cfg.Auth = true
	case "off":
	default:
		return cfg, fmt.Errorf("--auth / INTERLOCK_AUTH: %q is neither on nor off", *authMode)
	}
	if cfg.MaxPerPage, err = strconv.Atoi(*perPage); err != nil || cfg.MaxPerPage < 1 {
		return cfg, fmt.Errorf("--max-per-page / INTERLOCK_MAX_PER_PAGE: %q is not a positive integer", *perPage)
	}
	if cfg.TextFlushBytes, err = strconv.Atoi(*flushBytes); err != nil || cfg.TextFlushBytes < 1 {
		return cfg, fmt.Errorf("--text-flush-bytes / INTERLOCK_TEXT_FLUSH_BYTES: %q is not a positive integer", *flushBytes)
	}
	if cfg.MaxQueryTokens, err = strconv.Atoi(*maxTokens); err != nil || cfg.MaxQueryTokens < 1 {
		return cfg, fmt.Errorf("--max-query-tokens / INTERLOCK_MAX_QUERY_TOKENS: %q is not a positive integer", *maxTokens)
	}
	if cfg.MaxSubscriptionsPerConnection, err = strconv.Atoi(*maxSubs); err != nil || cfg.MaxSubscriptionsPerConnection < 1 {
		return cfg, fmt.Errorf("--max-subscriptions-per-connection / INTERLOCK_MAX_SUBSCRIPTIONS_PER_CONNECTION: %q is not a positive integer", *maxSubs)
	}
	for _, n := range []struct {
		dst       *int
		val, name string
	}{
		{&cfg.MaxQueryDepth, *maxDepth, "--max-query-depth / INTERLOCK_MAX_QUERY_DEPTH"},
		{&cfg.MaxQueryComplexity, *maxComplexity, "--max-query-complexity / INTERLOCK_MAX_QUERY_COMPLEXITY"},
		{&cfg.MutationBurst, *mutationBurst, "--mutation-burst / INTERLOCK_MUTATION_BURST"},
	} {
		if *n.dst, err = strconv.Atoi(n.val); err != nil || *n.dst < 1 {
			return cfg, fmt.Errorf("%s: %q is not a positive integer", n.name, n.val)
		}
	}
	if cfg.Introspection, err = strconv.ParseBool(*introspect); err != nil {
		return cfg, fmt.Errorf("--introspection / INTERLOCK_INTROSPECTION: %q is not true or false", *introspect)
	}
	if cfg.MutationRate, err = parseRate(*mutationRate); err != nil {
		return cfg, fmt.Errorf("--mutation-rate / INTERLOCK_MUTATION_RATE: %w", err)
	}
	for _, o := range strings.Split(*corsOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			if err := httpguard.CheckOrigin(o); err != nil {
				return cfg, fmt.Errorf("--cors-origins / INTERLOCK_CORS_ORIGINS: %w", err)
			}
			cfg.CORSOrigins = append(cfg.CORSOrigins, o)
		}
	}
	for _, d := range []struct {
		dst       *time.Duration
		val, name string
		min       time.Duration
	}{
		{&cfg.ModelDelay, *delay, "--demo-delay / INTERLOCK_DEMO_DELAY", 0},
		{&cfg.LeaseTTL, *lease, "--lease-ttl / INTERLOCK_LEASE_TTL", time.Second},
		{&cfg.ShutdownTimeout, *shutdown, "--shutdown-timeout / INTERLOCK_SHUTDOWN_TIMEOUT", 0},
		{&cfg.Retention, *retention, "--retention / INTERLOCK_RETENTION", time.Minute},
		{&cfg.TextFlushInterval, *flushEvery, "--text-flush-interval / INTERLOCK_TEXT_FLUSH_INTERVAL", time.Millisecond},
		{&cfg.WSInitTimeout, *wsInit, "--ws-init-timeout / INTERLOCK_WS_INIT_TIMEOUT", time.Millisecond},
		{&cfg.ReadTimeout, *readTimeout, "--read-timeout / INTERLOCK_READ_TIMEOUT", time.Millisecond},
		{&cfg.WriteTimeout, *writeTimeout, "--write-timeout / INTERLOCK_WRITE_TIMEOUT", time.Millisecond},
		{&cfg.IdleTimeout, *idleTimeout, "--idle-timeout / INTERLOCK_IDLE_TIMEOUT", time.Millisecond},
		{&cfg.DrainDelay, *drainDelay, "--drain-delay / INTERLOCK_DRAIN_DELAY", 0},
	} {
		if *d.dst, err = time.ParseDuration(d.val); err != nil || *d.dst < d.min {
			return cfg, fmt.Errorf("%s: %q is not a duration of at least %s (such as 30s or 2h)", d.name, d.val, d.min)
		}
	}
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
		}
	}
	return cfg, nil
}

// parseRate reads a rate per second: "20", "20/s", "600/m" or "1000/h"; 0 is no limit.
func parseRate(v string) (float64, error) {
	num, unit, slash := strings.Cut(strings.TrimSpace(v), "/")
	if !slash {
		unit = "s"
	}
	per := map[string]float64{"s": 1, "m": 60, "h": 3600}[unit]
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || per == 0 || n < 0 || math.IsInf(n, 0) {
		return 0, fmt.Errorf("%q is not a rate such as 20/s, 600/m or 0 (no limit)", v)
	}
	return n / per, nil
}

// App is a running Interlock: database, run service and HTTP handler.
type App struct {
	cfg     Config
	log     *slog.Logger
	db      *gorm.DB
	agents  *config.Agents
	Service *runs.Service
	handler http.Handler
	ws      *gqlguard.Websocket // the WebSocket transport, which knows the operations in flight
	// authn authenticates every API request; nil when authentication is off.
	authn *auth.Authenticator
	// AdminToken is the admin token made at start when authentication is on and the config
	// file has no auth section; empty otherwise.
	AdminToken string
	metrics    *observe.Metrics
	health     *health.Checker
}

// openDatabase opens the database cfg.DB names and applies its migrations.
func openDatabase(ctx context.Context, cfg Config) (*gorm.DB, error) {
	db, err := gormstore.Open(ctx, cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("--db / INTERLOCK_DB: %w", err)
	}
	if err := gormstore.Migrate(ctx, db); err != nil {
		closeDB(db)
		return nil, fmt.Errorf("--db / INTERLOCK_DB: %w", err)
	}
	return db, nil
}

// newRunService starts the run service (and its recovery and retention loops). It is a
// variable so that a test can prove `interlock migrate` never starts one.
var newRunService = runs.New

// NewApp opens and migrates the database and wires the service and the routes.
func NewApp(ctx context.Context, cfg Config, log *slog.Logger) (app *App, err error) {
	a := &App{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	var file *config.File
	if cfg.ConfigFile != "" {
		if file, err = config.Load(cfg.ConfigFile); err != nil {
			return nil, err
		}
	}
	if a.db, err = openDatabase(ctx, cfg); err != nil {
		return nil, err
	}
	if err = a.authenticate(ctx, file); err != nil {
		return nil, err
	}
	if a.agents, err = loadAgents(ctx, cfg, file); err != nil {
		return nil, err
	}
	a.metrics = observe.NewMetrics(version)
	a.metrics.Agents(a.agents.List)
	registry, err := agent.NewRegistry(a.agents.List...)
	if err != nil {
		return nil, err
	}
	a.Service, err = newRunService(a.metrics.Store(gormstore.New(a.db)), registry, runs.Config{
		MaxPerPage: cfg.MaxPerPage, LeaseTTL: cfg.LeaseTTL, Retention: cfg.Retention,
		TextFlushInterval: cfg.TextFlushInterval, TextFlushBytes: cfg.TextFlushBytes, Logger: log,
		SeparationOfDuties: a.authn != nil && file != nil && file.Auth != nil && file.Auth.SeparationOfDuties,
		Metrics:            a.metrics,
	})
	if err != nil {
		return nil, err
	}
	if err = a.observe(); err != nil {
		return nil, err
	}
	a.handler = a.routes()
	return a, nil
}

// authenticate sets up authentication: off, the config file's auth section, or, without one,
// an admin token made now.
func (a *App) authenticate(ctx context.Context, file *config.File) error {
	switch {
	case !a.cfg.Auth:
		a.log.Warn("authentication is off (--auth=off / INTERLOCK_AUTH=off): anyone who reaches the server can see and decide every run")
	case file != nil && file.Auth != nil:
		authn, err := auth.New(ctx, file.Auth, auth.Options{Logger: a.log})
		if err != nil {
			return fmt.Errorf("%s: %w", a.cfg.ConfigFile, err)
		}
		a.authn = authn
	default:
		a.AdminToken, a.authn = auth.Generated()
	}
	return nil
}

// loadAgents builds the agents of the config file, or the demo agents when it has none (a file
// with only an auth section, say) or there is no file.
func loadAgents(ctx context.Context, cfg Config, f *config.File) (*config.Agents, error) {
	demo := &llm.Demo{Delay: cfg.ModelDelay}
	if f == nil || len(f.Agents) == 0 {
		return &config.Agents{List: agent.DemoAgents(demo)}, nil
	}
	return config.Build(ctx, f, config.Options{Version: version, DemoModel: demo})
}

// maxBodyBytes is the largest request body /graphql reads (1 MiB): far more than any query or
// resumeData a person sends, and a bound on what one request makes the server hold.
const maxBodyBytes = 1 << 20

func (a *App) routes() http.Handler {
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Runs: a.Service}}))
	gql.Use(observe.Operations{Log: a.log, Metrics: a.metrics}) // first: it sees every answer
	gql.AddTransport(transport.SSE{})
	a.ws = gqlguard.NewWebsocket(transport.Websocket{
		KeepAlivePingInterval: 10 * time.Second,
		PingPongInterval:      10 * time.Second,
		InitFunc:              a.authenticateSocket,
		Implementation: transport.CoderWebsocketImplementation{AcceptOptions: websocket.AcceptOptions{
			OriginPatterns: a.cfg.AllowedOrigins,
		}},
	}, gqlguard.WebsocketLimits{InitTimeout: a.cfg.WSInitTimeout, MaxOperations: a.cfg.MaxSubscriptionsPerConnection})
	gql.AddTransport(a.ws)
	gql.AddTransport(transport.Options{})
	gql.AddTransport(transport.GET{})
	gql.AddTransport(transport.POST{})
	queries := lru.New[*ast.QueryDocument](1000)
	gql.SetQueryCache(queries)
	if a.cfg.Introspection {
		gql.Use(extension.Introspection{})
	} else {
		gql.Use(gqlguard.NoIntrospection{})
	}
	gql.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})
	// After APQ, so that it checks the query a hash stands for; before gqlgen's validation.
	gql.Use(gqlguard.QueryLimit{MaxTokens: a.cfg.MaxQueryTokens, Cache: queries})
	// After validation, before execution; the rate last, so that a refused query costs no token.
	gql.Use(gqlguard.DepthLimit{Max: a.cfg.MaxQueryDepth})
	gql.Use(&gqlguard.ComplexityLimit{Max: a.cfg.MaxQueryComplexity, PageSizeArgs: []string{"perPage", "last"}, DefaultPageSize: 20,
		PageSizeDefaults: map[string]int{"last": a.cfg.MaxPerPage}})
	if a.cfg.MutationRate > 0 {
		gql.Use(gqlguard.NewMutationRate(a.cfg.MutationRate, a.cfg.MutationBurst, func(ctx context.Context) string {
			if p := runs.PrincipalFrom(ctx); p != nil {
				return "principal:" + p.Subject
			}
			return "" // no authentication: the client IP
		}, 0))
	}
	// The operation-aware error log takes over graph's own log of internal errors.
	gql.SetErrorPresenter(observe.PresentError(a.log, graph.PresentError(slog.New(slog.DiscardHandler))))
	gql.SetRecoverFunc(graph.Recover(a.log))

	var api http.Handler = gqlguard.Middleware(httpguard.SpareStreams(httpguard.Body(gql, maxBodyBytes)))
	if a.authn != nil {
		api = auth.Middleware(a.authn, api)
	}
	mux := http.NewServeMux()
	// CORS outermost, so that preflights and refusals (401, 413, 429) carry its headers.
	mux.Handle("/graphql", observe.HTTP(a.log, httpguard.CORS(api, a.cfg.CORSOrigins)))
	mux.Handle("/playground", httpguard.NoFraming(playground.Handler("Interlock", "/graphql")))
	mux.HandleFunc("/healthz", a.health.Healthz)
	mux.HandleFunc("/readyz", a.health.Readyz)
	if a.cfg.MetricsAddr == "" {
		mux.Handle("/metrics", a.metrics.Handler())
	}
	mux.Handle("/", httpguard.Console(web.Handler()))
	return mux
}

// closeUnauthenticated closes a WebSocket whose connection_init carries no valid credentials.
const closeUnauthenticated = 4401

// authenticateSocket authenticates a WebSocket by the "authorization" of its connection_init
// payload (browsers cannot set headers on a WebSocket), or by the Authorization header its
// upgrade carried; without either it is closed with 4401.
func (a *App) authenticateSocket(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	if a.authn == nil {
		return ctx, nil, nil
	}
	p, err := a.authn.FromInitPayload(ctx, payload)
	var authErr *auth.Error
	if errors.As(err, &authErr) && authErr.Missing && runs.PrincipalFrom(ctx) != nil {
		return ctx, nil, nil // authenticated by the upgrade's header
	}
	if err != nil {
		ctx = transport.WithWebsocketCloseCode(ctx, closeUnauthenticated)
		return transport.AppendCloseReason(ctx, "unauthenticated"), nil, err
	}
	if !p.Expires.IsZero() {
		// The socket lasts no longer than its token: it closes when the token expires, and the
		// client must reconnect with a fresh one.
		expiring, cancel := context.WithDeadline(ctx, p.Expires)
		context.AfterFunc(ctx, cancel)
		ctx = transport.AppendCloseReason(expiring, "the token expired")
	}
	return runs.WithPrincipal(ctx, p), nil, nil
}

// Handler is the HTTP handler of every route.
func (a *App) Handler() http.Handler { return a.handler }

// Serve answers HTTP on ln until ctx ends, then stops gracefully within ShutdownTimeout: it
// stops accepting connections, lets executing runs reach their next checkpoint and hands them
// over (leases released, so another instance continues them at once), completes open
// subscriptions, and closes the remaining sockets.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           a.handler,
		ReadHeaderTimeout: min(10*time.Second, a.cfg.ReadTimeout),
		ReadTimeout:       a.cfg.ReadTimeout,
		WriteTimeout:      a.cfg.WriteTimeout, // SpareStreams lifts both for subscriptions
		IdleTimeout:       a.cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	stopMetrics, err := a.serveMetrics()
	if err != nil {
		return err
	}
	defer stopMetrics()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.drain()
	a.log.Info("shutting down", "timeout", a.cfg.ShutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownTimeout)
	defer cancel()
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Shutdown(shutdownCtx) }()
	a.Service.Shutdown(shutdownCtx) // also completes every subscription
	// Each WebSocket operation ends with its complete message; wait until all are out before
	// closing the sockets, or a client sees a dropped connection instead of a finished stream.
	if err := a.ws.Wait(shutdownCtx); err != nil {
		a.log.Warn("closing websockets before every subscription completed", "err", err)
	}
	cancelBase() // Shutdown does not close WebSockets; this ends them.
	return <-httpDone
}

// Close releases the database.
func (a *App) Close() {
	if a.Service != nil {
		a.Service.Close()
	}
	if a.agents != nil {
		a.agents.Close()
	}
	if a.authn != nil {
		a.authn.Close()
	}
	if a.db != nil {
		closeDB(a.db)
	}
}

func closeDB(db *gorm.DB) {
	if sqlDB, err := db.DB(); err == nil {
		sqlDB.Close()
	}
}

// consoleURL is the console's address for a listener: localhost for a wildcard address.
func consoleURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func main() {
	if err := run(os.Args[1:], nil); err != nil {
		fmt.Fprintln(os.Stderr, "interlock:", err)
		os.Exit(1)
	}
}

func run(args []string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	migrateOnly := len(args) > 0 && args[0] == "migrate"
	if migrateOnly {
		args = args[1:]
	}
	cfg, err := parseConfig(args, os.Getenv)
	if err != nil {
		return err
	}
	if log == nil { // the process's own log, as configured
		log = observe.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel)
		slog.SetDefault(log)
	}
	if migrateOnly {
		// Only the schema: no run service, so no recovery or retention touches the runs.
		db, err := openDatabase(ctx, cfg)
		if err != nil {
			return err
		}
		closeDB(db)
		log.Info("migrations applied")
		return nil
	}
	app, err := NewApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer app.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("--addr / INTERLOCK_ADDR: %w", err)
	}
	log.Info("interlock listening", "addr", ln.Addr().String(), "graphql", "/graphql", "playground", "/playground", "console", "/")
	if app.AdminToken != "" {
		// Printed once, not logged: the way in for whoever started the server.
		fmt.Fprintf(os.Stderr, "\nNo auth section in the config: this start made an admin token. Open the console with it:\n\n    %s/#token=%s\n\nSend it as \"Authorization: Bearer <token>\" from other clients. It changes at every start;\nconfigure auth.tokens in --config for lasting tokens and for several instances.\n\n", consoleURL(ln.Addr()), app.AdminToken)
	}
	if err := app.Serve(ctx, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
