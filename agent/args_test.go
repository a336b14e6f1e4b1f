package agent

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"interlock/llm"
)

func TestCanonicalJSON(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct{ in, out, err string }{
		{in: "{ \"b\" : 1,\n \"a\": [1, 2.50, \"x\"] }", out: `{"b":1,"a":[1,2.50,"x"]}`},
		{in: `{"note":"<b>&"}`, out: `{"note":"\u003cb\u003e\u0026"}`},
		{in: `{"a":{"x":1},"b":{"x":2}}`, out: `{"a":{"x":1},"b":{"x":2}}`}, // the same key in two objects
		{in: `[{"x":1},{"x":1}]`, out: `[{"x":1},{"x":1}]`},
		{in: `{"amount":1,"amount":5000}`, err: `key "amount" appears twice in one object`},
		{in: `{"a":{"b":{"amount":1,"n":{},"amount":2}}}`, err: `key "amount" appears twice`},
		{in: `{"amount":1,"\u0061mount":2}`, err: `key "amount" appears twice`}, // the same key, escaped
		{in: deep(MaxJSONDepth), out: deep(MaxJSONDepth)},
		{in: deep(MaxJSONDepth + 1), err: "nested deeper than 64 levels"},
		{in: deep(9000), err: "nested deeper than 64 levels"},
		{in: `{"a":`, err: "not valid JSON"},
		{in: "\"\xff\"", err: "not valid UTF-8"},
	} {
		got, err := CanonicalJSON([]byte(tc.in))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("CanonicalJSON(%.40s) = %s, %v; want error %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || string(got) != tc.out):
			t.Errorf("CanonicalJSON(%.40s) = %s, %v; want %s", tc.in, got, err, tc.out)
		}
		if err == nil {
			again, err := CanonicalJSON(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("CanonicalJSON is not stable on %s: %s, %v", got, again, err)
			}
		}
	}
}

// TestCallIDs: the server numbers a run's calls itself, whatever ids the model gives, and skips
// any id a run stored before the server assigned ids may have shown.
func TestCallIDs(t *testing.T) {
	snap := &Snapshot{Messages: []llm.Message{{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "tc_2"}}}}}
	used := snap.modelCallIDs()
	var got []string
	for range 3 {
		got = append(got, snap.nextCallID(used))
	}
	if strings.Join(got, ",") != "tc_1,tc_3,tc_4" || snap.CallIDs != 4 {
		t.Fatalf("ids %v (count %d), want tc_1,tc_3,tc_4", got, snap.CallIDs)
	}
	old := PendingCall{ToolCall: llm.ToolCall{ID: "call_7"}}
	if old.CallID() != "call_7" {
		t.Fatalf("a call stored before server ids is named %q, want the model's id", old.CallID())
	}
	s := &Snapshot{Pending: []PendingCall{
		{ToolCall: llm.ToolCall{ID: "same"}, ServerID: "tc_1", State: CallAwaitingApproval},
		{ToolCall: llm.ToolCall{ID: "same"}, ServerID: "tc_2", State: CallAwaitingApproval},
	}}
	if err := s.Decide("tc_2", Decision{Kind: CallApproved}); err != nil {
		t.Fatal(err)
	}
	if s.Pending[0].State != CallAwaitingApproval || s.Pending[1].State != CallApproved {
		t.Fatalf("deciding tc_2 left %s, %s", s.Pending[0].State, s.Pending[1].State)
	}
}

func TestReadableJSONWritesTheCharacters(t *testing.T) {
	canonical, err := CanonicalJSON([]byte(`{"cmd":"a > b && c < d","q":"say \"<x>\"","esc":"\\u003e stays","nl":"a\nb","ls":"\u2028"}`))
	if err != nil {
		t.Fatal(err)
	}
	got := ReadableJSON(canonical)
	want := `{"cmd":"a > b && c < d","q":"say \"<x>\"","esc":"\\u003e stays","nl":"a\nb","ls":"\u2028"}`
	if got != want {
		t.Errorf("ReadableJSON = %s\nwant            %s", got, want)
	}
	var a, b any
	if json.Unmarshal([]byte(got), &a) != nil || json.Unmarshal(canonical, &b) != nil || !reflect.DeepEqual(a, b) {
		t.Errorf("ReadableJSON changed the value: %s vs %s", got, canonical)
	}
}
