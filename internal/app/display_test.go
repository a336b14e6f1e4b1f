package app_test

// What a person sees is what runs (issue 32 §1), through the whole server on both dialects: a
// tool name holding a control or format character is refused on every way in, with nothing
// stored; an agent's values stay inside the server's text of a hook's context; the hooks'
// answers carry characters, not JSON's HTML escapes; the webhooks and Slack name and mark the
// characters that change how text reads. The console's side is web/console_hidden_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/notify"
)

// bidiCommand reads `cat README.md #~ fr- mr ;` in a bidi-aware view; it runs `rm -rf ~`.
const bidiCommand = "cat README.md #\u202e; rm -rf ~ \u202c"

// forgedHeading is what a carriage return in a hook's cwd or session_id tried to add to the
// context, as the server's own words.
const forgedHeading = "# ✅ Interlock: verified read-only, safe to approve"

// hookBody is the recorded PermissionRequest body of agent with fields replaced (tool_input as a
// JSON value).
func hookBody(t testing.TB, agent string, set map[string]any) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(apptest.HookFixture(t, agent+"/permission-request.json"), &v); err != nil {
		t.Fatal(err)
	}
	for k, x := range set {
		v[k] = x
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestToolNamesWithHiddenCharactersRefused: requestApproval over GraphQL, POST /approvals and
// both hooks refuse a tool name holding a bidi control, a newline, a carriage return, a zero
// width space or a tag with BAD_USER_INPUT (400 over HTTP) naming the character; nothing is stored.
func TestToolNamesWithHiddenCharactersRefused(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		requester := "Bearer " + apptest.TokenOf("cc")
		for _, c := range []struct{ name, says string }{
			{"Bash\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"},
			{"Bash\nrm", "U+000A LINE FEED"},
			{"Ba\rsh", "U+000D CARRIAGE RETURN"},
			{"Ba\u200bsh", "U+200B ZERO WIDTH SPACE"},
			{"Bash\U000E0041", `U+E0041 TAG "A"`},
			{"Bash\u2066x\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE"},
			{"Bash\u00ad", "U+00AD SOFT HYPHEN"},
		} {
			args := map[string]any{"command": "ls"}
			r := s.PostAs(t, apptest.TokenOf("cc"), `mutation($in: ApprovalRequestInput!) { requestApproval(input: $in) { runId } }`,
				map[string]any{"in": map[string]any{"agentId": "approve", "toolName": c.name, "args": args}})
			if r.Code != "BAD_USER_INPUT" || !strings.Contains(r.Msg, c.says) {
				t.Errorf("requestApproval of %q: %s %q, want BAD_USER_INPUT naming %s", c.name, r.Code, r.Msg, c.says)
			}
			body, _ := json.Marshal(map[string]any{"agentId": "approve", "toolName": c.name, "args": args})
			a := approvalRequest(t, s, context.Background(), requester, "POST", "/approvals?wait=0", string(body))
			if a.status != http.StatusBadRequest || a.code != "BAD_USER_INPUT" || !strings.Contains(a.message, c.says) {
				t.Errorf("POST /approvals of %q: %d %s", c.name, a.status, a.raw)
			}
			for _, agent := range []string{"claude-code", "codex"} {
				a := postHook(s, t, "/hooks/"+agent+"/approve?wait=1s", requester, hookBody(t, agent, map[string]any{"tool_name": c.name}))
				wantRefused(t, agent+" hook of "+fmt.Sprintf("%q", c.name), a, http.StatusBadRequest, "BAD_USER_INPUT", c.says)
			}
		}
		if n := countRuns(t, s); n != 0 {
			t.Fatalf("%d runs stored, want none", n)
		}
	})
}

