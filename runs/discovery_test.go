package runs_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

var base = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// seedOpts describes a stored run for discovery tests.
type seedOpts struct {
	id, agent, thread, resource, parent string
	at                                  time.Duration // createdAt = base + at
	status                              runtype.Status
}

// seed stores runs as the service would leave them, with one pending call per suspended run.
func seed(t testing.TB, db *gorm.DB, list ...seedOpts) {
	t.Helper()
	var rows []gormstore.Run
	var calls []gormstore.ToolCall
	for _, o := range list {
		rows = append(rows, seedRow(o))
		if o.status == runtype.StatusSuspended || o.status == "" {
			args := `{"orderId":"1","amount":10}`
			calls = append(calls, gormstore.ToolCall{RunID: o.id, ToolCallID: "call_1", ToolName: "issue_refund", Args: &args, RequiresApproval: true, State: gormstore.ToolCallPending, CreatedAt: base.Add(o.at)})
		}
	}
	if err := db.CreateInBatches(rows, 500).Error; err != nil {
		t.Fatal(err)
	}
	if len(calls) > 0 {
		if err := db.CreateInBatches(calls, 500).Error; err != nil {
			t.Fatal(err)
		}
	}
	// The rows were written around the store: rebuild its count of suspended runs.
	if err := gormstore.RecountSuspended(bg(), db); err != nil {
		t.Fatal(err)
	}
}

func seedRow(o seedOpts) gormstore.Run {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	if o.status == "" {
		o.status = runtype.StatusSuspended
	}
	at := base.Add(o.at)
	r := gormstore.Run{
		ID: o.id, AgentID: o.agent, ThreadID: opt(o.thread), ResourceID: opt(o.resource), ParentRunID: opt(o.parent),
		Prompt: "refund order 1", Status: string(o.status), CreatedAt: at, UpdatedAt: at, LastSeq: 4,
	}
	if o.status == runtype.StatusSuspended {
		snap := `{"messages":[],"pending":[{"id":"call_1","name":"issue_refund","args":{},"state":"awaiting_approval"}],"steps":0}`
		r.Snapshot, r.SuspendedAt = &snap, &at
	}
	return r
}

func discoveryRuns() []seedOpts {
	return []seedOpts{
		{id: "run-01", agent: "A", thread: "t1", resource: "u1", at: 0},
		{id: "run-02", agent: "A", thread: "t2", resource: "u1", at: time.Second},
		{id: "run-03", agent: "B", thread: "t1", resource: "u2", at: 2 * time.Second},
		{id: "run-04", agent: "B", thread: "t2", resource: "u2", at: 2 * time.Second}, // same createdAt as run-03
		{id: "run-05", agent: "A", thread: "t1", resource: "u1", at: 3 * time.Second, status: runtype.StatusCompleted},
		{id: "run-06", agent: "sub", thread: "t1", resource: "u1", parent: "run-01", at: 4 * time.Second},
		{id: "run-07", agent: "A", thread: "t1", resource: "u1", at: 5 * time.Second, status: runtype.StatusRunning},
	}
}

