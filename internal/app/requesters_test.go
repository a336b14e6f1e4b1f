package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/notify"
)

// requestersYAML is the approvals config with requesters bound to agents: laptop (a static
// token) to hooks only, muted to none, and JWTs whose agents are their claim "agents".
func requestersYAML() string {
	y := strings.Replace(approvalsYAML(), "audience: interlock}", "audience: interlock, claims: {agents: agents}}", 1)
	for _, t := range []struct{ subject, agents string }{{"laptop", "[hooks]"}, {"muted", "[]"}} {
		y += fmt.Sprintf("    - {subject: %s, role: requester, sha256: %s, agents: %s}\n", t.subject, apptest.Sha256Hex(apptest.TokenOf(t.subject)), t.agents)
	}
	return y
}

// eachRequestersDB runs fn on a server with requestersYAML over SQLite and over MySQL.
func eachRequestersDB(t *testing.T, fn func(t *testing.T, s *apptest.Server)) {
	start := func(t *testing.T, db string) *apptest.Server {
		return apptest.Start(t, db, "--auth=on", "--config", apptest.WriteConfig(t, requestersYAML()))
	}
	t.Run("sqlite", func(t *testing.T) { fn(t, start(t, "sqlite:"+t.TempDir()+"/interlock.db")) })
	t.Run("mysql", func(t *testing.T) { fn(t, start(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)))) })
}

// postWith POSTs body to path with the Authorization header (none when empty) and returns the
// status and the {"error"} code ("" for a 2xx).
func postWith(t testing.TB, s *apptest.Server, authorization, path string, body []byte) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var e hookError
	_ = json.Unmarshal(raw, &e)
	return resp.StatusCode, e.Error.Code, string(raw)
}

