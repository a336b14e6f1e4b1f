package app

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"interlock/approvals"
	"interlock/httpguard"
	"interlock/observe"
	"interlock/receipt"
	"interlock/runs"
)

// A setting is one of the server's settings: its flag, the environment variable that sets it
// when the flag is not given (INTERLOCK_ and the flag's name in capitals), its default as it
// would be written on the command line, what it means, and how its text becomes a field of
// Config. The flags, the variables, `interlock help` and the test that holds
// docs/configuration.md to the code are all made from the table below, so a setting is written
// once (the meaning of each field is documented on Config).
type setting struct {
	name, def, usage string
	// set parses a value into cfg; its error says what was wanted, and is shown after the flag's
	// and the variable's names.
	set func(cfg *Config, value string) error
}

// env is the environment variable of the setting.
func (s setting) env() string {
	return "INTERLOCK_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
}

// settings is every setting, in the order `interlock help` lists them.
var settings = []setting{
	{"addr", ":8080", "listen address", asText(func(c *Config) *string { return &c.Addr })},
	{"config", "", "YAML file of agents, models and tools", asText(func(c *Config) *string { return &c.ConfigFile })},
	{"db", "sqlite:interlock.db", "database: sqlite:FILE or mysql://USER:PASS@HOST:PORT/DB", asText(func(c *Config) *string { return &c.DB })},
	{"max-per-page", strconv.Itoa(runs.DefaultMaxPerPage), "largest perPage of suspendedRuns", asPositive(func(c *Config) *int { return &c.MaxPerPage })},
	{"text-flush-bytes", strconv.Itoa(runs.DefaultTextFlushBytes), "store streamed text once this many bytes wait", asPositive(func(c *Config) *int { return &c.TextFlushBytes })},
	{"text-flush-interval", durationText(runs.DefaultTextFlushInterval), "store streamed text at most this often", asDuration(time.Millisecond, func(c *Config) *time.Duration { return &c.TextFlushInterval })},
	{"max-query-tokens", "10000", "most tokens in one query", asPositive(func(c *Config) *int { return &c.MaxQueryTokens })},
	{"max-subscriptions-per-connection", "100", "most operations active at once on one WebSocket", asPositive(func(c *Config) *int { return &c.MaxSubscriptionsPerConnection })},
	{"max-connections-per-principal", "32", "WebSockets, event streams and held waits (/approvals?wait=, hooks, /mcp calls) each principal (or client IP without authentication) may hold open at once (0: no limit)", asConnections(func(c *Config) *int { return &c.MaxConnectionsPerPrincipal })},
	{"ws-init-timeout", "10s", "close a WebSocket that sends no connection_init within this", asDuration(time.Millisecond, func(c *Config) *time.Duration { return &c.WSInitTimeout })},
	{"read-timeout", "30s", "bound on reading one request", asDuration(time.Millisecond, func(c *Config) *time.Duration { return &c.ReadTimeout })},
	{"write-timeout", "60s", "bound on answering one request (not subscriptions)", asDuration(time.Millisecond, func(c *Config) *time.Duration { return &c.WriteTimeout })},
	{"idle-timeout", "120s", "close keep-alive connections idle this long", asDuration(time.Millisecond, func(c *Config) *time.Duration { return &c.IdleTimeout })},
	{"demo-delay", "0s", "delay before each demo model answer", asDuration(0, func(c *Config) *time.Duration { return &c.ModelDelay })},
	{"lease-ttl", durationText(runs.DefaultLeaseTTL), "run lease duration", asDuration(time.Second, func(c *Config) *time.Duration { return &c.LeaseTTL })},
	{"shutdown-timeout", "10s", "graceful stop deadline", asDuration(0, func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
	{"retention", durationText(runs.DefaultRetention), "how long finished runs are kept", asDuration(time.Minute, func(c *Config) *time.Duration { return &c.Retention })},
	{"auth", "on", "authentication: on or off", setAuth},
	{"allowed-origins", "", "extra WebSocket origins, comma-separated", asList(func(c *Config) *[]string { return &c.AllowedOrigins }, nil)},
	{"max-query-depth", "15", "deepest field nesting of one operation", asPositive(func(c *Config) *int { return &c.MaxQueryDepth })},
	{"max-query-complexity", "15000", "highest complexity of one operation", asPositive(func(c *Config) *int { return &c.MaxQueryComplexity })},
	{"cors-origins", "", "origins allowed to call /graphql cross-origin, comma-separated", asList(func(c *Config) *[]string { return &c.CORSOrigins }, httpguard.CheckOrigin)},
	{"introspection", "true", "serve schema introspection", asBoolean(func(c *Config) *bool { return &c.Introspection })},
	{"mutation-rate", "20/s", "mutations (and POST /approvals, /mcp tool calls) each principal (or client IP) may make: N, N/s, N/m or N/h (0: no limit)", setMutationRate},
	{"mutation-burst", "100", "mutations each principal or client IP may send at once", asPositive(func(c *Config) *int { return &c.MutationBurst })},
	{"log-format", observe.LogAuto, "log format: auto, json or text", setLogFormat},
	{"log-level", "info", "least level logged: debug, info, warn or error", setLogLevel},
	{"metrics-addr", "", "serve /metrics on this address instead of the API's", asText(func(c *Config) *string { return &c.MetricsAddr })},
	{"heap-floor-mib", "64", "heap the garbage collector lets grow before collecting, in MiB (0: GOGC alone)", setHeapFloor},
	{"max-approval-wait", durationText(approvals.DefaultMaxWait), "longest wait of POST /approvals, GET /approvals/{runId} and the coding-agent hooks (a longer wait is capped)", asDuration(0, func(c *Config) *time.Duration { return &c.MaxApprovalWait })},
	{"receipt-issuer", "interlock", "iss of the signed receipts of approvals (services that verify receipts check it)", asText(func(c *Config) *string { return &c.ReceiptIssuer })},
	{"receipt-lifetime", durationText(receipt.DefaultLifetime), "how long after its decision a receipt expires", asDuration(time.Second, func(c *Config) *time.Duration { return &c.ReceiptLifetime })},
	{"receipt-key-rotation", durationText(receipt.DefaultRotation), "how long a stored receipt signing key signs before the next one takes over", asDuration(time.Minute, func(c *Config) *time.Duration { return &c.ReceiptKeyRotation })},
	{"receipt-signing-key", "", "Ed25519 private key (PEM, PKCS #8) that signs receipts, in place of the keys stored in the database", setReceiptKey},
	{"console-url", "", "the console's public base URL, for the url of /approvals' answers and webhooks' links (default: notifications.consoleURL, else the server's own address)", setConsoleURL},
	{"drain-delay", "0s", "keep serving this long with /readyz at 503 when stopping", asDuration(0, func(c *Config) *time.Duration { return &c.DrainDelay })},
}

// asText sets a string field as given.
func asText(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *field(c) = v; return nil }
}

// asPositive sets an int field of at least 1.
func asPositive(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", v)
		}
		*field(c) = n
		return nil
	}
}

