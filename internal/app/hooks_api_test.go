package app_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/internal/proctest"
)

const hookJWTSecret = "a-hooks-secret-of-at-least-32-bytes!"

// hooksConfig: the principals (each token "token-" + subject), JWTs, and external agents that take
// any tool name ("*"), one per outcome a test drives so that the same recorded body is a request
// of its own on each; short's Bash expires after a second; helper is an agent Interlock runs.
func hooksConfig(t testing.TB) string {
	t.Helper()
	var tokens strings.Builder
	for _, p := range []struct{ subject, role string }{{"cc", "requester"}, {"vera", "viewer"}, {"otto", "operator"}, {"alice", "approver"}} {
		fmt.Fprintf(&tokens, "    - {subject: %s, role: %s, sha256: %s}\n", p.subject, p.role, apptest.Sha256Hex(apptest.TokenOf(p.subject)))
	}
	fmt.Fprintf(&tokens, "    - {subject: scoped, role: requester, resources: [r1], sha256: %s}\n", apptest.Sha256Hex(apptest.TokenOf("scoped")))
	var agents strings.Builder
	for _, id := range []string{"approve", "edit", "decline", "wait", "repeat", "auth", "curl", "settings", "ends", "gone", "race", "many"} {
		fmt.Fprintf(&agents, "  - {id: %s, name: Coding agents (%s), external: true, tools: ['*']}\n", id, id)
	}
	return `
auth:
  tokens:
` + tokens.String() + `  jwt: {hs256SecretEnv: INTERLOCK_TEST_HOOK_JWT, issuer: https://idp.test/, audience: interlock}
agents:
` + agents.String() + `  - {id: short, name: Short, external: true, tools: [Bash]}
  - {id: helper, name: Helper, model: {provider: demo}}
tools:
  - name: '*'
    requireApproval: true
  - name: Bash
    requireApproval: true
    approvalTimeout: 1s
`
}

// eachHooksDB runs fn on a server with hooksConfig, over SQLite and over MySQL side by side, in
// parallel with the other tests (they mostly wait: on a hook, an approval timeout of 1 s).
func eachHooksDB(t *testing.T, fn func(t *testing.T, s *apptest.Server)) {
	t.Parallel()
	start := func(t *testing.T, db string) *apptest.Server {
		return apptest.Start(t, db, "--auth=on", "--config", apptest.WriteConfig(t, hooksConfig(t)))
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db")))
	})
	t.Run("mysql", func(t *testing.T) { t.Parallel(); fn(t, start(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)))) })
}

