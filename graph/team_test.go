package graph_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/graph"
	"interlock/internal/dbtest"
	"interlock/runs"
	"interlock/runtype"
)

// Claims, search and saved views through the real executor over the real run service and a
// real database (both dialects): two service instances over one database, each with its own
// GraphQL handler, and a clock the test moves.

type teamClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *teamClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *teamClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// teamPrincipals are the people of these tests: approvers rita and bob, viewer vera, requesters
// req1 and req2 (of deploy-bot), portal an approver of resource r2 only, and ops, who holds
// only the custom role the restart tool names.
var teamPrincipals = map[string]*runtype.Principal{
	"rita":   {Subject: "rita", Roles: []runtype.Role{runtype.RoleApprover}},
	"bob":    {Subject: "bob", Roles: []runtype.Role{runtype.RoleApprover}},
	"vera":   {Subject: "vera", Roles: []runtype.Role{runtype.RoleViewer}},
	"req1":   {Subject: "req1", Roles: []runtype.Role{runtype.RoleRequester}, Agents: []string{"deploy-bot"}},
	"req2":   {Subject: "req2", Roles: []runtype.Role{runtype.RoleRequester}, Agents: []string{"deploy-bot"}},
	"portal": {Subject: "portal", Roles: []runtype.Role{runtype.RoleApprover}, Resources: []string{"r2"}},
	"ops":    {Subject: "ops", Roles: []runtype.Role{"sre"}},
}

func as(who string) context.Context {
	return runtype.WithPrincipal(context.Background(), teamPrincipals[who])
}

type teamInstance struct {
	svc *runs.Service
	api *api
}

func teamAgents(t *testing.T) *agent.Registry {
	t.Helper()
	obj := json.RawMessage(`{"type":"object"}`)
	reg, err := agent.NewRegistry([]*agent.Agent{{ID: "deploy-bot", Name: "Deploy bot", External: true, Tools: []*agent.Tool{
		{Name: "deploy", RequireApproval: true, InputSchema: obj},
		{Name: "restart", RequireApproval: true, ApproverRoles: []string{"sre"}, InputSchema: obj},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// teamInstanceOn starts a run service named id over db, with its GraphQL handler: each request
// acts for the principal its context names (doAs).
func teamInstanceOn(t *testing.T, db *gorm.DB, id string, clock *teamClock) *teamInstance {
	t.Helper()
	svc, err := runs.New(gormstore.New(db), teamAgents(t), runs.Config{InstanceID: id, NowFunc: clock.Now,
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: graph.NewResolver(svc)}))
	gql.AddTransport(transport.POST{})
	gql.Use(graph.ClaimsPerResponse{})
	gql.SetErrorPresenter(graph.PresentError(slog.New(slog.NewJSONHandler(logs, nil))))
	gql.SetRecoverFunc(graph.Recover(slog.New(slog.NewJSONHandler(logs, nil))))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, _ := r.Context().Value(asKey{}).(string)
		p := teamPrincipals[who]
		if p == nil {
			t.Errorf("no principal %q", who)
			http.Error(w, "who?", http.StatusUnauthorized)
			return
		}
		gql.ServeHTTP(w, r.WithContext(runtype.WithPrincipal(r.Context(), p)))
	})
	return &teamInstance{svc: svc, api: &api{h: h, log: logs}}
}

// doAs posts query as who.
func (i *teamInstance) doAs(t *testing.T, who, query string, vars map[string]any) answer {
	t.Helper()
	return i.api.do(t, context.WithValue(context.Background(), asKey{}, who), query, vars)
}

type asKey struct{}

// mustAs posts query as who and decodes its data into v, failing on any error.
func (i *teamInstance) mustAs(t *testing.T, who, query string, vars map[string]any, v any) {
	t.Helper()
	ans := i.doAs(t, who, query, vars)
	if len(ans.Errors) > 0 {
		t.Fatalf("%s: errors: %s", who, ans.body)
	}
	if err := json.Unmarshal(ans.Data, v); err != nil {
		t.Fatalf("data %s: %v", ans.Data, err)
	}
}

func codeOf(a answer) string {
	if len(a.Errors) == 0 {
		return ""
	}
	c, _ := a.Errors[0].Extensions["code"].(string)
	return c
}

// eachDialect runs fn on a fresh SQLite database and, with INTERLOCK_TEST_MYSQL_DSN, on MariaDB.
func eachDialect(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, dbtest.SQLite(t)) })
	t.Run("mysql", func(t *testing.T) { t.Parallel(); fn(t, dbtest.MySQL(t)) })
}

