package storetest

import (
	"encoding/json"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

func testLifecycle(t *testing.T, open Opener) {
	// Every write that appends events continues the one log: insert, checkpoints, suspension,
	// decision, claim and finish together number it 1..n without a gap.
	each(t, open, "SeqGaplessAcrossEveryWrite", func(t *testing.T, f *fixture) {
		r := f.insert(runOpts{})
		f.checkpoint(r, at(10), runtype.Event{Type: runtype.EventTextDelta, Text: "a"}, runtype.Event{Type: runtype.EventStepFinished})
		rn := f.suspend(r, approval("call-1"), at(11), "instance-1")
		r = f.decide(rn, decision(rn, runtype.DecisionApproved, "lease-2", at(12)))
		f.checkpoint(r, at(13), runtype.Event{Type: runtype.EventToolResult, Result: json.RawMessage(`{"ok":true}`)})
		f.expire(r)
		f.claim(r, "lease-3")
		f.checkpoint(r, at(14), runtype.Event{Type: runtype.EventModelCallRetried})
		f.finish(r, at(15))
		wantGapless(t, f.events(r.ID), 10)
		p, err := f.s.Progress(f.ctx, []string{r.ID})
		if err != nil || p[r.ID] != (runs.Progress{LastSeq: 10, Status: runtype.StatusCompleted}) {
			t.Errorf("Progress = %v, %v; want last seq 10, COMPLETED", p, err)
		}
		if got := f.get(r.ID); got.LastSeq != 10 || len(got.Decisions) != 1 {
			t.Errorf("run: last seq %d, %d decisions; want 10, 1", got.LastSeq, len(got.Decisions))
		}
	})
}
