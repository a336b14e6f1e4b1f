package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/agnivade/levenshtein"

	"interlock/gcfloor"
	"interlock/gormstore"
	"interlock/observe"
)

// Exit codes of the interlock command.
const (
	exitFailure = 1 // the command ran and failed: a database that cannot be reached, an unhealthy server
	exitUsage   = 2 // the command line is wrong: an unknown command or flag, a bad value
	exitPending = 3 // `migrate status`: some migrations are not applied yet
)

// commands are the words that may come first on the command line; without one, the server runs.
var commands = []struct{ name, summary string }{
	{"migrate [up]", "apply the database migrations, then exit"},
	{"migrate status", "list each migration, applied or pending; exit 3 when some are pending"},
	{"healthcheck", "exit 0 if the server on --addr's port answers /healthz, 1 if not"},
	{"audit verify FILE", "check an audit export (NDJSON or CSV; - for stdin): OK, or the first bad line; exit 1 then"},
	{"version", "print the version and the Go version"},
	{"help", "print this help (also -h, --help)"},
}

// usageError is a mistake on the command line. main prints it, with the usage when showUsage
// is set, and exits 2.
type usageError struct {
	err       error
	showUsage bool
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// errPending is `migrate status`'s answer when migrations are pending (exit 3).
var errPending = errors.New("migrations are pending: run `interlock migrate up` (the server also applies them at start)")

// Main runs the interlock command with the process's arguments and returns its exit code.
// version is the build's version ("dev" when the build did not set one).
func Main(buildVersion string) int {
	if buildVersion != "" {
		version = buildVersion
	}
	return exitCode(runCommand(os.Args[1:], nil), os.Stderr)
}

// exitCode prints err, when there is one, and returns the process's exit code.
func exitCode(err error, stderr io.Writer) int {
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "interlock:", err)
		if usage.showUsage {
			fmt.Fprintln(stderr)
			printUsage(stderr)
		} else {
			fmt.Fprintln(stderr, "Run `interlock --help` for the commands and flags.")
		}
		return exitUsage
	case errors.Is(err, errPending):
		fmt.Fprintln(stderr, "interlock:", err)
		return exitPending
	default:
		fmt.Fprintln(stderr, "interlock:", err)
		return exitFailure
	}
}

// runCommand runs the command line args (without the program name): a command, then flags.
func runCommand(args []string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	command, args, err := splitCommand(args)
	if err != nil {
		return err
	}
	if command == "audit verify" {
		return auditVerify(args, os.Stdin, os.Stdout)
	}
	if command == "version" {
		if len(args) > 0 {
			return &usageError{err: fmt.Errorf("version takes no flags or arguments, got %q", args[0])}
		}
		printVersion(os.Stdout)
		return nil
	}
	cfg, err := ParseConfig(args, os.Getenv)
	if errors.Is(err, flag.ErrHelp) || command == "help" {
		printUsage(os.Stdout)
		return nil
	}
	if err != nil {
		var usage *usageError
		if !errors.As(err, &usage) {
			err = &usageError{err: err} // a bad value: the message names the flag and its variable
		}
		return err
	}
	if log == nil { // the process's own log, as configured
		log = observe.NewLogger(os.Stderr, cfg.LogFormat, cfg.LogLevel)
		slog.SetDefault(log)
	}
	switch command {
	case "migrate up":
		return migrateUp(ctx, cfg, log)
	case "migrate status":
		return migrateStatus(ctx, cfg, os.Stdout)
	case "healthcheck":
		return healthcheck(ctx, cfg.Addr, 3*time.Second)
	}
	return runServer(ctx, cfg, log)
}

// splitCommand takes the command off the front of args: "" (serve), "migrate up", "migrate
// status", "healthcheck", "version" or "help". An unknown first word is an error naming it.
func splitCommand(args []string) (command string, rest []string, err error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return "", args, nil
	}
	switch word := args[0]; word {
	case "healthcheck", "version", "help":
		return word, args[1:], nil
	case "audit":
		if len(args) < 2 || args[1] != "verify" {
			return "", nil, &usageError{err: errors.New("unknown audit command: want `audit verify FILE`"), showUsage: true}
		}
		return "audit verify", args[2:], nil
	case "migrate":
		// Plain `migrate` (with flags) is `migrate up`, as it always was.
		if len(args) == 1 || strings.HasPrefix(args[1], "-") {
			return "migrate up", args[1:], nil
		}
		switch sub := args[1]; sub {
		case "up", "status":
			return "migrate " + sub, args[2:], nil
		default:
			return "", nil, &usageError{err: fmt.Errorf("unknown migrate command %q: want `migrate up` or `migrate status`", sub), showUsage: true}
		}
	default:
		return "", nil, &usageError{err: fmt.Errorf("unknown command %q%s", word, suggest(word)), showUsage: true}
	}
}

// strayWord is the error for a word among or after the flags.
func strayWord(word string) error {
	if _, _, err := splitCommand([]string{word}); err == nil {
		return &usageError{err: fmt.Errorf("%q after the flags: the command comes first (interlock %s --db …)", word, word)}
	}
	return &usageError{err: fmt.Errorf("unexpected argument %q: the server takes only flags (--name value); commands come first", word), showUsage: true}
}

