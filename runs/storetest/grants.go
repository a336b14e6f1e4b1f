package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// grantOpts describe a grant to create; zero fields take defaults.
type grantOpts struct {
	N         int // the grant's number (grantID); default the next one
	AgentID   string
	ToolName  string
	Scope     runtype.GrantScope
	Resource  *string
	ExpiresAt *time.Time
	MaxUses   *int
	CreatedAt time.Time
}

func grantID(n int) string { return fmt.Sprintf("01900000-0000-7000-9000-%012d", n) }

// grant creates a grant and returns it as created.
func (f *fixture) grant(o grantOpts) runtype.Grant {
	f.t.Helper()
	if o.N == 0 {
		f.n++
		o.N = f.n
	}
	if o.AgentID == "" {
		o.AgentID = "agent"
	}
	if o.ToolName == "" {
		o.ToolName = "issue_refund"
	}
	if o.Scope == "" {
		o.Scope = runtype.GrantScopeAgent
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = at(o.N)
	}
	by := "alice"
	g := runtype.Grant{
		ID: grantID(o.N), AgentID: o.AgentID, ToolName: o.ToolName, Scope: o.Scope, ResourceID: o.Resource,
		ArgsMatch: json.RawMessage(`{"/amount":{"lte":100}}`), ExpiresAt: o.ExpiresAt, MaxUses: o.MaxUses,
		CreatedBy: &by, CreatorRoles: []runtype.Role{runtype.RoleApprover}, CreatedAt: o.CreatedAt,
		FromRunID: id(1), FromToolCallID: "tc_1",
	}
	if o.Scope == runtype.GrantScopeResource {
		g.ScopeValue = o.Resource
	}
	if err := f.s.CreateGrant(f.ctx, g); err != nil {
		f.t.Fatalf("CreateGrant: %v", err)
	}
	return g
}

// readGrant reads a grant that must exist.
func (f *fixture) readGrant(id string) *runtype.Grant {
	f.t.Helper()
	g, err := f.s.Grant(f.ctx, id)
	if err != nil || g == nil {
		f.t.Fatalf("Grant %s = %v, %v", id, g, err)
	}
	return g
}

// grantUse is the UseGrant of call callID of running run r by grant g at when.
func grantUse(r *live, g string, callID string, when time.Time) runs.GrantUse {
	call := approval(callID)
	reason := "auto-approved by grant " + g
	receipt := "receipt-of-" + callID
	gid := g
	snap := fmt.Sprintf(`{"approved":%q}`, callID)
	return runs.GrantUse{
		Checkpoint: runs.Checkpoint{RunID: r.ID, Lease: r.Lease, TTL: hour, After: r.Seq, At: when, Snapshot: &snap,
			Events: []runtype.Event{{Type: runtype.EventToolCallApproved, ToolCall: &call, Reason: reason, GrantID: g}}},
		GrantID: g,
		Decision: runtype.Decision{RunID: r.ID, ToolCallID: callID, ToolName: call.ToolName, Kind: runtype.DecisionAutoApproved,
			DecidedAt: when, Reason: &reason, Args: call.Args, Receipt: &receipt, GrantID: &gid},
	}
}

