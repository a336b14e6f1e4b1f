package apptest

import (
	"testing"
	"time"
)

// FinishAs starts a run of the support agent with the token and input fields and waits for it to
// complete.
func (s *Server) FinishAs(t *testing.T, token string, input map[string]any) Run {
	t.Helper()
	input["agentId"] = "support-agent"
	var out struct{ StartRun Run }
	s.MustAs(t, token, `mutation($i: StartRunInput!) { startRun(input: $i) { `+RunFields+` } }`, map[string]any{"i": input}, &out)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var got struct{ Run Run }
		s.MustAs(t, token, `query($id: ID!) { run(runId: $id) { `+RunFields+` } }`, map[string]any{"id": out.StartRun.ID}, &got)
		if got.Run.Status == "COMPLETED" {
			return got.Run
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s", out.StartRun.ID, got.Run.Status)
		}
	}
}
