package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/golang-jwt/jwt/v5"

	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// eachAuthDB runs fn on an authServer over SQLite and one over MySQL.
func eachAuthDB(t *testing.T, extra string, fn func(t *testing.T, s *apptest.Server)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/interlock.db", extra)) })
	t.Run("mysql", func(t *testing.T) { fn(t, apptest.AuthServer(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)), extra)) })
}

// transports run one operation as a principal; each returns the first result.
func transports(s *apptest.Server) map[string]func(t testing.TB, token, query string, vars map[string]any) apptest.Result {
	return map[string]func(t testing.TB, token, query string, vars map[string]any) apptest.Result{
		"http": s.PostAs,
		"sse":  s.SSEAs,
		"ws graphql-transport-ws": func(t testing.TB, token, q string, v map[string]any) apptest.Result {
			return s.WsAs(t, "graphql-transport-ws", token, q, v)
		},
		"ws graphql-ws": func(t testing.TB, token, q string, v map[string]any) apptest.Result {
			return s.WsAs(t, "graphql-ws", token, q, v)
		},
	}
}

// TestAuthRoleByOperation: every role against every operation (the queries, startRun, the three
// decisions, both subscriptions) over HTTP, SSE and both WebSocket subprotocols.
func TestAuthRoleByOperation(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		root := apptest.TokenOf("root")
		seen := s.SuspendAs(t, root, "refund order 1 for 5", map[string]any{"threadId": "th-1"})
		type op struct {
			name, need string // need: the least role allowed
			run        func(t testing.TB, do func(t testing.TB, token, q string, v map[string]any) apptest.Result, token string) apptest.Result
		}
		query := func(q string, v map[string]any) func(t testing.TB, do func(t testing.TB, token, q string, v map[string]any) apptest.Result, token string) apptest.Result {
			return func(t testing.TB, do func(t testing.TB, token, q string, v map[string]any) apptest.Result, token string) apptest.Result {
				return do(t, token, q, v)
			}
		}
		decide := func(prompt, q string) func(t testing.TB, do func(t testing.TB, token, q string, v map[string]any) apptest.Result, token string) apptest.Result {
			return func(t testing.TB, do func(t testing.TB, token, q string, v map[string]any) apptest.Result, token string) apptest.Result {
				r := s.SuspendAs(t, root, prompt, nil)
				return do(t, token, q, map[string]any{"id": r.ID})
			}
		}
		ops := []op{
			{"suspendedRuns", "viewer", query(`{ suspendedRuns { total runs { id } } }`, nil)},
			{"run", "viewer", query(`query($id: ID!) { run(runId: $id) { id startedBy } }`, map[string]any{"id": seen.ID})},
			{"recentRuns", "viewer", query(`{ recentRuns { total } }`, nil)},
			{"threads", "viewer", query(`{ threads { total } }`, nil)},
			{"thread", "viewer", query(`{ thread(id: "th-1") { id } }`, nil)},
			{"agents", "viewer", query(`{ agents { id } }`, nil)},
			{"startRun", "operator", query(`mutation { startRun(input: {agentId: "support-agent", prompt: "hello"}) { id } }`, nil)},
			{"approveToolCall", "approver", decide("refund order 2 for 5", `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`)},
			{"declineToolCall", "approver", decide("refund order 3 for 5", `mutation($id: ID!) { declineToolCall(runId: $id, reason: "no") { status } }`)},
			{"resumeRun", "approver", decide("ask the customer which order", `mutation($id: ID!) { resumeRun(runId: $id, resumeData: {answer: "order 7"}) { status } }`)},
			{"runEvents", "viewer", query(`subscription($id: ID!) { runEvents(runId: $id) { seq type } }`, map[string]any{"id": seen.ID})},
			{"suspendedRunsChanged", "viewer", func(t testing.TB, do func(t testing.TB, token, q string, v map[string]any) apptest.Result, token string) apptest.Result {
				// A run suspends once the server serves the subscription (every role may read, so
				// it does: a refusal would end do's wait instead). The start is waited for before
				// the subtest ends, so its request never outlives the test.
				started := make(chan struct{})
				go func() {
					defer close(started)
					for deadline := time.Now().Add(20 * time.Second); s.App.Service.Watchers() == 0 && time.Now().Before(deadline); {
						time.Sleep(5 * time.Millisecond)
					}
					s.PostAs(t, root, `mutation { startRun(input: {agentId: "support-agent", prompt: "refund order 9 for 1"}) { id } }`, nil)
				}()
				defer func() { <-started }()
				return do(t, token, `subscription { suspendedRunsChanged { kind run { id } } }`, nil)
			}},
		}
		rank := map[string]int{"viewer": 1, "operator": 2, "approver": 3, "admin": 4}
		roles := map[string]string{"vera": "viewer", "otto": "operator", "alice": "approver", "root": "admin"}
		for tname, do := range transports(s) {
			for subject, role := range roles {
				for _, o := range ops {
					if o.name == "suspendedRunsChanged" && rank[role] < rank[o.need] {
						continue // nothing to trigger: every role reads
					}
					if tname == "http" && (o.name == "runEvents" || o.name == "suspendedRunsChanged") {
						continue // a subscription is not run over a plain POST (TestSubscriptionOverPlainHTTP)
					}
					got := o.run(t, do, apptest.TokenOf(subject))
					if rank[role] >= rank[o.need] {
						if got.Code != "" {
							t.Errorf("%s: %s as %s (%s): %s %s, want it allowed", tname, o.name, subject, role, got.Code, got.Msg)
						}
					} else if got.Code != "FORBIDDEN" {
						t.Errorf("%s: %s as %s (%s): %q %s, want FORBIDDEN", tname, o.name, subject, role, got.Code, got.Msg)
					}
				}
			}
		}
	})
}