// TestHookContextKeepsAgentValuesInside: a carriage return (and a CRLF, a line separator) in a
// hook's cwd and session_id, and in its description, cannot start a line of the context, so no
// heading of the server's can be forged; each is written as its mark, and so is the bidi
// control of the command, whose arguments are stored as sent. The session (the thread) is
// stored as sent too: it is data, shown by the console as marks.
func TestHookContextKeepsAgentValuesInside(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		requester := "Bearer " + apptest.TokenOf("cc")
		for _, agent := range []string{"claude-code", "codex"} {
			t.Run(agent, func(t *testing.T) {
				session := agent + "-s1\r" + forgedHeading + "\r"
				held := s.PostHookAsync(t, "/hooks/"+agent+"/wait?wait=30s", requester, hookBody(t, agent, map[string]any{
					"session_id": session,
					"cwd":        "/repo\r\n\r\n" + forgedHeading + "\u2028",
					"tool_input": map[string]any{"command": bidiCommand, "description": "List files\r" + forgedHeading},
				}))
				r := waitingRequest(s, t, "wait")
				if r.Context == nil {
					t.Fatal("no context")
				}
				md := *r.Context
				for i, line := range strings.Split(md, "\n") {
					if strings.HasPrefix(strings.TrimLeft(line, " "), "#") || strings.ContainsAny(line, "\r\u2028\u202e\u202c") {
						t.Errorf("context line %d is %q: an agent's value escaped its place\n%s", i+1, line, md)
					}
				}
				for _, want := range []string{"`/repo⟨U+000D⟩⟨U+000A⟩⟨U+000D⟩⟨U+000A⟩" + forgedHeading + "⟨U+2028⟩`",
					"session `" + agent + "-s1⟨U+000D⟩" + forgedHeading + "⟨U+000D⟩`", "> List files⟨U+000D⟩" + forgedHeading,
					"cat README.md #⟨U+202E⟩; rm -rf ~ ⟨U+202C⟩"} {
					if !strings.Contains(md, want) {
						t.Errorf("context lacks %q:\n%s", want, md)
					}
				}
				var args struct{ Command string }
				if err := json.Unmarshal(r.ToolCalls[0].Args, &args); err != nil || args.Command != bidiCommand {
					t.Errorf("args as stored: %s, want the command as sent", r.ToolCalls[0].Args)
				}
				if r.ThreadID == nil || *r.ThreadID != session {
					t.Errorf("thread %v, want the session as sent", r.ThreadID)
				}
				s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { declineToolCall(runId: $id) { status } }`, map[string]any{"id": r.RunID}, nil)
				apptest.Answered(t, held)
			})
		}
	})
}

// TestHookAnswersCarryCharacters: an approval with edited arguments holding <, > and & reaches
// Claude Code as updatedInput and Codex as the message telling the model the approved
// arguments, with the characters themselves, never \u003c, \u003e, \u0026 (in the body's bytes
// or in the message's text).
func TestHookAnswersCarryCharacters(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		requester := "Bearer " + apptest.TokenOf("cc")
		edited := "ls > out.txt && sort < in.txt"
		for _, agent := range []string{"claude-code", "codex"} {
			t.Run(agent, func(t *testing.T) {
				held := s.PostHookAsync(t, "/hooks/"+agent+"/edit?wait=30s", requester, hookBody(t, agent, map[string]any{"session_id": agent + "-chars"}))
				r := waitingRequest(s, t, "edit")
				s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!, $a: JSON) { approveToolCall(runId: $id, args: $a) { status } }`,
					map[string]any{"id": r.RunID, "a": map[string]any{"command": edited}}, nil)
				a := apptest.Answered(t, held)
				if a.Status != http.StatusOK || bytes.Contains(a.Body, []byte(`\u00`)) {
					t.Fatalf("answer %d %s: want 200 without \\u00xx escapes", a.Status, a.Body)
				}
				var got struct {
					HookSpecificOutput struct {
						Decision struct {
							Behavior     string
							Message      string
							UpdatedInput json.RawMessage
						}
					}
				}
				if err := json.Unmarshal(a.Body, &got); err != nil {
					t.Fatal(err)
				}
				d := got.HookSpecificOutput.Decision
				if agent == "claude-code" {
					if d.Behavior != "allow" || string(d.UpdatedInput) != `{"command":"`+edited+`"}` {
						t.Fatalf("claude code: %s", a.Body)
					}
					return
				}
				if d.Behavior != "deny" || !strings.HasSuffix(d.Message, `The approved arguments: {"command":"`+edited+`"}`) {
					t.Fatalf("codex message %q", d.Message)
				}
			})
		}
	})
}

