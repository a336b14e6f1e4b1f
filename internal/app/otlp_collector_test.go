package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// otlpCollector is an in-process OpenTelemetry collector: a real HTTP server that takes
// OTLP/HTTP protobuf exports at /v1/traces, as the SDK's exporter sends them, and keeps the spans.
type otlpCollector struct {
	url string

	mu       sync.Mutex
	spans    []*gotSpan
	requests int
}

// gotSpan is a received span with the resource it came with.
type gotSpan struct {
	*tracepb.Span
	resource map[string]string
}

func (s *gotSpan) traceID() string  { return hex.EncodeToString(s.TraceId) }
func (s *gotSpan) spanID() string   { return hex.EncodeToString(s.SpanId) }
func (s *gotSpan) parentID() string { return hex.EncodeToString(s.ParentSpanId) }

// attr is a span attribute as text ("" when absent).
func (s *gotSpan) attr(key string) string { return attrText(s.Attributes, key) }

func attrText(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			return fmt.Sprint(v.BoolValue)
		default:
			return kv.Value.String()
		}
	}
	return ""
}

func startCollector(t testing.TB) *otlpCollector {
	t.Helper()
	c := &otlpCollector{}
	srv := httptest.NewServer(http.HandlerFunc(c.export))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// export decodes one ExportTraceServiceRequest and answers as a collector does.
func (c *otlpCollector) export(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces of application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.add(&req)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	io.Copy(w, bytes.NewReader(out))
}

// add keeps the spans of one export.
func (c *otlpCollector) add(req *collectortrace.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	for _, rs := range req.ResourceSpans {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.Key] = attrText(rs.Resource.Attributes, kv.Key)
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				c.spans = append(c.spans, &gotSpan{Span: sp, resource: res})
			}
		}
	}
}

// startGRPCCollector is the collector over OTLP/gRPC: a real gRPC server on localhost serving
// the OTLP trace service. Its url is the endpoint to give the exporter.
func startGRPCCollector(t testing.TB) *otlpCollector {
	t.Helper()
	c := &otlpCollector{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, grpcTraces{c: c})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	c.url = "http://" + ln.Addr().String()
	return c
}

type grpcTraces struct {
	collectortrace.UnimplementedTraceServiceServer
	c *otlpCollector
}

func (g grpcTraces) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.c.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// received returns the spans received so far and how many exports brought them.
func (c *otlpCollector) received() ([]*gotSpan, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*gotSpan(nil), c.spans...), c.requests
}
