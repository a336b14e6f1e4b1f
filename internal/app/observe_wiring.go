package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"interlock/gormstore"
	"interlock/health"
)

// observe wires what an operator sees: the pool and run metrics, and the readiness checks.
func (a *App) observe() error {
	sqlDB, err := a.db.DB()
	if err != nil {
		return fmt.Errorf("database pool: %w", err)
	}
	a.metrics.WatchDB(sqlDB)
	a.metrics.WatchRuns(a.Service.Stats, a.log)
	a.health = health.New(health.Options{
		Ping:    sqlDB.PingContext,
		Pending: func(ctx context.Context) ([]string, error) { return gormstore.PendingMigrations(ctx, a.db) },
		Logger:  a.log,
	})
	return nil
}

// serveMetrics serves /metrics on --metrics-addr when it is set; the returned func stops it.
func (a *App) serveMetrics() (stop func(), err error) {
	if a.cfg.MetricsAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr / INTERLOCK_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", a.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("metrics server", "err", err)
		}
	}()
	a.log.Info("metrics listening", "addr", ln.Addr().String(), "path", "/metrics")
	return func() { srv.Close() }, nil
}

// drain starts a graceful stop: /readyz answers 503 at once, and the server goes on serving
// for --drain-delay so that load balancers take the instance out before its listener closes.
func (a *App) drain() {
	a.health.ShuttingDown()
	if a.cfg.DrainDelay > 0 {
		a.log.Info("draining: /readyz answers 503", "delay", a.cfg.DrainDelay.String())
		time.Sleep(a.cfg.DrainDelay)
	}
}
