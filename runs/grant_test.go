package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// payBot is the external agent of the grant tests: its pay tool needs an approver holding the
// custom role payments.
func payBot() *agent.Agent {
	return &agent.Agent{ID: "pay-bot", Name: "Pay bot", External: true, Tools: []*agent.Tool{{
		Name: "pay", RequireApproval: true, ApproverRoles: []string{"payments"},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"},"currency":{"type":"string"}},"required":["amount","currency"]}`),
	}}}
}

// roleBook is the server's knowledge of subjects' current roles (Config.PrincipalOf), which a
// test changes to take a role away.
type roleBook struct {
	mu    sync.Mutex
	roles map[string][]runtype.Role
}

func (b *roleBook) set(subject string, roles ...runtype.Role) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.roles == nil {
		b.roles = map[string][]runtype.Role{}
	}
	b.roles[subject] = roles
}

func (b *roleBook) principalOf(subject string) *runtype.Principal {
	b.mu.Lock()
	defer b.mu.Unlock()
	roles, ok := b.roles[subject]
	if !ok {
		return nil // not known: a JWT's subject
	}
	return &runtype.Principal{Subject: subject, Roles: roles}
}

func grantSetup(t *testing.T, db *gorm.DB, cfg runs.Config) *fixture {
	t.Helper()
	return setupWith(t, db, cfg, setupOpts{agents: []*agent.Agent{payBot()}})
}

var (
	requester = func() context.Context { return as("rita", nil, runtype.RoleRequester) }
	payer     = func() context.Context { return as("pam", nil, "payments") }
)

// pay asks pay-bot's pay tool for amount in thread (resource acme), as ctx.
func pay(t *testing.T, f *fixture, ctx context.Context, thread string, amount string) *runtype.Run {
	t.Helper()
	return payIn(t, f, ctx, "acme", thread, amount)
}

// payIn is pay in resource.
func payIn(t *testing.T, f *fixture, ctx context.Context, resource, thread string, amount string) *runtype.Run {
	t.Helper()
	return request(t, f, ctx, runs.ApprovalParams{AgentID: "pay-bot", ToolName: "pay", ThreadID: thread, ResourceID: resource,
		Args: json.RawMessage(`{"amount":` + amount + `,"currency":"EUR"}`)})
}

// remember approves run r's call as ctx, remembering in.
func remember(t *testing.T, f *fixture, ctx context.Context, r *runtype.Run, in runs.GrantInput) {
	t.Helper()
	if _, err := f.svc.ApproveAndRemember(ctx, runs.DecideParams{RunID: r.ID}, in); err != nil {
		t.Fatalf("ApproveAndRemember: %v", err)
	}
}

// letThrough checks that r was let through by grant id without anyone asked.
func letThrough(t *testing.T, r *runtype.Run, grantID string) {
	t.Helper()
	if r.Status != runtype.StatusCompleted || len(r.Decisions) != 1 {
		t.Fatalf("run %s: %s with decisions %+v, want COMPLETED let through by grant %s", r.ID, r.Status, r.Decisions, grantID)
	}
	d := r.Decisions[0]
	if d.Kind != runtype.DecisionAutoApproved || d.GrantID == nil || *d.GrantID != grantID || d.DecidedBy != nil || d.Reason == nil || !strings.Contains(*d.Reason, grantID) {
		t.Fatalf("decision %+v, want AUTO_APPROVED by grant %s", d, grantID)
	}
}

func held(t *testing.T, r *runtype.Run, why string) {
	t.Helper()
	if r.Status != runtype.StatusSuspended {
		t.Fatalf("%s: run %s is %s with decisions %+v, want SUSPENDED for a person", why, r.ID, r.Status, r.Decisions)
	}
}

// onlyGrant returns the one grant the service lists.
func onlyGrant(t *testing.T, f *fixture) runs.GrantView {
	t.Helper()
	list, err := f.svc.Grants(bg(), runs.GrantsFilter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("Grants = %+v, %v; want one", list, err)
	}
	return list[0]
}