func TestSuspendedRunsDiscovery(t *testing.T) {
	t.Parallel()
	at := func(d time.Duration) *time.Time { v := base.Add(d); return &v }
	parse := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return &v
	}
	cases := []struct {
		name  string
		p     runs.ListSuspendedParams
		want  []string
		total int64
	}{
		{"no filter: top-level suspended runs, newest first, ties by runId desc", runs.ListSuspendedParams{}, []string{"run-04", "run-03", "run-02", "run-01"}, 4},
		{"agent", runs.ListSuspendedParams{AgentID: ptr("A")}, []string{"run-02", "run-01"}, 2},
		{"agent with a tie", runs.ListSuspendedParams{AgentID: ptr("B")}, []string{"run-04", "run-03"}, 2},
		{"sub-agent runs only under their own agent", runs.ListSuspendedParams{AgentID: ptr("sub")}, []string{"run-06"}, 1},
		{"unknown agent", runs.ListSuspendedParams{AgentID: ptr("nobody")}, []string{}, 0},
		{"thread", runs.ListSuspendedParams{ThreadID: ptr("t1")}, []string{"run-03", "run-01"}, 2},
		{"resource", runs.ListSuspendedParams{ResourceID: ptr("u2")}, []string{"run-04", "run-03"}, 2},
		{"agent and thread", runs.ListSuspendedParams{AgentID: ptr("A"), ThreadID: ptr("t1")}, []string{"run-01"}, 1},
		{"agent, thread and resource", runs.ListSuspendedParams{AgentID: ptr("B"), ThreadID: ptr("t2"), ResourceID: ptr("u2")}, []string{"run-04"}, 1},
		{"resource that matches nothing with thread", runs.ListSuspendedParams{ThreadID: ptr("t2"), ResourceID: ptr("nobody")}, []string{}, 0},
		{"fromDate inclusive at an exact createdAt", runs.ListSuspendedParams{FromDate: at(time.Second)}, []string{"run-04", "run-03", "run-02"}, 3},
		{"toDate inclusive at an exact createdAt", runs.ListSuspendedParams{ToDate: at(time.Second)}, []string{"run-02", "run-01"}, 2},
		{"fromDate = toDate", runs.ListSuspendedParams{FromDate: at(2 * time.Second), ToDate: at(2 * time.Second)}, []string{"run-04", "run-03"}, 2},
		{"date range and thread", runs.ListSuspendedParams{FromDate: at(time.Second), ToDate: at(2 * time.Second), ThreadID: ptr("t2")}, []string{"run-04", "run-02"}, 2},
		{"fromDate with another offset", runs.ListSuspendedParams{FromDate: parse("2026-12-01T12:00:01.000+02:00")}, []string{"run-04", "run-03", "run-02"}, 3},
		{"fromDate half a millisecond after a createdAt excludes it", runs.ListSuspendedParams{FromDate: at(time.Second + 500*time.Microsecond)}, []string{"run-04", "run-03"}, 2},
		{"toDate half a millisecond before a createdAt excludes it", runs.ListSuspendedParams{ToDate: at(time.Second - 500*time.Microsecond)}, []string{"run-01"}, 1},
		{"date range with nothing in it", runs.ListSuspendedParams{FromDate: at(10 * time.Second)}, []string{}, 0},
		{"page alone does not paginate", runs.ListSuspendedParams{Page: ptr(1)}, []string{"run-04", "run-03", "run-02", "run-01"}, 4},
		{"perPage alone does not paginate", runs.ListSuspendedParams{PerPage: ptr(1)}, []string{"run-04", "run-03", "run-02", "run-01"}, 4},
		{"first page", runs.ListSuspendedParams{Page: ptr(0), PerPage: ptr(3)}, []string{"run-04", "run-03", "run-02"}, 4},
		{"last partial page", runs.ListSuspendedParams{Page: ptr(1), PerPage: ptr(3)}, []string{"run-01"}, 4},
		{"page past the end", runs.ListSuspendedParams{Page: ptr(2), PerPage: ptr(3)}, []string{}, 4},
		{"page far past the end", runs.ListSuspendedParams{Page: ptr(1 << 30), PerPage: ptr(500)}, []string{}, 4},
		{"pages split a tie without overlap", runs.ListSuspendedParams{Page: ptr(0), PerPage: ptr(1)}, []string{"run-04"}, 4},
		{"second page of one", runs.ListSuspendedParams{Page: ptr(1), PerPage: ptr(1)}, []string{"run-03"}, 4},
		{"filtered and paginated", runs.ListSuspendedParams{ResourceID: ptr("u1"), Page: ptr(1), PerPage: ptr(1)}, []string{"run-01"}, 2},
		{"perPage at the maximum", runs.ListSuspendedParams{Page: ptr(0), PerPage: ptr(500)}, []string{"run-04", "run-03", "run-02", "run-01"}, 4},
	}
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		seed(t, db, discoveryRuns()...)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				res, err := f.svc.ListSuspended(bg(), tc.p)
				if err != nil {
					t.Fatal(err)
				}
				got := []string{}
				for _, r := range res.Runs {
					got = append(got, r.ID)
					if r.Status != runtype.StatusSuspended || r.SuspendedAt == nil || len(r.ToolCalls) != 1 {
						t.Errorf("%s: status %s, suspendedAt %v, %d tool calls", r.ID, r.Status, r.SuspendedAt, len(r.ToolCalls))
					}
				}
				if !slices.Equal(got, tc.want) || res.Total != tc.total {
					t.Fatalf("got %v total %d, want %v total %d", got, res.Total, tc.want, tc.total)
				}
			})
		}
	})
}