// TestAgentBoundRequesters: a requester bound to agents (a token's agents, a JWT's
// claims.agents) requests only for them, over every entry: POST /approvals and both hooks 403
// FORBIDDEN, requestApproval FORBIDDEN over POST, SSE and both WebSocket subprotocols — for a
// call the policy would approve at once too (the attack: a laptop's token filing a
// deploy-bot request and being told its approval) — with nothing stored; its own agent's
// requests pass everywhere. A token bound to no agent, and a JWT without the claim, request
// for none; an unbound requester still requests for any.
func TestAgentBoundRequesters(t *testing.T) {
	t.Parallel()
	eachRequestersDB(t, func(t *testing.T, s *apptest.Server) {
		jwtOf := func(sub string, agents any) string {
			c := jwt.MapClaims{"sub": sub, "roles": "requester"}
			if agents != nil {
				c["agents"] = agents
			}
			return signJWT(t, c)
		}
		const mutation = `mutation($input: ApprovalRequestInput!) { requestApproval(input: $input) { runId status } }`
		foreign := []map[string]any{
			{"agentId": "deploy-bot", "toolName": "status", "args": map[string]any{}}, // approved by the policy at once
			deployRequest(nil),
			{"agentId": "nobody", "toolName": "x", "args": map[string]any{}}, // FORBIDDEN, not NOT_FOUND: nothing about other agents
		}
		hooks := map[string]any{"agentId": "hooks", "toolName": "Bash", "args": map[string]any{"command": "ls"}}
		for _, c := range []struct {
			name, token string
			mayUseHooks bool
		}{
			{"a token bound to hooks", apptest.TokenOf("laptop"), true},
			{"a JWT bound to hooks", jwtOf("jwt-laptop", []string{"hooks"}), true},
			{"a JWT bound to hooks (one id)", jwtOf("jwt-laptop-2", "hooks"), true},
			{"a token bound to no agent", apptest.TokenOf("muted"), false},
			{"a JWT without the claim", jwtOf("jwt-none", nil), false},
		} {
			refused := append([]map[string]any{}, foreign...)
			if !c.mayUseHooks {
				refused = append(refused, hooks)
			}
			before := countRuns(t, s)
			for _, req := range refused {
				body, _ := json.Marshal(req)
				for _, wait := range []string{"0", "30s"} {
					if status, code, raw := postWith(t, s, "Bearer "+c.token, "/approvals?wait="+wait, body); status != 403 || code != "FORBIDDEN" {
						t.Errorf("%s: POST /approvals for %s: %s, want 403 FORBIDDEN", c.name, req["agentId"], raw)
					}
				}
				for name, run := range transports(s) {
					if r := run(t, c.token, mutation, map[string]any{"input": req}); r.Code != "FORBIDDEN" || !strings.Contains(r.Msg, "may request approvals") {
						t.Errorf("%s: requestApproval for %s over %s: %q %s %s", c.name, req["agentId"], name, r.Code, r.Msg, r.Data)
					}
				}
				for _, agent := range []string{"claude-code", "codex"} {
					path := "/hooks/" + agent + "/" + req["agentId"].(string) + "?wait=30s"
					if status, code, raw := postWith(t, s, "Bearer "+c.token, path, apptest.HookFixture(t, agent+"/permission-request.json")); status != 403 || code != "FORBIDDEN" {
						t.Errorf("%s: %s: %s, want 403 FORBIDDEN", c.name, path, raw)
					}
				}
			}
			if n := countRuns(t, s) - before; n != 0 {
				t.Fatalf("%s: refused requests stored %d runs", c.name, n)
			}
			if !c.mayUseHooks {
				continue
			}
			// Its own agent, over every entry.
			body, _ := json.Marshal(hooks)
			if status, _, raw := postWith(t, s, "Bearer "+c.token, "/approvals", body); status != 200 {
				t.Errorf("%s: POST /approvals for hooks: %s", c.name, raw)
			}
			for name, run := range transports(s) {
				if r := run(t, c.token, mutation, map[string]any{"input": hooks}); r.Code != "" || !strings.Contains(string(r.Data), `"SUSPENDED"`) {
					t.Errorf("%s: requestApproval for hooks over %s: %q %s %s", c.name, name, r.Code, r.Msg, r.Data)
				}
			}
			for _, agent := range []string{"claude-code", "codex"} {
				if status, _, raw := postWith(t, s, "Bearer "+c.token, "/hooks/"+agent+"/hooks?wait=0", apptest.HookFixture(t, agent+"/permission-request.json")); status/100 != 2 {
					t.Errorf("%s: the %s hook for hooks: %s", c.name, agent, raw)
				}
			}
			if n := countRuns(t, s) - before; n != 1+4+2 {
				t.Errorf("%s: %d runs stored for its agent, want 7", c.name, n)
			}
		}
		// Unbound, the same request is filed and approved by the policy: what a binding prevents.
		if got := ask(t, s, "bot", "0", foreign[0]); got.Status != "APPROVED" {
			t.Fatalf("an unbound requester: %+v", got)
		}
	})
}

// heldWait is a request the server holds while it waits: its answer's status comes on done
// (0 when the client gave up first), and cancel gives up.
type heldWait struct {
	done   chan int
	cancel context.CancelFunc
}

// hold sends a request that waits, as bot, in the background.
func hold(t *testing.T, s *apptest.Server, method, path string, body []byte) heldWait {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, method, s.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apptest.TokenOf("bot"))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	h := heldWait{done: make(chan int, 1), cancel: cancel}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			h.done <- 0
			return
		}
		resp.Body.Close()
		h.done <- resp.StatusCode
	}()
	t.Cleanup(func() { cancel(); <-finished })
	return h
}

// waitStored waits until the server stores n runs.
func waitStored(t *testing.T, s *apptest.Server, n int64) {
	t.Helper()
	apptest.Until(t, fmt.Sprintf("%d runs stored", n), func() bool { return countRuns(t, s) == n })
}

