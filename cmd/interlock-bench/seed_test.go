package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/config"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// countCalls is an agent.Middleware that counts tool executions (the agents share their tool,
// which it wraps once).
type countCalls struct{ n *atomic.Int64 }

func (countCalls) WrapModel(m llm.Model) llm.Model { return m }

func (c countCalls) WrapTool(_ *agent.Tool, exec agent.ToolFunc) agent.ToolFunc {
	return func(ctx context.Context, call *agent.Call) (any, error) {
		c.n.Add(1)
		return exec(ctx, call)
	}
}

// benchService is the run service the measured server runs, in process: the bench agents
// over db, their refund tool answered by a local endpoint that counts its calls.
func benchService(t *testing.T, db *gorm.DB, agents int) (*runs.Service, *atomic.Int64) {
	t.Helper()
	refund, err := startRefundServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(refund.Close)
	var calls atomic.Int64
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(agentConfig(agents, refund.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	built, err := config.Build(context.Background(), f, config.Options{DemoModel: &llm.Demo{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(built.Close)
	reg, err := agent.NewRegistry(built.List, countCalls{&calls})
	if err != nil {
		t.Fatal(err)
	}
	// Text is stored once per model answer (never split by the flush timer on a slow
	// machine), as it is when the model answers within the flush interval.
	svc, err := runs.New(gormstore.New(db), reg, runs.Config{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TextFlushInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return svc, &calls
}

// waitStatus polls until the run has the status.
func waitStatus(t *testing.T, svc *runs.Service, id string, want runtype.Status) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := svc.Get(runtype.WithSystem(context.Background()), id)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil && r.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not reach %s: %+v", id, want, r)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// timeColumns are compared by presence only: the service's steps take their own time.
var timeColumns = map[string]bool{"created_at": true, "updated_at": true, "suspended_at": true, "lease_until": true, "decided_at": true, "expires_at": true, "recover_after": true}

// rowsOfRun reads every stored row of a run, table by table, without the columns that name
// the run or are numbered by the database, and with times reduced to whether they are set.
func rowsOfRun(t *testing.T, db *gorm.DB, id string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, q := range []struct{ table, where, order string }{
		{"agent_runs", "id = ?", "id"},
		{"run_tool_calls", "run_id = ?", "id"},
		{"run_events", "run_id = ?", "seq"},
		{"messages", "run_id = ?", "id"},
	} {
		var rows []map[string]any
		if err := db.Table(q.table).Where(q.where, id).Order(q.order).Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			delete(r, "run_id")
			delete(r, "id")
			for c := range r {
				if timeColumns[c] {
					r[c] = r[c] != nil
				}
			}
		}
		out[q.table] = rows
	}
	return out
}

// TestSeedWritesTheServicesRows seeds a few runs in bulk and has the run service start the
// same runs (same agent, prompt, thread and resource), then compares every row of each pair;
// it then approves both of every suspended pair through the service and compares again, so a
// seeded suspended run is one the real service decides and continues like its own.
func TestSeedWritesTheServicesRows(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := runtype.WithSystem(context.Background())
		p := seedParams{Runs: 6, Suspended: 3, Threads: 4, Resources: 2, Agents: 5, Days: 1, End: time.Now().UTC(), Chunk: 4}
		if err := seed(ctx, db, p, io.Discard); err != nil {
			t.Fatal(err)
		}
		// A repeated seed changes nothing.
		if err := seed(ctx, db, p, io.Discard); err != nil {
			t.Fatal(err)
		}
		var count int64
		db.Model(&gormstore.Run{}).Count(&count)
		if count != int64(p.Runs) {
			t.Fatalf("%d runs stored after seeding %d twice", count, p.Runs)
		}
		// Every seeded thread belongs to the resource of its runs, as the store's claim makes it.
		var threads []gormstore.Thread
		if err := db.Find(&threads).Error; err != nil {
			t.Fatal(err)
		}
		owners := map[string]string{}
		for i := 0; i < p.Runs; i++ {
			owners[p.spec(i).ThreadID] = p.spec(i).ResourceID
		}
		if len(threads) != len(owners) {
			t.Errorf("%d threads stored, want %d", len(threads), len(owners))
		}
		for _, th := range threads {
			if th.ResourceID == nil || *th.ResourceID != owners[th.ID] {
				t.Errorf("thread %s belongs to %v, want %s", th.ID, th.ResourceID, owners[th.ID])
			}
		}
		svc, toolCalls := benchService(t, db, p.Agents)
		type pair struct {
			spec runSpec
			real string
		}
		var pairs []pair
		suspended := 0
		for i := 0; i < p.Runs; i++ {
			s := p.spec(i)
			r, err := svc.StartRun(ctx, runs.StartParams{AgentID: s.AgentID, Prompt: s.Prompt, ThreadID: &s.ThreadID, ResourceID: &s.ResourceID})
			if err != nil {
				t.Fatal(err)
			}
			want := runtype.StatusCompleted
			if s.Suspended {
				want = runtype.StatusSuspended
				suspended++
			}
			waitStatus(t, svc, r.ID, want)
			pairs = append(pairs, pair{s, r.ID})
		}
		if suspended != p.Suspended {
			t.Fatalf("%d of the specs are suspended, want %d", suspended, p.Suspended)
		}
		compare := func(when string) {
			t.Helper()
			for _, pr := range pairs {
				got, want := rowsOfRun(t, db, pr.spec.ID), rowsOfRun(t, db, pr.real)
				if len(want["run_events"]) == 0 {
					t.Fatalf("run %s has no events", pr.real)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: seeded run %d (%q) differs from the service's:\nseeded:  %v\nservice: %v", when, pr.spec.Index, pr.spec.Prompt, got, want)
				}
			}
		}
		compare("as stored")
		// The seeded runs are listed like the service's own.
		list, err := svc.ListSuspended(ctx, runs.ListSuspendedParams{})
		if err != nil {
			t.Fatal(err)
		}
		if list.Total != int64(2*p.Suspended) {
			t.Fatalf("suspendedRuns total %d, want %d", list.Total, 2*p.Suspended)
		}
		for _, pr := range pairs {
			if !pr.spec.Suspended {
				continue
			}
			for _, id := range []string{pr.spec.ID, pr.real} {
				if _, err := svc.Approve(ctx, runs.DecideParams{RunID: id}); err != nil {
					t.Fatalf("approve %s: %v", id, err)
				}
				waitStatus(t, svc, id, runtype.StatusCompleted)
			}
		}
		if got := toolCalls.Load(); got != int64(2*p.Suspended) {
			t.Fatalf("the refund tool ran %d times, want %d", got, 2*p.Suspended)
		}
		compare("after approval")
		if r, _ := svc.Get(ctx, pairs[0].spec.ID); r == nil || !strings.Contains(r.Prompt, "customer") && !strings.Contains(r.Prompt, "refund") {
			t.Fatalf("seeded run read back as %+v", r)
		}
	})
}