func request(t *testing.T, svc *runs.Service, who string, p runs.ApprovalParams) *runtype.Run {
	t.Helper()
	if p.AgentID == "" {
		p.AgentID = "deploy-bot"
	}
	if p.ToolName == "" {
		p.ToolName = "deploy"
	}
	if p.Args == nil {
		p.Args = json.RawMessage(`{"service":"api"}`)
	}
	r, err := svc.RequestApproval(as(who), p)
	if err != nil {
		t.Fatalf("RequestApproval: %v", err)
	}
	return r
}

type claimsOf struct {
	Run *struct {
		Status string
		Claims []struct {
			Subject   string
			Since     time.Time
			ExpiresAt time.Time
		}
	}
}

func (c claimsOf) subjects() string {
	if c.Run == nil {
		return "<no run>"
	}
	var s []string
	for _, cl := range c.Run.Claims {
		s = append(s, cl.Subject)
	}
	return strings.Join(s, ",")
}

const (
	claimsQuery  = `query($id: ID!) { run(runId: $id) { status claims { subject since expiresAt } } }`
	claimMut     = `mutation($id: ID!) { claimRun(runId: $id) { runId claims { subject } } }`
	releaseMut   = `mutation($id: ID!) { releaseClaim(runId: $id) { runId claims { subject } } }`
	inboxClaims  = `{ suspendedRuns { runs { runId claims { subject } } } }`
	searchQuery  = `query($q: String) { suspendedRuns(search: $q) { total runs { runId } } recentRuns(search: $q, statuses: [SUSPENDED, COMPLETED], perPage: 100) { total runs { runId } } }`
	saveMut      = `mutation($n: String!, $q: String!) { saveView(name: $n, query: $q) { id name query createdAt } }`
	viewsQuery   = `{ savedViews { id name query } }`
	deleteMut    = `mutation($id: ID!) { deleteSavedView(id: $id) }`
	declineMut   = `mutation($id: ID!) { declineToolCall(runId: $id) { status } }`
	teamDeadline = 20 * time.Second
)

