// Package app is the Interlock server as a program: its configuration, the wiring of the
// packages into one server, the HTTP routes, and the command line (cli.go). The command at the
// module's root only calls Main. This file is configuration, wiring and routes; nothing else.
package app

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/approvals"
	"interlock/auth"
	"interlock/config"
	"interlock/gormstore"
	"interlock/gqlguard"
	"interlock/gqlhttp"
	"interlock/graph"
	"interlock/health"
	"interlock/httpguard"
	"interlock/llm"
	"interlock/mcpgate"
	"interlock/notify"
	"interlock/observe"
	"interlock/playground"
	"interlock/receipt"
	"interlock/runs"
	"interlock/runtype"
	"interlock/slackapp"
	"interlock/tracing"
)

// version is the server's version, told to MCP servers and printed by `interlock version`: the
// command's main.version, set at build time with -ldflags "-X main.version=…" (the Dockerfile's
// VERSION build argument) and handed to Main.
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
	// MaxConnectionsPerPrincipal is how many WebSockets, event streams (SSE) and held waits
	// (long-polls of /approvals with a wait, held coding-agent hooks) each principal (or client
	// address, with authentication off) may hold open at once: the next WebSocket is closed with
	// 4429 right after its connection_init, the next stream or wait refused with 429
	// (--max-connections-per-principal, INTERLOCK_MAX_CONNECTIONS_PER_PRINCIPAL; 0: no limit).
	// Default 32: the console holds one socket per tab, each carrying up to
	// MaxSubscriptionsPerConnection subscriptions, so 32 is a person's tabs and devices with
	// room to spare, and bounds one principal to 3,200 subscriptions instead of any number.
	MaxConnectionsPerPrincipal int
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
	// INTERLOCK_MAX_QUERY_COMPLEXITY). Default 15000: the console's inbox page of 500 runs, with the
	// follow-up markers and the request's context, costs about 10000.
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
	// MaxApprovalWait is the longest wait of POST /approvals, GET /approvals/{runId} and the
	// coding-agent hooks (/hooks/…): a longer one is capped to it (--max-approval-wait,
	// INTERLOCK_MAX_APPROVAL_WAIT). Default 10m; 0 answers at once.
	MaxApprovalWait time.Duration
	// DrainDelay is how long a stopping server keeps serving with /readyz at 503 before it
	// stops accepting connections, for load balancers to notice (--drain-delay,
	// INTERLOCK_DRAIN_DELAY). Default 0s.
	DrainDelay time.Duration
	// ReceiptIssuer is the iss of every receipt (--receipt-issuer, INTERLOCK_RECEIPT_ISSUER).
	// Default "interlock"; give each deployment its own, so that a service trusting one
	// refuses another's receipts.
	ReceiptIssuer string
	// ReceiptLifetime is how long after its decision a receipt expires (--receipt-lifetime,
	// INTERLOCK_RECEIPT_LIFETIME). Default 15m.
	ReceiptLifetime time.Duration
	// ReceiptKeyRotation is how long a stored signing key signs before the next one takes
	// over (--receipt-key-rotation, INTERLOCK_RECEIPT_KEY_ROTATION). Default 720h (30 days).
	ReceiptKeyRotation time.Duration
	// ReceiptSigningKey, when set, is the one key that signs receipts, given by the
	// environment (--receipt-signing-key, INTERLOCK_RECEIPT_SIGNING_KEY: an Ed25519 private
	// key in PEM): nothing is stored, and rotating it is the operator's. Default: keys stored
	// in the database, made by the first instance that starts, rotated every
	// ReceiptKeyRotation (package receipt).
	ReceiptSigningKey ed25519.PrivateKey
	// ConsoleURL is the console's public base URL (https://interlock.example.com), for the url
	// of /approvals' answers and the links of webhooks (--console-url, INTERLOCK_CONSOLE_URL;
	// it wins over notifications.consoleURL). Default: notifications.consoleURL, else none:
	// /approvals' answers then link to the server's own address (the one each request's
	// connection arrived at), never to the Host header a request carries.
	ConsoleURL string
	// HeapFloorMiB is the heap goal the garbage collector keeps at least, in MiB, over GOGC's
	// own (--heap-floor-mib, INTERLOCK_HEAP_FLOOR_MIB; 0: GOGC alone). A server that keeps
	// little but allocates much per request then collects less often, which takes the
	// collector off the queries' latency (docs/performance.md). Default 64.
	HeapFloorMiB int
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
	// stopNotify stops the webhook dispatcher (nil: no notifications configured).
	stopNotify func()
	// slack is the slack-app webhook (slackapp_wiring.go), nil without one.
	slack *slackapp.App
	// mcp is the MCP gateway's handler (/mcp), nil without mcpGateway.
	mcp *mcpgate.Handler
	// consoleURL is the console's public base URL in links: --console-url, else
	// notifications.consoleURL ("" when neither is set).
	consoleURL string
	// tracing exports spans over OTLP; nil (off) unless an OTEL_EXPORTER_OTLP_*ENDPOINT is set.
	tracing *tracing.Tracing
	metrics *observe.Metrics
	health  *health.Checker
	// receipts signs the receipts of approvals and serves their keys (/.well-known/jwks.json).
	receipts *receipt.Signer
}