// postHook POSTs body to path (e.g. /hooks/claude-code/approve?wait=30s) with the Authorization
// header auth ("" for none), as the agents do: Content-Type application/json.
func postHook(s *apptest.Server, t testing.TB, path, auth string, body []byte) apptest.HookAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apptest.HookAnswer{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// waitingRequest waits until agent's request waits for a decision and returns it.
func waitingRequest(s *apptest.Server, t testing.TB, agent string) apptest.HookRun {
	t.Helper()
	return waitingRequestAs(s, t, apptest.TokenOf("alice"), agent)
}

// waitingRequestAs is waitingRequest read with token.
func waitingRequestAs(s *apptest.Server, t testing.TB, token, agent string) apptest.HookRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var out struct {
			SuspendedRuns struct{ Runs []apptest.HookRun }
		}
		s.MustAs(t, token, `query($a: ID) { suspendedRuns(agentId: $a) { runs { `+apptest.HookRunFields+` } } }`, map[string]any{"a": agent}, &out)
		if len(out.SuspendedRuns.Runs) == 1 {
			return out.SuspendedRuns.Runs[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no request of %s waits", agent)
	return apptest.HookRun{}
}

// denyWith is the recorded deny shape of agent with its message replaced.
func denyWith(t testing.TB, agent, message string) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(apptest.HookFixture(t, agent+"/answer-deny.json"), &v); err != nil {
		t.Fatal(err)
	}
	v["hookSpecificOutput"].(map[string]any)["decision"].(map[string]any)["message"] = message
	out, _ := json.Marshal(v)
	return out
}

// TestHooksReplayDocumentedBodies: the recorded PermissionRequest bodies of Claude Code and Codex,
// POSTed as the agents POST them, wait in the inbox as approval requests (the session as thread,
// the tool's input as args, a context saying who asks where); decided over GraphQL, each hook
// gets exactly the documented answer: allow, allow with updatedInput (Claude Code) or a deny
// naming the edited arguments (Codex, which fails closed on updatedInput), deny with the
// person's reason; an expired request and one nobody decided in time are denied saying so.
func TestHooksReplayDocumentedBodies(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		requester := "Bearer " + apptest.TokenOf("cc")
		for _, c := range []struct {
			agent, body, session, command string
		}{
			{"claude-code", "claude-code/permission-request.json", "abc123", "rm -rf node_modules"},
			{"codex", "codex/permission-request.json", "<session-id>", "rm -f /tmp/example"},
		} {
			t.Run(c.agent, func(t *testing.T) {
				body := apptest.HookFixture(t, c.body)
				var input struct {
					ToolInput json.RawMessage `json:"tool_input"`
				}
				json.Unmarshal(body, &input)

				// Approved as asked.
				held := s.PostHookAsync(t, "/hooks/"+c.agent+"/approve?wait=30s", requester, body)
				r := waitingRequest(s, t, "approve")
				if r.ThreadID == nil || *r.ThreadID != c.session || r.StartedBy == nil || *r.StartedBy != "cc" || r.External == nil || !*r.External ||
					len(r.ToolCalls) != 1 || r.ToolCalls[0].ToolName != "Bash" || !apptest.SameJSONValue(t, r.ToolCalls[0].Args, input.ToolInput) {
					t.Fatalf("the request as stored: %+v", r)
				}
				who := map[string]string{"claude-code": "**Claude Code** asks to run `Bash`", "codex": "**Codex** asks to run `Bash`"}[c.agent]
				if r.Context == nil || !strings.Contains(*r.Context, who) || !strings.Contains(*r.Context, c.command) || !strings.Contains(*r.Context, "session `"+c.session+"`") {
					t.Fatalf("the context shown to the person: %v", r.Context)
				}
				select {
				case a := <-held:
					t.Fatalf("answered before anyone decided: %d %s", a.Status, a.Body)
				default:
				}
				s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": r.RunID}, nil)
				apptest.WantAnswer(t, "approved", apptest.Answered(t, held), apptest.HookFixture(t, c.agent+"/answer-allow.json"))

				// Approved with edited arguments.
				held = s.PostHookAsync(t, "/hooks/"+c.agent+"/edit?wait=30s", requester, body)
				r = waitingRequest(s, t, "edit")
				s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!, $a: JSON) { approveToolCall(runId: $id, args: $a) { status } }`,
					map[string]any{"id": r.RunID, "a": map[string]any{"command": "npm run lint"}}, nil)
				if c.agent == "claude-code" {
					apptest.WantAnswer(t, "edited", apptest.Answered(t, held), apptest.HookFixture(t, "claude-code/answer-allow-updated-input.json"))
				} else {
					apptest.WantAnswer(t, "edited", apptest.Answered(t, held), denyWith(t, "codex",
						`Not run as asked: alice approved this call in Interlock only with edited arguments, which Codex cannot take from a hook. The approved arguments: {"command":"npm run lint"}`))
				}

				// Declined, with a reason.
				held = s.PostHookAsync(t, "/hooks/"+c.agent+"/decline?wait=30s", requester, body)
				r = waitingRequest(s, t, "decline")
				s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!, $r: String) { declineToolCall(runId: $id, reason: $r) { status } }`,
					map[string]any{"id": r.RunID, "r": "Reason for denial"}, nil)
				apptest.WantAnswer(t, "declined", apptest.Answered(t, held), apptest.HookFixture(t, c.agent+"/answer-deny.json"))

				// Expired: short's Bash has an approvalTimeout of 1 s.
				a := postHook(s, t, "/hooks/"+c.agent+"/short?wait=30s", requester, body)
				var exp []apptest.HookRun
				for _, r := range s.HookRequests(t, "short") {
					if r.ThreadID != nil && *r.ThreadID == c.session {
						exp = append(exp, r)
					}
				}
				if len(exp) != 1 || len(exp[0].Decisions) != 1 || exp[0].Decisions[0].Kind != "EXPIRED" {
					t.Fatalf("short's request: %+v, want one, expired", exp)
				}
				var got struct {
					HookSpecificOutput struct{ Decision struct{ Message string } }
				}
				json.Unmarshal(a.Body, &got)
				msg := got.HookSpecificOutput.Decision.Message
				if !strings.HasPrefix(msg, "Not approved: the request expired in Interlock at ") || !strings.HasSuffix(msg, " without a decision.") {
					t.Fatalf("expired: %s", a.Body)
				}
				apptest.WantAnswer(t, "expired", a, denyWith(t, c.agent, msg))

				// Nobody decides within the hook's wait.
				a = postHook(s, t, "/hooks/"+c.agent+"/wait?wait=1s", requester, body)
				apptest.WantAnswer(t, "undecided", a, denyWith(t, c.agent, "Not approved: nobody decided in Interlock within 1s."))
			})
		}
	})
}

