package app

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"interlock/httpguard"
	"interlock/observe"
)

// ParseConfig reads the server's settings from the command line's flags, each defaulting to
// its environment variable (read with getenv) and then to its built-in default. A word that is
// not a flag, among or after them, is an error: it is a mistyped command or a flag missing
// its dashes, and ignoring it would start a server the person did not ask for.
func ParseConfig(args []string, getenv func(string) string) (Config, error) {
	s, finish := defineFlags(getenv)
	if err := s.fs.Parse(args); err != nil {
		return Config{}, &usageError{err: err, showUsage: true}
	}
	if s.fs.NArg() > 0 {
		return Config{}, strayWord(s.fs.Arg(0))
	}
	return finish()
}

// flagSet is the command line's flags, each with the environment variable that sets it when
// the flag is not given. The help text and docs/configuration.md's test read them from here.
type flagSet struct {
	fs     *flag.FlagSet
	getenv func(string) string
	// env maps each flag's name to its environment variable.
	env map[string]string
}

// strVar defines a string flag whose default is the variable envName, or def without it.
func (s *flagSet) strVar(p *string, name, envName, def, usage string) {
	if v := s.getenv(envName); v != "" {
		def = v
	}
	s.env[name] = envName
	s.fs.StringVar(p, name, def, usage)
}

func (s *flagSet) str(name, envName, def, usage string) *string {
	p := new(string)
	s.strVar(p, name, envName, def, usage)
	return p
}