func TestGrantLetsSimilarCallsThroughInItsScope(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := grantSetup(t, db, runs.Config{})
		first := pay(t, f, requester(), "t1", "30")
		remember(t, f, payer(), first, runs.GrantInput{Scope: runtype.GrantScopeThread, ArgsMatch: json.RawMessage(`{"/amount":{"lte":100,"gte":1},"/currency":{"eq":"EUR"}}`)})
		g := onlyGrant(t, f)
		if g.ScopeValue == nil || *g.ScopeValue != "t1" || g.CreatedBy == nil || *g.CreatedBy != "pam" || g.FromRunID != first.ID || !g.Active {
			t.Fatalf("grant %+v", g)
		}

		same := pay(t, f, requester(), "t1", "100")
		letThrough(t, same, g.ID)
		stored, _ := f.svc.Get(bg(), same.ID)
		letThrough(t, stored, g.ID)
		evs := allEvents(t, f, same.ID)
		var approved *runtype.Event
		for i := range evs {
			if evs[i].Type == runtype.EventToolCallApproved {
				approved = &evs[i]
			}
		}
		if approved == nil || approved.GrantID != g.ID || approved.DecidedBy != "" {
			t.Fatalf("events %+v: want TOOL_CALL_APPROVED naming grant %s", evs, g.ID)
		}

		held(t, pay(t, f, requester(), "t2", "30"), "another thread")
		held(t, pay(t, f, requester(), "t1", "100.5"), "above lte")
		held(t, pay(t, f, requester(), "t1", "0.5"), "below gte")
		held(t, request(t, f, requester(), runs.ApprovalParams{AgentID: "pay-bot", ToolName: "pay", ThreadID: "t1", ResourceID: "acme",
			Args: json.RawMessage(`{"amount":30,"currency":"USD"}`)}), "another currency")
		if got := onlyGrant(t, f).Uses; got != 1 {
			t.Fatalf("uses = %d, want 1", got)
		}
	})
}

func TestGrantInputIsChecked(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := grantSetup(t, db, runs.Config{})
		r := pay(t, f, requester(), "", "30")
		for _, c := range []struct {
			name string
			ctx  context.Context
			in   runs.GrantInput
			code runtype.Code
		}{
			{"pointer not in the args", payer(), runs.GrantInput{Scope: runtype.GrantScopeAgent, ArgsMatch: json.RawMessage(`{"/fee":{"lte":1}}`)}, runtype.CodeBadUserInput},
			{"lte on a string", payer(), runs.GrantInput{Scope: runtype.GrantScopeAgent, ArgsMatch: json.RawMessage(`{"/currency":{"lte":1}}`)}, runtype.CodeBadUserInput},
			{"bound not a number", payer(), runs.GrantInput{Scope: runtype.GrantScopeAgent, ArgsMatch: json.RawMessage(`{"/amount":{"lte":"100"}}`)}, runtype.CodeBadUserInput},
			{"the approved call does not match", payer(), runs.GrantInput{Scope: runtype.GrantScopeAgent, ArgsMatch: json.RawMessage(`{"/amount":{"lte":10}}`)}, runtype.CodeBadUserInput},
			{"unknown condition", payer(), runs.GrantInput{Scope: runtype.GrantScopeAgent, ArgsMatch: json.RawMessage(`{"/amount":{"lt":100}}`)}, runtype.CodeBadUserInput},
			{"not a pointer", payer(), runs.GrantInput{Scope: runtype.GrantScopeAgent, ArgsMatch: json.RawMessage(`{"amount":{"lte":100}}`)}, runtype.CodeBadUserInput},
			{"THREAD without a thread", payer(), runs.GrantInput{Scope: runtype.GrantScopeThread}, runtype.CodeBadUserInput},
			{"maxUses 0", payer(), runs.GrantInput{Scope: runtype.GrantScopeAgent, MaxUses: ptr(0)}, runtype.CodeBadUserInput},
			{"no such scope", payer(), runs.GrantInput{Scope: "PLANET"}, runtype.CodeBadUserInput},
			{"an approver without the tool's role", as("alice", nil, runtype.RoleApprover), runs.GrantInput{Scope: runtype.GrantScopeAgent}, runtype.CodeForbidden},
			{"a viewer", as("vera", nil, runtype.RoleViewer), runs.GrantInput{Scope: runtype.GrantScopeAgent}, runtype.CodeForbidden},
		} {
			_, err := f.svc.ApproveAndRemember(c.ctx, runs.DecideParams{RunID: r.ID}, c.in)
			if err == nil || runtype.ErrorCode(err) != c.code {
				t.Errorf("%s: %v, want %s", c.name, err, c.code)
			}
		}
		again, _ := f.svc.Get(bg(), r.ID)
		held(t, again, "a refused grant decides nothing")
		if list, _ := f.svc.Grants(bg(), runs.GrantsFilter{}); len(list) != 0 {
			t.Fatalf("a refused grant was stored: %+v", list)
		}
	})
}