// openDatabase opens the database cfg.DB names and applies its migrations.
func openDatabase(ctx context.Context, cfg Config, opts ...gormstore.Option) (*gorm.DB, error) {
	db, err := gormstore.Open(ctx, cfg.DB, opts...)
	if err != nil {
		return nil, fmt.Errorf("--db / INTERLOCK_DB: %w", err)
	}
	if err := gormstore.Migrate(ctx, db); err != nil {
		closeDB(db)
		return nil, fmt.Errorf("--db / INTERLOCK_DB: %w", err)
	}
	return db, nil
}

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
	if a.tracing, err = tracing.Start(ctx, version); err != nil {
		return nil, err
	}
	if a.db, err = openDatabase(ctx, cfg, gormstore.DriverLog(log)); err != nil {
		return nil, err
	}
	if p := a.tracing.GORM(); p != nil {
		if err = a.db.Use(p); err != nil {
			return nil, err
		}
	}
	if err = a.authenticate(ctx, file); err != nil {
		return nil, err
	}
	if a.agents, err = loadAgents(ctx, cfg, file, log); err != nil {
		return nil, err
	}
	a.metrics = observe.NewMetrics(version)
	// The agents call their models and tools through tracing (when on), then metrics.
	registry, err := agent.NewRegistry(a.agents.List, a.tracing.Agents(), a.metrics.Agents())
	if err != nil {
		return nil, err
	}
	// The run service hands the store the webhooks' outbox rows of what it writes, in the
	// transactions of the events they announce (none without a notifications section); the
	// dispatcher delivers them.
	var webhooks []notify.Target
	if file != nil && file.Notifications != nil {
		webhooks = file.Notifications.Targets()
	}
	store := gormstore.New(a.db).TraceGroups(a.tracing.Groups())
	a.consoleURL = cfg.ConsoleURL
	if file != nil && file.Notifications != nil {
		if a.consoleURL == "" {
			a.consoleURL = file.Notifications.ConsoleURL
		}
		notifications := *file.Notifications
		notifications.ConsoleURL = a.consoleURL // one console URL for every link the server gives
		deliverers, err := a.slackApp(notifications, store)
		if err != nil {
			return nil, err
		}
		if a.stopNotify, err = notify.Start(store, notifications, notify.Options{Getenv: os.Getenv, Logger: log, Deliverers: deliverers}); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.ConfigFile, err)
		}
	}
	// Every instance signs with the keys the database holds (made by the first to start) or the
	// one the environment gives.
	if a.receipts, err = receipt.New(ctx, receipt.Config{Issuer: cfg.ReceiptIssuer, Lifetime: cfg.ReceiptLifetime,
		Rotation: cfg.ReceiptKeyRotation, Key: cfg.ReceiptSigningKey, Keys: store}); err != nil {
		return nil, err
	}
	a.Service, err = runs.New(a.metrics.Store(store), registry, runs.Config{
		MaxPerPage: cfg.MaxPerPage, LeaseTTL: cfg.LeaseTTL, Retention: cfg.Retention,
		TextFlushInterval: cfg.TextFlushInterval, TextFlushBytes: cfg.TextFlushBytes, Logger: log,
		SeparationOfDuties: a.authn != nil && file != nil && file.Auth != nil && file.Auth.SeparationOfDuties,
		Tracer:             a.tracing.Runs(),
		Metrics:            a.metrics,
		Receipts:           a.receipts,
		Webhooks:           webhooks,
		PrincipalOf:        a.principalOf(),
	})
	if err != nil {
		return nil, err
	}
	// The service runs until Serve's graceful stop or Close, not for as long as ctx, which only
	// bounds building the app.
	if err = a.Service.Start(context.Background()); err != nil {
		return nil, err
	}
	if a.slack != nil {
		a.slack.Decider = a.Service // presses decide as the console does
		a.slack.Start()             // Socket Mode, when configured
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
func loadAgents(ctx context.Context, cfg Config, f *config.File, log *slog.Logger) (*config.Agents, error) {
	demo := &llm.Demo{Delay: cfg.ModelDelay}
	if f == nil || (len(f.Agents) == 0 && f.MCPGateway == nil) {
		return &config.Agents{List: agent.DemoAgents(demo)}, nil
	}
	return config.Build(ctx, f, config.Options{Version: version, DemoModel: demo, Logger: log})
}

// maxBodyBytes is the largest request body /graphql reads (1 MiB): far more than any query or
// resumeData a person sends, and a bound on what one request makes the server hold.
const maxBodyBytes = 1 << 20

// decisionsPerToken is how many decisions of one decideToolCalls cost one token of the mutation
// rate: a batch of 200 costs 20 of the default burst of 100, so a person's "select all (200),
// approve" passes at once, and the batches a client can send still stay near the rate its
// single decisions would have.
const decisionsPerToken = 10

func (a *App) routes() http.Handler {
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: graph.NewResolver(a.Service)}))
	gql.Use(observe.Operations{Log: a.log, Metrics: a.metrics}) // first: it sees every answer
	conns := gqlguard.NewConnections(a.cfg.MaxConnectionsPerPrincipal, limitedSubject)
	a.ws = gqlguard.NewWebsocket(transport.Websocket{
		KeepAlivePingInterval: 10 * time.Second,
		PingPongInterval:      10 * time.Second,
		InitFunc:              a.authenticateSocket,
		Implementation: transport.CoderWebsocketImplementation{AcceptOptions: websocket.AcceptOptions{
			OriginPatterns: a.cfg.AllowedOrigins,
		}},
	}, gqlguard.WebsocketLimits{InitTimeout: a.cfg.WSInitTimeout, MaxOperations: a.cfg.MaxSubscriptionsPerConnection,
		Connections: conns})
	gql.AddTransport(a.ws)
	// Every other request: POST and GET as the GraphQL-over-HTTP spec has them, SSE as
	// graphql-sse has it (both modes), multipart/mixed for @defer.
	gql.AddTransport(gqlhttp.New(gqlhttp.Options{
		MaxOperations: a.cfg.MaxSubscriptionsPerConnection,
		StreamFunc:    conns.Stream,
		OwnerFunc:     streamOwner,
		ExpiresFunc:   credentialsExpire,
	}))
	// Every operation acts for a principal, and a subscription ends when its token expires.
	gql.Use(auth.Operations{})
	if ext := a.tracing.GraphQL(); ext != nil {
		gql.Use(ext) // first, so that the operation's span holds everything after it
	}
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
	// After validation, before execution; the rate last, so that a refused query costs no token
	// (nor a mutation sent by GET, which is refused first).
	gql.Use(gqlhttp.QueriesOverGET{})
	gql.Use(gqlguard.DepthLimit{Max: a.cfg.MaxQueryDepth})
	gql.Use(&gqlguard.ComplexityLimit{Max: a.cfg.MaxQueryComplexity, PageSizeArgs: []string{"perPage", "last"}, DefaultPageSize: 20,
		PageSizeDefaults: map[string]int{"last": a.cfg.MaxPerPage}})
	var rate *gqlguard.MutationRate // one bucket per client for GraphQL's mutations and POST /approvals
	if a.cfg.MutationRate > 0 {
		rate = gqlguard.NewMutationRate(a.cfg.MutationRate, a.cfg.MutationBurst, limitedSubject, 0).
			CountItems("decideToolCalls", "decisions", decisionsPerToken)
		gql.Use(rate)
	}
	// A plain request answered only with UNAVAILABLE is 503 with Retry-After (Middleware).
	gql.Use(gqlguard.Unavailable{})
	// A subscription whose stream breaks ends with the error, not a bare complete.
	gql.Use(graph.StreamErrors{})
	// One read of the claims in force answers every AgentRun.claims of a response.
	gql.Use(graph.ClaimsPerResponse{})
	// The one presenter: codes, plain messages, and the log of what clients are not shown.
	gql.SetErrorPresenter(graph.PresentError(a.log))
	gql.SetRecoverFunc(graph.Recover(a.log))

	var api http.Handler = gqlguard.Middleware(httpguard.SpareStreams(httpguard.Body(gql, maxBodyBytes)))
	if a.authn != nil {
		api = auth.Middleware(a.authn, api)
	} else {
		api = auth.Anonymous(api) // authentication off: everyone, unrestricted, recorded as nobody
	}
	mux := http.NewServeMux()
	// CORS outermost, so that preflights and refusals (401, 413, 429) carry its headers.
	mux.Handle("/graphql", a.tracing.HTTP(observe.HTTP(a.log, httpguard.CORS(api, a.cfg.CORSOrigins)), "graphql"))
	// Approvals over plain HTTP (approvals/): the same authentication, body limit, CORS and
	// mutation rate as /graphql, its errors in its own JSON; the coding-agent permission hooks
	// (approvals/hooks.go), guarded as /approvals, without CORS.
	requests, hooks := a.approvals(rate, conns)
	approvalsRoute := a.tracing.HTTP(observe.HTTP(a.log, httpguard.CORS(requests, a.cfg.CORSOrigins)), "approvals")
	mux.Handle("/approvals", approvalsRoute)
	mux.Handle("/approvals/", approvalsRoute)
	mux.Handle("/hooks/", a.tracing.HTTP(observe.HTTP(a.log, hooks), "hooks"))
	// The audit export of decisions (audit/, audit_wiring.go): the same authentication.
	mux.Handle("/audit", a.tracing.HTTP(observe.HTTP(a.log, a.auditExport()), "audit"))
	if gw := a.mcpGateway(rate, conns); gw != nil {
		mux.Handle("/mcp", a.tracing.HTTP(observe.HTTP(a.log, gw), "mcp"))
	}
	// GraphiQL with its files embedded (playground/): the page, and its files under /playground/.
	graphiql := httpguard.NoFraming(playground.Handler())
	mux.Handle("/playground", graphiql)
	mux.Handle("/playground/", graphiql)
	// The public keys of the receipts, for the services tools call: public, so unauthenticated.
	mux.Handle("/.well-known/jwks.json", a.tracing.HTTP(observe.HTTP(a.log, a.receipts), "jwks"))
	// Slack's button presses: authenticated by Slack's signature, not a bearer token.
	if a.slack != nil {
		mux.Handle("/slack/interactions", a.tracing.HTTP(observe.HTTP(a.log, a.slack), "slack"))
	}
	mux.HandleFunc("/healthz", a.health.Healthz)
	mux.HandleFunc("/readyz", a.health.Readyz)
	if a.cfg.MetricsAddr == "" {
		mux.Handle("/metrics", a.metrics.Handler())
	}
	mux.Handle("/console.json", a.consoleConfig()) // how the console signs in (console_wiring.go)
	mux.Handle("/", a.console())
	return mux
}

