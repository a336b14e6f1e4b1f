package approvals

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameJSON reports whether a and b are the same JSON value (whitespace and key order aside).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

// withMessage is the recorded deny shape with its message replaced.
func withMessage(t *testing.T, shape []byte, msg string) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(shape, &v); err != nil {
		t.Fatal(err)
	}
	v["hookSpecificOutput"].(map[string]any)["decision"].(map[string]any)["message"] = msg
	out, _ := json.Marshal(v)
	return out
}

func TestParseHookDocumentedBodies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		agent hookAgent
		file  string
		want  hookRequest
	}{
		{claudeCode, "claude-code/permission-request.json", hookRequest{SessionID: "abc123", ToolName: "Bash", Cwd: "/Users/...", PermissionMode: "default",
			ToolInput: json.RawMessage(`{"command":"rm -rf node_modules","description":"Remove node_modules directory"}`)}},
		{claudeCode, "claude-code/permission-request-tool-always-allow.json", hookRequest{SessionID: "abc123", ToolName: "Bash", Cwd: "/Users/...", PermissionMode: "default",
			ToolInput: json.RawMessage(`{"command":"rm -rf node_modules","description":"Remove node_modules directory"}`)}},
		{codex, "codex/permission-request.json", hookRequest{SessionID: "<session-id>", Turn: "<turn-id>", ToolName: "Bash", Cwd: "/path/to/cwd", PermissionMode: "default", Model: "gpt-5",
			ToolInput: json.RawMessage(`{"command":"rm -f /tmp/example"}`)}},
	} {
		r, err := parseHook(c.agent, fixture(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if r.SessionID != c.want.SessionID || r.ToolName != c.want.ToolName || r.Cwd != c.want.Cwd || r.Turn != c.want.Turn ||
			r.PermissionMode != c.want.PermissionMode || r.Model != c.want.Model || string(r.ToolInput) != string(c.want.ToolInput) {
			t.Fatalf("%s: read %+v\nwant %+v", c.file, r, c.want)
		}
	}
}

func TestParseHookRefusals(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		``:         "the body is empty",
		`not json`: "not a JSON object",
		`[1]`:      "not a JSON object",
		`{"hook_event_name": "PermissionRequest", `: "not the JSON input",
		`{}`:                                "no hook_event_name",
		`{"hook_event_name": "PreToolUse"}`: `hook_event_name is "PreToolUse"`,
		`{"hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {}}`:                                  "no session_id",
		`{"hook_event_name": "PermissionRequest", "session_id": "s", "tool_input": {}}`:                                    "no tool_name",
		`{"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "Bash"}`:                                 "no tool_input",
		`{"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "Bash", "tool_input": "ls"}`:             "tool_input is not a JSON object",
		`{"hook_event_name": "PermissionRequest", "session_id": 7, "tool_name": "Bash", "tool_input": {}}`:                 "session_id is a JSON number, not a string",
		`{"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "Bash", "tool_input": {"a": 1, "a": 2}}`: "tool_input is",
		`{"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "Bash", "tool_input": {}} {}`:            "more than one JSON value",
	} {
		_, err := parseHook(claudeCode, []byte(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error saying %q", body, err, want)
		}
	}
}

// TestParseHookStrictFields: a body naming a field twice, or a field of the hook in another case
// (which encoding/json would take for it, keeping the last), is refused naming the field — at the
// top level, which is decoded into the hook's fields, and at every depth of tool_input, whose
// keys are its own (a key in another case there is another argument of the tool, and passes).
// Fields Interlock does not read pass, once each.
func TestParseHookStrictFields(t *testing.T) {
	t.Parallel()
	const head = `"hook_event_name": "PermissionRequest", "tool_name": "Bash"`
	body := func(fields string) []byte { return []byte(`{` + head + `, ` + fields + `}`) }
	for fields, want := range map[string]string{
		`"session_id": "s", "session_id": "t", "tool_input": {}`:                        `the field "session_id" twice`,
		`"session_id": "s", "tool_input": {}, "tool_input": {"command": "x"}`:           `the field "tool_input" twice`,
		`"session_id": "s", "tool_input": {}, "cwd": "/a", "cwd": "/b"`:                 `the field "cwd" twice`,
		`"session_id": "s", "tool_input": {}, "extra": 1, "extra": 2`:                   `the field "extra" twice`,
		`"session_id": "s", "Tool_Name": "Write", "tool_input": {}`:                     `a field "Tool_Name": field names are case-sensitive, and the hook's field is "tool_name"`,
		`"SESSION_ID": "s", "tool_input": {}`:                                           `a field "SESSION_ID"`,
		"\"\u017fession_id\": \"s\", \"tool_input\": {}":                                "a field \"\u017fession_id\"", // ſ folds to s in encoding/json
		`"session_id": "s", "tool_input": {}, "Turn_ID": "t2"`:                          `a field "Turn_ID"`,
		`"session_id": "s", "tool_input": {}, "prompt_ID": "p"`:                         `a field "prompt_ID"`,
		`"session_id": "s", "tool_input": {"command": "ls", "command": "rm -rf /"}`:     `tool_input is key "command" appears twice`,
		`"session_id": "s", "tool_input": {"a": {"b": [{"c": 1, "c": 2}]}}`:             `tool_input is key "c" appears twice`,
		`"session_id": "s", "tool_input": {"a": {"b": {"c": {"d": {"e": 1, "e": 1}}}}}`: `tool_input is key "e" appears twice`,
	} {
		_, err := parseHook(codex, body(fields))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %s", fields, err, want)
		}
	}
	r, err := parseHook(codex, body(`"session_id": "s", "tool_input": {"command": "ls", "Command": "rm", "nested": {"x": 1, "X": 2}}, "permission_suggestions": []`))
	if err != nil || string(r.ToolInput) != `{"command":"ls","Command":"rm","nested":{"x":1,"X":2}}` {
		t.Fatalf("tool_input keys in two cases (two arguments): %v, %s", err, r.ToolInput)
	}
	for _, a := range []hookAgent{claudeCode, codex} {
		for _, f := range []string{"claude-code/permission-request.json", "claude-code/permission-request-tool-always-allow.json", "codex/permission-request.json"} {
			if _, err := parseHook(a, fixture(t, f)); err != nil {
				t.Fatalf("%s as %s: %v", f, a, err)
			}
		}
	}
}