// TestAuthRejectsBadCredentials: no token, a malformed header or an unknown token get
// UNAUTHENTICATED and no data: 401 over HTTP and SSE, a 4401 close after connection_init on
// both WebSocket subprotocols.
func TestAuthRejectsBadCredentials(t *testing.T) {
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/interlock.db", "")
	s.SuspendAs(t, apptest.TokenOf("root"), "refund order 1 for 5", nil)
	for name, header := range map[string]string{"none": "", "malformed": "Basic dmVyYTpwdw==", "unknown": "Bearer token-mallory", "empty bearer": "Bearer "} {
		body := strings.NewReader(`{"query":"{ suspendedRuns { total runs { id } } }"}`)
		req, _ := http.NewRequest("POST", s.URL+"/graphql", body)
		req.Header.Set("Content-Type", "application/json")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		for _, accept := range []string{"application/json", "text/event-stream"} {
			req.Header.Set("Accept", accept)
			body.Seek(0, io.SeekStart)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code, _ := apptest.FirstError(apptest.GjsonErrors(raw))
			if resp.StatusCode != http.StatusUnauthorized || code != "UNAUTHENTICATED" || strings.Contains(string(raw), "runs\":[") || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s credentials (%s): %d %s %s, want 401 UNAUTHENTICATED with a challenge", name, accept, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), raw)
			}
		}
	}
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		for name, payload := range map[string]string{"none": `{}`, "unknown": `{"authorization":"Bearer token-mallory"}`, "not a string": `{"authorization":42}`} {
			c := apptest.DialRawWS(t, s.URL, protocol)
			c.Send(apptest.WSMessage{Type: "connection_init", Payload: json.RawMessage(payload)})
			var code websocket.StatusCode
			for code == 0 {
				// graphql-ws announces the refusal with connection_error first.
				var m apptest.WSMessage
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := wsjson.Read(ctx, c.Conn, &m)
				cancel()
				if err == nil {
					if m.Type == "connection_ack" {
						t.Fatalf("%s with %s credentials: acknowledged", protocol, name)
					}
					continue
				}
				code = websocket.CloseStatus(err)
				if code == -1 {
					t.Fatalf("%s with %s credentials: %v, want a close", protocol, name, err)
				}
			}
			if code != 4401 {
				t.Errorf("%s with %s credentials closed with %d, want 4401", protocol, name, code)
			}
		}
	}
	// A token in the upgrade's Authorization header is as good as one in connection_init.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/graphql", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Authorization": {"Bearer " + apptest.TokenOf("vera")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &apptest.WSClient{T: t, Conn: conn, Protocol: "graphql-transport-ws"}
	defer conn.Close(websocket.StatusNormalClosure, "")
	c.Send(apptest.WSMessage{Type: "connection_init", Payload: json.RawMessage(`{}`)})
	if m := c.Read(); m.Type != "connection_ack" {
		t.Fatalf("with the token in the upgrade's header: %s %s", m.Type, m.Payload)
	}
	// The console, its scripts and the health check need no token: they hold no data.
	for _, path := range []string{"/", "/healthz"} {
		resp, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a token: %d", path, resp.StatusCode)
		}
	}
}

