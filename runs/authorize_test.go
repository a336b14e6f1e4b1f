package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// as is a context acting for a principal.
func as(subject string, resources []string, roles ...runtype.Role) context.Context {
	return runtype.WithPrincipal(context.Background(), &runtype.Principal{Subject: subject, Roles: roles, Resources: resources})
}

func TestRolesGateEachOperation(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		viewer := as("vera", nil, runtype.RoleViewer)
		operator := as("otto", nil, runtype.RoleOperator)
		approver := as("alice", nil, runtype.RoleApprover)
		nobody := as("nora", nil)

		_, err := f.svc.StartRun(viewer, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 1 for 5"})
		wantCode(t, err, runtype.CodeForbidden)
		started, err := f.svc.StartRun(operator, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 1 for 5", ResourceID: ptr("r1")})
		if err != nil {
			t.Fatal(err)
		}
		if started.StartedBy == nil || *started.StartedBy != "otto" {
			t.Fatalf("startedBy = %v, want otto", started.StartedBy)
		}
		f.until(t, started.ID, 0, runtype.StatusSuspended)

		for name, read := range map[string]func(context.Context) error{
			"Get": func(ctx context.Context) error { _, err := f.svc.Get(ctx, started.ID); return err },
			"ListSuspended": func(ctx context.Context) error {
				_, err := f.svc.ListSuspended(ctx, runs.ListSuspendedParams{})
				return err
			},
			"RecentRuns": func(ctx context.Context) error {
				_, err := f.svc.RecentRuns(ctx, runs.RecentParams{PerPage: 10})
				return err
			},
			"Threads": func(ctx context.Context) error {
				_, _, err := f.svc.Threads(ctx, runs.ThreadsParams{PerPage: 10})
				return err
			},
			"Follow": func(ctx context.Context) error {
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				_, err := f.svc.Follow(ctx, started.ID, 0)
				return err
			},
			"WatchSuspended": func(ctx context.Context) error {
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				_, err := f.svc.WatchSuspended(ctx, runs.WatchFilter{})
				return err
			},
			"Authorize": runs.Authorize,
		} {
			if err := read(viewer); err != nil {
				t.Errorf("%s as a viewer: %v", name, err)
			}
			if err := read(nobody); runtype.ErrorCode(err) != runtype.CodeForbidden {
				t.Errorf("%s as a principal without a role: %v, want FORBIDDEN", name, err)
			}
		}

		for _, ctx := range []context.Context{viewer, operator} {
			_, err := f.svc.Approve(ctx, runs.DecideParams{RunID: started.ID})
			wantCode(t, err, runtype.CodeForbidden)
			_, err = f.svc.Decline(ctx, runs.DecideParams{RunID: started.ID}, "no")
			wantCode(t, err, runtype.CodeForbidden)
		}
		// Who decides is who authenticated.
		after, err := f.svc.Approve(approver, runs.DecideParams{RunID: started.ID})
		if err != nil {
			t.Fatal(err)
		}
		if d := after.Decisions; len(d) != 1 || d[0].DecidedBy == nil || *d[0].DecidedBy != "alice" {
			t.Fatalf("decisions = %+v, want one decided by alice", d)
		}
		f.finished(t, started.ID)
	})
}