// approvals are the handlers of /approvals and of the coding-agent permission hooks
// (/hooks/claude-code/{agentId}, /hooks/codex/{agentId}), behind authentication as /graphql: the
// same bearer tokens (a requester's, typically), body limit, --max-approval-wait and mutation
// rate (rate, when not nil: each POST stores a request, each GET that waits holds one), and
// the connection slots of conns (--max-connections-per-principal): a request held while it
// waits counts as a WebSocket does. No CORS on the hooks: coding agents call them, not
// browsers.
func (a *App) approvals(rate *gqlguard.MutationRate, conns *gqlguard.Connections) (requests, hooks http.Handler) {
	o := approvals.Options{Service: a.Service, MaxWait: a.cfg.MaxApprovalWait, MaxBodyBytes: maxBodyBytes,
		SlotFunc: conns.Acquire, ConsoleURL: a.consoleURL, Logger: a.log}
	if rate != nil {
		o.RateFunc = func(ctx context.Context) time.Duration { return rate.Take(ctx, 1) }
	}
	guard := func(h http.Handler) http.Handler {
		if a.authn != nil {
			h = auth.Require(a.authn, h, approvals.Unauthorized)
		} else {
			h = auth.Anonymous(h)
		}
		return gqlguard.Middleware(h) // the client's address, for the rate without authentication
	}
	return guard(approvals.New(o)), guard(approvals.NewHooks(o))
}