func TestGrantTTLAndMaxUses(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		clock := &testClock{}
		f := grantSetup(t, db, runs.Config{NowFunc: clock.now})
		remember(t, f, payer(), pay(t, f, requester(), "t1", "30"), runs.GrantInput{Scope: runtype.GrantScopeResource, TTL: time.Hour})
		remember(t, f, payer(), payIn(t, f, requester(), "beta", "t9", "30"), runs.GrantInput{Scope: runtype.GrantScopeThread, MaxUses: ptr(2)})
		list, _ := f.svc.Grants(bg(), runs.GrantsFilter{})
		byThread, byResource := list[0], list[1]
		clock.advance(59 * time.Minute)
		letThrough(t, pay(t, f, requester(), "t2", "30"), byResource.ID)
		clock.advance(time.Minute)
		held(t, pay(t, f, requester(), "t2", "30"), "at its ttl")
		active := true
		live, _ := f.svc.Grants(bg(), runs.GrantsFilter{Active: &active})
		if len(live) != 1 || live[0].ID != byThread.ID {
			t.Fatalf("active grants after the ttl: %+v", live)
		}
		letThrough(t, payIn(t, f, requester(), "beta", "t9", "30"), byThread.ID)
		letThrough(t, payIn(t, f, requester(), "beta", "t9", "30"), byThread.ID)
		held(t, payIn(t, f, requester(), "beta", "t9", "30"), "its uses used")
	})
}

func TestGrantFollowsItsCreatorsRight(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		book := &roleBook{}
		book.set("pam", "payments")
		f := grantSetup(t, db, runs.Config{PrincipalOf: book.principalOf})
		remember(t, f, payer(), pay(t, f, requester(), "", "30"), runs.GrantInput{Scope: runtype.GrantScopeAgent})
		g := onlyGrant(t, f)
		letThrough(t, pay(t, f, requester(), "", "30"), g.ID)

		// Separation of duties: never a run its creator started, whatever the config says.
		self := as("pam", nil, "payments", runtype.RoleRequester)
		held(t, pay(t, f, self, "", "30"), "a run its creator started")

		// The creator loses the role: the grant stops applying.
		book.set("pam", runtype.RoleViewer)
		held(t, pay(t, f, requester(), "", "30"), "its creator lost the tool's role")
		book.set("pam", "payments")
		letThrough(t, pay(t, f, requester(), "", "30"), g.ID)
	})
}

func TestGrantBoundByTheToolsApproverRolesAndCreatorsResources(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		db2 := db
		f := grantSetup(t, db, runs.Config{})
		scoped := as("sue", []string{"acme"}, "payments")
		remember(t, f, scoped, pay(t, f, requester(), "", "30"), runs.GrantInput{Scope: runtype.GrantScopeAgent})
		g := onlyGrant(t, f)
		other := request(t, f, requester(), runs.ApprovalParams{AgentID: "pay-bot", ToolName: "pay", ResourceID: "globex", Args: json.RawMessage(`{"amount":30,"currency":"EUR"}`)})
		held(t, other, "a resource its creator does not see")
		letThrough(t, pay(t, f, requester(), "", "30"), g.ID)

		// The tool's approverRoles change (a new config): the creator's role no longer approves.
		changed := payBot()
		changed.Tools[0].ApproverRoles = []string{"treasury"}
		f2 := setupWith(t, db2, runs.Config{}, setupOpts{agents: []*agent.Agent{changed}})
		held(t, pay(t, f2, requester(), "", "30"), "the tool's approverRoles no longer name the creator's role")
	})
}