// defineFlags defines every flag of the server on a new FlagSet, with defaults read through
// getenv (a func returning "" gives the built-in ones). Once the FlagSet has parsed the
// command line, finish checks the values and returns the Config, or an error naming the flag
// and its variable.
func defineFlags(getenv func(string) string) (s *flagSet, finish func() (Config, error)) {
	s = &flagSet{fs: flag.NewFlagSet("interlock", flag.ContinueOnError), getenv: getenv, env: map[string]string{}}
	s.fs.SetOutput(io.Discard)
	var cfg Config
	var origins string
	s.strVar(&cfg.Addr, "addr", "INTERLOCK_ADDR", ":8080", "listen address")
	s.strVar(&cfg.ConfigFile, "config", "INTERLOCK_CONFIG", "", "YAML file of agents, models and tools")
	s.strVar(&cfg.DB, "db", "INTERLOCK_DB", "sqlite:interlock.db", "database: sqlite:FILE or mysql://USER:PASS@HOST:PORT/DB")
	perPage := s.str("max-per-page", "INTERLOCK_MAX_PER_PAGE", "500", "largest perPage of suspendedRuns")
	flushBytes := s.str("text-flush-bytes", "INTERLOCK_TEXT_FLUSH_BYTES", "1024", "store streamed text once this many bytes wait")
	flushEvery := s.str("text-flush-interval", "INTERLOCK_TEXT_FLUSH_INTERVAL", "50ms", "store streamed text at most this often")
	maxTokens := s.str("max-query-tokens", "INTERLOCK_MAX_QUERY_TOKENS", "10000", "most tokens in one query")
	maxSubs := s.str("max-subscriptions-per-connection", "INTERLOCK_MAX_SUBSCRIPTIONS_PER_CONNECTION", "100", "most operations active at once on one WebSocket")
	maxConns := s.str("max-connections-per-principal", "INTERLOCK_MAX_CONNECTIONS_PER_PRINCIPAL", "32", "WebSockets and event streams each principal (or client IP without authentication) may hold open at once (0: no limit)")
	wsInit := s.str("ws-init-timeout", "INTERLOCK_WS_INIT_TIMEOUT", "10s", "close a WebSocket that sends no connection_init within this")
	readTimeout := s.str("read-timeout", "INTERLOCK_READ_TIMEOUT", "30s", "bound on reading one request")
	writeTimeout := s.str("write-timeout", "INTERLOCK_WRITE_TIMEOUT", "60s", "bound on answering one request (not subscriptions)")
	idleTimeout := s.str("idle-timeout", "INTERLOCK_IDLE_TIMEOUT", "120s", "close keep-alive connections idle this long")
	delay := s.str("demo-delay", "INTERLOCK_DEMO_DELAY", "0s", "delay before each demo model answer")
	lease := s.str("lease-ttl", "INTERLOCK_LEASE_TTL", "30s", "run lease duration")
	shutdown := s.str("shutdown-timeout", "INTERLOCK_SHUTDOWN_TIMEOUT", "10s", "graceful stop deadline")
	retention := s.str("retention", "INTERLOCK_RETENTION", "168h", "how long finished runs are kept")
	authMode := s.str("auth", "INTERLOCK_AUTH", "on", "authentication: on or off")
	s.strVar(&origins, "allowed-origins", "INTERLOCK_ALLOWED_ORIGINS", "", "extra WebSocket origins, comma-separated")
	maxDepth := s.str("max-query-depth", "INTERLOCK_MAX_QUERY_DEPTH", "15", "deepest field nesting of one operation")
	maxComplexity := s.str("max-query-complexity", "INTERLOCK_MAX_QUERY_COMPLEXITY", "10000", "highest complexity of one operation")
	corsOrigins := s.str("cors-origins", "INTERLOCK_CORS_ORIGINS", "", "origins allowed to call /graphql cross-origin, comma-separated")
	introspect := s.str("introspection", "INTERLOCK_INTROSPECTION", "true", "serve schema introspection")
	mutationRate := s.str("mutation-rate", "INTERLOCK_MUTATION_RATE", "20/s", "mutations each principal (or client IP) may make: N, N/s, N/m or N/h (0: no limit)")
	mutationBurst := s.str("mutation-burst", "INTERLOCK_MUTATION_BURST", "100", "mutations each principal or client IP may send at once")
	s.strVar(&cfg.LogFormat, "log-format", "INTERLOCK_LOG_FORMAT", observe.LogAuto, "log format: auto, json or text")
	logLevel := s.str("log-level", "INTERLOCK_LOG_LEVEL", "info", "least level logged: debug, info, warn or error")
	s.strVar(&cfg.MetricsAddr, "metrics-addr", "INTERLOCK_METRICS_ADDR", "", "serve /metrics on this address instead of the API's")
	heapFloor := s.str("heap-floor-mib", "INTERLOCK_HEAP_FLOOR_MIB", "64", "heap the garbage collector lets grow before collecting, in MiB (0: GOGC alone)")
	drainDelay := s.str("drain-delay", "INTERLOCK_DRAIN_DELAY", "0s", "keep serving this long with /readyz at 503 when stopping")
	return s, func() (Config, error) {
		var err error
		if err := observe.CheckLogFormat(cfg.LogFormat); err != nil {
			return Config{}, fmt.Errorf("--log-format / INTERLOCK_LOG_FORMAT: %w", err)
		}
		if cfg.LogLevel, err = observe.ParseLogLevel(*logLevel); err != nil {
			return Config{}, fmt.Errorf("--log-level / INTERLOCK_LOG_LEVEL: %w", err)
		}
		switch *authMode {
		case "on":
			cfg.Auth = true
		case "off":
		default:
			return Config{}, fmt.Errorf("--auth / INTERLOCK_AUTH: %q is neither on nor off", *authMode)
		}
		if cfg.MaxPerPage, err = strconv.Atoi(*perPage); err != nil || cfg.MaxPerPage < 1 {
			return Config{}, fmt.Errorf("--max-per-page / INTERLOCK_MAX_PER_PAGE: %q is not a positive integer", *perPage)
		}
		if cfg.TextFlushBytes, err = strconv.Atoi(*flushBytes); err != nil || cfg.TextFlushBytes < 1 {
			return Config{}, fmt.Errorf("--text-flush-bytes / INTERLOCK_TEXT_FLUSH_BYTES: %q is not a positive integer", *flushBytes)
		}
		if cfg.MaxQueryTokens, err = strconv.Atoi(*maxTokens); err != nil || cfg.MaxQueryTokens < 1 {
			return Config{}, fmt.Errorf("--max-query-tokens / INTERLOCK_MAX_QUERY_TOKENS: %q is not a positive integer", *maxTokens)
		}
		if cfg.MaxSubscriptionsPerConnection, err = strconv.Atoi(*maxSubs); err != nil || cfg.MaxSubscriptionsPerConnection < 1 {
			return Config{}, fmt.Errorf("--max-subscriptions-per-connection / INTERLOCK_MAX_SUBSCRIPTIONS_PER_CONNECTION: %q is not a positive integer", *maxSubs)
		}
		if cfg.MaxConnectionsPerPrincipal, err = strconv.Atoi(*maxConns); err != nil || cfg.MaxConnectionsPerPrincipal < 0 {
			return Config{}, fmt.Errorf("--max-connections-per-principal / INTERLOCK_MAX_CONNECTIONS_PER_PRINCIPAL: %q is not a number of connections (0: no limit)", *maxConns)
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
				return Config{}, fmt.Errorf("%s: %q is not a positive integer", n.name, n.val)
			}
		}
		if cfg.HeapFloorMiB, err = strconv.Atoi(*heapFloor); err != nil || cfg.HeapFloorMiB < 0 || cfg.HeapFloorMiB > 1<<20 {
			return Config{}, fmt.Errorf("--heap-floor-mib / INTERLOCK_HEAP_FLOOR_MIB: %q is not a number of MiB from 0 to 1048576", *heapFloor)
		}
		if cfg.Introspection, err = strconv.ParseBool(*introspect); err != nil {
			return Config{}, fmt.Errorf("--introspection / INTERLOCK_INTROSPECTION: %q is not true or false", *introspect)
		}
		if cfg.MutationRate, err = parseRate(*mutationRate); err != nil {
			return Config{}, fmt.Errorf("--mutation-rate / INTERLOCK_MUTATION_RATE: %w", err)
		}
		for _, o := range strings.Split(*corsOrigins, ",") {
			if o = strings.TrimSpace(o); o != "" {
				if err := httpguard.CheckOrigin(o); err != nil {
					return Config{}, fmt.Errorf("--cors-origins / INTERLOCK_CORS_ORIGINS: %w", err)
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
				return Config{}, fmt.Errorf("%s: %q is not a duration of at least %s (such as 30s or 2h)", d.name, d.val, d.min)
			}
		}
		for _, o := range strings.Split(origins, ",") {
			if o = strings.TrimSpace(o); o != "" {
				cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
			}
		}
		return cfg, nil
	}
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