func TestScopedPrincipalLearnsNothingOfOtherResources(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		admin := as("root", nil, runtype.RoleAdmin)
		scoped := as("portal", []string{"r2"}, runtype.RoleAdmin)
		watchCtx, stopWatch := context.WithCancel(scoped)
		defer stopWatch()
		changes, err := f.svc.WatchSuspended(watchCtx, runs.WatchFilter{})
		if err != nil {
			t.Fatal(err)
		}

		other, err := f.svc.StartRun(admin, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 7 for 9", ThreadID: ptr("t1"), ResourceID: ptr("r1")})
		if err != nil {
			t.Fatal(err)
		}
		f.until(t, other.ID, 0, runtype.StatusSuspended)
		unscoped, err := f.svc.StartRun(admin, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 8 for 9"})
		if err != nil {
			t.Fatal(err)
		}
		f.until(t, unscoped.ID, 0, runtype.StatusSuspended)
		before := f.record(t, other.ID)

		for _, p := range []runs.ListSuspendedParams{{}, {ResourceID: ptr("r1")}, {ThreadID: ptr("t1")}, {AgentID: ptr("support-agent")}} {
			res, err := f.svc.ListSuspended(scoped, p)
			if err != nil || res.Total != 0 || len(res.Runs) != 0 {
				t.Errorf("ListSuspended(%+v) = %+v, %v; want nothing", p, res, err)
			}
		}
		if res, err := f.svc.RecentRuns(scoped, runs.RecentParams{Statuses: runtype.AllStatuses, PerPage: 10}); err != nil || res.Total != 0 {
			t.Errorf("RecentRuns = %+v, %v; want nothing", res, err)
		}
		if th, err := f.svc.Thread(scoped, "t1", 0); err != nil || th != nil {
			t.Errorf("Thread(t1) = %+v, %v; want nil", th, err)
		}
		_, err = f.svc.Get(scoped, other.ID)
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Get(scoped, unscoped.ID)
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Follow(scoped, other.ID, 0)
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Approve(scoped, runs.DecideParams{RunID: other.ID})
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Decline(scoped, runs.DecideParams{RunID: other.ID}, "no")
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.Resume(scoped, runs.DecideParams{RunID: other.ID}, json.RawMessage(`{}`))
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.EditAndApprove(scoped, runs.DecideParams{RunID: other.ID}, json.RawMessage(`{"orderId":"1","amount":1}`))
		wantCode(t, err, runtype.CodeNotFound)
		// The answers about a run it may not see are those about a run that does not exist.
		_, errNone := f.svc.Approve(scoped, runs.DecideParams{RunID: "no-such-run"})
		_, errOther := f.svc.Approve(scoped, runs.DecideParams{RunID: other.ID})
		if strings.ReplaceAll(errNone.Error(), "no-such-run", "X") != strings.ReplaceAll(errOther.Error(), other.ID, "X") {
			t.Errorf("NOT_FOUND messages differ: %q and %q", errNone, errOther)
		}

		after, err := f.svc.Get(admin, other.ID)
		if err != nil || after.Status != runtype.StatusSuspended || f.record(t, other.ID).Version != before.Version || len(after.Decisions) != 0 {
			t.Fatalf("the other resource's run changed: %+v, %v", after, err)
		}

		_, err = f.svc.StartRun(scoped, runs.StartParams{AgentID: "support-agent", Prompt: "hi", ResourceID: ptr("r1")})
		wantCode(t, err, runtype.CodeForbidden)
		_, err = f.svc.StartRun(scoped, runs.StartParams{AgentID: "support-agent", Prompt: "hi"})
		wantCode(t, err, runtype.CodeForbidden)
		own, err := f.svc.StartRun(scoped, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 3 for 1", ResourceID: ptr("r2")})
		if err != nil {
			t.Fatal(err)
		}
		// The watcher hears of its own resource's run only, though the others suspended first.
		select {
		case ch := <-changes:
			if ch.Run.ID != own.ID {
				t.Fatalf("the scoped watcher was told of run %s (resource %v)", ch.Run.ID, ch.Run.ResourceID)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the scoped watcher was not told of its own run")
		}
		res, err := f.svc.ListSuspended(scoped, runs.ListSuspendedParams{})
		if err != nil || res.Total != 1 || res.Runs[0].ID != own.ID {
			t.Fatalf("ListSuspended = %+v, %v; want its own run only", res, err)
		}
	})
}

func TestSeparationOfDuties(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{SeparationOfDuties: true})
		alice := as("alice", nil, runtype.RoleApprover)
		bob := as("bob", nil, runtype.RoleApprover)
		suspend := func() *runtype.Run {
			r, err := f.svc.StartRun(alice, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 1 for 5"})
			if err != nil {
				t.Fatal(err)
			}
			f.until(t, r.ID, 0, runtype.StatusSuspended)
			return r
		}
		r := suspend()
		_, err := f.svc.Approve(alice, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeForbidden)
		if !strings.Contains(err.Error(), "separation of duties") {
			t.Errorf("message %q does not say why", err)
		}
		_, err = f.svc.EditAndApprove(alice, runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"orderId":"1","amount":1}`))
		wantCode(t, err, runtype.CodeForbidden)
		if _, err := f.svc.Approve(bob, runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatal(err)
		}
		f.finished(t, r.ID)
		// Declining one's own risky call is always allowed.
		r = suspend()
		if _, err := f.svc.Decline(alice, runs.DecideParams{RunID: r.ID}, "not this one"); err != nil {
			t.Fatal(err)
		}
		f.finished(t, r.ID)

		off := setup(t, db, runs.Config{})
		r2, err := off.svc.StartRun(alice, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 3 for 5"})
		if err != nil {
			t.Fatal(err)
		}
		off.until(t, r2.ID, 0, runtype.StatusSuspended)
		if _, err := off.svc.Approve(alice, runs.DecideParams{RunID: r2.ID}); err != nil {
			t.Fatalf("without separation of duties the starter may approve: %v", err)
		}
		off.finished(t, r2.ID)
	})
}

func TestApproverRolesOfATool(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		guarded := &agent.Agent{
			ID: "guarded-agent", Name: "Guarded", Model: &llm.Demo{},
			Tools: []*agent.Tool{{
				Name: "issue_refund", RequireApproval: true, ApproverRoles: []string{"refunds"},
				InputSchema: json.RawMessage(`{"type":"object"}`),
				ExecuteFunc: func(ctx context.Context, c *agent.Call) (any, error) { return map[string]any{"ok": true}, nil },
			}},
		}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{guarded}})
		admin := as("root", nil, runtype.RoleAdmin)
		approver := as("alice", nil, runtype.RoleApprover)
		refunds := as("rita", nil, "refunds")
		suspend := func() *runtype.Run {
			r, err := f.svc.StartRun(admin, runs.StartParams{AgentID: "guarded-agent", Prompt: "refund order 1 for 5"})
			if err != nil {
				t.Fatal(err)
			}
			f.until(t, r.ID, 0, runtype.StatusSuspended)
			return r
		}
		r := suspend()
		_, err := f.svc.Approve(approver, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeForbidden)
		if !strings.Contains(err.Error(), "refunds") {
			t.Errorf("message %q does not name the role needed", err)
		}
		_, err = f.svc.Decline(approver, runs.DecideParams{RunID: r.ID}, "no")
		wantCode(t, err, runtype.CodeForbidden)
		if _, err := f.svc.Approve(refunds, runs.DecideParams{RunID: r.ID}); err != nil {
			t.Fatalf("a holder of the tool's approver role: %v", err)
		}
		f.finished(t, r.ID)
		r = suspend()
		if _, err := f.svc.Decline(admin, runs.DecideParams{RunID: r.ID}, "admin may"); err != nil {
			t.Fatalf("admin: %v", err)
		}
		f.finished(t, r.ID)
		// The custom role decides only the tools that name it: not the support agent's refunds.
		r2, err := f.svc.StartRun(admin, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 2 for 5"})
		if err != nil {
			t.Fatal(err)
		}
		f.until(t, r2.ID, 0, runtype.StatusSuspended)
		_, err = f.svc.Approve(refunds, runs.DecideParams{RunID: r2.ID})
		wantCode(t, err, runtype.CodeForbidden)
		if _, err := f.svc.Approve(approver, runs.DecideParams{RunID: r2.ID}); err != nil {
			t.Fatal(err)
		}
		f.finished(t, r2.ID)
	})
}

// TestNoPrincipalIsUnauthenticated: every entry point of the service, called with a context that
// acts for nobody, answers UNAUTHENTICATED and changes nothing; System and Anonymous are
// unrestricted and recorded as nobody. (Before, a context without a principal was unrestricted:
// a request that slipped past authentication started and approved runs as nobody.)
func TestNoPrincipalIsUnauthenticated(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{})
		r := f.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 3"})
		nobody := context.Background()
		for name, call := range map[string]func() error{
			"StartRun": func() error {
				_, err := f.svc.StartRun(nobody, runs.StartParams{AgentID: "support-agent", Prompt: "refund order 1 for 5"})
				return err
			},
			"Get":           func() error { _, err := f.svc.Get(nobody, r.ID); return err },
			"ListSuspended": func() error { _, err := f.svc.ListSuspended(nobody, runs.ListSuspendedParams{}); return err },
			"RecentRuns":    func() error { _, err := f.svc.RecentRuns(nobody, runs.RecentParams{PerPage: 20}); return err },
			"Approve":       func() error { _, err := f.svc.Approve(nobody, runs.DecideParams{RunID: r.ID}); return err },
			"EditAndApprove": func() error {
				_, err := f.svc.EditAndApprove(nobody, runs.DecideParams{RunID: r.ID}, []byte(`{}`))
				return err
			},
			"Decline":        func() error { _, err := f.svc.Decline(nobody, runs.DecideParams{RunID: r.ID}, "no"); return err },
			"Resume":         func() error { _, err := f.svc.Resume(nobody, runs.DecideParams{RunID: r.ID}, nil); return err },
			"Follow":         func() error { _, err := f.svc.Follow(nobody, r.ID, 0); return err },
			"WatchSuspended": func() error { _, err := f.svc.WatchSuspended(nobody, runs.WatchFilter{}); return err },
			"Thread":         func() error { _, err := f.svc.Thread(nobody, "t1", 0); return err },
			"Threads":        func() error { _, _, err := f.svc.Threads(nobody, runs.ThreadsParams{PerPage: 20}); return err },
			"Authorize":      func() error { return runs.Authorize(nobody) },
		} {
			if err := call(); runtype.ErrorCode(err) != runtype.CodeUnauthenticated {
				t.Errorf("%s without a principal: %v, want UNAUTHENTICATED", name, err)
			}
		}
		got, err := f.svc.Get(bg(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runtype.StatusSuspended || len(got.Decisions) != 0 || f.executed.Load() != 0 {
			t.Fatalf("after the refused calls: %s, decisions %+v, executed %d; want it untouched", got.Status, got.Decisions, f.executed.Load())
		}
		// The server's own principals may do everything, and are recorded as nobody.
		for name, ctx := range map[string]context.Context{"System": bg(), "Anonymous": runtype.WithPrincipal(context.Background(), runtype.Anonymous())} {
			started, err := f.svc.StartRun(ctx, runs.StartParams{AgentID: "support-agent", Prompt: "hello"})
			if err != nil || started.StartedBy != nil {
				t.Fatalf("%s starts a run: %v, startedBy %v; want started by nobody", name, err, started.StartedBy)
			}
		}
		after, err := f.svc.Approve(runtype.WithPrincipal(context.Background(), runtype.Anonymous()), runs.DecideParams{RunID: r.ID})
		if err != nil || len(after.Decisions) != 1 || after.Decisions[0].DecidedBy != nil {
			t.Fatalf("Anonymous approves: %v, decisions %+v; want one decided by nobody", err, after.Decisions)
		}
	})
}