func TestClaimsOverGraphQL(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, db *gorm.DB) {
		clock := &teamClock{now: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}
		a := teamInstanceOn(t, db, "instance-a", clock)
		b := teamInstanceOn(t, db, "instance-b", clock)
		run := request(t, a.svc, "req1", runs.ApprovalParams{ResourceID: "r1"})
		restart := request(t, a.svc, "req1", runs.ApprovalParams{ToolName: "restart", ResourceID: "r1"})
		vars := map[string]any{"id": run.ID}

		// Who may claim: not a viewer, not someone who cannot see the run, not someone whose
		// roles decide none of its calls.
		if code := codeOf(a.doAs(t, "vera", claimMut, vars)); code != "FORBIDDEN" {
			t.Errorf("a viewer's claim: code %q, want FORBIDDEN", code)
		}
		if code := codeOf(a.doAs(t, "portal", claimMut, vars)); code != "NOT_FOUND" {
			t.Errorf("a claim on another resource's run: code %q, want NOT_FOUND", code)
		}
		if code := codeOf(a.doAs(t, "rita", claimMut, map[string]any{"id": restart.ID})); code != "FORBIDDEN" {
			t.Errorf("rita's claim of a restart (approverRoles sre): code %q, want FORBIDDEN", code)
		}
		var ok struct{ ClaimRun struct{ RunID string } }
		a.mustAs(t, "ops", claimMut, map[string]any{"id": restart.ID}, &ok)
		if code := codeOf(a.doAs(t, "rita", claimMut, map[string]any{"id": "no-such-run"})); code != "NOT_FOUND" {
			t.Errorf("a claim of no run: code %q", code)
		}

		// Instance b watches the inbox (as vera) before rita claims on instance a.
		ctx, cancel := context.WithTimeout(as("vera"), teamDeadline)
		defer cancel()
		changes, err := b.svc.WatchSuspended(ctx, runs.WatchFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var claimed struct {
			ClaimRun struct {
				Claims []struct{ Subject string }
			}
		}
		a.mustAs(t, "rita", claimMut, vars, &claimed)
		if len(claimed.ClaimRun.Claims) != 1 || claimed.ClaimRun.Claims[0].Subject != "rita" {
			t.Fatalf("claimRun answered claims %+v", claimed.ClaimRun.Claims)
		}
		waitChange(t, changes, run.ID)

		// Seen on the other instance: in the run and in the inbox; bob joins.
		var got claimsOf
		b.mustAs(t, "vera", claimsQuery, vars, &got)
		if got.subjects() != "rita" || !got.Run.Claims[0].ExpiresAt.Equal(clock.Now().Add(runs.ClaimTTL)) || !got.Run.Claims[0].Since.Equal(clock.Now()) {
			t.Fatalf("claims on b %+v", got.Run)
		}
		clock.Add(time.Minute)
		b.mustAs(t, "bob", claimMut, vars, &claimed)
		clock.Add(30 * time.Second)
		a.mustAs(t, "rita", claimMut, vars, &claimed) // rita renews: until 30 s after bob's
		var inbox struct {
			SuspendedRuns struct {
				Runs []struct {
					RunID  string
					Claims []struct{ Subject string }
				}
			}
		}
		a.mustAs(t, "vera", inboxClaims, nil, &inbox)
		byRun := map[string]string{}
		for _, r := range inbox.SuspendedRuns.Runs {
			var s []string
			for _, c := range r.Claims {
				s = append(s, c.Subject)
			}
			byRun[r.RunID] = strings.Join(s, ",")
		}
		if byRun[run.ID] != "rita,bob" || byRun[restart.ID] != "ops" {
			t.Errorf("inbox claims %v", byRun)
		}

		// Expiry: past bob's three minutes only rita's renewed claim stands, then none.
		clock.Add(runs.ClaimTTL - 30*time.Second - time.Second)
		a.mustAs(t, "vera", claimsQuery, vars, &got)
		if got.subjects() != "rita,bob" {
			t.Errorf("a second before bob's expiry: %q", got.subjects())
		}
		clock.Add(time.Second)
		a.mustAs(t, "vera", claimsQuery, vars, &got)
		if got.subjects() != "rita" {
			t.Errorf("at bob's expiry: %q, want rita", got.subjects())
		}
		clock.Add(time.Minute)
		b.mustAs(t, "vera", claimsQuery, vars, &got)
		if got.subjects() != "" {
			t.Errorf("past every expiry: %q, want none", got.subjects())
		}

		// Release: one's own only; announced too.
		a.mustAs(t, "rita", claimMut, vars, &claimed)
		b.mustAs(t, "bob", claimMut, vars, &claimed)
		var released struct {
			ReleaseClaim struct {
				Claims []struct{ Subject string }
			}
		}
		a.mustAs(t, "rita", releaseMut, vars, &released)
		if len(released.ReleaseClaim.Claims) != 1 || released.ReleaseClaim.Claims[0].Subject != "bob" {
			t.Errorf("after rita's release: %+v", released.ReleaseClaim.Claims)
		}
		waitChange(t, changes, run.ID)
		a.mustAs(t, "vera", releaseMut, vars, &released) // holds none: changes nothing
		b.mustAs(t, "vera", claimsQuery, vars, &got)
		if got.subjects() != "bob" {
			t.Errorf("after releases: %q, want bob", got.subjects())
		}

		// A claim decides nothing: rita declines the run bob is on; then nobody is on it.
		var dec struct{ DeclineToolCall struct{ Status string } }
		a.mustAs(t, "rita", declineMut, vars, &dec)
		if dec.DeclineToolCall.Status != "COMPLETED" {
			t.Errorf("declined run is %s", dec.DeclineToolCall.Status)
		}
		b.mustAs(t, "vera", claimsQuery, vars, &got)
		if got.subjects() != "" {
			t.Errorf("a decided run's claims: %q", got.subjects())
		}
		if code := codeOf(b.doAs(t, "bob", claimMut, vars)); code != "CONFLICT" {
			t.Errorf("claim of a decided run: code %q, want CONFLICT", code)
		}
	})
}