// TestHookAnswersMatchTheDocumentedShapes: each outcome's answer is exactly the recorded shape.
func TestHookAnswersMatchTheDocumentedShapes(t *testing.T) {
	t.Parallel()
	edited := json.RawMessage(`{"command":"npm run lint"}`)
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	for _, a := range []hookAgent{claudeCode, codex} {
		dir := string(a) + "/"
		deny := fixture(t, dir+"answer-deny.json")
		cases := []struct {
			name string
			o    hookOutcome
			want []byte
		}{
			{"approved", hookOutcome{kind: outcomeApproved}, fixture(t, dir+"answer-allow.json")},
			{"declined", hookOutcome{kind: outcomeDeclined, reason: "Reason for denial", decidedBy: "alice"}, deny},
			{"declined without a reason", hookOutcome{kind: outcomeDeclined, decidedBy: "alice"}, withMessage(t, deny, "Declined in Interlock by alice, without a reason.")},
			{"expired", hookOutcome{kind: outcomeExpired, at: at}, withMessage(t, deny, "Not approved: the request expired in Interlock at 2026-12-05T10:00:00Z without a decision.")},
			{"undecided", hookOutcome{kind: outcomeUndecided, waited: 590 * time.Second}, withMessage(t, deny, "Not approved: nobody decided in Interlock within 9m50s.")},
		}
		if a == claudeCode {
			cases = append(cases, struct {
				name string
				o    hookOutcome
				want []byte
			}{"edited", hookOutcome{kind: outcomeEdited, args: edited}, fixture(t, dir+"answer-allow-updated-input.json")})
		} else {
			cases = append(cases, struct {
				name string
				o    hookOutcome
				want []byte
			}{"edited", hookOutcome{kind: outcomeEdited, args: edited, decidedBy: "alice"}, withMessage(t, deny,
				`Not run as asked: alice approved this call in Interlock only with edited arguments, which Codex cannot take from a hook. The approved arguments: {"command":"npm run lint"}`)})
		}
		for _, c := range cases {
			if got := c.o.answer(a); !sameJSON(t, got, c.want) {
				t.Errorf("%s %s: %s\nwant %s", a, c.name, got, c.want)
			}
		}
	}
}

func TestHookContextQuotesWhatTheAgentSent(t *testing.T) {
	t.Parallel()
	r, err := parseHook(codex, []byte(`{"hook_event_name": "PermissionRequest", "session_id": "s1", "turn_id": "t1", "cwd": "/w/a`+"``"+`b",
		"tool_name": "Bash", "tool_input": {"command": "echo `+"```"+` done", "description": "needs [net](javascript:alert(1))"}}`))
	if err != nil {
		t.Fatal(err)
	}
	md := r.contextMarkdown(codex)
	for _, want := range []string{"**Codex** asks to run `Bash` in ```/w/a``b```.", "> needs [net](javascript:alert(1))", "````sh\necho ``` done\n````", "session `s1` · turn `t1`"} {
		if !strings.Contains(md, want) {
			t.Errorf("context %q lacks %q", md, want)
		}
	}
	if k1, k2 := r.idempotencyKey(codex, "a", md), r.idempotencyKey(claudeCode, "a", md); k1 == k2 || !strings.HasPrefix(k1, "hook:codex:") {
		t.Errorf("keys %s %s", k1, k2)
	}
	r2 := r
	r2.Turn = "t2"
	if r.idempotencyKey(codex, "a", md) == r2.idempotencyKey(codex, "a", md) {
		t.Error("another turn has the same key")
	}
	if r.idempotencyKey(codex, "a", md) == r.idempotencyKey(codex, "b", md) {
		t.Error("another agent has the same key")
	}
}

// A long command or description is cut in the context (the arguments keep it whole), so that a
// hook never fails for the length of its context.
func TestHookContextIsBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 50_000)
	body, _ := json.Marshal(map[string]any{"hook_event_name": "PermissionRequest", "session_id": "s", "tool_name": "apply_patch",
		"tool_input": map[string]any{"command": long, "description": long}})
	r, err := parseHook(codex, body)
	if err != nil {
		t.Fatal(err)
	}
	md := r.contextMarkdown(codex)
	if n := len([]rune(md)); n > 12_000 {
		t.Fatalf("the context is %d characters long", n)
	}
	for _, want := range []string{"(48000 more characters: see the arguments)", "(42000 more characters: see the arguments)", "```\nxxx"} {
		if !strings.Contains(md, want) {
			t.Fatalf("the context lacks %q", want)
		}
	}
	if strings.Contains(md, "```sh") {
		t.Fatal("apply_patch's command is marked as shell")
	}
}
