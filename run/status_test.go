package run_test

import (
	"testing"

	"interlock/run"
)

func TestStatuses(t *testing.T) {
	t.Parallel()
	for _, s := range run.AllStatuses {
		final := s == run.StatusCompleted || s == run.StatusFailed
		if s.Finished() != final {
			t.Errorf("%s.Finished() = %v", s, s.Finished())
		}
		want := s
		if s == run.StatusWaiting {
			want = run.StatusRunning // the work goes on in a sub-agent's run
		}
		if s.Public() != want {
			t.Errorf("%s.Public() = %s, want %s", s, s.Public(), want)
		}
	}
	if len(run.AllStatuses) != 5 {
		t.Errorf("AllStatuses = %v, want the five statuses", run.AllStatuses)
	}
	for _, e := range []run.EventType{run.EventRunStarted, run.EventRunSuspended, run.EventRunResumed, run.EventToolResult} {
		if e.Terminal() {
			t.Errorf("%s does not end a stream", e)
		}
	}
	if !run.EventRunFinished.Terminal() || !run.EventRunFailed.Terminal() {
		t.Errorf("RUN_FINISHED and RUN_FAILED end a stream")
	}
}
