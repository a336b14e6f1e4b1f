package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/internal/proctest"
)

// cliResult is what one run of the real binary printed and how it exited.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the built binary with args and the extra environment variables env, and waits
// for it to exit. A command that should exit but starts a server instead fails the test
// when the deadline passes.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	bin := apptest.Binary(t) // built before the deadline starts: a build on a busy machine is no hang
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := proctest.CommandContext(ctx, t, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("interlock %s did not exit (a server started?)\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	}
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// TestCLIHelpListsEveryFlag: --help, -h and `help` print, on stdout, every command and every
// flag with its environment variable and built-in default, and exit 0 — even with the
// environment setting other values.
func TestCLIHelpListsEveryFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"migrate", "--help"}} {
		r := runCLI(t, []string{"INTERLOCK_ADDR=:9999"}, args...)
		if r.code != 0 {
			t.Errorf("interlock %v exited %d, want 0\n%s", args, r.code, r.stderr)
			continue
		}
		for _, c := range []string{"migrate [up]", "migrate status", "healthcheck", "version"} {
			if !strings.Contains(r.stdout, "interlock "+c) {
				t.Errorf("interlock %v does not show the command %q", args, c)
			}
		}
		for _, f := range app.FlagDocs() {
			want := fmt.Sprintf("  --%s\n        %s [%s", f.Name, f.Usage, f.Env)
			if f.Default != "" {
				want += fmt.Sprintf(", default %q]", f.Default)
			}
			if !strings.Contains(r.stdout, want) {
				t.Errorf("interlock %v lacks\n%s", args, want)
			}
		}
	}
}

