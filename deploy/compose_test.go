package deploy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"interlock/config"
	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// There is no Docker engine where the tests run, so these tests read docker-compose.yml (anchors
// and merge keys resolved, ${VAR} interpolated as Compose does) and deploy/nginx.conf and hold
// them to what they promise: MySQL 8.4 with a volume and a healthcheck, two replicas that wait
// for it, one shared auth config, and a proxy in front of both.

// composeService is the part of a Compose service these tests read.
type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Configs []struct {
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	} `yaml:"configs"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Configs  map[string]struct {
		Content string `yaml:"content"`
		File    string `yaml:"file"`
	} `yaml:"configs"`
	Volumes map[string]any `yaml:"volumes"`
}

// composeVar is a Compose interpolation: ${NAME}, ${NAME:-default} or ${NAME:?error}.
var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:-|:\?)([^}]*))?\}`)

// interpolate does what Compose does to a value with the variables env: $$ is a dollar sign.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	s = strings.ReplaceAll(s, "$$", "\x00")
	s = composeVar.ReplaceAllStringFunc(s, func(m string) string {
		g := composeVar.FindStringSubmatch(m)
		if v := env[g[1]]; v != "" {
			return v
		}
		switch g[2] {
		case ":-":
			return g[3]
		case ":?":
			t.Fatalf("docker-compose.yml needs %s: %s", g[1], g[3])
		}
		return ""
	})
	return strings.ReplaceAll(s, "\x00", "$")
}