// TestHooksRepeatedIsTheSameRequest: a hook sent again with the same body (a retry, or the agent
// asking again in the same turn) while it waits is the same request: both are held and both get
// its decision; once decided, the same body is a new call, asked anew (never answered from the
// earlier decision). Another turn is a new request.
func TestHooksRepeatedIsTheSameRequest(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		body := apptest.HookFixture(t, "codex/permission-request.json")
		requester := "Bearer " + apptest.TokenOf("cc")
		first := s.PostHookAsync(t, "/hooks/codex/repeat?wait=30s", requester, body)
		r := waitingRequest(s, t, "repeat")
		second := s.PostHookAsync(t, "/hooks/codex/repeat?wait=30s", requester, body)
		// Both are held before the decision: one sent after it is a new call (asked anew).
		apptest.Until(t, "both hooks wait on the request", func() bool { return s.App.Service.Followers(r.RunID) == 2 })
		s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!, $r: String) { declineToolCall(runId: $id, reason: $r) { status } }`,
			map[string]any{"id": r.RunID, "r": "not in prod"}, nil)
		want := denyWith(t, "codex", "not in prod")
		apptest.WantAnswer(t, "first", apptest.Answered(t, first), want)
		apptest.WantAnswer(t, "second", apptest.Answered(t, second), want)
		if n := len(s.HookRequests(t, "repeat")); n != 1 {
			t.Fatalf("%d requests stored, want 1", n)
		}
		undecided := denyWith(t, "codex", "Not approved: nobody decided in Interlock within 0s.")
		apptest.WantAnswer(t, "after the decision", postHook(s, t, "/hooks/codex/repeat?wait=0", requester, body), undecided)
		apptest.WantAnswer(t, "after the decision, again", postHook(s, t, "/hooks/codex/repeat?wait=0", requester, body), undecided)
		// Each of those stopped waiting at once (wait=0), which ended its request: the next
		// one is a request of its own again.
		if n := len(s.HookRequests(t, "repeat")); n != 3 {
			t.Fatalf("%d requests stored after the decision, want 3 (a later call joins its own only while it waits)", n)
		}
		other := bytes.Replace(body, []byte(`"<turn-id>"`), []byte(`"turn-2"`), 1)
		apptest.WantAnswer(t, "another turn", postHook(s, t, "/hooks/codex/repeat?wait=0", requester, other), undecided)
		if n := len(s.HookRequests(t, "repeat")); n != 4 {
			t.Fatalf("%d requests stored after another turn, want 4", n)
		}
	})
}

// hookError is a refused hook's body.
type hookError struct {
	Error struct{ Code, Message string }
}

func wantRefused(t testing.TB, what string, a apptest.HookAnswer, status int, code, says string) {
	t.Helper()
	var e hookError
	if err := json.Unmarshal(a.Body, &e); err != nil || a.Status != status || e.Error.Code != code || !strings.Contains(e.Error.Message, says) {
		t.Fatalf("%s: %d %s, want %d %s saying %q", what, a.Status, a.Body, status, code, says)
	}
}

// TestHooksCredentials: every credential over both endpoints, through the whole handler: no
// token, a wrong one, a malformed header and an expired JWT are 401 with the bearer challenge; a
// viewer is 403; a requester, an operator and a JWT requester are held and answered. Nothing is
// stored for a refused hook.
func TestHooksCredentials(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		sign := func(sub, role string, exp time.Time) string {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "https://idp.test/", "aud": "interlock",
				"sub": sub, "roles": role, "exp": exp.Unix()}).SignedString([]byte(hookJWTSecret))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		for _, agent := range []string{"claude-code", "codex"} {
			body := apptest.HookFixture(t, agent+"/permission-request.json")
			path := "/hooks/" + agent + "/auth?wait=0"
			before := len(s.HookRequests(t, "auth"))
			for _, c := range []struct {
				name, auth string
				status     int
				code, says string
			}{
				{"no token", "", 401, "UNAUTHENTICATED", ""},
				{"a wrong token", "Bearer token-nobody", 401, "UNAUTHENTICATED", ""},
				{"a malformed header", "Basic Y2M6c2VjcmV0", 401, "UNAUTHENTICATED", ""},
				{"an empty bearer", "Bearer ", 401, "UNAUTHENTICATED", ""},
				{"an expired JWT", "Bearer " + sign("jay", "requester", time.Now().Add(-time.Hour)), 401, "UNAUTHENTICATED", "expired"},
				{"a viewer", "Bearer " + apptest.TokenOf("vera"), 403, "FORBIDDEN", "requester"},
				{"a JWT viewer", "Bearer " + sign("vic", "viewer", time.Now().Add(time.Hour)), 403, "FORBIDDEN", ""},
			} {
				a := postHook(s, t, path, c.auth, body)
				wantRefused(t, agent+": "+c.name, a, c.status, c.code, c.says)
				if c.status == 401 && !strings.HasPrefix(a.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("%s: %s: no bearer challenge (%v)", agent, c.name, a.Header)
				}
			}
			if n := len(s.HookRequests(t, "auth")) - before; n != 0 {
				t.Fatalf("%s: %d requests stored by refused hooks", agent, n)
			}
			undecided := denyWith(t, agent, "Not approved: nobody decided in Interlock within 0s.")
			for _, c := range []struct{ name, token, subject string }{
				{"a requester", apptest.TokenOf("cc"), "cc"},
				{"an operator", apptest.TokenOf("otto"), "otto"},
				{"a JWT requester", sign("jay", "requester", time.Now().Add(time.Hour)), "jay"},
			} {
				apptest.WantAnswer(t, agent+": "+c.name, postHook(s, t, path, "Bearer "+c.token, body), undecided)
				found := false
				for _, r := range s.HookRequests(t, "auth") {
					found = found || (r.StartedBy != nil && *r.StartedBy == c.subject && strings.Contains(*r.Context, map[string]string{"codex": "Codex", "claude-code": "Claude Code"}[agent]))
				}
				if !found {
					t.Fatalf("%s: no request started by %s", agent, c.subject)
				}
			}
			// A requester scoped to resource r1 asks in r1 only (?resourceId=); the session's
			// thread then belongs to r1 (a thread stays with the resource of its first run).
			wantRefused(t, agent+": another resource", postHook(s, t, path+"&resourceId=r2", "Bearer "+apptest.TokenOf("scoped"), body), 403, "FORBIDDEN", "")
			wantRefused(t, agent+": no resource", postHook(s, t, path, "Bearer "+apptest.TokenOf("scoped"), body), 403, "FORBIDDEN", "")
			other := bytes.Replace(body, []byte(`"session_id": "`), []byte(`"session_id": "r1-`), 1)
			apptest.WantAnswer(t, agent+": its resource", postHook(s, t, path+"&resourceId=r1", "Bearer "+apptest.TokenOf("scoped"), other),
				denyWith(t, agent, "Not approved: nobody decided in Interlock within 0s."))
		}
	})
}

// TestHooksRefuseWhatIsNotAHook: an unknown agent is 404, an agent Interlock runs is 400 saying
// so, a body that is not JSON, lacks a field, or names one twice or in another case (a key twice
// at any depth of tool_input) is 400 saying which, another method is 405 and another path 404 —
// each with nothing stored.
func TestHooksRefuseWhatIsNotAHook(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		cc := "Bearer " + apptest.TokenOf("cc")
		for _, agent := range []string{"claude-code", "codex"} {
			body := apptest.HookFixture(t, agent+"/permission-request.json")
			wantRefused(t, agent+": unknown agent", postHook(s, t, "/hooks/"+agent+"/nope", cc, body), 404, "NOT_FOUND", `no agent with id "nope"`)
			wantRefused(t, agent+": internal agent", postHook(s, t, "/hooks/"+agent+"/helper", cc, body), 400, "BAD_USER_INPUT", `agent "helper" runs in Interlock`)
			for _, c := range []struct{ name, body, says string }{
				{"not JSON", "rm -rf /", "not a JSON object"},
				{"broken JSON", `{"session_id": "s", `, "not the JSON input"},
				{"no tool_name", `{"session_id": "s", "hook_event_name": "PermissionRequest", "tool_input": {}}`, "no tool_name"},
				{"no tool_input", `{"session_id": "s", "hook_event_name": "PermissionRequest", "tool_name": "Bash"}`, "no tool_input"},
				{"no session_id", `{"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {}}`, "no session_id"},
				{"another event", `{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}}`, `hook_event_name is "PreToolUse"`},
				{"tool_input not an object", `{"session_id": "s", "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": "ls"}`, "tool_input is not a JSON object"},
				// Strict names (as /approvals): encoding/json would take the last of a field given
				// twice, and a field in another case for the field.
				{"a field twice", `{"session_id": "s", "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_name": "Write", "tool_input": {}}`, `the field "tool_name" twice`},
				{"a field in another case", `{"session_id": "s", "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "ls"}, "Tool_Input": {"command": "rm -rf /"}}`, `a field "Tool_Input": field names are case-sensitive`},
				{"an argument twice", `{"session_id": "s", "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "ls", "command": "rm -rf /"}}`, `tool_input is key "command" appears twice`},
				{"a nested key twice", `{"session_id": "s", "hook_event_name": "PermissionRequest", "tool_name": "MultiEdit", "tool_input": {"edits": [{"file_path": "a", "file_path": "b"}]}}`, `tool_input is key "file_path" appears twice`},
			} {
				wantRefused(t, agent+": "+c.name, postHook(s, t, "/hooks/"+agent+"/auth", cc, []byte(c.body)), 400, "BAD_USER_INPUT", c.says)
			}
			req, _ := http.NewRequest(http.MethodGet, s.URL+"/hooks/"+agent+"/auth", nil)
			req.Header.Set("Authorization", cc)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
				t.Fatalf("%s: GET answered %d (Allow %q), want 405 POST", agent, resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
		wantRefused(t, "another agent kind", postHook(s, t, "/hooks/cursor/auth", cc, apptest.HookFixture(t, "codex/permission-request.json")), 404, "NOT_FOUND", "/hooks/claude-code/{agentId}")
		wantRefused(t, "a bad wait", postHook(s, t, "/hooks/codex/auth?wait=soon", cc, apptest.HookFixture(t, "codex/permission-request.json")), 400, "BAD_USER_INPUT", `wait="soon"`)
		for _, agent := range []string{"auth", "helper", "nope"} {
			if n := len(s.HookRequests(t, agent)); n != 0 {
				t.Fatalf("%d requests of %s stored", n, agent)
			}
		}
	})
}