// asConnections sets a number of connections, 0 meaning no limit.
func asConnections(field func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a number of connections (0: no limit)", v)
		}
		*field(c) = n
		return nil
	}
}

// asDuration sets a duration field of at least least.
func asDuration(least time.Duration, field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < least {
			return fmt.Errorf("%q is not a duration of at least %s (such as 30s or 2h)", v, least)
		}
		*field(c) = d
		return nil
	}
}

// asBoolean sets a bool field from true or false (or 1, 0, and the other forms strconv reads).
func asBoolean(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*field(c) = b
		return nil
	}
}

// asList sets a comma-separated list, blanks dropped, each item checked by check when given.
func asList(field func(*Config) *[]string, check func(string) error) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			if check != nil {
				if err := check(item); err != nil {
					return err
				}
			}
			out = append(out, item)
		}
		*field(c) = out
		return nil
	}
}

func setAuth(c *Config, v string) error {
	switch v {
	case "on":
		c.Auth = true
	case "off":
		c.Auth = false
	default:
		return fmt.Errorf("%q is neither on nor off", v)
	}
	return nil
}

func setMutationRate(c *Config, v string) (err error) {
	c.MutationRate, err = parseRate(v)
	return err
}

func setLogFormat(c *Config, v string) error {
	if err := observe.CheckLogFormat(v); err != nil {
		return err
	}
	c.LogFormat = v
	return nil
}

func setLogLevel(c *Config, v string) (err error) {
	c.LogLevel, err = observe.ParseLogLevel(v)
	return err
}

func setConsoleURL(c *Config, v string) error {
	if v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("%q is not the http(s) URL of the console, such as https://interlock.example.com", v)
		}
	}
	c.ConsoleURL = v
	return nil
}

func setHeapFloor(c *Config, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1<<20 {
		return fmt.Errorf("%q is not a number of MiB from 0 to 1048576", v)
	}
	c.HeapFloorMiB = n
	return nil
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

// durationText writes a default duration as a person would: 168h, not 168h0m0s.
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// setReceiptKey reads the receipt signing key given by the environment (receipt.ParseKey); an
// empty value keeps the keys stored in the database.
func setReceiptKey(c *Config, v string) error {
	if strings.TrimSpace(v) == "" {
		c.ReceiptSigningKey = nil
		return nil
	}
	k, err := receipt.ParseKey(v)
	if err != nil {
		return fmt.Errorf("not an Ed25519 private key in PEM (such as `openssl genpkey -algorithm ed25519` writes): %w", err)
	}
	c.ReceiptSigningKey = k
	return nil
}
