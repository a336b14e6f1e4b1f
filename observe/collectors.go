package observe

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"interlock/runs"
	"interlock/runtype"
)

// dbCollector exports sql.DBStats of the server's connection pool at each scrape.
type dbCollector struct {
	db                                  *sql.DB
	open, inUse, idle, maxOpen          *prometheus.Desc
	waitCount, waitDuration, idleClosed *prometheus.Desc
}

// WatchDB exports the pool statistics of db (interlock_db_*).
func (m *Metrics) WatchDB(db *sql.DB) {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	m.reg.MustRegister(&dbCollector{
		db:           db,
		open:         d("interlock_db_open_connections", "Connections to the database open now, in use or idle."),
		inUse:        d("interlock_db_in_use_connections", "Database connections in use now."),
		idle:         d("interlock_db_idle_connections", "Idle database connections now."),
		maxOpen:      d("interlock_db_max_open_connections", "Most database connections the pool opens (0: no limit)."),
		waitCount:    d("interlock_db_wait_count_total", "Times a query waited for a free database connection."),
		waitDuration: d("interlock_db_wait_duration_seconds_total", "Total time queries waited for a free database connection."),
		idleClosed:   d("interlock_db_max_idle_closed_total", "Connections closed because the pool had too many idle ones."),
	})
}

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.inUse, c.idle, c.maxOpen, c.waitCount, c.waitDuration, c.idleClosed} {
		ch <- d
	}
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.db.Stats()
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(s.OpenConnections))
	ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(s.InUse))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.Idle))
	ch <- prometheus.MustNewConstMetric(c.maxOpen, prometheus.GaugeValue, float64(s.MaxOpenConnections))
	ch <- prometheus.MustNewConstMetric(c.waitCount, prometheus.CounterValue, float64(s.WaitCount))
	ch <- prometheus.MustNewConstMetric(c.waitDuration, prometheus.CounterValue, s.WaitDuration.Seconds())
	ch <- prometheus.MustNewConstMetric(c.idleClosed, prometheus.CounterValue, float64(s.MaxIdleClosed))
}

// StatsFunc counts the stored runs (runs.Service.Stats).
type StatsFunc func(ctx context.Context) (runs.RunStats, error)

// runsCollector reads the numbers of runs from the database at each scrape: they are the
// same on every instance (all share the database), and right after a restart, which a count
// kept in memory would not be.
type runsCollector struct {
	stats     StatsFunc
	log       *slog.Logger
	byStatus  *prometheus.Desc
	suspended *prometheus.Desc
	up        *prometheus.Desc
}

// statsTimeout bounds the counting queries of one scrape.
const statsTimeout = 5 * time.Second

// WatchRuns exports interlock_runs{status} and interlock_suspended_runs, read through stats at
// each scrape. When the database does not answer, both are left out of that scrape and
// interlock_runs_stats_up is 0 (and the error logged).
func (m *Metrics) WatchRuns(stats StatsFunc, log *slog.Logger) {
	m.reg.MustRegister(&runsCollector{
		stats: stats, log: log,
		byStatus:  prometheus.NewDesc("interlock_runs", "Stored runs by status (RUNNING, WAITING, SUSPENDED, COMPLETED, FAILED; finished runs until retention removes them), read from the database at scrape time: the same on every instance.", []string{"status"}, nil),
		suspended: prometheus.NewDesc("interlock_suspended_runs", "Top-level runs waiting for a person (what suspendedRuns without agentId lists), read from the database at scrape time.", nil, nil),
		up:        prometheus.NewDesc("interlock_runs_stats_up", "1 when the last scrape could count the runs in the database, 0 when it could not.", nil, nil),
	})
}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.byStatus
	ch <- c.suspended
	ch <- c.up
}

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		c.log.Warn("metrics: count runs", "err", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, s := range runtype.AllStatuses {
		ch <- prometheus.MustNewConstMetric(c.byStatus, prometheus.GaugeValue, float64(st.ByStatus[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.suspended, prometheus.GaugeValue, float64(st.Suspended))
}