// waitChange waits for a suspended-set change of run id on ch.
func waitChange(t *testing.T, ch <-chan runs.RunChange, id string) {
	t.Helper()
	for c := range ch {
		if c.Run.ID == id && c.Kind == runs.ChangeChanged {
			return
		}
	}
	t.Fatalf("no CHANGED of run %s within %s", id, teamDeadline)
}

type searchAnswer struct {
	SuspendedRuns struct {
		Total int
		Runs  []struct{ RunID string }
	}
	RecentRuns struct {
		Total int
		Runs  []struct{ RunID string }
	}
}

func (s searchAnswer) ids() (suspended, recent map[string]bool) {
	suspended, recent = map[string]bool{}, map[string]bool{}
	for _, r := range s.SuspendedRuns.Runs {
		suspended[r.RunID] = true
	}
	for _, r := range s.RecentRuns.Runs {
		recent[r.RunID] = true
	}
	return suspended, recent
}

func TestSearchOverGraphQL(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, db *gorm.DB) {
		clock := &teamClock{now: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}
		a := teamInstanceOn(t, db, "instance-a", clock)
		pay := request(t, a.svc, "req1", runs.ApprovalParams{ResourceID: "r1", ThreadID: "Release-Train", Args: json.RawMessage(`{"service":"Payments","note":"50%_off"}`)})
		clock.Add(time.Second)
		web := request(t, a.svc, "req2", runs.ApprovalParams{ResourceID: "r2", ThreadID: "hotfix", Args: json.RawMessage(`{"service":"web"}`)})
		clock.Add(time.Second)
		rst := request(t, a.svc, "req2", runs.ApprovalParams{ToolName: "restart", ResourceID: "r2", Args: json.RawMessage(`{"service":"payments-worker"}`)})
		clock.Add(time.Second)
		done := request(t, a.svc, "req1", runs.ApprovalParams{ResourceID: "r1", Args: json.RawMessage(`{"service":"billing"}`)})
		var dec struct{ DeclineToolCall struct{ Status string } }
		a.mustAs(t, "rita", declineMut, map[string]any{"id": done.ID}, &dec)

		for _, tc := range []struct {
			who, q string
			want   []*runtype.Run
		}{
			{"vera", strings.ToUpper(pay.ID), []*runtype.Run{pay}}, // run id
			{"vera", "RESTART", []*runtype.Run{rst}},               // tool
			{"vera", "payments", []*runtype.Run{pay, rst}},         // argument text
			{"vera", "billing", []*runtype.Run{done}},              // a decided run's arguments
			{"vera", "release-train", []*runtype.Run{pay}},         // thread
			{"vera", "r2", []*runtype.Run{web, rst}},               // resource
			{"vera", "REQ1", []*runtype.Run{pay, done}},            // requester
			{"vera", "%_", []*runtype.Run{pay}},                    // wildcards match themselves
			{"portal", "payments", []*runtype.Run{rst}},            // scoped: r2 only
			{"portal", "req1", nil},                                // never another resource's runs
			{"portal", pay.ID, nil},
		} {
			var got searchAnswer
			a.mustAs(t, tc.who, searchQuery, map[string]any{"q": tc.q}, &got)
			sus, rec := got.ids()
			want := map[string]bool{}
			for _, r := range tc.want {
				want[r.ID] = true
			}
			for id := range want {
				if !rec[id] {
					t.Errorf("%s searching %q: recentRuns misses %s", tc.who, tc.q, id)
				}
				if id != done.ID && !sus[id] {
					t.Errorf("%s searching %q: suspendedRuns misses %s", tc.who, tc.q, id)
				}
			}
			for id := range rec {
				if !want[id] {
					t.Errorf("%s searching %q: recentRuns found %s", tc.who, tc.q, id)
				}
			}
			for id := range sus {
				if !want[id] || id == done.ID {
					t.Errorf("%s searching %q: suspendedRuns found %s", tc.who, tc.q, id)
				}
			}
			if got.SuspendedRuns.Total != len(got.SuspendedRuns.Runs) || got.RecentRuns.Total != len(got.RecentRuns.Runs) {
				t.Errorf("%s searching %q: totals %d and %d for %d and %d runs", tc.who, tc.q, got.SuspendedRuns.Total, got.RecentRuns.Total, len(sus), len(rec))
			}
		}
		// A requester lists nothing, search or not; a search too long is refused.
		if code := codeOf(a.doAs(t, "req1", searchQuery, map[string]any{"q": "payments"})); code != "FORBIDDEN" {
			t.Errorf("a requester's search: code %q, want FORBIDDEN", code)
		}
		if code := codeOf(a.doAs(t, "vera", searchQuery, map[string]any{"q": strings.Repeat("x", 201)})); code != "BAD_USER_INPUT" {
			t.Errorf("a search of 201 characters: code %q, want BAD_USER_INPUT", code)
		}
	})
}