// TestScopedPrincipalAttacksAnotherResource: a principal of resource r2 tries every entry point
// on a run of r1; it learns nothing (empty lists, null, NOT_FOUND, no events) and changes
// nothing.
func TestScopedPrincipalAttacksAnotherResource(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		root, portal := apptest.TokenOf("root"), apptest.TokenOf("portal")
		victim := s.SuspendAs(t, root, "refund order 1 for 5", map[string]any{"resourceId": "r1", "threadId": "victim-thread"})
		asked := s.SuspendAs(t, root, "ask the customer which order", map[string]any{"resourceId": "r1"})
		var before struct{ SuspendedRuns struct{ Total int } }
		s.MustAs(t, root, `{ suspendedRuns { total } }`, nil, &before)

		watch := apptest.DialAs(t, s.URL, "graphql-transport-ws", portal)
		changes := watch.Subscribe(`subscription { suspendedRunsChanged { kind run { id resourceId } } }`, nil)
		s.WaitWatchers(t, 1)

		for _, q := range []string{
			`{ suspendedRuns { total runs { id } } }`,
			`{ suspendedRuns(resourceId: "r1") { total runs { id } } }`,
			`{ suspendedRuns(threadId: "victim-thread") { total runs { id } } }`,
			`{ suspendedRuns(agentId: "support-agent", resourceId: "r1") { total runs { id } } }`,
			`{ recentRuns(statuses: [SUSPENDED, RUNNING, COMPLETED, FAILED]) { total runs { id } } }`,
			`{ recentRuns(statuses: [SUSPENDED], resourceId: "r1") { total runs { id } } }`,
		} {
			var out map[string]struct{ Total int }
			s.MustAs(t, portal, q, nil, &out)
			for k, v := range out {
				if v.Total != 0 {
					t.Errorf("%s: %s total %d, want 0", q, k, v.Total)
				}
			}
		}
		var me struct{ Me struct{ Resources []string } }
		s.MustAs(t, portal, `{ me { resources } }`, nil, &me)
		if len(me.Me.Resources) != 1 || me.Me.Resources[0] != "r2" {
			t.Errorf("me as portal: %+v", me)
		}
		var one struct {
			Run    *apptest.Run
			Thread *struct{ ID string }
		}
		s.MustAs(t, portal, `query($id: ID!) { run(runId: $id) { id } thread(id: "victim-thread") { id } }`, map[string]any{"id": victim.ID}, &one)
		if one.Run != nil || one.Thread != nil {
			t.Errorf("run and thread of r1 as portal: %+v, want null", one)
		}
		for name, do := range transports(s) {
			if name == "http" {
				continue // a subscription is not run over a plain POST (TestSubscriptionOverPlainHTTP)
			}
			if got := do(t, portal, `subscription($id: ID!) { runEvents(runId: $id) { seq type } }`, map[string]any{"id": victim.ID}); got.Code != "NOT_FOUND" || got.Data != nil && string(got.Data) != "null" {
				t.Errorf("%s: runEvents of r1's run as portal: %q %s %s, want NOT_FOUND and no event", name, got.Code, got.Msg, got.Data)
			}
		}
		for _, c := range []struct{ q, id string }{
			{`mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, victim.ID},
			{`mutation($id: ID!) { approveToolCall(runId: $id, args: {orderId: "1", amount: 500}) { status } }`, victim.ID},
			{`mutation($id: ID!) { declineToolCall(runId: $id, reason: "x") { status } }`, victim.ID},
			{`mutation($id: ID!) { resumeRun(runId: $id, resumeData: {answer: "x"}) { status } }`, asked.ID},
		} {
			got := s.PostAs(t, portal, c.q, map[string]any{"id": c.id})
			unknown := s.PostAs(t, portal, c.q, map[string]any{"id": "0190e0e0-0000-7000-8000-000000000000"})
			if got.Code != "NOT_FOUND" || strings.ReplaceAll(got.Msg, c.id, "X") != strings.ReplaceAll(unknown.Msg, "0190e0e0-0000-7000-8000-000000000000", "X") {
				t.Errorf("%s as portal: %s %q; an unknown run gets %q: want the same NOT_FOUND", c.q, got.Code, got.Msg, unknown.Msg)
			}
		}
		if got := s.PostAs(t, portal, `mutation { startRun(input: {agentId: "support-agent", prompt: "hi", resourceId: "r1"}) { id } }`, nil); got.Code != "FORBIDDEN" {
			t.Errorf("startRun for r1 as portal: %q, want FORBIDDEN", got.Code)
		}
		// Nothing changed: the runs still wait, undecided.
		var after struct{ SuspendedRuns struct{ Total int } }
		s.MustAs(t, root, `{ suspendedRuns { total } }`, nil, &after)
		if after.SuspendedRuns.Total != before.SuspendedRuns.Total {
			t.Errorf("suspended total %d, was %d", after.SuspendedRuns.Total, before.SuspendedRuns.Total)
		}
		var check struct {
			Run struct {
				Status    string
				Decisions []any
			}
		}
		s.MustAs(t, root, `query($id: ID!) { run(runId: $id) { status decisions { id } } }`, map[string]any{"id": victim.ID}, &check)
		if check.Run.Status != "SUSPENDED" || len(check.Run.Decisions) != 0 {
			t.Errorf("r1's run after the attack: %+v", check.Run)
		}
		// Its watcher hears of a run of its own resource, never of the r1 runs before it.
		s.SuspendAs(t, root, "refund order 5 for 5", map[string]any{"resourceId": "r1"})
		own := s.SuspendAs(t, portal, "refund order 6 for 5", map[string]any{"resourceId": "r2"})
		data, _, errs := watch.Next(changes)
		if errs != nil || !strings.Contains(string(data), own.ID) {
			t.Errorf("portal's first change: %s %s, want its own run %s", data, errs, own.ID)
		}
	})
}

// TestSeparationOfDutiesOverTheAPI: with separationOfDuties, who started a run cannot approve
// its calls; another approver can, and decidedBy on the decision and the events names them.
func TestSeparationOfDutiesOverTheAPI(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "  separationOfDuties: true\n", func(t *testing.T, s *apptest.Server) {
		r := s.SuspendAs(t, apptest.TokenOf("alice"), "refund order 4 for 5", nil)
		got := s.PostAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": r.ID})
		if got.Code != "FORBIDDEN" || !strings.Contains(got.Msg, "separation of duties") {
			t.Fatalf("alice approves her own run: %s %q, want FORBIDDEN saying why", got.Code, got.Msg)
		}
		c := apptest.DialAs(t, s.URL, "graphql-transport-ws", apptest.TokenOf("vera"))
		op := c.Subscribe(apptest.EventsQuery, map[string]any{"runId": r.ID, "after": r.LastEventSeq})
		var out struct {
			ApproveToolCall struct {
				StartedBy string
				Decisions []struct{ DecidedBy string }
			}
		}
		s.MustAs(t, apptest.TokenOf("bob"), `mutation($id: ID!) { approveToolCall(runId: $id) { startedBy decisions { decidedBy } } }`, map[string]any{"id": r.ID}, &out)
		if out.ApproveToolCall.StartedBy != "alice" || len(out.ApproveToolCall.Decisions) != 1 || out.ApproveToolCall.Decisions[0].DecidedBy != "bob" {
			t.Fatalf("after bob's approval: %+v", out.ApproveToolCall)
		}
		for {
			data, done, errs := c.Next(op)
			if done || errs != nil {
				t.Fatalf("events ended before TOOL_CALL_APPROVED: %s", errs)
			}
			var ev struct {
				RunEvents struct{ Type, DecidedBy string }
			}
			json.Unmarshal(data, &ev)
			if ev.RunEvents.Type == "TOOL_CALL_APPROVED" {
				if ev.RunEvents.DecidedBy != "bob" {
					t.Errorf("TOOL_CALL_APPROVED decidedBy %q, want bob", ev.RunEvents.DecidedBy)
				}
				break
			}
		}
	})
}

// TestToolApproverRolesOverTheAPI: a tool with approverRoles is decided only by those roles
// (and admin); an approver without them gets FORBIDDEN naming the role.
func TestToolApproverRolesOverTheAPI(t *testing.T) {
	t.Parallel()
	refunds := apptest.NewRefundEndpoint(t)
	file := apptest.WriteConfig(t, fmt.Sprintf(`
auth:
  tokens:
    - {subject: alice, role: approver, sha256: %s}
    - {subject: rita, role: [refunds], sha256: %s}
    - {subject: root, role: admin, sha256: %s}
agents:
  - id: support-agent
    model: {provider: demo}
    tools: [issue_refund]
tools:
  - name: issue_refund
    requireApproval: true
    approverRoles: [refunds]
    http: {url: %s/refund}
`, apptest.Sha256Hex(apptest.TokenOf("alice")), apptest.Sha256Hex(apptest.TokenOf("rita")), apptest.Sha256Hex(apptest.TokenOf("root")), refunds.URL))
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/interlock.db", "--auth=on", "--config", file)
	var who struct {
		Me struct {
			Subject   string
			Roles     []string
			Resources []string
		}
		Agents []struct {
			Tools []struct {
				Name          string
				ApproverRoles []string
			}
		}
	}
	s.MustAs(t, apptest.TokenOf("rita"), `{ me { subject roles resources } agents { tools { name approverRoles } } }`, nil, &who)
	if who.Me.Subject != "rita" || len(who.Me.Roles) != 1 || who.Me.Roles[0] != "refunds" || who.Me.Resources != nil ||
		len(who.Agents) != 1 || who.Agents[0].Tools[0].ApproverRoles[0] != "refunds" {
		t.Fatalf("me and the tool's approver roles: %+v", who)
	}
	r := s.SuspendAs(t, apptest.TokenOf("root"), "refund order 8 for 5", nil)
	const approve = `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`
	if got := s.PostAs(t, apptest.TokenOf("alice"), approve, map[string]any{"id": r.ID}); got.Code != "FORBIDDEN" || !strings.Contains(got.Msg, "refunds") {
		t.Fatalf("alice approves issue_refund: %s %q, want FORBIDDEN naming refunds", got.Code, got.Msg)
	}
	if got := s.PostAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { declineToolCall(runId: $id) { status } }`, map[string]any{"id": r.ID}); got.Code != "FORBIDDEN" {
		t.Fatalf("alice declines issue_refund: %s, want FORBIDDEN", got.Code)
	}
	if calls, _ := refunds.Got(); len(calls) != 0 {
		t.Fatalf("the tool ran %d times before anyone allowed approved", len(calls))
	}
	s.MustAs(t, apptest.TokenOf("rita"), approve, map[string]any{"id": r.ID}, nil)
}

// TestJWTPrincipalsOverTheAPI: a server trusting HS256 JWTs scopes a token to the resources of
// its claim, and a WebSocket lasts no longer than its token.
func TestJWTPrincipalsOverTheAPI(t *testing.T) {
	t.Parallel()
	const secret = jwtSecret
	file := apptest.WriteConfig(t, `
auth:
  jwt: {hs256SecretEnv: INTERLOCK_TEST_JWT, issuer: https://idp.test/, audience: interlock, claims: {resources: tenants}}
`)
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/interlock.db", "--auth=on", "--config", file)
	sign := func(claims jwt.MapClaims) string {
		base := jwt.MapClaims{"iss": "https://idp.test/", "aud": "interlock", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range claims {
			base[k] = v
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, base).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	admin := sign(jwt.MapClaims{"sub": "ada", "roles": []string{"admin"}, "tenants": []string{"t1", "t2"}})
	r := s.SuspendAs(t, admin, "refund order 1 for 5", map[string]any{"resourceId": "t2"})
	viewer := sign(jwt.MapClaims{"sub": "vic", "roles": "viewer", "tenants": "t1"})
	var out struct{ SuspendedRuns struct{ Total int } }
	s.MustAs(t, viewer, `{ suspendedRuns { total } }`, nil, &out)
	if out.SuspendedRuns.Total != 0 {
		t.Errorf("a t1 viewer sees %d runs of t2", out.SuspendedRuns.Total)
	}
	s.MustAs(t, admin, `{ suspendedRuns { total } }`, nil, &out)
	if out.SuspendedRuns.Total != 1 {
		t.Errorf("a t1, t2 admin sees %d runs, want 1", out.SuspendedRuns.Total)
	}
	if got := s.PostAs(t, sign(jwt.MapClaims{"sub": "eve", "roles": "admin", "aud": "other"}), `{ me { subject } }`, nil); got.Status != http.StatusUnauthorized || got.Code != "UNAUTHENTICATED" {
		t.Errorf("a token for another audience: %d %s", got.Status, got.Code)
	}
	if got := s.PostAs(t, sign(jwt.MapClaims{"sub": "eve", "roles": "admin", "exp": time.Now().Add(-time.Hour).Unix()}), `{ me { subject } }`, nil); got.Status != http.StatusUnauthorized || !strings.Contains(got.Msg, "expired") {
		t.Errorf("an expired token: %d %s %q", got.Status, got.Code, got.Msg)
	}

	// A token that expires mid-stream: exp 25 s ago, inside the 30 s leeway for clock skew, so
	// it is good for 4 to 5 more seconds (exp is in whole seconds) — time enough, on a busy
	// machine, to connect and read the run's events before it expires. That instant is the one
	// the streams end at too. Each stream has a token of its own, and the four wait side by side.
	expiring := func() string {
		return sign(jwt.MapClaims{"sub": "ada", "roles": "admin", "tenants": "t2", "exp": time.Now().Add(-25 * time.Second).Unix()})
	}
	// A plain request inside the leeway is answered in full (it was "cancelled" when the
	// stream cut-off was exp and the validation exp plus the leeway).
	if got := s.PostAs(t, expiring(), `{ suspendedRuns { total } }`, nil); got.Code != "" || got.Status != http.StatusOK {
		t.Errorf("a request inside the leeway: %d %s %s, want it answered", got.Status, got.Code, got.Msg)
	}
	for _, protocol := range []string{"graphql-transport-ws", "graphql-ws"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			c := apptest.DialAs(t, s.URL, protocol, expiring())
			op := c.Subscribe(`subscription($id: ID!) { runEvents(runId: $id) { seq } }`, map[string]any{"id": r.ID})
			for left := r.LastEventSeq; left > 0; left-- {
				if _, done, errs := c.Next(op); done || errs != nil {
					t.Fatalf("the stream ended before the token expired: %s", errs)
				}
			}
			if code, reason := waitClosed(t, c); code != 4401 || reason != "token expired" {
				t.Errorf("the socket of an expired token closed with %d %q, want 4401 \"token expired\"", code, reason)
			}
		})
	}

	// The same with the token in the upgrade's header.
	t.Run("header", func(t *testing.T) {
		t.Parallel()
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		conn, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/graphql", &websocket.DialOptions{
			Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Authorization": {"Bearer " + expiring()}},
		})
		if err != nil {
			t.Fatal(err)
		}
		hc := &apptest.WSClient{T: t, Conn: conn, Protocol: "graphql-transport-ws"}
		hc.Send(apptest.WSMessage{Type: "connection_init", Payload: json.RawMessage(`{}`)})
		if m := hc.Read(); m.Type != "connection_ack" {
			t.Fatalf("header-authenticated socket: %s", m.Type)
		}
		hc.Subscribe(`subscription { suspendedRunsChanged { kind } }`, nil)
		if code, _ := waitClosed(t, hc); code != 4401 {
			t.Errorf("header-authenticated socket of an expired token closed with %d, want 4401", code)
		}
	})

	// Over SSE the stream ends with an UNAUTHENTICATED error, then complete: a client tells it
	// from the end of the run (complete alone).
	t.Run("sse", func(t *testing.T) {
		t.Parallel()
		body, _ := json.Marshal(map[string]any{"query": `subscription { suspendedRunsChanged { kind } }`})
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		req, _ := http.NewRequestWithContext(sctx, "POST", s.URL+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+expiring())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body) // returns when the server ends the stream
		resp.Body.Close()
		if sctx.Err() != nil {
			t.Fatal("the SSE stream of an expired token went on")
		}
		stream := string(raw)
		if !strings.Contains(stream, `"code":"UNAUTHENTICATED"`) || !strings.Contains(stream, "token expired") ||
			strings.Index(stream, "UNAUTHENTICATED") > strings.Index(stream, "event: complete") {
			t.Errorf("the SSE stream of an expired token: %q, want an UNAUTHENTICATED error, then complete", stream)
		}
	})
}