// TestWaitsTakeConnectionSlots: with --max-connections-per-principal 4, a requester holding four
// waits — two POST /approvals?wait=, a GET /approvals/{id}?wait= and a hook — has every slot:
// the 5th to 8th waits (a POST, a GET, both hooks) are refused at once with 429
// TOO_MANY_CONNECTIONS and Retry-After, storing nothing, and so is its WebSocket (4429), while
// a POST that does not wait and another requester's wait pass. When a wait ends (its request
// decided), its slot is free again.
func TestWaitsTakeConnectionSlots(t *testing.T) {
	t.Parallel()
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		first := ask(t, s, "bot", "0", deployRequest(nil)) // answered at once: holds no slot
		deploy := func(version string) []byte {
			b, _ := json.Marshal(deployRequest(map[string]any{"args": map[string]any{"service": "api", "version": version}}))
			return b
		}
		held := []heldWait{
			hold(t, s, "POST", "/approvals?wait=60s", deploy("2")),
			hold(t, s, "POST", "/approvals?wait=60s", deploy("3")),
			hold(t, s, "GET", "/approvals/"+first.RunID+"?wait=60s", nil),
			hold(t, s, "POST", "/hooks/claude-code/hooks?wait=60s", apptest.HookFixture(t, "claude-code/permission-request.json")),
		}
		waitStored(t, s, 4)
		var waiting struct {
			SuspendedRuns struct{ Runs []struct{ RunID string } }
		}
		s.MustAs(t, apptest.TokenOf("vera"), `{ suspendedRuns { runs { runId } } }`, nil, &waiting)
		for _, r := range waiting.SuspendedRuns.Runs {
			waitFollowed(t, s, r.RunID) // each of the four is held
		}

		over := []struct {
			name, method, path string
			body               []byte
		}{
			{"a 5th wait (POST)", "POST", "/approvals?wait=60s", deploy("5")},
			{"a 6th wait (GET)", "GET", "/approvals/" + first.RunID + "?wait=60s", nil},
			{"a 7th wait (the Claude Code hook)", "POST", "/hooks/claude-code/hooks?wait=60s", apptest.HookFixture(t, "claude-code/permission-request.json")},
			{"an 8th wait (the Codex hook)", "POST", "/hooks/codex/hooks?wait=60s", apptest.HookFixture(t, "codex/permission-request.json")},
		}
		for _, o := range over {
			start := time.Now()
			got := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), o.method, o.path, string(o.body))
			if took := time.Since(start); got.status != 429 || got.code != "TOO_MANY_CONNECTIONS" || got.header.Get("Retry-After") == "" ||
				!strings.Contains(got.message, "too many connections for bot") || took > 5*time.Second {
				t.Errorf("%s: %d %s, Retry-After %q, after %s; want 429 TOO_MANY_CONNECTIONS at once", o.name, got.status, got.raw, got.header.Get("Retry-After"), took)
			}
		}
		if n := countRuns(t, s); n != 4 {
			t.Fatalf("the refused waits stored %d runs, want the 4 stored before", n)
		}
		// The slots are those WebSockets take.
		wantTooMany(t, dialFrom(t, s.URL, "graphql-transport-ws", nil, apptest.TokenOf("bot")), "bot")
		// A request that does not wait holds nothing; another requester has its own slots.
		if got := ask(t, s, "bot", "0", deployRequest(nil)); got.Status != "PENDING" {
			t.Fatalf("a POST without a wait: %+v", got)
		}
		if got := ask(t, s, "other-bot", "0.05", deployRequest(nil)); got.Status != "PENDING" {
			t.Fatalf("another requester's wait: %+v", got)
		}

		// A wait that ends frees its slot: decide the request the first POST waits on.
		var mine string
		for _, r := range waiting.SuspendedRuns.Runs {
			var read struct {
				Run struct {
					ToolCalls []struct{ Args json.RawMessage }
				}
			}
			s.MustAs(t, apptest.TokenOf("vera"), `query($id: ID!) { run(runId: $id) { toolCalls { args } } }`, map[string]any{"id": r.RunID}, &read)
			if len(read.Run.ToolCalls) == 1 && strings.Contains(string(read.Run.ToolCalls[0].Args), `"version":"2"`) {
				mine = r.RunID
			}
		}
		s.MustAs(t, apptest.TokenOf("sue"), approveMutation, map[string]any{"id": mine}, nil)
		select {
		case status := <-held[0].done:
			if status != 200 {
				t.Fatalf("the decided wait: %d", status)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the decided wait was not answered")
		}
		var next httpAnswer
		apptest.Until(t, "a wait accepted once one ended", func() bool {
			next = approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("bot"), "GET", "/approvals/"+first.RunID+"?wait=0.05", "")
			return next.status != 429
		})
		if next.status != 200 || next.body.Status != "PENDING" {
			t.Fatalf("a wait after a slot was freed: %d %s", next.status, next.raw)
		}
		for _, h := range held[1:] {
			h.cancel()
		}
	}, "--max-connections-per-principal", "4")
}