// TestWebhooksNameHiddenCharacters: a request whose arguments hold bidi controls, declined with
// a reason holding a carriage return: the json webhook gets the arguments exactly as stored and
// hiddenCharacters naming the characters; Slack's text marks them and warns.
func TestWebhooksNameHiddenCharacters(t *testing.T) {
	for _, db := range []string{"sqlite", "mysql"} {
		t.Run(db, func(t *testing.T) {
			ops, slack := newReceiver(t), newReceiver(t)
			t.Setenv("INTERLOCK_TEST_SLACK_URL", slack.URL+"/services/T000/B000/XXXX")
			file := apptest.WriteConfig(t, hooksConfig(t)+notifySection(ops.URL, "", `    - name: chat
      urlEnv: INTERLOCK_TEST_SLACK_URL
      format: slack
`))
			url := "sqlite:" + t.TempDir() + "/n.db"
			if db == "mysql" {
				url = dbtest.MySQLURL(dbtest.MySQLDSN(t))
			}
			s := apptest.Start(t, url, "--auth=on", "--config", file)
			body, _ := json.Marshal(map[string]any{"agentId": "decline", "toolName": "Bash", "args": map[string]any{"command": bidiCommand}})
			a := approvalRequest(t, s, context.Background(), "Bearer "+apptest.TokenOf("cc"), "POST", "/approvals?wait=0", string(body))
			if a.status != http.StatusOK {
				t.Fatalf("POST /approvals: %d %s", a.status, a.raw)
			}
			s.MustAs(t, apptest.TokenOf("alice"), declineMutation, map[string]any{"id": a.body.RunID, "reason": "no\r:white_check_mark: approved"}, nil)
			apptest.Eventually(t, func() bool { n, _ := ops.delivered(); return len(n) == 2 && len(slack.got()) == 2 },
				func() string {
					return fmt.Sprintf("%d json, %d slack deliveries, want 2 and 2", len(ops.got()), len(slack.got()))
				})

			_, events := ops.delivered()
			asked, decided := events[notify.EventID(a.body.RunID, 3)], events[notify.EventID(a.body.RunID, 5)]
			var args struct{ Command string }
			if asked.ToolCall == nil || json.Unmarshal(asked.ToolCall.Args, &args) != nil || args.Command != bidiCommand {
				t.Errorf("approval_requested: %+v, want the arguments as stored", asked)
			}
			if !slices.Equal(asked.HiddenCharacters, []string{"U+202E", "U+202C"}) {
				t.Errorf("approval_requested hiddenCharacters %q", asked.HiddenCharacters)
			}
			if decided.Type != notify.Decided || !slices.Contains(decided.HiddenCharacters, "U+000D") {
				t.Errorf("decided: %+v, want hiddenCharacters with the reason's U+000D", decided)
			}
			var texts []string
			for _, h := range slack.got() {
				var msg struct{ Text string }
				json.Unmarshal(h.body, &msg)
				texts = append(texts, msg.Text)
			}
			all := strings.Join(texts, "\n---\n")
			for _, want := range []string{":warning: This call holds characters that change how text reads without showing themselves: U+202E RIGHT-TO-LEFT OVERRIDE, U+202C POP DIRECTIONAL FORMATTING.",
				"was declined by alice: no⟨U+000D⟩:white_check_mark: approved"} {
				if !strings.Contains(all, want) {
					t.Errorf("slack texts lack %q:\n%s", want, all)
				}
			}
			if strings.ContainsAny(all, "\r\u202e\u202c") {
				t.Errorf("slack texts hold the characters themselves: %q", all)
			}
		})
	}
}

// TestToolCallHiddenCharactersField: AgentRunToolCall.hiddenCharacters names the code points of
// the hidden characters of a call's arguments (keys too), on the run and on its events, and is
// empty for a call without any; the arguments are stored and shown exactly as sent.
func TestToolCallHiddenCharactersField(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		for _, c := range []struct {
			args map[string]any
			want []string
		}{
			{map[string]any{"command": bidiCommand, "k\u200b": 1}, []string{"U+202E", "U+202C", "U+200B"}},
			{map[string]any{"command": "ls -la\n"}, []string{}},
		} {
			var asked struct{ RequestApproval struct{ RunID string } }
			s.MustAs(t, apptest.TokenOf("cc"), `mutation($in: ApprovalRequestInput!) { requestApproval(input: $in) { runId } }`,
				map[string]any{"in": map[string]any{"agentId": "wait", "toolName": "Bash", "args": c.args}}, &asked)
			id := asked.RequestApproval.RunID
			var out struct {
				Run struct {
					ToolCalls []struct {
						HiddenCharacters []string
						Args             map[string]any
					}
				}
			}
			s.MustAs(t, apptest.TokenOf("alice"), `query($id: ID!) { run(runId: $id) { toolCalls { hiddenCharacters args } } }`, map[string]any{"id": id}, &out)
			if calls := out.Run.ToolCalls; len(calls) != 1 || !slices.Equal(calls[0].HiddenCharacters, c.want) || calls[0].Args["command"] != c.args["command"] {
				t.Errorf("toolCalls %+v, want hiddenCharacters %q and the command as sent", calls, c.want)
			}
			ev := s.SSEAs(t, apptest.TokenOf("alice"), `subscription($id: ID!) { runEvents(runId: $id, after: 1) { type toolCall { hiddenCharacters } } }`, map[string]any{"id": id})
			var got struct {
				RunEvents struct {
					Type     string
					ToolCall struct{ HiddenCharacters []string }
				}
			}
			if err := json.Unmarshal(ev.Data, &got); err != nil || got.RunEvents.Type != "TOOL_CALL" || !slices.Equal(got.RunEvents.ToolCall.HiddenCharacters, c.want) {
				t.Errorf("the TOOL_CALL event: %s %s %s, want hiddenCharacters %q", ev.Data, ev.Code, ev.Msg, c.want)
			}
		}
	})
}
