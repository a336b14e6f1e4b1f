package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// wantTime fails unless got is want as stored: the same instant at millisecond precision, in UTC.
func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(runtype.StoredTime(want)) || got.Location() != time.UTC {
		t.Errorf("%s = %v, want %v (UTC, milliseconds)", what, got, runtype.StoredTime(want))
	}
}

// wantStr fails unless got and want are both nil or point to equal strings.
func wantStr(t *testing.T, what string, got, want *string) {
	t.Helper()
	if (got == nil) != (want == nil) || got != nil && *got != *want {
		t.Errorf("%s = %s, want %s", what, show(got), show(want))
	}
}

// sameStr reports whether a and b are both nil or point to equal strings.
func sameStr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(s *string) string {
	if s == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", *s)
}

// sameJSON reports whether two JSON texts are equal once compacted (a store may reformat JSON,
// not change it). Two empty texts are equal.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// wantCall fails unless got is the call want.
func wantCall(t *testing.T, what string, got, want runtype.ToolCall) {
	t.Helper()
	if got.ToolCallID != want.ToolCallID || got.ToolName != want.ToolName || got.RequiresApproval != want.RequiresApproval ||
		got.Interrupted != want.Interrupted || got.InterruptedToolCallID != want.InterruptedToolCallID ||
		!sameJSON(got.Args, want.Args) || !sameJSON(got.SuspendPayload, want.SuspendPayload) {
		t.Errorf("%s = %s, want %s", what, body(got), body(want))
	}
}

func body(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// stored is evs as a store gives them back: of run runID, numbered from seq after+1, at when.
func stored(runID string, after int64, when time.Time, evs ...runtype.Event) []runtype.Event {
	out := make([]runtype.Event, len(evs))
	for i, ev := range evs {
		ev.RunID, ev.Seq, ev.At = runID, after+int64(i)+1, runtype.StoredTime(when)
		out[i] = ev
	}
	return out
}

// wantEvents fails unless got are the events want, field by field, in order.
func wantEvents(t *testing.T, what string, got, want []runtype.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events %s, want %d %s", what, len(got), seqTypes(got), len(want), seqTypes(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.RunID != w.RunID || g.Seq != w.Seq || g.Type != w.Type || !g.At.Equal(w.At) || g.At.Location() != time.UTC || body(g) != body(w) {
			t.Errorf("%s: event %d = %s %d %s at %v %s, want %s %d %s at %v %s", what, i,
				g.RunID, g.Seq, g.Type, g.At, body(g), w.RunID, w.Seq, w.Type, w.At, body(w))
		}
	}
}

func seqTypes(evs []runtype.Event) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = fmt.Sprintf("%d:%s", ev.Seq, ev.Type)
	}
	return fmt.Sprint(s)
}

// wantGapless fails unless the events of a run are numbered 1, 2, … n.
func wantGapless(t *testing.T, evs []runtype.Event, n int64) {
	t.Helper()
	if int64(len(evs)) != n {
		t.Fatalf("%d events %s, want %d", len(evs), seqTypes(evs), n)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i)+1 {
			t.Fatalf("event %d has seq %d: the log is not 1..%d without gaps: %s", i, ev.Seq, n, seqTypes(evs))
		}
	}
}

// runIDs lists the ids of runs in order.
func runIDs(list []*runtype.Run) []string {
	out := make([]string, len(list))
	for i, r := range list {
		out[i] = r.ID
	}
	return out
}

// recordIDs lists the ids of records in order.
func recordIDs(list []*runs.Record) []string {
	out := make([]string, len(list))
	for i, r := range list {
		out[i] = r.ID
	}
	return out
}

// wantIDs fails unless got lists exactly the runs want, in that order.
func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// wantUnchanged fails unless the run's status, version, last seq, lease owner and pending calls
// are as in before: a failed write must leave no trace.
func wantUnchanged(t *testing.T, what string, got, before *runs.Record) {
	t.Helper()
	if got.Status != before.Status || got.Version != before.Version || got.LastSeq != before.LastSeq ||
		len(got.ToolCalls) != len(before.ToolCalls) || len(got.Decisions) != len(before.Decisions) ||
		got.RecoveryAttempts != before.RecoveryAttempts {
		t.Errorf("%s changed the run: status %s→%s, version %d→%d, last seq %d→%d, %d→%d pending calls, %d→%d decisions, %d→%d recovery attempts",
			what, before.Status, got.Status, before.Version, got.Version, before.LastSeq, got.LastSeq,
			len(before.ToolCalls), len(got.ToolCalls), len(before.Decisions), len(got.Decisions), before.RecoveryAttempts, got.RecoveryAttempts)
	}
	wantStr(t, what+": lease owner", got.LeaseOwner, before.LeaseOwner)
	wantStr(t, what+": snapshot", got.Snapshot, before.Snapshot)
	if !got.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("%s changed updatedAt %v → %v", what, before.UpdatedAt, got.UpdatedAt)
	}
}