// TestGetWaitsTakeARateToken: a GET /approvals/{id} that waits takes a token of the client's
// mutation rate, as a POST does (the same bucket as its GraphQL mutations); a GET that does
// not wait takes none.
func TestGetWaitsTakeARateToken(t *testing.T) {
	t.Parallel()
	s := approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db", "--mutation-rate", "1/h", "--mutation-burst", "3")
	id := ask(t, s, "bot", "0", deployRequest(nil)).RunID // one token
	for i := range 2 {
		if got := poll(t, s, "bot", id, "0.01"); got.status != 200 {
			t.Fatalf("GET wait %d: %d %s", i+1, got.status, got.raw)
		}
	}
	got := poll(t, s, "bot", id, "0.01")
	if got.status != http.StatusTooManyRequests || got.code != "RATE_LIMITED" || got.header.Get("Retry-After") == "" {
		t.Fatalf("a GET wait over the rate: %d %s", got.status, got.raw)
	}
	if got := poll(t, s, "bot", id, "0"); got.status != 200 {
		t.Fatalf("a GET without a wait over the rate: %d %s", got.status, got.raw)
	}
	if r := s.PostAs(t, apptest.TokenOf("bot"), `mutation { requestApproval(input: {agentId: "hooks", toolName: "Bash", args: {}}) { runId } }`, nil); r.Code != "RATE_LIMITED" {
		t.Fatalf("a mutation after the GET waits spent the bucket: %s", r.Code)
	}
	if got := poll(t, s, "vera", id, "0.01"); got.status != 200 {
		t.Fatalf("another client's GET wait: %d %s", got.status, got.raw)
	}
}

// TestStrictJWTs: a JWT issued in the future beyond the 30 s leeway is 401 on /graphql,
// /approvals and the hooks (within the leeway it passes); a JWT whose subject differs from a
// static token's only by case or spaces around it is refused as an equal one.
func TestStrictJWTs(t *testing.T) {
	t.Parallel()
	s := approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db")
	hook := apptest.HookFixture(t, "claude-code/permission-request.json")
	refused := func(what, token, says string) {
		t.Helper()
		if r := s.PostAs(t, token, `{ me { subject } }`, nil); r.Code != "UNAUTHENTICATED" || !strings.Contains(r.Msg, says) {
			t.Errorf("%s over /graphql: %q %s", what, r.Code, r.Msg)
		}
		if status, code, raw := postWith(t, s, "Bearer "+token, "/approvals", []byte(`{"agentId":"hooks","toolName":"Bash","args":{}}`)); status != 401 || code != "UNAUTHENTICATED" || !strings.Contains(raw, says) {
			t.Errorf("%s on /approvals: %s", what, raw)
		}
		if status, _, raw := postWith(t, s, "Bearer "+token, "/hooks/claude-code/hooks?wait=0", hook); status != 401 {
			t.Errorf("%s on the hook: %s", what, raw)
		}
	}
	refused("iat in an hour", signJWT(t, jwt.MapClaims{"sub": "jay", "roles": "requester", "iat": time.Now().Add(time.Hour).Unix()}), "issued in the future")
	refused("iat in a minute", signJWT(t, jwt.MapClaims{"sub": "jay", "roles": "requester", "iat": time.Now().Add(time.Minute).Unix()}), "issued in the future")
	for _, iat := range []time.Duration{10 * time.Second, -time.Minute} {
		if r := s.PostAs(t, signJWT(t, jwt.MapClaims{"sub": "jay", "roles": "viewer", "iat": time.Now().Add(iat).Unix()}), `{ me { subject } }`, nil); r.Code != "" {
			t.Errorf("iat %s from now: %q %s", iat, r.Code, r.Msg)
		}
	}
	for _, sub := range []string{"bot", "Bot", "BOT", " bot", "bot ", "\tbot", "\u00a0BoT\u2003"} {
		refused(fmt.Sprintf("a JWT with subject %q", sub), signJWT(t, jwt.MapClaims{"sub": sub, "roles": "admin"}), "is the subject of a configured API token")
	}
	if r := s.PostAs(t, signJWT(t, jwt.MapClaims{"sub": "bott", "roles": "viewer"}), `{ me { subject } }`, nil); r.Code != "" {
		t.Errorf("another subject: %q %s", r.Code, r.Msg)
	}
}