func TestRevokeGrant(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := grantSetup(t, db, runs.Config{})
		other := grantSetup(t, db, runs.Config{}) // a second instance over the same database
		remember(t, f, payer(), pay(t, f, requester(), "", "30"), runs.GrantInput{Scope: runtype.GrantScopeAgent})
		g := onlyGrant(t, f)
		letThrough(t, pay(t, other, requester(), "", "30"), g.ID)

		_, err := f.svc.RevokeGrant(as("pete", nil, "payments"), g.ID)
		wantCode(t, err, runtype.CodeForbidden)
		_, err = f.svc.RevokeGrant(payer(), "no-such-grant")
		wantCode(t, err, runtype.CodeNotFound)
		_, err = f.svc.RevokeGrant(as("sue", []string{"globex"}, runtype.RoleAdmin), g.ID)
		wantCode(t, err, runtype.CodeNotFound) // its resource is not hers: as no grant at all
		revoked, err := f.svc.RevokeGrant(payer(), g.ID)
		if err != nil || revoked.RevokedAt == nil || revoked.RevokedBy == nil || *revoked.RevokedBy != "pam" {
			t.Fatalf("RevokeGrant = %+v, %v", revoked, err)
		}
		// Seen at once by the other instance: no cache stands between the table and a use.
		held(t, pay(t, other, requester(), "", "30"), "revoked on another instance")
		_, err = other.svc.RevokeGrant(as("root", nil, runtype.RoleAdmin), g.ID)
		wantCode(t, err, runtype.CodeConflict)
		if !strings.Contains(err.Error(), "pam") {
			t.Errorf("CONFLICT %q does not say who revoked it", err)
		}
		// An admin may revoke another's grant.
		remember(t, f, payer(), pay(t, f, requester(), "", "30"), runs.GrantInput{Scope: runtype.GrantScopeAgent})
		active := true
		live, _ := f.svc.Grants(bg(), runs.GrantsFilter{Active: &active})
		if len(live) != 1 {
			t.Fatalf("active grants: %+v", live)
		}
		if _, err := other.svc.RevokeGrant(as("root", nil, runtype.RoleAdmin), live[0].ID); err != nil {
			t.Fatalf("an admin's RevokeGrant: %v", err)
		}
	})
}

// TestGrantLastUseRacedOverTwoInstances: two instances over one database, a grant with one use,
// many matching requests at once: exactly one is let through, every other waits for a person.
func TestGrantLastUseRacedOverTwoInstances(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		a := grantSetup(t, db, runs.Config{})
		b := grantSetup(t, db, runs.Config{})
		remember(t, a, payer(), pay(t, a, requester(), "", "30"), runs.GrantInput{Scope: runtype.GrantScopeAgent, MaxUses: ptr(1)})
		g := onlyGrant(t, a)
		const n = 16
		got := make([]*runtype.Run, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			f := a
			if i%2 == 1 {
				f = b
			}
			wg.Go(func() {
				<-start
				got[i], errs[i] = f.svc.RequestApproval(requester(), runs.ApprovalParams{AgentID: "pay-bot", ToolName: "pay", ResourceID: "acme",
					Args: json.RawMessage(`{"amount":30,"currency":"EUR"}`)})
			})
		}
		close(start)
		wg.Wait()
		auto := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("request %d: %v", i, errs[i])
			}
			if got[i].Status == runtype.StatusCompleted {
				letThrough(t, got[i], g.ID)
				auto++
			} else {
				held(t, got[i], "the grant's one use was taken")
			}
		}
		if auto != 1 || onlyGrant(t, a).Uses != 1 {
			t.Fatalf("%d requests let through, grant counts %d uses; want exactly one", auto, onlyGrant(t, a).Uses)
		}
	})
}

