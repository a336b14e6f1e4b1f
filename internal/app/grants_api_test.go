package app_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

type apiGrant struct {
	ID         string          `json:"id"`
	AgentID    string          `json:"agentId"`
	ToolName   string          `json:"toolName"`
	Scope      string          `json:"scope"`
	ScopeValue *string         `json:"scopeValue"`
	ArgsMatch  json.RawMessage `json:"argsMatch"`
	ExpiresAt  *string         `json:"expiresAt"`
	MaxUses    *int            `json:"maxUses"`
	Uses       int             `json:"uses"`
	Active     bool            `json:"active"`
	CreatedBy  *string         `json:"createdBy"`
	FromRunID  string          `json:"fromRunId"`
	RevokedAt  *string         `json:"revokedAt"`
	RevokedBy  *string         `json:"revokedBy"`
}

const grantFields = `id agentId toolName scope scopeValue argsMatch expiresAt maxUses uses active createdBy fromRunId revokedAt revokedBy`

type apiDecided struct {
	Status    string `json:"status"`
	Decisions []struct {
		Kind      string  `json:"kind"`
		GrantID   *string `json:"grantId"`
		DecidedBy *string `json:"decidedBy"`
		Receipt   *string `json:"receipt"`
		Reason    *string `json:"reason"`
	} `json:"decisions"`
}

// settled waits until run id is no longer RUNNING on s, and returns it with its decisions.
func settled(t *testing.T, s *apptest.Server, token, id string) apiDecided {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var out struct{ Run apiDecided }
		s.MustAs(t, token, `query($id: ID!) { run(runId: $id) { status decisions { kind grantId decidedBy receipt reason } } }`, map[string]any{"id": id}, &out)
		if out.Run.Status != "RUNNING" {
			return out.Run
		}
	}
	t.Fatalf("run %s still RUNNING after 20s", id)
	return apiDecided{}
}

// TestGrantsOverTheAPI: approve and allow similar, a similar call let through on another
// instance with its decision AUTO_APPROVED naming the grant, the errors' codes, and a revocation
// on one instance seen at once by the other (two servers over one database on MySQL).
func TestGrantsOverTheAPI(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "mysql"} {
		t.Run(name, func(t *testing.T) {
			db := "sqlite:" + filepath.Join(t.TempDir(), "interlock.db")
			if name == "mysql" {
				db = dbtest.MySQLURL(dbtest.MySQLDSN(t)) // skipped without a MySQL DSN
			}
			a := apptest.AuthServer(t, db, "")
			b := a
			if name == "mysql" {
				b = apptest.AuthServer(t, db, "")
			}
			otto, alice, bob, vera := apptest.TokenOf("otto"), apptest.TokenOf("alice"), apptest.TokenOf("bob"), apptest.TokenOf("vera")
			thread := map[string]any{"threadId": "th-" + name}
			first := a.SuspendAs(t, otto, "refund order 42 for 30", thread)
			remember := `mutation($id: ID!, $remember: GrantInput) { approveToolCall(runId: $id, remember: $remember) { status } }`
			in := map[string]any{"scope": "THREAD", "ttl": 3600, "maxUses": 2, "argsMatch": map[string]any{"/amount": map[string]any{"lte": 50}}}

			other := a.SuspendAs(t, otto, "refund order 7 for 30", map[string]any{"threadId": "th-other-" + name})
			for _, c := range []struct {
				token, code string
				remember    map[string]any
			}{
				{vera, "FORBIDDEN", in},
				{alice, "BAD_USER_INPUT", map[string]any{"scope": "THREAD", "argsMatch": map[string]any{"/nope": map[string]any{"eq": 1}}}},
				{alice, "BAD_USER_INPUT", map[string]any{"scope": "THREAD", "argsMatch": map[string]any{"/orderId": map[string]any{"lte": 1}}}},
				{alice, "BAD_USER_INPUT", map[string]any{"scope": "THREAD", "ttl": 0}},
				{alice, "BAD_USER_INPUT", map[string]any{"scope": "RESOURCE"}}, // the run has no resource
			} {
				if r := a.PostAs(t, c.token, remember, map[string]any{"id": other.ID, "remember": c.remember}); r.Code != c.code {
					t.Errorf("remember %v as %s: %s %q, want %s", c.remember, c.token, r.Code, r.Msg, c.code)
				}
			}

			var approved struct{ ApproveToolCall struct{ Status string } }
			a.MustAs(t, alice, remember, map[string]any{"id": first.ID, "remember": in}, &approved)
			var list struct{ Grants []apiGrant }
			b.MustAs(t, vera, `{ grants(active: true) { `+grantFields+` } }`, nil, &list)
			if len(list.Grants) != 1 {
				t.Fatalf("grants = %+v, want one", list.Grants)
			}
			g := list.Grants[0]
			if g.Scope != "THREAD" || g.ScopeValue == nil || *g.ScopeValue != "th-"+name || g.ToolName != "issue_refund" || g.MaxUses == nil || *g.MaxUses != 2 ||
				g.ExpiresAt == nil || g.CreatedBy == nil || *g.CreatedBy != "alice" || g.FromRunID != first.ID || !g.Active || !strings.Contains(string(g.ArgsMatch), `"lte":50`) {
				t.Fatalf("grant %+v", g)
			}

			// A similar call on the other instance runs without waiting.
			var started struct{ StartRun struct{ ID string } }
			start := `mutation($input: StartRunInput!) { startRun(input: $input) { id } }`
			b.MustAs(t, otto, start, map[string]any{"input": map[string]any{"agentId": "support-agent", "prompt": "refund order 43 for 40", "threadId": "th-" + name}}, &started)
			run := settled(t, b, vera, started.StartRun.ID)
			if run.Status != "COMPLETED" || len(run.Decisions) != 1 {
				t.Fatalf("similar call: %+v", run)
			}
			d := run.Decisions[0]
			if d.Kind != "AUTO_APPROVED" || d.GrantID == nil || *d.GrantID != g.ID || d.DecidedBy != nil || d.Receipt == nil || d.Reason == nil || !strings.Contains(*d.Reason, g.ID) {
				t.Fatalf("decision %+v", d)
			}

			if r := b.PostAs(t, bob, `mutation($id: ID!) { revokeGrant(id: $id) { id } }`, map[string]any{"id": g.ID}); r.Code != "FORBIDDEN" {
				t.Fatalf("bob revokes alice's grant: %s %q", r.Code, r.Msg)
			}
			if r := b.PostAs(t, alice, `mutation { revokeGrant(id: "no-such-grant") { id } }`, nil); r.Code != "NOT_FOUND" {
				t.Fatalf("revoke unknown: %s %q", r.Code, r.Msg)
			}
			var revoked struct{ RevokeGrant apiGrant }
			b.MustAs(t, alice, `mutation($id: ID!) { revokeGrant(id: $id) { `+grantFields+` } }`, map[string]any{"id": g.ID}, &revoked)
			if revoked.RevokeGrant.RevokedAt == nil || revoked.RevokeGrant.RevokedBy == nil || *revoked.RevokeGrant.RevokedBy != "alice" || revoked.RevokeGrant.Active {
				t.Fatalf("revoked grant %+v", revoked.RevokeGrant)
			}
			if r := a.PostAs(t, apptest.TokenOf("root"), `mutation($id: ID!) { revokeGrant(id: $id) { id } }`, map[string]any{"id": g.ID}); r.Code != "CONFLICT" {
				t.Fatalf("revoke twice: %s %q", r.Code, r.Msg)
			}
			// Seen at once by the first instance: the next similar call waits for a person.
			after := a.SuspendAs(t, otto, "refund order 44 for 40", thread)
			if after.Status != "SUSPENDED" {
				t.Fatalf("after the revocation: %s", after.Status)
			}
		})
	}
}

