package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/graph"
	"interlock/internal/apptest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// inboxQuery is what the console asks of suspendedRuns, as cmd/interlock-bench sends it.
const inboxQuery = `query($agentId: ID, $threadId: ID, $page: Int, $perPage: Int) {
  suspendedRuns(agentId: $agentId, threadId: $threadId, page: $page, perPage: $perPage) {
    total
    runs { runId agentId threadId resourceId status prompt createdAt suspendedAt lastEventSeq toolCalls { toolCallId toolName args requiresApproval } }
  }
}`

// BenchmarkSuspendedRunsHandler splits the cost of a suspendedRuns request in process, over a
// data set cmd/interlock-bench seeded (INTERLOCK_BENCH_DB, e.g.
// mysql://root@127.0.0.1:3306/interlock_bench): "store" is the store's own code for the shape
// (count, page, calls), "handler" the whole request through the server's HTTP handler without
// a socket, "executor" gqlgen's executor alone answering from the page the store read once
// (no database wait, no middleware: what gqlgen costs to execute and write the answer), and
// "typename" the fixed cost of a request (docs/performance.md):
//
//	INTERLOCK_BENCH_DB=… go test -run '^$' -bench SuspendedRunsHandler -benchtime 2000x .
func BenchmarkSuspendedRunsHandler(b *testing.B) {
	db := os.Getenv("INTERLOCK_BENCH_DB")
	if db == "" {
		b.Skip("INTERLOCK_BENCH_DB is not set: seed a database with cmd/interlock-bench first")
	}
	cfg := apptest.WriteConfig(b, "agents:\n  - id: agent-1\n    name: Bench agent 1\n    model: {provider: demo}\n")
	s := apptest.Start(b, db, "--config", cfg, "--retention", "87600h", "--mutation-rate", "0")
	store := gormstore.New(s.App.DB())
	h := s.App.Handler()
	agent, thread, zero, fifty := "agent-1", "thread-7", 0, 50
	for _, sh := range []struct {
		name string
		vars map[string]any
		p    runs.ListSuspendedParams
	}{
		{"inbox", map[string]any{"page": 0, "perPage": 50}, runs.ListSuspendedParams{Page: &zero, PerPage: &fifty}},
		{"agentThread", map[string]any{"agentId": agent, "threadId": thread, "page": 0, "perPage": 50},
			runs.ListSuspendedParams{AgentID: &agent, ThreadID: &thread, Page: &zero, PerPage: &fifty}},
	} {
		b.Run(sh.name+"/store", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := store.CountSuspended(b.Context(), sh.p); err != nil {
					b.Fatal(err)
				}
				if _, err := store.ListSuspended(b.Context(), sh.p, fifty, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sh.name+"/handler", func(b *testing.B) { benchHandler(b, h, inboxQuery, sh.vars) })
		b.Run(sh.name+"/executor", func(b *testing.B) {
			benchHandler(b, executorOnly(b, store, sh.p, fifty), inboxQuery, sh.vars)
		})
	}
	b.Run("typename", func(b *testing.B) { benchHandler(b, h, "{ __typename }", nil) })
}

// benchHandler posts query with vars to h, b.N times, failing on any error in the answer.
func benchHandler(b *testing.B, h http.Handler, query string, vars map[string]any) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("POST", "/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 || bytes.Contains(w.Body.Bytes(), []byte(`"errors"`)) {
			b.Fatalf("%d %s", w.Code, w.Body.String())
		}
	}
}

// readPage is a store that answers suspendedRuns with one page it read from the real store
// beforehand: the executor benchmark measures gqlgen, not the database.
type readPage struct {
	*gormstore.Store
	total int64
	page  []*runtype.Run
}

func (r *readPage) CountSuspended(context.Context, runs.ListSuspendedParams) (int64, error) {
	return r.total, nil
}

func (r *readPage) ListSuspended(context.Context, runs.ListSuspendedParams, int, int) ([]*runtype.Run, error) {
	return r.page, nil
}

// executorOnly is gqlgen's executor with the POST transport and a query cache (as the server
// has them), over a run service whose store answers with the page p of the real store.
func executorOnly(b *testing.B, store *gormstore.Store, p runs.ListSuspendedParams, limit int) http.Handler {
	total, err := store.CountSuspended(b.Context(), p)
	if err != nil {
		b.Fatal(err)
	}
	page, err := store.ListSuspended(b.Context(), p, limit, 0)
	if err != nil {
		b.Fatal(err)
	}
	registry, err := agent.NewRegistry(agent.DemoAgents(&llm.Demo{}))
	if err != nil {
		b.Fatal(err)
	}
	// Never started: no loop polls, recovers, expires or purges the seeded database.
	svc, err := runs.New(&readPage{Store: store, total: total, page: page}, registry, runs.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: graph.NewResolver(svc)}))
	gql.AddTransport(transport.POST{})
	gql.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	return gql
}