// suggest returns ` (did you mean "migrate"?)` for a word one or two edits from a command.
func suggest(word string) string {
	best, bestDist := "", 3
	for _, c := range []string{"migrate", "healthcheck", "version", "help", "audit"} {
		if d := levenshtein.ComputeDistance(word, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// printUsage writes the commands and every flag with its variable and built-in default.
func printUsage(w io.Writer) {
	fmt.Fprint(w, "Interlock: a GraphQL server that runs AI agents and holds their risky tool calls for a person.\n\n")
	fmt.Fprint(w, "Usage:\n  interlock [flags]                  serve the API, the console and Playground\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  interlock %-24s %s\n", c.name+flagsSuffix(c.name), c.summary)
	}
	fmt.Fprint(w, "\nFlags (each may be set by its environment variable instead; the flag wins):\n")
	s, _ := defineFlags(func(string) string { return "" })
	s.fs.VisitAll(func(f *flag.Flag) {
		def := ""
		if f.DefValue != "" {
			def = fmt.Sprintf(", default %q", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s\n        %s [%s%s]\n", f.Name, f.Usage, s.env[f.Name], def)
	})
	fmt.Fprint(w, "\nExit codes: 0 success, 1 failure, 2 a wrong command line, 3 migrations pending (migrate status).\n")
	fmt.Fprint(w, "Every setting, environment variable and config-file key: docs/configuration.md.\n")
}

// flagsSuffix is " [flags]" for the commands that take flags.
func flagsSuffix(command string) string {
	if command == "version" || command == "help" || strings.HasPrefix(command, "audit") {
		return ""
	}
	return " [flags]"
}

// printVersion writes the version set at build time (-ldflags "-X main.version=…"), the VCS
// revision when the build recorded one, and the Go version and platform.
func printVersion(w io.Writer) {
	rev := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	fmt.Fprintf(w, "interlock %s%s (%s %s/%s)\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// migrateUp applies the migrations and nothing else: no run service, so no recovery or
// retention touches the runs.
func migrateUp(ctx context.Context, cfg Config, log *slog.Logger) error {
	db, err := openDatabase(ctx, cfg)
	if err != nil {
		return err
	}
	closeDB(db)
	log.Info("migrations applied")
	return nil
}

// migrateStatus prints each migration with applied or pending, and returns errPending when
// some are pending. It only reads the database.
func migrateStatus(ctx context.Context, cfg Config, w io.Writer) error {
	db, err := gormstore.Open(ctx, cfg.DB)
	if err != nil {
		return fmt.Errorf("--db / INTERLOCK_DB: %w", err)
	}
	defer closeDB(db)
	list, err := gormstore.MigrationStatus(ctx, db)
	if err != nil {
		return fmt.Errorf("--db / INTERLOCK_DB: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tNAME\tSTATUS")
	pending, unknown := 0, 0
	for _, m := range list {
		status := "pending"
		switch {
		case !m.Known:
			status = "applied " + m.AppliedAt.Format(time.RFC3339) + " (not in this binary: a newer version applied it)"
			unknown++
		case !m.Pending():
			status = "applied " + m.AppliedAt.Format(time.RFC3339)
		default:
			pending++
		}
		fmt.Fprintf(tw, "%04d\t%s\t%s\n", m.Version, m.Name, status)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d applied, %d pending\n", len(list)-pending, pending)
	if unknown > 0 {
		fmt.Fprintf(w, "The database has %d migration(s) this binary does not know: it may be older than the schema.\n", unknown)
	}
	if pending > 0 {
		return errPending
	}
	return nil
}

// healthcheck asks the server on addr's port for /healthz, for the Docker HEALTHCHECK (the
// distroless image has no shell and no curl). A wildcard address (":8080", "0.0.0.0:8080")
// is asked on 127.0.0.1; a specific host on that host, since the server listens only there.
func healthcheck(ctx context.Context, addr string, timeout time.Duration) error {
	url, err := healthURL(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s: %s", url, resp.Status)
	}
	return nil
}

// healthURL is the /healthz URL of a server listening on addr.
func healthURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", &usageError{err: fmt.Errorf("--addr / INTERLOCK_ADDR: %q is not host:port or :port", addr)}
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

// runServer runs the server until SIGTERM or SIGINT.
func runServer(ctx context.Context, cfg Config, log *slog.Logger) error {
	// The collector's percent is the process's: set here, where the process serves, not in
	// NewApp, which tests run many of in one process.
	defer gcfloor.Start(uint64(cfg.HeapFloorMiB) << 20)()
	app, err := NewApp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer app.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("--addr / INTERLOCK_ADDR: %w", err)
	}
	log.Info("interlock listening", "addr", ln.Addr().String(), "graphql", "/graphql", "playground", "/playground", "console", "/", "version", version)
	if app.AdminToken != "" {
		// Printed once, not logged: the way in for whoever started the server.
		fmt.Fprintf(os.Stderr, "\nNo auth section in the config: this start made an admin token. Open the console with it:\n\n    %s/#token=%s\n\nSend it as \"Authorization: Bearer <token>\" from other clients. It changes at every start;\nconfigure auth.tokens in --config for lasting tokens and for several instances.\n\n", consoleURL(ln.Addr()), app.AdminToken)
	}
	if err := app.Serve(ctx, ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