// TestGrantsLetApprovalRequestsThrough: an external agent's request (POST /approvals) that a
// grant matches is answered APPROVED at once — by nobody, the reason naming the grant — and
// one that it does not match (another version) waits for a person; the grant's creator holds
// the tool's approverRoles (sre).
func TestGrantsLetApprovalRequestsThrough(t *testing.T) {
	t.Parallel()
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		first := ask(t, s, "bot", "0", deployRequest(nil))
		remember := `mutation($id: ID!, $g: GrantInput) { approveToolCall(runId: $id, remember: $g) { status } }`
		g := map[string]any{"scope": "AGENT", "maxUses": 1, "argsMatch": map[string]any{"/service": map[string]any{"eq": "api"}, "/version": map[string]any{"eq": "1.2.3"}}}
		if r := s.PostAs(t, apptest.TokenOf("alice"), remember, map[string]any{"id": first.RunID, "g": g}); r.Code != "FORBIDDEN" {
			t.Fatalf("alice (no sre) remembering: %s %q, want FORBIDDEN", r.Code, r.Msg)
		}
		s.MustAs(t, apptest.TokenOf("sue"), remember, map[string]any{"id": first.RunID, "g": g}, nil)

		other := ask(t, s, "bot", "0", map[string]any{"agentId": "deploy-bot", "toolName": "deploy", "args": map[string]any{"service": "api", "version": "9.9.9"}})
		if other.Status != "PENDING" {
			t.Fatalf("another version: %+v, want PENDING", other)
		}
		same := ask(t, s, "bot", "0", deployRequest(nil))
		if same.Status != "APPROVED" || same.DecidedBy != nil || same.Reason == nil || !strings.Contains(*same.Reason, "grant") {
			t.Fatalf("a request the grant matches: %+v, want APPROVED by the grant", same)
		}
		// Its one use is taken: the next waits for a person.
		if again := ask(t, s, "bot", "0", deployRequest(nil)); again.Status != "PENDING" {
			t.Fatalf("after the grant's one use: %+v, want PENDING", again)
		}
	})
}

// TestGrantLastUseOverTwoServers: two servers over one MariaDB/MySQL database, a grant with one
// use, twenty matching requests sent at once to both: exactly one is let through.
func TestGrantLastUseOverTwoServers(t *testing.T) {
	t.Parallel()
	db := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	a, b := approvalsServer(t, db), approvalsServer(t, db)
	first := ask(t, a, "bot", "0", deployRequest(nil))
	a.MustAs(t, apptest.TokenOf("sue"), `mutation($id: ID!, $g: GrantInput) { approveToolCall(runId: $id, remember: $g) { status } }`,
		map[string]any{"id": first.RunID, "g": map[string]any{"scope": "AGENT", "maxUses": 1}}, nil)
	const n = 20
	got := make([]approvalAnswer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() { <-start; got[i] = ask(t, s, "bot", "0", deployRequest(nil)) })
	}
	close(start)
	wg.Wait()
	count := map[string]int{}
	for _, g := range got {
		count[g.Status]++
	}
	if count["APPROVED"] != 1 || count["PENDING"] != n-1 {
		t.Fatalf("outcomes %v, want exactly one APPROVED and %d PENDING", count, n-1)
	}
	var list struct{ Grants []apiGrant }
	b.MustAs(t, apptest.TokenOf("vera"), `{ grants { `+grantFields+` } }`, nil, &list)
	if len(list.Grants) != 1 || list.Grants[0].Uses != 1 || list.Grants[0].Active {
		t.Fatalf("grants %+v, want one, used once, no longer active", list.Grants)
	}
}