func TestSavedViewsOverGraphQL(t *testing.T) {
	t.Parallel()
	eachDialect(t, func(t *testing.T, db *gorm.DB) {
		clock := &teamClock{now: time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)}
		a := teamInstanceOn(t, db, "instance-a", clock)
		type view struct{ ID, Name, Query string }
		var saved struct{ SaveView view }
		a.mustAs(t, "rita", saveMut, map[string]any{"n": "My deploys", "q": "?q=deploy&agentId=deploy-bot"}, &saved)
		if saved.SaveView.Query != "q=deploy&agentId=deploy-bot" || saved.SaveView.Name != "My deploys" {
			t.Errorf("saved %+v", saved.SaveView)
		}
		ritas := saved.SaveView.ID
		a.mustAs(t, "rita", saveMut, map[string]any{"n": "Acme", "q": "resourceId=acme"}, &saved)
		a.mustAs(t, "vera", saveMut, map[string]any{"n": "My deploys", "q": "q=web"}, &saved) // another person, same name
		for _, tc := range []struct{ name, query, code string }{
			{"My deploys", "q=x", "CONFLICT"},
			{"  ", "q=x", "BAD_USER_INPUT"},
			{strings.Repeat("n", 101), "q=x", "BAD_USER_INPUT"},
			{"long", "q=" + strings.Repeat("x", 2000), "BAD_USER_INPUT"},
			{"spaces", "q=a b", "BAD_USER_INPUT"},
		} {
			if code := codeOf(a.doAs(t, "rita", saveMut, map[string]any{"n": tc.name, "q": tc.query})); code != tc.code {
				t.Errorf("saveView(%q, %q): code %q, want %s", tc.name, tc.query, code, tc.code)
			}
		}
		var views struct{ SavedViews []view }
		a.mustAs(t, "rita", viewsQuery, nil, &views)
		if len(views.SavedViews) != 2 || views.SavedViews[0].Name != "Acme" || views.SavedViews[1].ID != ritas {
			t.Errorf("rita's views %+v", views.SavedViews)
		}
		a.mustAs(t, "vera", viewsQuery, nil, &views)
		if len(views.SavedViews) != 1 || views.SavedViews[0].Query != "q=web" {
			t.Errorf("vera's views %+v", views.SavedViews)
		}
		if code := codeOf(a.doAs(t, "vera", deleteMut, map[string]any{"id": ritas})); code != "NOT_FOUND" {
			t.Errorf("vera deleting rita's view: code %q, want NOT_FOUND", code)
		}
		var del struct{ DeleteSavedView bool }
		a.mustAs(t, "rita", deleteMut, map[string]any{"id": ritas}, &del)
		a.mustAs(t, "rita", viewsQuery, nil, &views)
		if !del.DeleteSavedView || len(views.SavedViews) != 1 || views.SavedViews[0].Name != "Acme" {
			t.Errorf("after delete: %v, %+v", del.DeleteSavedView, views.SavedViews)
		}
	})
}