// hooksDoc is the page that documents the hooks (tests run in this directory): its
// configurations and the Codex command are what these tests run, as written.
var hooksDoc = filepath.Join("..", "..", "docs", "coding-agent-hooks.md")

// hooksDocBlock is the body of the first ```lang block of hooksDoc after the line holding marker.
func hooksDocBlock(t testing.TB, marker, lang string) string {
	t.Helper()
	return docBlock(t, hooksDoc, marker, lang)
}

// docBlock is the body of the first ```lang block of the page doc after the text marker: what a
// page tells its readers to write, for a test that writes it as it is.
func docBlock(t testing.TB, doc, marker, lang string) string {
	t.Helper()
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("%s has no %q", doc, marker)
	}
	s = s[i:]
	j := strings.Index(s, "```"+lang+"\n")
	if j < 0 {
		t.Fatalf("%s has no ```%s block after %q", doc, lang, marker)
	}
	s = s[j+len("```"+lang+"\n"):]
	return s[:strings.Index(s, "```")]
}

// claudeHeader fills a Claude Code HTTP hook's header value as its reference says: $VAR and
// ${VAR} take the variable's value when allowedEnvVars names it, else the empty string.
func claudeHeader(v string, allowed []string, env map[string]string) string {
	return hookEnvRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := strings.Trim(ref, "${}")
		for _, a := range allowed {
			if a == name {
				return env[name]
			}
		}
		return ""
	})
}

var hookEnvRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)

// docHooksConfig is hooksDoc's step 1 configuration with its two tokens' digests filled
// in: ana's (the requester, "token-ana") and sam's (the approver, apptest.TokenOf("sam")).
func docHooksConfig(t testing.TB) string {
	t.Helper()
	yaml := hooksDocBlock(t, "**1. An external agent", "yaml")
	for placeholder, token := range map[string]string{"<sha256 of ana's token>": "token-ana", "<sha256 of sam's token>": apptest.TokenOf("sam")} {
		if !strings.Contains(yaml, placeholder) {
			t.Fatalf("the step 1 of docs/coding-agent-hooks.md has no %s:\n%s", placeholder, yaml)
		}
		yaml = strings.Replace(yaml, placeholder, apptest.Sha256Hex(token), 1)
	}
	return yaml
}

// docCodexHook is hooksDoc's Codex hook block and its command, checked for the shape the
// page's words rely on: a PermissionRequest command hook with a 600 s timeout, whose curl
// gives up before it (Codex kills a hook at its timeout, and a killed hook decides nothing).
func docCodexHook(t testing.TB) (toml, command string) {
	t.Helper()
	toml = hooksDocBlock(t, "**3. Codex**", "toml")
	m := regexp.MustCompile(`(?m)^command = '([^']*)'$`).FindStringSubmatch(toml)
	if m == nil || !strings.Contains(toml, "[[hooks.PermissionRequest.hooks]]\ntype = \"command\"\n") || !strings.Contains(toml, "timeout = 600\n") {
		t.Fatalf("the Codex hook of docs/coding-agent-hooks.md:\n%s", toml)
	}
	maxTime := regexp.MustCompile(`--max-time (\d+) `).FindStringSubmatch(m[1])
	if maxTime == nil {
		t.Fatalf("the Codex hook of docs/coding-agent-hooks.md gives curl no --max-time: %s", m[1])
	}
	if n, _ := strconv.Atoi(maxTime[1]); n >= 600 {
		t.Fatalf("the Codex hook of docs/coding-agent-hooks.md: curl's --max-time %d is not under the hook's timeout (600)", n)
	}
	return toml, m[1]
}

