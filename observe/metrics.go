// Package observe is what an operator sees of a running server: Prometheus metrics on a
// registry of the server's own, the slog logger (JSON or text), and one log line per GraphQL
// operation (the errors hidden from clients are logged by graph.PresentError, which names the
// operation as OperationOf does). The run service knows nothing of it: it is told of decisions
// through runs.Metrics, and of events, model calls and tool calls through wrappers around the
// store, the models and the tools.
package observe

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"interlock/runs"
	"interlock/runtype"
)

// Metrics holds the server's metrics and the registry they are exported from. Create it with
// NewMetrics; it implements runs.Metrics.
type Metrics struct {
	reg *prometheus.Registry

	operations        *prometheus.CounterVec
	operationDuration *prometheus.HistogramVec
	subscriptions     *prometheus.GaugeVec
	decisionWait      *prometheus.HistogramVec
	decisions         *prometheus.CounterVec
	eventsWritten     prometheus.Counter
	modelDuration     *prometheus.HistogramVec
	modelErrors       *prometheus.CounterVec
	toolDuration      *prometheus.HistogramVec
	toolErrors        *prometheus.CounterVec

	names *nameSet
	// tools are the tool names used as label values of interlock_decisions_total: tools come
	// from the config, but an external agent with tools: ["*"] takes any name a caller sends.
	tools *nameSet
}

// maxToolNames bounds the tool label of interlock_decisions_total.
const maxToolNames = 200

var _ runs.Metrics = (*Metrics)(nil)

// callBuckets are the latency buckets of model and tool calls: from a fast lookup to a slow
// model answer or a webhook near its timeout.
var callBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// waitBuckets are the buckets of the time a call waits for a person: seconds to days.
var waitBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 259200, 604800}

// NewMetrics makes the metrics on a new registry (never the global one, so that two servers
// in one process, as in tests, do not share counters), with the Go runtime and process
// collectors and interlock_build_info for the version given.
func NewMetrics(version string) *Metrics {
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		names: newNameSet(maxOperationNames),
		tools: newNameSet(maxToolNames),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_graphql_operations_total",
			Help: "GraphQL operations answered, by operation name (\"anonymous\" without one, \"other\" past the first " + itoa(maxOperationNames) + " names), type and outcome (ok, or the first error's extensions.code: CANCELLED when the client gave up before the answer). Subscriptions are counted when they end.",
		}, []string{"operation", "type", "outcome"}),
		operationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "interlock_graphql_operation_duration_seconds",
			Help:    "Time to answer a GraphQL query or mutation (subscriptions are not timed: they last as long as a client wants), by operation name, type and outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"operation", "type", "outcome"}),
		subscriptions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "interlock_graphql_subscriptions_open",
			Help: "GraphQL subscriptions open now, by transport (websocket, sse).",
		}, []string{"transport"}),
		decisionWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "interlock_decision_wait_seconds",
			Help:    "Time from a run's suspension to the decision on its call, by decision kind (APPROVED, DECLINED, RESUMED, EXPIRED).",
			Buckets: waitBuckets,
		}, []string{"kind"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_decisions_total",
			Help: "Decisions stored by this instance (a person's, or an expiry), by kind and tool (\"other\" past the first " + itoa(maxToolNames) + " tools). Approvals by policy are not counted. Per person: the teamFigures query and the console's Team page (a label per person would grow without bound).",
		}, []string{"kind", "tool"}),
		eventsWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "interlock_run_events_written_total",
			Help: "Run events committed to storage by this instance (rate() gives events per second).",
		}),
		modelDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "interlock_model_call_duration_seconds",
			Help:    "Duration of model calls, streaming included, by model (provider/name).",
			Buckets: callBuckets,
		}, []string{"model"}),
		modelErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_model_call_errors_total",
			Help: "Model calls that failed (not counting calls cancelled by a shutdown or a lost lease), by model.",
		}, []string{"model"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "interlock_tool_call_duration_seconds",
			Help:    "Duration of tool executions, by tool.",
			Buckets: callBuckets,
		}, []string{"tool"}),
		toolErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "interlock_tool_call_errors_total",
			Help: "Tool executions that returned an error or panicked (a suspend() is not an error), by tool.",
		}, []string{"tool"}),
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "interlock_build_info",
		Help:        "Always 1; its version label is the server's version (set at build time).",
		ConstLabels: prometheus.Labels{"version": version},
	})
	build.Set(1)
	m.reg.MustRegister(
		build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.operations, m.operationDuration, m.subscriptions, m.decisionWait, m.decisions, m.eventsWritten,
		m.modelDuration, m.modelErrors, m.toolDuration, m.toolErrors,
	)
	for _, tr := range []string{transportWebsocket, transportSSE} {
		m.subscriptions.WithLabelValues(tr) // present at 0 from the start
	}
	return m
}

// Registry is the registry the metrics are on, for collectors added by the server.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format (or OpenMetrics when asked).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// Decided counts a decision and observes the wait of its call (runs.Metrics).
func (m *Metrics) Decided(kind runtype.DecisionKind, tool string, waited time.Duration) {
	m.decisions.WithLabelValues(string(kind), m.tools.label(tool, true)).Inc()
	if waited >= 0 {
		m.decisionWait.WithLabelValues(string(kind)).Observe(waited.Seconds())
	}
}

// failed reports whether err is a failure worth counting: not nil, and not a cancellation
// (a shutdown, a lost lease or a client gone is not the model's or the tool's fault).
func failed(ctx context.Context, err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil
}