// loadCompose reads docker-compose.yml as Compose would with the variables env (as from .env).
func loadCompose(t *testing.T, env map[string]string) composeFile {
	t.Helper()
	raw, err := os.ReadFile(apptest.RepoPath("docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal([]byte(interpolate(t, string(raw), env)), &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return f
}

// composeReplicas returns the names of the services built from this repository, sorted.
func composeReplicas(f composeFile) []string {
	var names []string
	for name, s := range f.Services {
		if s.Build != nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestComposeRunsTwoReplicasOverMySQL: MySQL 8.4 keeps its data on a named volume and has a
// healthcheck; two Interlock replicas wait for it to be healthy and reach it with the database,
// user and password the MySQL service creates — also when .env changes them.
func TestComposeRunsTwoReplicasOverMySQL(t *testing.T) {
	for _, env := range []map[string]string{
		{"INTERLOCK_ADMIN_TOKEN_SHA256": strings.Repeat("a", 64)},
		{"INTERLOCK_ADMIN_TOKEN_SHA256": strings.Repeat("a", 64), "MYSQL_USER": "u1", "MYSQL_PASSWORD": "p1", "MYSQL_DATABASE": "d1"},
	} {
		f := loadCompose(t, env)
		mysql, ok := f.Services["mysql"]
		if !ok {
			t.Fatal("no mysql service")
		}
		if mysql.Image != "mysql:8.4" {
			t.Errorf("mysql image %q, want mysql:8.4", mysql.Image)
		}
		var dataVolume string
		for _, v := range mysql.Volumes {
			if src, dst, _ := strings.Cut(v, ":"); strings.TrimSuffix(dst, ":rw") == "/var/lib/mysql" {
				dataVolume = src
			}
		}
		if _, declared := f.Volumes[dataVolume]; dataVolume == "" || !declared {
			t.Errorf("mysql volumes %v: want a named volume, declared under volumes:, at /var/lib/mysql", mysql.Volumes)
		}
		if mysql.Healthcheck == nil || len(mysql.Healthcheck.Test) < 2 || !strings.Contains(strings.Join(mysql.Healthcheck.Test, " "), "mysqladmin ping") {
			t.Errorf("mysql healthcheck %+v: want a mysqladmin ping", mysql.Healthcheck)
		}

		replicas := composeReplicas(f)
		if len(replicas) != 2 {
			t.Fatalf("services built from the Dockerfile: %v, want two replicas", replicas)
		}
		first := f.Services[replicas[0]]
		for _, name := range replicas {
			s := f.Services[name]
			if s.DependsOn["mysql"].Condition != "service_healthy" {
				t.Errorf("%s depends_on mysql %+v, want condition: service_healthy", name, s.DependsOn)
			}
			if len(s.Ports) > 0 {
				t.Errorf("%s publishes %v: only the proxy should be reachable", name, s.Ports)
			}
			if fmt.Sprint(s.Environment) != fmt.Sprint(first.Environment) || fmt.Sprint(s.Configs) != fmt.Sprint(first.Configs) {
				t.Errorf("%s is configured unlike %s: replicas must be alike", name, replicas[0])
			}
			db, err := url.Parse(s.Environment["INTERLOCK_DB"])
			if err != nil || db.Scheme != "mysql" {
				t.Fatalf("%s INTERLOCK_DB %q: want mysql://…", name, s.Environment["INTERLOCK_DB"])
			}
			pass, _ := db.User.Password()
			got := []string{db.Hostname(), db.Port(), db.User.Username(), pass, strings.TrimPrefix(db.Path, "/")}
			want := []string{"mysql", "3306", mysql.Environment["MYSQL_USER"], mysql.Environment["MYSQL_PASSWORD"], mysql.Environment["MYSQL_DATABASE"]}
			if !slices.Equal(got, want) {
				t.Errorf("%s INTERLOCK_DB reaches host, port, user, password, database %q; the mysql service makes %q", name, got, want)
			}
			if _, err := app.ParseConfig(nil, func(k string) string { return s.Environment[k] }); err != nil {
				t.Errorf("%s environment: %v", name, err)
			}
		}
	}
}

// TestComposeReplicasShareOneAuthConfig: the replicas read the same mounted config file, whose
// auth.tokens entry takes its digest from .env; two real servers over one MySQL started with
// that file both accept the one admin token — what a load balancer in front of them needs.
func TestComposeReplicasShareOneAuthConfig(t *testing.T) {
	token := "compose-test-token"
	sum := sha256.Sum256([]byte(token))
	f := loadCompose(t, map[string]string{"INTERLOCK_ADMIN_TOKEN_SHA256": hex.EncodeToString(sum[:])})
	replicas := composeReplicas(f)
	if len(replicas) == 0 {
		t.Fatal("no replicas")
	}
	s := f.Services[replicas[0]]
	path := s.Environment["INTERLOCK_CONFIG"]
	var source string
	for _, c := range s.Configs {
		if c.Target == path {
			source = c.Source
		}
	}
	cfgDef, ok := f.Configs[source]
	if path == "" || !ok || cfgDef.Content == "" {
		t.Fatalf("INTERLOCK_CONFIG=%q is not a mounted config with inline content (configs %+v)", path, s.Configs)
	}
	file, err := config.Parse("interlock-config", []byte(cfgDef.Content))
	if err != nil {
		t.Fatal(err)
	}
	if file.Auth == nil || len(file.Auth.Tokens) == 0 {
		t.Fatal("the shared config has no auth.tokens")
	}

	written := filepath.Join(t.TempDir(), "interlock.yaml")
	if err := os.WriteFile(written, []byte(cfgDef.Content), 0o600); err != nil {
		t.Fatal(err)
	}
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	a := apptest.StartProc(t, db, "--auth=on", "--config", written)
	b := apptest.StartProc(t, db, "--auth=on", "--config", written)
	run := a.SuspendAs(t, token, "refund order 11 for 5", nil)
	var got struct{ ApproveToolCall apptest.Run }
	b.MustAs(t, token, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.ID}, &got)
	if r := b.PostAs(t, "not-"+token, `{ suspendedRuns { total } }`, nil); r.Code != "UNAUTHENTICATED" {
		t.Errorf("another token: %s, want UNAUTHENTICATED", r.Code)
	}
}

// nginxDirectives returns the simple directives of an nginx config, "name arg arg" each,
// comments dropped, blocks flattened, in order.
func nginxDirectives(t *testing.T, file string) []string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		line, _, _ = strings.Cut(line, "#")
		text.WriteString(line + " ")
	}
	var out []string
	for _, stmt := range regexp.MustCompile(`[;{}]`).Split(text.String(), -1) {
		if stmt = strings.Join(strings.Fields(stmt), " "); stmt != "" {
			out = append(out, stmt)
		}
	}
	return out
}

// TestComposeProxyBalancesBothReplicas: the proxy publishes the one port, mounts its config from
// the repository, waits for both replicas to be healthy, and its upstream names both on the
// port INTERLOCK_ADDR gives them, with WebSocket upgrades (a GET's only) passed on and SSE unbuffered.
func TestComposeProxyBalancesBothReplicas(t *testing.T) {
	f := loadCompose(t, map[string]string{"INTERLOCK_ADMIN_TOKEN_SHA256": strings.Repeat("a", 64)})
	replicas := composeReplicas(f)
	proxy, ok := f.Services["proxy"]
	if !ok {
		t.Fatal("no proxy service")
	}
	if len(proxy.Ports) != 1 || !strings.HasSuffix(proxy.Ports[0], ":8080") {
		t.Errorf("proxy ports %v, want one, to its port 8080", proxy.Ports)
	}
	for _, r := range replicas {
		if proxy.DependsOn[r].Condition != "service_healthy" {
			t.Errorf("proxy depends_on %s: %+v, want condition: service_healthy", r, proxy.DependsOn[r])
		}
	}
	var conf string
	for _, v := range proxy.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == "/etc/nginx/nginx.conf" {
			conf = parts[0]
		}
	}
	if conf == "" {
		t.Fatalf("proxy volumes %v mount no /etc/nginx/nginx.conf", proxy.Volumes)
	}
	directives := nginxDirectives(t, apptest.RepoPath(conf))

	_, port, err := net.SplitHostPort(f.Services[replicas[0]].Environment["INTERLOCK_ADDR"])
	if err != nil {
		t.Fatal(err)
	}
	var upstream string
	var servers []string
	for i, d := range directives {
		if name, ok := strings.CutPrefix(d, "upstream "); ok {
			upstream = name
			for _, s := range directives[i+1:] {
				if !strings.HasPrefix(s, "server ") && !strings.HasPrefix(s, "keepalive") {
					break
				}
				if strings.HasPrefix(s, "server ") {
					servers = append(servers, strings.Fields(s)[1])
				}
			}
		}
	}
	var want []string
	for _, r := range replicas {
		want = append(want, r+":"+port)
	}
	slices.Sort(servers)
	if !slices.Equal(servers, want) {
		t.Errorf("%s: upstream %q servers %v, want the replicas %v", conf, upstream, servers, want)
	}
	for _, d := range []string{
		"proxy_pass http://" + upstream,
		"proxy_http_version 1.1",
		"proxy_set_header Upgrade $websocket_upgrade",
		"proxy_set_header Connection $connection_upgrade",
		`map "$request_method:$http_upgrade" $websocket_upgrade`,
		"map $websocket_upgrade $connection_upgrade",
		"proxy_set_header Host $http_host",
		"proxy_buffering off",
		"listen 8080",
	} {
		if !slices.Contains(directives, d) {
			t.Errorf("%s lacks %q", conf, d)
		}
	}
	if !slices.ContainsFunc(directives, func(d string) bool { return strings.HasPrefix(d, "proxy_read_timeout ") && strings.HasSuffix(d, "h") }) {
		t.Errorf("%s: want a proxy_read_timeout in hours, for subscriptions", conf)
	}
}