// waitClosed reads until the server closes the socket and returns its close code and reason;
// it fails the test after 20s.
func waitClosed(t *testing.T, c *apptest.WSClient) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var m apptest.WSMessage
		if err := wsjson.Read(ctx, c.Conn, &m); err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("the socket of an expired token: %v, want it closed", err)
			}
			return ce.Code, ce.Reason
		}
	}
}

// TestTokensNeverLogged: whatever the requests, good tokens, refused tokens and the generated
// admin token never reach the server's log.
func TestTokensNeverLogged(t *testing.T) {
	t.Parallel()
	var logs apptest.SyncBuffer
	cfg, err := app.ParseConfig([]string{"--auth=on", "--db", "sqlite:" + t.TempDir() + "/interlock.db"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	app, err := app.NewApp(context.Background(), cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(func() { srv.Close(); app.Close() })
	s := &apptest.Server{URL: srv.URL, App: app}
	r := s.SuspendAs(t, app.AdminToken, "refund order 1 for 5", nil)
	s.PostAs(t, "wrong-"+app.AdminToken, `{ suspendedRuns { total } }`, nil)
	s.PostAs(t, app.AdminToken, `mutation($id: ID!) { resumeRun(runId: $id, resumeData: {}) { status } }`, map[string]any{"id": r.ID})
	s.PostAs(t, app.AdminToken, `{ nosuchfield }`, nil)
	c := apptest.DialRawWS(t, s.URL, "graphql-transport-ws")
	c.Send(apptest.WSMessage{Type: "connection_init", Payload: json.RawMessage(`{"authorization":"Bearer refused-` + app.AdminToken + `"}`)})
	c.Closed()
	s.MustAs(t, app.AdminToken, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": r.ID}, nil)
	app.Service.Wait()
	if strings.Contains(logs.String(), app.AdminToken) {
		t.Fatalf("the log holds the token:\n%s", logs.String())
	}
}
