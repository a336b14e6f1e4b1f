package app_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// probe is one answer of /healthz or /readyz.
type probe struct {
	status int
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func getProbe(t testing.TB, url string) probe {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var p probe
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("GET %s: status %d, body %s", url, resp.StatusCode, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", url, ct)
	}
	p.status = resp.StatusCode
	return p
}

func wantReady(t testing.TB, url string) {
	t.Helper()
	if p := getProbe(t, url+"/readyz"); p.status != http.StatusOK || p.Status != "ok" || p.Checks["database"] != "ok" || p.Checks["migrations"] != "ok" || p.Checks["shutdown"] != "ok" {
		t.Fatalf("/readyz = %+v, want 200 with every check ok", p)
	}
}

// TestReadyzNeedsEveryMigration: an instance whose database lacks a migration the code knows is
// not ready (the body names it), and is again once it is recorded; /healthz does not care.
func TestReadyzNeedsEveryMigration(t *testing.T) {
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		wantReady(t, s.URL)
		var last struct {
			Version   int
			Name      string
			AppliedAt time.Time
		}
		db := s.App.DB().Table("schema_migrations")
		if err := db.Order("version DESC").Limit(1).Take(&last).Error; err != nil {
			t.Fatal(err)
		}
		if err := s.App.DB().Exec("DELETE FROM schema_migrations WHERE version = ?", last.Version).Error; err != nil {
			t.Fatal(err)
		}
		p := getProbe(t, s.URL+"/readyz")
		if p.status != http.StatusServiceUnavailable || p.Status != "unavailable" || p.Checks["database"] != "ok" ||
			!strings.Contains(p.Checks["migrations"], "1 not applied") || !strings.Contains(p.Checks["migrations"], last.Name) {
			t.Fatalf("/readyz without migration %d_%s = %+v", last.Version, last.Name, p)
		}
		if h := getProbe(t, s.URL+"/healthz"); h.status != http.StatusOK {
			t.Fatalf("/healthz = %+v while not ready", h)
		}
		if err := s.App.DB().Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", last.Version, last.Name, last.AppliedAt).Error; err != nil {
			t.Fatal(err)
		}
		wantReady(t, s.URL)
	})
}

// tcpProxy forwards TCP to a target until stopped: stopping closes the listener and every
// connection, as a network partition or a database restart does; start listens again on the
// same address.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, addr: "127.0.0.1:0", target: target}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *tcpProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestReadyzFailsWhileTheDatabaseIsUnreachable: MySQL reached through a proxy that is cut
// (every connection closed, new ones refused) makes /readyz 503 naming the database, without
// the driver's error; when the network is back, the same instance is ready again.
func TestReadyzFailsWhileTheDatabaseIsUnreachable(t *testing.T) {
	cfg, err := gomysql.ParseDSN(dbtest.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, cfg.Addr)
	cfg.Addr = proxy.addr
	s := apptest.Start(t, dbtest.MySQLURL(cfg.FormatDSN()))
	wantReady(t, s.URL)

	proxy.stop()
	p := getProbe(t, s.URL+"/readyz")
	if p.status != http.StatusServiceUnavailable || p.Status != "unavailable" || !strings.HasPrefix(p.Checks["database"], "not reachable") ||
		p.Checks["migrations"] == "ok" || p.Checks["shutdown"] != "ok" {
		t.Fatalf("/readyz with the database cut off = %+v", p)
	}
	for _, leak := range []string{proxy.addr, "dial", "refused", "root"} {
		for _, v := range p.Checks {
			if strings.Contains(v, leak) {
				t.Fatalf("/readyz tells %q: %+v", leak, p)
			}
		}
	}
	if h := getProbe(t, s.URL+"/healthz"); h.status != http.StatusOK || h.Status != "ok" {
		t.Fatalf("/healthz = %+v with the database cut off; it must not depend on it", h)
	}

	proxy.start()
	wantReady(t, s.URL)
}

// TestReadyzIs503WhileShuttingDown: once a stop begins, /readyz answers 503 (shutdown) for
// --drain-delay while the server still serves, and /healthz stays 200.
func TestReadyzIs503WhileShuttingDown(t *testing.T) {
	t.Parallel()
	s, stop := serveOnPort(t, "--drain-delay", "3s")
	wantReady(t, s.URL)
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// The first answer that is not 200 must be the drain's 503. The stop may begin late on a
	// busy machine, so the wait is for that answer, not for a time.
	var p probe
	apptest.Until(t, "/readyz answers other than 200 once the stop began", func() bool {
		p = getProbe(t, s.URL+"/readyz")
		return p.status != http.StatusOK
	})
	if p.status != http.StatusServiceUnavailable || p.Checks["shutdown"] != "shutting down" || p.Checks["database"] != "ok" {
		t.Fatalf("/readyz while shutting down = %+v", p)
	}
	if h := getProbe(t, s.URL+"/healthz"); h.status != http.StatusOK {
		t.Fatalf("/healthz while draining = %+v", h)
	}
	if err := <-stopped; err != nil && err != http.ErrServerClosed {
		t.Fatalf("Serve: %v", err)
	}
}