// mcpGateway is the handler of /mcp (mcpgate) when the config has an mcpGateway, else nil:
// behind authentication as /approvals (the same tokens, answered 401 with their challenge),
// with the body limit, the mutation rate (rate: a token per call) and the connection slots of
// conns (a held call takes one, as /approvals' waits do); no CORS (MCP clients are not
// browsers), and no request deadline (a held call is a long request, as a hook's is).
func (a *App) mcpGateway(rate *gqlguard.MutationRate, conns *gqlguard.Connections) http.Handler {
	gw := a.agents.Gateway
	if gw == nil {
		return nil
	}
	o := mcpgate.Options{Service: a.Service, AgentID: gw.Agent.ID, Wait: gw.Wait, ProgressInterval: gw.ProgressInterval,
		ConsoleURL: a.consoleURL, Version: version, Logger: a.log, AuthOff: a.authn == nil, SlotFunc: conns.Acquire}
	if rate != nil {
		o.RateFunc = func(ctx context.Context) time.Duration { return rate.Take(ctx, 1) }
	}
	for _, t := range gw.Tools {
		o.Tools = append(o.Tools, mcpgate.Tool{Name: t.Name, Upstream: t.Upstream})
	}
	a.mcp = mcpgate.New(o)
	h := httpguard.Body(a.mcp, maxBodyBytes)
	if a.authn != nil {
		return auth.Require(a.authn, h, mcpgate.Unauthorized)
	}
	return auth.Anonymous(h)
}

