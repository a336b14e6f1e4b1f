package agent

import (
	"encoding/json"
	"testing"

	"interlock/llm"
)

func TestDecide(t *testing.T) {
	snap := func() *Snapshot {
		return &Snapshot{Pending: []PendingCall{
			{ToolCall: llm.ToolCall{ID: "c0"}, State: CallDone},
			{ToolCall: llm.ToolCall{ID: "c1"}, State: CallAwaitingApproval, Interrupted: true, ResumeData: json.RawMessage(`{"answer":"x"}`)},
			{ToolCall: llm.ToolCall{ID: "c2"}, State: CallNew},
		}}
	}
	s := snap()
	if err := s.Decide("c2", Decision{Kind: CallApproved}); err != ErrUnknownCall {
		t.Fatalf("deciding a call that does not wait: %v", err)
	}
	if err := s.Decide("c1", Decision{Kind: CallApproved}); err != nil {
		t.Fatal(err)
	}
	c := s.Pending[1]
	if c.State != CallApproved || c.Interrupted || string(c.ResumeData) != `{"answer":"x"}` {
		t.Fatalf("approving an interrupted resumed call: %+v", c)
	}
	s = snap()
	s.Decide("c1", Decision{Kind: CallDeclined, Reason: "no"})
	if c := s.Pending[1]; c.State != CallDeclined || c.Reason != "no" || c.ResumeData != nil {
		t.Fatalf("decline: %+v", c)
	}
	if s.Waiting() != nil {
		t.Fatal("a decided snapshot still waits")
	}
}
