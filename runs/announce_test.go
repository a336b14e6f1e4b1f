package runs_test

import (
	"fmt"
	"testing"

	"gorm.io/gorm"

	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/notify"
	"interlock/runs"
	"interlock/runtype"
)

// TestAnnouncedOnTheTopLevelRunOnly: the service decides what its writes announce
// (announce.go). A call three levels deep waits for approval: only the chief's run, which shows
// it, announces it (the supervisor's and the support agent's runs are sub-agents' runs); the
// approval given on the chief's run is announced there as decided, to the webhooks taking each
// kind, in the transactions that stored them.
func TestAnnouncedOnTheTopLevelRunOnly(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		all := notify.Target{Name: "all", Events: notify.Kinds}
		decided := notify.Target{Name: "decided", Events: []notify.Kind{notify.Decided}}
		f := setupChainWith(t, db, runs.Config{Webhooks: []notify.Target{all, decided}})
		c := suspendedChain(t, f, "refund order 42 for 30")
		outbox := gormstore.New(db)
		summary := func(runID string) []string {
			t.Helper()
			list, err := outbox.Deliveries(bg(), runID)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]string, len(list))
			for i, d := range list {
				out[i] = fmt.Sprintf("%s %s", d.Target, d.Kind)
			}
			return out
		}
		want := func(what string, got []string, want ...string) {
			t.Helper()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: deliveries %q, want %q", what, got, want)
			}
		}
		want("the chief's run", summary(c.chief.ID), "all approval_requested")
		want("the supervisor's run", summary(c.supervisor.ID))
		want("the support agent's run", summary(c.support.ID))

		if _, err := f.svc.Approve(as("alice", nil, runtype.RoleAdmin), runs.DecideParams{RunID: c.chief.ID}); err != nil {
			t.Fatal(err)
		}
		want("the chief's run after the approval", summary(c.chief.ID), "all approval_requested", "all decided", "decided decided")
		want("the supervisor's run after the approval", summary(c.supervisor.ID))
		want("the support agent's run after the approval", summary(c.support.ID))
	})
}