// limitedSubject is who the per-client limits (mutation rate, connections) count a request
// against: the authenticated principal's subject, or "" for Anonymous (authentication off), which
// the limits take for the client's address.
func limitedSubject(ctx context.Context) string {
	if p := runtype.PrincipalFrom(ctx); p != nil && p.Authenticated() {
		return p.Subject
	}
	return ""
}

// streamOwner is who a single connection SSE stream belongs to: the principal's subject (empty
// for Anonymous, authentication off), so that one client's stream token is nothing to another.
func streamOwner(ctx context.Context) string {
	if p := runtype.PrincipalFrom(ctx); p != nil {
		return p.Subject
	}
	return ""
}

// credentialsExpire is when the principal of ctx stops being valid (zero: never): a single
// connection SSE stream ends then, as a WebSocket is closed.
func credentialsExpire(ctx context.Context) time.Time {
	if p := runtype.PrincipalFrom(ctx); p != nil {
		return p.Expires
	}
	return time.Time{}
}

// authenticateSocket authenticates a WebSocket by the "authorization" of its connection_init
// payload (browsers cannot set headers on a WebSocket), or by the Authorization header its
// upgrade carried; without either, or with credentials refused, it is closed with 4401. A socket
// lasts no longer than its token: it is closed with 4401 when the token expires, and the client
// must connect again with a fresh one.
func (a *App) authenticateSocket(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	if a.authn == nil {
		return ctx, nil, nil // the middleware made the request Anonymous's
	}
	p, err := a.authn.FromInitPayload(ctx, payload)
	var authErr *auth.Error
	if errors.As(err, &authErr) && authErr.Missing && runtype.PrincipalFrom(ctx) != nil {
		p, err = runtype.PrincipalFrom(ctx), nil // authenticated by the upgrade's header
	}
	if err != nil {
		ctx = transport.WithWebsocketCloseCode(ctx, gqlguard.CloseUnauthenticated)
		return transport.AppendCloseReason(ctx, "unauthenticated"), nil, err
	}
	if !p.Expires.IsZero() {
		gqlguard.CloseAt(ctx, p.Expires, gqlguard.CloseUnauthenticated, "token expired")
	}
	return runtype.WithPrincipal(ctx, p), nil, nil
}

