// Package tracing is Interlock's OpenTelemetry tracing: spans for HTTP requests, GraphQL
// operations, each execution of a run's agent loop, model calls, tool calls and SQL, exported over
// OTLP. It is off unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set;
// everything else is the SDK's standard OTEL_* configuration, read from the environment.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// scope names the instrumentation in every span Interlock makes.
const scope = "interlock"

// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES
// names the service.
const DefaultServiceName = "interlock"

// Tracing is the server's tracer provider and what it instruments with. A nil *Tracing is
// tracing turned off: every method is then a no-op that hands back what it was given, so the
// wiring needs no conditions.
type Tracing struct {
	provider   *sdktrace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// Enabled reports whether the environment asks for traces: an OTLP endpoint is set, and neither
// OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns them off.
func Enabled(getenv func(string) string) bool {
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")) != "none"
}

// Start sets tracing up from the process environment, or returns nil (off, nothing started) when
// Enabled is false. version is service.version. The exporter reads the OTEL_EXPORTER_OTLP_*
// variables (endpoint, headers, timeout, compression, certificates), the provider the sampler
// (OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG) and the batching (OTEL_BSP_*), the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
// or OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc. Start connects to nothing:
// the exporter sends the first batch when there is one, and a collector that is down loses spans,
// never requests.
func Start(ctx context.Context, version string) (*Tracing, error) {
	if !Enabled(os.Getenv) {
		return nil, nil
	}
	if v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); v != "" && v != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported (otlp or none)", v)
	}
	exp, err := newExporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName), semconv.ServiceVersion(version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last, so that OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{
		provider:   p,
		tracer:     p.Tracer(scope),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}, nil
}

// newExporter makes the OTLP exporter of the protocol the environment names.
func newExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	if protocol == "" {
		protocol, name = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), "OTEL_EXPORTER_OTLP_PROTOCOL"
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch strings.TrimSpace(protocol) {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%s: %q is not supported (http/protobuf or grpc)", name, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return exp, nil
}

// Provider is the tracer provider, nil when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Flush exports every span that has ended and not been sent yet.
func (t *Tracing) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Shutdown exports what is left and stops the exporter; call it after everything that makes
// spans has stopped.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
