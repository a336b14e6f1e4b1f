package tracing

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
)

// HTTP traces the requests h serves: it continues the trace of an incoming W3C traceparent (and
// baggage) and makes a server span per request, so the GraphQL operation spans nest under it. A
// WebSocket gets no span of its own, which would last as long as the socket: its operations
// become children of the trace its upgrade request carried, or roots. Off, it returns h.
func (t *Tracing) HTTP(h http.Handler, operation string) http.Handler {
	if t == nil {
		return h
	}
	spanned := otelhttp.NewHandler(h, operation,
		otelhttp.WithTracerProvider(t.provider),
		otelhttp.WithPropagators(t.propagator),
		otelhttp.WithMeterProvider(noop.NewMeterProvider()), // metrics are Prometheus's (see README)
		otelhttp.WithSpanNameFormatter(func(op string, r *http.Request) string { return r.Method + " " + r.URL.Path }),
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWebsocket(r) {
			spanned.ServeHTTP(w, r)
			return
		}
		ctx := t.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// isWebsocket reports whether r asks to upgrade to a WebSocket.
func isWebsocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