// TestApprovalURLIgnoresHost: the url of /approvals' answers is under --console-url when set,
// and else under the server's own address — never under the Host header the request carries.
func TestApprovalURLIgnoresHost(t *testing.T) {
	t.Parallel()
	withHost := func(s *apptest.Server, method, path, body string) approvalAnswer {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		req.Host = "evil.example"
		req.Header.Set("Authorization", "Bearer "+apptest.TokenOf("bot"))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a approvalAnswer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, err)
		}
		return a
	}
	for _, c := range []struct {
		name string
		args []string
		base func(s *apptest.Server) string
	}{
		{"the server's own address", nil, func(s *apptest.Server) string { return s.URL }},
		{"--console-url", []string{"--console-url", "https://interlock.example.com/console/"}, func(*apptest.Server) string { return "https://interlock.example.com/console" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := approvalsServer(t, "sqlite:"+t.TempDir()+"/interlock.db", c.args...)
			posted := withHost(s, "POST", "/approvals", `{"agentId":"hooks","toolName":"Bash","args":{}}`)
			read := withHost(s, "GET", "/approvals/"+posted.RunID, "")
			want := c.base(s) + "/?run=" + posted.RunID
			for what, got := range map[string]string{"POST": posted.URL, "GET": read.URL} {
				if got != want || strings.Contains(got, "evil") {
					t.Errorf("%s's url with Host evil.example: %q, want %q", what, got, want)
				}
			}
		})
	}
}

// TestGetOfAnInternalRunIsPlainNotFound: GET /approvals/{id} of a run of an agent Interlock runs
// is NOT_FOUND in the words of an unknown id, even to a viewer who may read that run: an id of
// /approvals is an approval request's or nothing.
func TestGetOfAnInternalRunIsPlainNotFound(t *testing.T) {
	t.Parallel()
	eachApprovalsDB(t, func(t *testing.T, s *apptest.Server) {
		var started struct{ StartRun struct{ RunID string } }
		s.MustAs(t, apptest.TokenOf("otto"), `mutation { startRun(input: {agentId: "helper", prompt: "hello"}) { runId } }`, nil, &started)
		internal, unknown := started.StartRun.RunID, "00000000-0000-7000-8000-000000000000"
		for _, wait := range []string{"0", "5s"} {
			a, b := poll(t, s, "vera", internal, wait), poll(t, s, "vera", unknown, wait)
			if a.status != 404 || a.code != "NOT_FOUND" || strings.ReplaceAll(a.raw, internal, unknown) != b.raw {
				t.Errorf("GET /approvals/{internal run}?wait=%s: %d %s; an unknown id: %s", wait, a.status, a.raw, b.raw)
			}
		}
	})
}

// TestConsoleURLForEveryLink: --console-url is the base of every link the server gives — the
// url of /approvals' answers and the webhooks' run links — over notifications.consoleURL, which
// is the base of both without it.
func TestConsoleURLForEveryLink(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, base string
		args       []string
	}{
		{"--console-url", "https://interlock.example.com", []string{"--console-url", "https://interlock.example.com"}},
		{"notifications.consoleURL", "https://console.example/interlock", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t)
			file := apptest.WriteConfig(t, approvalsYAML()+notifySection(r.URL, "", ""))
			s := apptest.Start(t, "sqlite:"+t.TempDir()+"/interlock.db", append([]string{"--auth=on", "--config", file}, c.args...)...)
			got := ask(t, s, "bot", "0", deployRequest(nil))
			want := c.base + "/?run=" + got.RunID
			if got.URL != want {
				t.Errorf("/approvals' url: %q, want %q", got.URL, want)
			}
			var e notify.Event
			apptest.Until(t, "the approval_requested event delivered", func() bool {
				_, last := r.delivered()
				for _, ev := range last {
					if ev.Type == notify.ApprovalRequested {
						e = ev
						return true
					}
				}
				return false
			})
			if e.URL != want {
				t.Errorf("the webhook's url: %q, want %q", e.URL, want)
			}
		})
	}
}