// hookRun is what a hook command did.
type hookRun struct {
	stdout, stderr string
	code           int
}

// runHookCommand runs command as Codex runs a command hook: by shell (sh or bash) with -c,
// the hook's input on stdin, the environment env (and PATH).
func runHookCommand(t testing.TB, shell, command string, env []string, stdin []byte) hookRun {
	t.Helper()
	cmd := proctest.Command(t, shell, "-c", command)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return hookRun{out.String(), errb.String(), exit.ExitCode()}
	case err != nil:
		t.Fatal(err)
	}
	return hookRun{out.String(), errb.String(), 0}
}

// wantDeny fails t unless the hook command exited 0 printing exactly Codex's deny with message.
func wantDeny(t testing.TB, what string, got hookRun, message string) {
	t.Helper()
	if got.code != 0 || !json.Valid([]byte(got.stdout)) || !apptest.SameJSONValue(t, []byte(got.stdout), denyWith(t, "codex", message)) {
		t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit 0 and the deny %q", what, got.code, got.stdout, got.stderr, message)
	}
}

// TestHooksDocConfigs: the configuration of docs/coding-agent-hooks.md, as written: its agent, policy and tokens
// serve the requests and sam's token decides them; its Claude Code settings.json hook, sent as
// Claude Code sends an HTTP hook (the header filled from allowedEnvVars), gets the allow once
// approved; its Codex command, run by sh and by bash with the hook's input on stdin, prints the
// deny with the person's reason, and, when Interlock refuses the token (401), a deny naming
// curl's exit 22 — never nothing, which Codex would leave to its reviewer model or its own
// prompt.
func TestHooksDocConfigs(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the Codex hook command needs curl:", err)
	}
	yaml := docHooksConfig(t)
	sam := apptest.TokenOf("sam")
	for _, db := range []string{"sqlite", "mysql"} {
		t.Run(db, func(t *testing.T) {
			url := "sqlite:" + filepath.Join(t.TempDir(), "interlock.db")
			if db == "mysql" {
				url = dbtest.MySQLURL(dbtest.MySQLDSN(t))
			}
			s := apptest.Start(t, url, "--auth=on", "--config", apptest.WriteConfig(t, yaml))

			// Claude Code.
			var settings struct {
				Hooks map[string][]struct {
					Matcher string
					Hooks   []struct {
						Type, URL      string
						Timeout        int
						Headers        map[string]string
						AllowedEnvVars []string
					}
				}
			}
			if err := json.Unmarshal([]byte(hooksDocBlock(t, "**2. Claude Code**", "json")), &settings); err != nil {
				t.Fatal("the settings.json of docs/coding-agent-hooks.md:", err)
			}
			groups := settings.Hooks["PermissionRequest"]
			if len(groups) != 1 || groups[0].Matcher != "*" || len(groups[0].Hooks) != 1 {
				t.Fatalf("the PermissionRequest hooks of docs/coding-agent-hooks.md: %+v", groups)
			}
			h := groups[0].Hooks[0]
			if h.Type != "http" || h.Timeout != 600 || !strings.HasPrefix(h.URL, "http://localhost:8080/") {
				t.Fatalf("the hook of docs/coding-agent-hooks.md: %+v", h)
			}
			req, _ := http.NewRequest(http.MethodPost, s.URL+strings.TrimPrefix(h.URL, "http://localhost:8080"), bytes.NewReader(apptest.HookFixture(t, "claude-code/permission-request.json")))
			req.Header.Set("Content-Type", "application/json")
			for k, v := range h.Headers {
				req.Header.Set(k, claudeHeader(v, h.AllowedEnvVars, map[string]string{"INTERLOCK_TOKEN": "token-ana", "HOME": "/root"}))
			}
			held := make(chan apptest.HookAnswer, 1)
			go func() {
				resp, err := (&http.Client{Timeout: time.Duration(h.Timeout) * time.Second}).Do(req)
				if err != nil {
					held <- apptest.HookAnswer{Status: -1, Body: []byte(err.Error())}
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				held <- apptest.HookAnswer{Status: resp.StatusCode, Header: resp.Header, Body: b}
			}()
			r := waitingRequestAs(s, t, sam, "coding")
			if r.StartedBy == nil || *r.StartedBy != "ana-laptop" || r.ToolCalls[0].ToolName != "Bash" {
				t.Fatalf("the request: %+v", r)
			}
			s.MustAs(t, sam, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": r.RunID}, nil)
			apptest.WantAnswer(t, "Claude Code's hook", apptest.Answered(t, held), apptest.HookFixture(t, "claude-code/answer-allow.json"))

			// Codex, under each shell.
			_, command := docCodexHook(t)
			input := apptest.HookFixture(t, "codex/permission-request.json")
			for _, shell := range []string{"sh", "bash"} {
				done := make(chan hookRun, 1)
				go func() {
					done <- runHookCommand(t, shell, command, []string{"INTERLOCK_TOKEN=token-ana", "INTERLOCK_URL=" + s.URL}, input)
				}()
				r = waitingRequestAs(s, t, sam, "coding")
				if !strings.Contains(*r.Context, "**Codex** asks to run `Bash` in `/path/to/cwd`") {
					t.Fatalf("the context: %s", *r.Context)
				}
				s.MustAs(t, sam, `mutation($id: ID!, $r: String) { declineToolCall(runId: $id, reason: $r) { status } }`,
					map[string]any{"id": r.RunID, "r": "Reason for denial"}, nil)
				select {
				case got := <-done:
					wantDeny(t, shell+": declined", got, "Reason for denial")
				case <-time.After(45 * time.Second):
					t.Fatalf("%s: the Codex hook command did not end", shell)
				}
				got := runHookCommand(t, shell, command, []string{"INTERLOCK_TOKEN=token-wrong", "INTERLOCK_URL=" + s.URL}, input)
				wantDeny(t, shell+": a refused token", got, "Not run: Interlock could not be asked (curl exit 22).")
				if !strings.Contains(got.stderr, "401") {
					t.Fatalf("%s: curl's stderr %q does not name the 401", shell, got.stderr)
				}
			}
		})
	}
}

// TestHooksDocCodexFailsClosed: the Codex command of docs/coding-agent-hooks.md, exactly as printed, run by sh and
// by bash, answers every way of not reaching a decision with Codex's deny naming curl's real exit
// code, and prints nothing else (a partial answer never reaches Codex): Interlock down (7), a
// host name that does not resolve (6), Interlock answering 401, 500 or 503 (22), a connection
// closed before any answer (52) or in the middle of one (18).
func TestHooksDocCodexFailsClosed(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the Codex hook command needs curl:", err)
	}
	_, command := docCodexHook(t)
	answering := func(fn func(w http.ResponseWriter)) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			fn(w)
		}))
		t.Cleanup(s.Close)
		return s.URL
	}
	cut := func(partial string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			if partial != "" {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "1000")
				io.WriteString(w, partial)
				w.(http.Flusher).Flush()
			}
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		}
	}
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	for _, c := range []struct {
		name, url string
		exit      int
	}{
		{"Interlock down", downURL, 7},
		{"a host name that does not resolve", "http://interlock.invalid:8080", 6},
		{"401", answering(func(w http.ResponseWriter) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, `{"error": {"code": "UNAUTHENTICATED", "message": "a bad token"}}`, 401)
		}), 22},
		{"500", answering(func(w http.ResponseWriter) { http.Error(w, "boom", 500) }), 22},
		{"503", answering(func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"error": {"code": "UNAVAILABLE", "message": "Interlock is stopping"}}`, 503)
		}), 22},
		{"closed without an answer", answering(cut("")), 52},
		{"closed in the middle of an answer", answering(cut(`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"`)), 18},
	} {
		for _, shell := range []string{"sh", "bash"} {
			got := runHookCommand(t, shell, command, []string{"INTERLOCK_TOKEN=token-ana", "INTERLOCK_URL=" + c.url}, apptest.HookFixture(t, "codex/permission-request.json"))
			wantDeny(t, shell+": "+c.name, got, fmt.Sprintf("Not run: Interlock could not be asked (curl exit %d).", c.exit))
		}
	}
}

// TestHooksStoppingServerLetsTheAgentAsk: a hook held when the server stops is answered 503 (the
// agent then asks its own person), not a deny saying nobody decided; the request stays in the
// inbox for another instance.
func TestHooksStoppingServerLetsTheAgentAsk(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		held := s.PostHookAsync(t, "/hooks/claude-code/wait?wait=30s", "Bearer "+apptest.TokenOf("cc"), apptest.HookFixture(t, "claude-code/permission-request.json"))
		r := waitingRequest(s, t, "wait")
		s.App.Service.Close()
		a := apptest.Answered(t, held)
		wantRefused(t, "held while stopping", a, http.StatusServiceUnavailable, "UNAVAILABLE", "Interlock is stopping: the request "+r.RunID+" ended without a decision")
		if a.Header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
		// The agent asks its own person now: the request ends, so nobody approves it in
		// Interlock for a call that person may have refused.
		wantEnded(t, requestOf(s, t, "wait", r.RunID), "Claude Code", "Interlock stopped while its hook waited, so the agent asked its own person")
	})
}