func TestSuspendedRunsValidation(t *testing.T) {
	t.Parallel()
	at := func(d time.Duration) *time.Time { v := base.Add(d); return &v }
	cases := []struct {
		name string
		p    runs.ListSuspendedParams
	}{
		{"negative page", runs.ListSuspendedParams{Page: ptr(-1), PerPage: ptr(10)}},
		{"negative page alone", runs.ListSuspendedParams{Page: ptr(-1)}},
		{"perPage zero", runs.ListSuspendedParams{Page: ptr(0), PerPage: ptr(0)}},
		{"perPage negative", runs.ListSuspendedParams{Page: ptr(0), PerPage: ptr(-5)}},
		{"perPage above the maximum", runs.ListSuspendedParams{Page: ptr(0), PerPage: ptr(501)}},
		{"fromDate after toDate", runs.ListSuspendedParams{FromDate: at(time.Second), ToDate: at(0)}},
		{"fromDate a millisecond after toDate", runs.ListSuspendedParams{FromDate: at(time.Millisecond), ToDate: at(0)}},
	}
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, err := f.svc.ListSuspended(bg(), tc.p)
				wantCode(t, err, runtype.CodeBadUserInput)
			})
		}
	})
}

func TestUnpaginatedAnswerAboveTheLimitAsksToPaginate(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{MaxUnpaginated: 3, MaxPerPage: 2})
		seed(t, db, discoveryRuns()...)
		_, err := f.svc.ListSuspended(bg(), runs.ListSuspendedParams{})
		wantCode(t, err, runtype.CodeBadUserInput)
		res, err := f.svc.ListSuspended(bg(), runs.ListSuspendedParams{AgentID: ptr("A")})
		if err != nil || res.Total != 2 {
			t.Fatalf("a filtered answer under the limit: %v %v", res, err)
		}
		res, err = f.svc.ListSuspended(bg(), runs.ListSuspendedParams{Page: ptr(1), PerPage: ptr(2)})
		if err != nil || res.Total != 4 || len(res.Runs) != 2 {
			t.Fatalf("paginated: %+v %v", res, err)
		}
		_, err = f.svc.ListSuspended(bg(), runs.ListSuspendedParams{Page: ptr(0), PerPage: ptr(3)})
		wantCode(t, err, runtype.CodeBadUserInput) // the configured maximum perPage is 2
	})
}

func TestAmbiguousToolCall(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		seed(t, db, seedOpts{id: "run-two", agent: "support-agent"})
		args := `{}`
		db.Create(&gormstore.ToolCall{RunID: "run-two", ToolCallID: "call_2", ToolName: "issue_refund", Args: &args, RequiresApproval: true, State: gormstore.ToolCallPending, CreatedAt: base})
		_, err := f.svc.Approve(bg(), runs.DecideParams{RunID: "run-two"})
		wantCode(t, err, runtype.CodeBadUserInput)
		r, _ := f.svc.Get(bg(), "run-two")
		if r.Status != runtype.StatusSuspended {
			t.Fatalf("status after a refused decision: %s", r.Status)
		}
	})
}

func TestConcurrentApprovalsOneWins(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		r := f.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 3"})
		const n = 50
		errs := make(chan error, n)
		startGate := make(chan struct{})
		for i := 0; i < n; i++ {
			go func(i int) {
				<-startGate
				_, err := f.svc.Approve(as(fmt.Sprint("user", i), nil, runtype.RoleAdmin), runs.DecideParams{RunID: r.ID})
				errs <- err
			}(i)
		}
		close(startGate)
		var ok, conflict int
		for i := 0; i < n; i++ {
			switch err := <-errs; runtype.ErrorCode(err) {
			case runtype.CodeConflict:
				conflict++
			default:
				if err != nil {
					t.Errorf("unexpected error: %v", err)
					continue
				}
				ok++
			}
		}
		done := f.finished(t, r.ID)
		if ok != 1 || conflict != n-1 || f.executed.Load() != 1 || done.Status != runtype.StatusCompleted {
			t.Fatalf("%d succeeded, %d conflicts, tool executed %d times, run %s", ok, conflict, f.executed.Load(), done.Status)
		}
		var decided int64
		db.Model(&gormstore.ToolCall{}).Where("run_id = ? AND state = ?", r.ID, gormstore.ToolCallApproved).Count(&decided)
		if decided != 1 {
			t.Fatalf("%d decision rows", decided)
		}
	})
}
