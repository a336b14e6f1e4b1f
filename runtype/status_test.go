package runtype_test

import (
	"testing"

	"interlock/runtype"
)

func TestStatuses(t *testing.T) {
	t.Parallel()
	for _, s := range runtype.AllStatuses {
		final := s == runtype.StatusCompleted || s == runtype.StatusFailed
		if s.Finished() != final {
			t.Errorf("%s.Finished() = %v", s, s.Finished())
		}
		want := s
		if s == runtype.StatusWaiting {
			want = runtype.StatusRunning // the work goes on in a sub-agent's run
		}
		if s.Public() != want {
			t.Errorf("%s.Public() = %s, want %s", s, s.Public(), want)
		}
	}
	if len(runtype.AllStatuses) != 5 {
		t.Errorf("AllStatuses = %v, want the five statuses", runtype.AllStatuses)
	}
	for _, e := range []runtype.EventType{runtype.EventRunStarted, runtype.EventRunSuspended, runtype.EventRunResumed, runtype.EventToolResult} {
		if e.Terminal() {
			t.Errorf("%s does not end a stream", e)
		}
	}
	if !runtype.EventRunFinished.Terminal() || !runtype.EventRunFailed.Terminal() {
		t.Errorf("RUN_FINISHED and RUN_FAILED end a stream")
	}
}
