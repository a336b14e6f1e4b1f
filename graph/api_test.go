package graph_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"interlock/graph"
	"interlock/runtype"
)

// api is the GraphQL handler as the app builds it around the resolvers — gqlgen's executor,
// its POST transport, the one error presenter and the recover function — over a fake run
// service, with the log the presenter writes.
type api struct {
	h   http.Handler
	log *syncBuffer
}

// serve builds the API over f. Requests act for the system principal, as they do with
// authentication off; what a principal may do is the service's rule, faked here.
func serve(t *testing.T, f *fakeRuns) *api {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Runs: f}}))
	gql.AddTransport(transport.POST{})
	gql.SetErrorPresenter(graph.PresentError(log))
	gql.SetRecoverFunc(graph.Recover(log))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gql.ServeHTTP(w, r.WithContext(runtype.WithSystem(r.Context())))
	})
	return &api{h: h, log: logs}
}

// answer is a GraphQL response as a client reads it.
type answer struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
	body   string
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// do posts query with vars under ctx and returns the answer.
func (a *api) do(t *testing.T, ctx context.Context, query string, vars map[string]any) answer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	var out answer
	out.body = rec.Body.String()
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("the answer is not JSON (%v): %s", err, out.body)
	}
	return out
}

// data posts query and decodes its data into v, failing on any error.
func (a *api) data(t *testing.T, query string, vars map[string]any, v any) {
	t.Helper()
	ans := a.do(t, context.Background(), query, vars)
	if len(ans.Errors) > 0 {
		t.Fatalf("errors: %s", ans.body)
	}
	if err := json.Unmarshal(ans.Data, v); err != nil {
		t.Fatalf("data %s: %v", ans.Data, err)
	}
}

// lines are the log's lines, decoded.
func (a *api) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(a.log.String()))
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
