package notify

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"interlock/runtype"
)

// TestSlackTextShowsHiddenCharacters: what an agent or a person wrote stays text in the server's
// sentence — a bidi control or a carriage return as its mark, a link of its own as text — and the
// message warns about the characters the call holds; the json event names them.
func TestSlackTextShowsHiddenCharacters(t *testing.T) {
	e := Event{Type: Decided, Decision: DecisionDeclined, Run: Run{ID: "r1", AgentID: "coder"},
		ToolCall:  &runtype.ToolCall{ToolName: "Bash", Args: json.RawMessage(`{"command":"cat README.md #\u202e; rm -rf ~ \u202c"}`)},
		DecidedBy: "alice", Reason: "no\r:white_check_mark: <https://evil.example|approved>"}
	body, err := slackBody(e)
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]string
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatal(err)
	}
	text := msg["text"]
	for _, want := range []string{
		":no_entry: `Bash` of agent coder was declined by alice: no⟨U+000D⟩:white_check_mark: &lt;https://evil.example|approved&gt; (run r1)",
		"\n:warning: This call holds characters that change how text reads without showing themselves: U+202E RIGHT-TO-LEFT OVERRIDE, U+202C POP DIRECTIONAL FORMATTING, U+000D CARRIAGE RETURN.",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("slack text lacks %q:\n%s", want, text)
		}
	}
	if strings.ContainsAny(text, "\r\u202e\u202c") {
		t.Errorf("slack text holds the characters themselves: %q", text)
	}
	if got := e.withHidden().HiddenCharacters; !slices.Equal(got, []string{"U+202E", "U+202C", "U+000D"}) {
		t.Errorf("hiddenCharacters = %q", got)
	}
	if got := (Event{ToolCall: &runtype.ToolCall{ToolName: "Bash", Args: json.RawMessage(`{"a":"b\nc"}`)}}).withHidden().HiddenCharacters; got != nil {
		t.Errorf("hiddenCharacters of plain text = %q", got)
	}
}
