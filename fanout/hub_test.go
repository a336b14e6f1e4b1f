package fanout

import "testing"

// TestSubscribeFunc checks that a function subscriber is called once per value published to
// its topic, never for another topic, and never after Close; channel subscribers of the same
// topic still get their values.
func TestSubscribeFunc(t *testing.T) {
	h := NewWakeHub()
	calls := 0
	fs := h.SubscribeFunc("run-1", func() { calls++ })
	cs := h.Subscribe("run-1")
	h.Publish("run-1", struct{}{})
	h.Publish("run-2", struct{}{})
	h.Publish("run-1", struct{}{})
	if calls != 2 {
		t.Fatalf("function called %d times for two values of its topic, want 2", calls)
	}
	if len(cs.C) != 1 {
		t.Fatalf("channel subscriber holds %d wake-ups, want 1 (they coalesce)", len(cs.C))
	}
	if n := h.Count("run-1"); n != 2 {
		t.Fatalf("Count = %d, want 2", n)
	}
	fs.Close()
	fs.Close() // again: no panic (it has no channel to close twice)
	h.Publish("run-1", struct{}{})
	if calls != 2 {
		t.Fatalf("function called after Close (%d calls)", calls)
	}
	if n := h.Count("run-1"); n != 1 {
		t.Fatalf("Count after Close = %d, want 1", n)
	}
}