// Handler is the HTTP handler of every route.
func (a *App) Handler() http.Handler { return a.handler }

// DB is the app's database handle, for tools and tests that look at what is stored.
func (a *App) DB() *gorm.DB { return a.db }

// ActiveOperations is the number of GraphQL operations in flight over WebSockets: a socket's
// subscriptions are counted until the socket is closed and the server has let them go.
func (a *App) ActiveOperations() int { return a.ws.Active() }

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
		WriteTimeout:      a.cfg.WriteTimeout, // lifted for subscriptions: SpareStreams, gqlhttp
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
	a.log.Info("shutting down", "timeout", a.cfg.ShutdownTimeout.String())
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
	// The MCP gateway's held calls were answered as they stand when the service stopped; let
	// those answers out before the connections are cut.
	if a.mcp != nil {
		if err := a.mcp.Wait(shutdownCtx); err != nil {
			a.log.Warn("closing connections before every held MCP call was answered", "err", err)
		}
	}
	cancelBase() // Shutdown does not close WebSockets; this ends them.
	return <-httpDone
}

// Close releases the database.
func (a *App) Close() {
	if a.stopNotify != nil {
		a.stopNotify()
	}
	if a.slack != nil {
		a.slack.Close() // Socket Mode, and presses being decided
	}
	if a.Service != nil {
		a.Service.Close()
	}
	if a.agents != nil {
		a.agents.Close()
	}
	if a.authn != nil {
		a.authn.Close()
	}
	if a.tracing != nil {
		// Last but the database: every span is over once the service has stopped.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.tracing.Shutdown(ctx); err != nil {
			a.log.Warn("tracing: spans not exported", "err", err)
		}
		cancel()
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

// principalOf is how the run service learns a grant creator's current roles (runs.Config.
// PrincipalOf): from the authenticator's static tokens; nil when authentication is off.
func (a *App) principalOf() func(string) *runtype.Principal {
	if a.authn == nil {
		return nil
	}
	return a.authn.PrincipalOf
}
