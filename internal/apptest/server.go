package apptest

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"interlock/internal/app"
	"interlock/internal/dbtest"
)

// Server is the real app over a real database, served over real HTTP.
type Server struct {
	URL       string
	App       *app.App
	CloseHTTP func()
}

// Start serves the app over db, with any further settings as command-line args.
func Start(t testing.TB, db string, args ...string) *Server {
	t.Helper()
	// Authentication is off unless a test turns it on: a later --auth in args wins.
	cfg, err := app.ParseConfig(append([]string{"--auth=off", "--db", db}, args...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	app, err := app.NewApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler())
	var once sync.Once
	closeHTTP := func() { once.Do(func() { srv.CloseClientConnections(); srv.Close() }) }
	t.Cleanup(func() {
		closeHTTP()
		app.Close()
	})
	return &Server{URL: srv.URL, App: app, CloseHTTP: closeHTTP}
}

// EachDB runs fn against a server on SQLite and one on MySQL, each started with args.
func EachDB(t *testing.T, fn func(t *testing.T, s *Server), args ...string) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), args...))
	})
	t.Run("mysql", func(t *testing.T) {
		fn(t, Start(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)), args...))
	})
}

// WriteConfig writes a config file for the test and returns its path.
func WriteConfig(t testing.TB, yaml string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "interlock.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// DiscardLog is a logger that writes nowhere, for an app a test builds itself.
func DiscardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