func testGrants(t *testing.T, open Opener) {
	each(t, open, "CreateReadsBackInUTCMilliseconds", func(t *testing.T, f *fixture) {
		res := "acme"
		end := at(3600)
		g := f.grant(grantOpts{Scope: runtype.GrantScopeResource, Resource: &res, ExpiresAt: &end, MaxUses: ptr(3)})
		got := f.readGrant(g.ID)
		want := g
		want.CreatedAt = runtype.StoredTime(g.CreatedAt)
		e := runtype.StoredTime(end)
		want.ExpiresAt = &e
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("Grant = %+v\nwant    %+v", *got, want)
		}
		if got.CreatedAt.Location() != time.UTC {
			t.Fatalf("createdAt in %v, want UTC", got.CreatedAt.Location())
		}
		if none, err := f.s.Grant(f.ctx, grantID(999)); err != nil || none != nil {
			t.Fatalf("Grant(unknown) = %v, %v; want nil, nil", none, err)
		}
	})
	each(t, open, "ListFiltersAndOrders", func(t *testing.T, f *fixture) {
		a, b := "a", "b"
		g1 := f.grant(grantOpts{Resource: &a})
		g2 := f.grant(grantOpts{Resource: &b, ToolName: "deploy"})
		g3 := f.grant(grantOpts{Resource: &a, Scope: runtype.GrantScopeResource, MaxUses: ptr(1)})
		end := at(10)
		g4 := f.grant(grantOpts{Resource: &a, AgentID: "other", ExpiresAt: &end})
		if err := f.s.UseGrant(f.ctx, grantUse(f.insert(runOpts{}), g3.ID, "tc_1", at(20))); err != nil {
			t.Fatalf("UseGrant: %v", err)
		}
		list := func(p runs.GrantsParams) []string {
			t.Helper()
			got, err := f.s.Grants(f.ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for _, g := range got {
				ids = append(ids, g.ID)
			}
			return ids
		}
		yes, no := true, false
		scope := runtype.GrantScopeResource
		for _, c := range []struct {
			name string
			p    runs.GrantsParams
			want []string
		}{
			{"all, newest first", runs.GrantsParams{}, []string{g4.ID, g3.ID, g2.ID, g1.ID}},
			{"agent", runs.GrantsParams{AgentID: ptr("agent")}, []string{g3.ID, g2.ID, g1.ID}},
			{"tool", runs.GrantsParams{ToolName: ptr("deploy")}, []string{g2.ID}},
			{"scope", runs.GrantsParams{Scope: &scope}, []string{g3.ID}},
			{"active before the expiry", runs.GrantsParams{Active: &yes, At: at(9)}, []string{g4.ID, g2.ID, g1.ID}},
			{"active at the expiry", runs.GrantsParams{Active: &yes, At: at(10)}, []string{g2.ID, g1.ID}},
			{"inactive: used up or expired", runs.GrantsParams{Active: &no, At: at(10)}, []string{g4.ID, g3.ID}},
			{"resources", runs.GrantsParams{Resources: []string{"b"}}, []string{g2.ID}},
			{"no resources", runs.GrantsParams{Resources: []string{}}, []string{}},
			{"page", runs.GrantsParams{Limit: 2, Offset: 1}, []string{g3.ID, g2.ID}},
		} {
			if got := list(c.p); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	})
	each(t, open, "UseStoresTheDecisionUnderTheLease", func(t *testing.T, f *fixture) {
		g := f.grant(grantOpts{})
		r := f.insert(runOpts{})
		u := grantUse(r, g.ID, "tc_1", at(30))
		if err := f.s.UseGrant(f.ctx, u); err != nil {
			t.Fatalf("UseGrant: %v", err)
		}
		if got := f.readGrant(g.ID).Uses; got != 1 {
			t.Fatalf("uses = %d, want 1", got)
		}
		rec := f.get(r.ID)
		if rec.Status != runtype.StatusRunning || rec.LastSeq != r.Seq+1 || rec.Snapshot == nil || *rec.Snapshot != *u.Snapshot {
			t.Fatalf("run after UseGrant: %s, last seq %d, snapshot %v", rec.Status, rec.LastSeq, rec.Snapshot)
		}
		if len(rec.Decisions) != 1 {
			t.Fatalf("decisions = %+v, want one", rec.Decisions)
		}
		d := rec.Decisions[0]
		if d.Kind != runtype.DecisionAutoApproved || d.GrantID == nil || *d.GrantID != g.ID || d.DecidedBy != nil ||
			d.Receipt == nil || *d.Receipt != "receipt-of-tc_1" || d.ToolCallID != "tc_1" || !d.DecidedAt.Equal(runtype.StoredTime(at(30))) {
			t.Fatalf("decision = %+v", d)
		}
		evs := f.eventsAfter(r.ID, r.Seq)
		if len(evs) != 1 || evs[0].Type != runtype.EventToolCallApproved || evs[0].GrantID != g.ID {
			t.Fatalf("events = %+v", evs)
		}
	})
	each(t, open, "TheAuditTrailNamesTheGrant", func(t *testing.T, f *fixture) {
		g := f.grant(grantOpts{})
		r := f.insert(runOpts{})
		if err := f.s.UseGrant(f.ctx, grantUse(r, g.ID, "tc_1", at(30))); err != nil {
			t.Fatalf("UseGrant: %v", err)
		}
		all, _ := f.decisionsOf(runs.DecisionQuery{From: at(0), To: at(100), Limit: 10})
		if len(all) != 1 || all[0].GrantID == nil || *all[0].GrantID != g.ID || all[0].Approvals != nil {
			t.Fatalf("the audit trail's decisions = %+v, want the one the grant let through, naming it", all)
		}
	})
	each(t, open, "SpentOrLeaseLostStoresNothing", func(t *testing.T, f *fixture) {
		end := at(100)
		limited := f.grant(grantOpts{MaxUses: ptr(1)})
		expiring := f.grant(grantOpts{ExpiresAt: &end})
		revoked := f.grant(grantOpts{})
		if err := f.s.RevokeGrant(f.ctx, revoked.ID, ptr("bob"), at(40)); err != nil {
			t.Fatalf("RevokeGrant: %v", err)
		}
		first := f.insert(runOpts{})
		if err := f.s.UseGrant(f.ctx, grantUse(first, limited.ID, "tc_1", at(50))); err != nil {
			t.Fatalf("first use: %v", err)
		}
		r := f.insert(runOpts{})
		for _, c := range []struct {
			name string
			u    runs.GrantUse
			want error
		}{
			{"used up", grantUse(r, limited.ID, "tc_1", at(50)), runs.ErrGrantSpent},
			{"expired at its end", grantUse(r, expiring.ID, "tc_1", at(100)), runs.ErrGrantSpent},
			{"revoked", grantUse(r, revoked.ID, "tc_1", at(50)), runs.ErrGrantSpent},
			{"unknown grant", grantUse(r, grantID(999), "tc_1", at(50)), runs.ErrGrantSpent},
			{"another lease", grantUse(&live{ID: r.ID, Lease: "other", Seq: r.Seq}, expiring.ID, "tc_1", at(50)), runs.ErrLeaseLost},
			{"another last seq", grantUse(&live{ID: r.ID, Lease: r.Lease, Seq: r.Seq + 5}, expiring.ID, "tc_1", at(50)), runs.ErrLeaseLost},
		} {
			if err := f.s.UseGrant(f.ctx, c.u); !errors.Is(err, c.want) {
				t.Errorf("%s: UseGrant = %v, want %v", c.name, err, c.want)
			}
		}
		rec := f.get(r.ID)
		if rec.LastSeq != r.Seq || len(rec.Decisions) != 0 {
			t.Fatalf("a refused use stored something: last seq %d (want %d), decisions %+v", rec.LastSeq, r.Seq, rec.Decisions)
		}
		if u := f.readGrant(expiring.ID).Uses; u != 0 {
			t.Fatalf("a refused use consumed the grant: uses %d", u)
		}
		if err := f.s.UseGrant(f.ctx, grantUse(r, expiring.ID, "tc_1", at(99))); err != nil {
			t.Fatalf("use before the end: %v", err)
		}
	})
	each(t, open, "RevokeOnce", func(t *testing.T, f *fixture) {
		g := f.grant(grantOpts{})
		if err := f.s.RevokeGrant(f.ctx, g.ID, ptr("bob"), at(60)); err != nil {
			t.Fatalf("RevokeGrant: %v", err)
		}
		got := f.readGrant(g.ID)
		if got.RevokedAt == nil || !got.RevokedAt.Equal(runtype.StoredTime(at(60))) || got.RevokedBy == nil || *got.RevokedBy != "bob" {
			t.Fatalf("revoked = %v by %v", got.RevokedAt, got.RevokedBy)
		}
		if err := f.s.RevokeGrant(f.ctx, g.ID, ptr("carol"), at(61)); !errors.Is(err, runs.ErrStale) {
			t.Fatalf("second RevokeGrant = %v, want ErrStale", err)
		}
		if by := *f.readGrant(g.ID).RevokedBy; by != "bob" {
			t.Fatalf("the second revocation overwrote the first: by %s", by)
		}
		if err := f.s.RevokeGrant(f.ctx, grantID(999), nil, at(61)); !errors.Is(err, runs.ErrNoSuchGrant) {
			t.Fatalf("RevokeGrant(unknown) = %v, want ErrNoSuchGrant", err)
		}
	})
	each(t, open, "RacingUsesOfTheLastUseExactlyOneWins", func(t *testing.T, f *fixture) {
		g := f.grant(grantOpts{MaxUses: ptr(1)})
		const n = 12
		uses := make([]runs.GrantUse, n)
		for i := range uses {
			uses[i] = grantUse(f.insert(runOpts{}), g.ID, "tc_1", at(70))
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range uses {
			wg.Go(func() { <-start; errs[i] = f.s.UseGrant(f.ctx, uses[i]) })
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, runs.ErrGrantSpent):
				t.Errorf("use %d: %v", i, err)
			}
		}
		if won != 1 || f.readGrant(g.ID).Uses != 1 {
			t.Fatalf("%d uses won, grant counts %d; want exactly one", won, f.readGrant(g.ID).Uses)
		}
	})
	each(t, open, "RequestLetThroughConsumesInItsInsert", func(t *testing.T, f *fixture) {
		g := f.grant(grantOpts{AgentID: "deploy-bot", ToolName: "deploy", MaxUses: ptr(1)})
		letThrough := func() runs.NewRun {
			n := f.newRequest(requestOpts{Approved: true})
			gid := g.ID
			n.External.Call.RequiresApproval = true
			n.External.Decision.Kind, n.External.Decision.GrantID = runtype.DecisionAutoApproved, &gid
			return n
		}
		first := letThrough()
		if err := f.s.InsertRun(f.ctx, first); err != nil {
			t.Fatalf("InsertRun: %v", err)
		}
		got := f.get(first.Run.ID)
		if got.Status != runtype.StatusCompleted || len(got.Decisions) != 1 || got.Decisions[0].Kind != runtype.DecisionAutoApproved ||
			got.Decisions[0].GrantID == nil || *got.Decisions[0].GrantID != g.ID {
			t.Fatalf("request let through: %s, decisions %+v", got.Status, got.Decisions)
		}
		second := letThrough()
		if err := f.s.InsertRun(f.ctx, second); !errors.Is(err, runs.ErrGrantSpent) {
			t.Fatalf("InsertRun on a spent grant = %v, want ErrGrantSpent", err)
		}
		if r, err := f.s.GetRun(f.ctx, second.Run.ID); err != nil || r != nil {
			t.Fatalf("a request refused for its spent grant was stored: %v, %v", r, err)
		}
	})
	each(t, open, "DecideStoresTheRememberedGrant", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		d := decision(r, runtype.DecisionApproved, "lease-new", at(80))
		by := "alice"
		g := runtype.Grant{ID: grantID(500), AgentID: "agent", ToolName: "issue_refund", Scope: runtype.GrantScopeAgent,
			CreatedBy: &by, CreatorRoles: []runtype.Role{runtype.RoleApprover}, CreatedAt: at(80), FromRunID: r.ID, FromToolCallID: r.ToolCalls[0].ToolCallID}
		stale := d
		stale.Version++
		stale.Grant = &g
		if err := f.s.Decide(f.ctx, stale); !errors.Is(err, runs.ErrStale) {
			t.Fatalf("stale Decide = %v, want ErrStale", err)
		}
		if got, _ := f.s.Grant(f.ctx, g.ID); got != nil {
			t.Fatalf("a decision that lost stored its grant: %+v", got)
		}
		d.Grant = &g
		f.decide(r, d)
		if got := f.readGrant(g.ID); got.FromRunID != r.ID || got.Uses != 0 || got.RevokedAt != nil {
			t.Fatalf("remembered grant = %+v", got)
		}
	})
}