// lostUseAnswer is a store whose first UseGrant commits but answers with an error, as a
// connection that died after the commit does.
type lostUseAnswer struct {
	runs.Store
	lost atomic.Bool
}

func (s *lostUseAnswer) UseGrant(ctx context.Context, u runs.GrantUse) error {
	err := s.Store.UseGrant(ctx, u)
	if err == nil && s.lost.CompareAndSwap(false, true) {
		return errors.New("connection reset by peer")
	}
	return err
}

// An execution let through by a grant whose write's answer was lost hands the run over;
// its recovery finds the call let through in the snapshot and runs it, consuming no second use.
func TestGrantRecoveredExecutionConsumesNoSecondUse(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setupWith(t, db, runs.Config{RecoveryInterval: time.Hour}, setupOpts{wrap: func(s runs.Store) runs.Store { return &lostUseAnswer{Store: s} }})
		first := f.suspended(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 42 for 30", ResourceID: ptr("acme")})
		remember(t, f, as("alice", nil, runtype.RoleApprover), first, runs.GrantInput{Scope: runtype.GrantScopeAgent, MaxUses: ptr(5),
			ArgsMatch: json.RawMessage(`{"/amount":{"lte":50}}`)})
		f.finished(t, first.ID)

		r := f.start(t, runs.StartParams{AgentID: "counter-agent", Prompt: "refund order 43 for 40", ResourceID: ptr("acme")})
		// The answer of the use is lost: the execution hands the run over (its lease released).
		waitFor(t, "the run handed over", func() bool { return f.record(t, r.ID).LeaseOwner == nil })
		if n, err := f.svc.RecoverExpired(bg()); err != nil || n != 1 {
			t.Fatalf("RecoverExpired = %d, %v", n, err)
		}
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || len(done.Decisions) != 1 || done.Decisions[0].Kind != runtype.DecisionAutoApproved {
			t.Fatalf("recovered run: %s, decisions %+v", done.Status, done.Decisions)
		}
		if got := onlyGrant(t, f).Uses; got != 1 {
			t.Fatalf("grant uses = %d, want 1: the recovery consumed a second use", got)
		}
		if got := f.executed.Load(); got != 2 {
			t.Fatalf("tool executed %d times, want 2 (the approved call and the one let through)", got)
		}
	})
}

// A call let through by a grant whose instance died while it executed is interrupted: it goes
// to a person, never through the grant again.
func TestGrantNeverLetsAnInterruptedCallThrough(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		f := setup(t, db, runs.Config{RecoveryInterval: time.Hour})
		by := "alice"
		g := runtype.Grant{ID: "g-1", AgentID: "support-agent", ToolName: "issue_refund", Scope: runtype.GrantScopeAgent, CreatedBy: &by,
			CreatorRoles: []runtype.Role{runtype.RoleApprover}, CreatedAt: time.Now(), FromRunID: "r0", FromToolCallID: "tc_1"}
		if err := gormstore.New(db).CreateGrant(bg(), g); err != nil {
			t.Fatal(err)
		}
		deadRun(t, db, "run-executing", `{"messages":[{"role":"user","content":"refund order 5"},{"role":"assistant","toolCalls":[{"id":"call_1","name":"issue_refund","args":{"orderId":"5","amount":10}}]}],"pending":[{"id":"call_1","name":"issue_refund","args":{"orderId":"5","amount":10},"state":"executing"}],"steps":0}`)
		if n, err := f.svc.RecoverExpired(bg()); err != nil || n != 1 {
			t.Fatalf("RecoverExpired = %d, %v", n, err)
		}
		f.until(t, "run-executing", 3, runtype.StatusSuspended)
		f.svc.Wait()
		r, _ := f.svc.Get(bg(), "run-executing")
		if r.Status != runtype.StatusSuspended || len(r.ToolCalls) != 1 || !r.ToolCalls[0].Interrupted {
			t.Fatalf("recovered run: %s %+v", r.Status, r.ToolCalls)
		}
		if got := onlyGrant(t, f).Uses; got != 0 {
			t.Fatalf("grant uses = %d: an interrupted call went through a grant", got)
		}
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s", what)
		}
	}
}