// TestCLIRefusesWhatItDoesNotUnderstand: a mistyped command, an unknown flag, a stray word
// among or after the flags, or a bad value exits 2 naming the mistake, and never starts a
// server or touches the database.
func TestCLIRefusesWhatItDoesNotUnderstand(t *testing.T) {
	t.Parallel()
	dbFile := filepath.Join(t.TempDir(), "never.db")
	addr := fmt.Sprintf("127.0.0.1:%d", apptest.FreePort(t))
	for _, tc := range []struct {
		args      []string
		want      string
		showUsage bool
	}{
		{[]string{"migrat", "--db", "sqlite:" + dbFile}, `unknown command "migrat" (did you mean "migrate"?)`, true},
		{[]string{"serve", "--db", "sqlite:" + dbFile}, `unknown command "serve"`, true},
		{[]string{"--db", "sqlite:" + dbFile, "--bogus"}, "flag provided but not defined: -bogus", true},
		{[]string{"--db", "sqlite:" + dbFile, "--addr", addr, "stray"}, `unexpected argument "stray"`, true},
		{[]string{"--db", "sqlite:" + dbFile, "addr", addr}, `unexpected argument "addr"`, true},
		{[]string{"--db", "sqlite:" + dbFile, "migrate"}, `"migrate" after the flags: the command comes first`, false},
		{[]string{"migrate", "stauts", "--db", "sqlite:" + dbFile}, `unknown migrate command "stauts"`, true},
		{[]string{"migrate", "status", "extra", "--db", "sqlite:" + dbFile}, `unexpected argument "extra"`, true},
		{[]string{"--db", "sqlite:" + dbFile, "--max-per-page", "0"}, "--max-per-page / INTERLOCK_MAX_PER_PAGE", false},
		{[]string{"version", "--db", "x"}, "version takes no flags", false},
	} {
		r := runCLI(t, nil, append(tc.args, "--addr", addr)...)
		if r.code != 2 || !strings.Contains(r.stderr, "interlock: "+tc.want) {
			t.Errorf("interlock %v: exit %d, stderr:\n%s\nwant exit 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
		if got := strings.Contains(r.stderr, "\nFlags ("); got != tc.showUsage {
			t.Errorf("interlock %v: usage printed %v, want %v", tc.args, got, tc.showUsage)
		}
	}
	if _, err := os.Stat(dbFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused command line touched the database: %v", err)
	}
}

// TestCLIVersion prints the version main.version holds (dev without -ldflags) and Go's.
func TestCLIVersion(t *testing.T) {
	r := runCLI(t, nil, "version")
	want := regexp.MustCompile(`^interlock dev( [0-9a-f]{12})? \(` + regexp.QuoteMeta(runtime.Version()) + ` [a-z0-9]+/[a-z0-9]+\)\n$`)
	if r.code != 0 || !want.MatchString(r.stdout) {
		t.Fatalf("interlock version: exit %d, %q; want %s", r.code, r.stdout, want)
	}
}

// statusRow is one migration in `migrate status`: version, name, status.
var statusRow = regexp.MustCompile(`(?m)^(\d{4})  +(\w+) +(pending|applied \S+)$`)

// TestCLIMigrateStatusAndUp: on a new database status lists every migration pending and exits
// 3; `migrate up` applies them; then status lists them applied and exits 0. The database is
// named by INTERLOCK_DB, as in a container.
func TestCLIMigrateStatusAndUp(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, db string) {
		env := []string{"INTERLOCK_DB=" + db}
		r := runCLI(t, env, "migrate", "status")
		if r.code != 3 || !strings.Contains(r.stderr, "migrations are pending") {
			t.Fatalf("status of a new database: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
		}
		rows := statusRow.FindAllStringSubmatch(r.stdout, -1)
		if len(rows) < 7 || !strings.Contains(r.stdout, fmt.Sprintf("0 applied, %d pending", len(rows))) {
			t.Fatalf("status lists %d migrations:\n%s", len(rows), r.stdout)
		}
		for _, row := range rows {
			if row[3] != "pending" {
				t.Errorf("new database: %s", row[0])
			}
		}
		if r := runCLI(t, env, "migrate", "up"); r.code != 0 {
			t.Fatalf("migrate up: exit %d\n%s", r.code, r.stderr)
		}
		r = runCLI(t, env, "migrate", "status")
		if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("%d applied, 0 pending", len(rows))) {
			t.Fatalf("status after up: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, row := range statusRow.FindAllStringSubmatch(r.stdout, -1) {
			if !strings.HasPrefix(row[3], "applied 20") {
				t.Errorf("after up: %s", row[0])
			}
		}
	}
	t.Run("sqlite", func(t *testing.T) { check(t, "sqlite:"+filepath.Join(t.TempDir(), "status.db")) })
	t.Run("mysql", func(t *testing.T) { check(t, dbtest.MySQLURL(dbtest.MySQLDSN(t))) })
}

// TestCLIHealthcheck: `interlock healthcheck` exits 0 while a server answers /healthz on the
// port of INTERLOCK_ADDR (a wildcard address as in the image, or a specific one), and 1 when
// nothing listens there or /healthz answers an error.
func TestCLIHealthcheck(t *testing.T) {
	t.Parallel()
	p := apptest.StartProc(t, "sqlite:"+filepath.Join(t.TempDir(), "health.db"))
	port := strings.TrimPrefix(p.URL, "http://127.0.0.1")
	for _, env := range []string{"INTERLOCK_ADDR=" + port, "INTERLOCK_ADDR=0.0.0.0" + port, "INTERLOCK_ADDR=127.0.0.1" + port} {
		if r := runCLI(t, []string{env}, "healthcheck"); r.code != 0 {
			t.Errorf("healthcheck with %s: exit %d\n%s", env, r.code, r.stderr)
		}
	}
	if r := runCLI(t, nil, "healthcheck", "--addr", "127.0.0.1"+port); r.code != 0 {
		t.Errorf("healthcheck --addr: exit %d\n%s", r.code, r.stderr)
	}

	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			t.Errorf("healthcheck asked for %s", r.URL.Path)
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer sick.Close()
	r := runCLI(t, []string{"INTERLOCK_ADDR=" + strings.TrimPrefix(sick.URL, "http://")}, "healthcheck")
	if r.code != 1 || !strings.Contains(r.stderr, "503") {
		t.Errorf("healthcheck of a server answering 503: exit %d, %q", r.code, r.stderr)
	}
	r = runCLI(t, []string{fmt.Sprintf("INTERLOCK_ADDR=:%d", apptest.FreePort(t))}, "healthcheck")
	if r.code != 1 || !strings.Contains(r.stderr, "healthcheck:") {
		t.Errorf("healthcheck with nothing listening: exit %d, %q", r.code, r.stderr)
	}
	if r := runCLI(t, []string{"INTERLOCK_ADDR=nonsense"}, "healthcheck"); r.code != 2 || !strings.Contains(r.stderr, "INTERLOCK_ADDR") {
		t.Errorf("healthcheck with a bad address: exit %d, %q", r.code, r.stderr)
	}
}
