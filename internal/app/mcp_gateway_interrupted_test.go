package app_test

import (
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
)

// TestMCPGatewayInterruptedCallIsNotSaidNotToHaveRun: an approved call that reached the
// upstream and was not answered within the server's timeout has an unknown outcome: it goes
// back to the inbox interrupted. The client that made it must not be told that the tool has
// not run (the pending text) nor, once a person declines running it again, that it did not
// run (the declined text): the upstream did receive it, and a model told otherwise may make
// the refund again by other means.
func TestMCPGatewayInterruptedCallIsNotSaidNotToHaveRun(t *testing.T) {
	t.Parallel()
	up := apptest.NewMCPUpstream(t)
	up.Hold = make(chan struct{}) // refund never answers within the timeout
	t.Cleanup(func() { close(up.Hold) })
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/i.db", gatewayConfig(up, "4s", "    timeout: 1s"))
	cs := gatewayClient(t, s, apptest.TokenOf("agentbot"), "2025-11-25", nil)
	args := map[string]any{"order": 31, "amount": 99}

	got := heldCall(cs, "orders__refund", args, 30*time.Second)
	id := waitingRun(t, s)
	decide(t, s, "alice", id, `approveToolCall(runId: $id) { id }`)
	select {
	case <-up.Started():
	case <-time.After(20 * time.Second):
		t.Fatal("the approved call never reached the upstream")
	}
	apptest.Until(t, "the call interrupted (sent, not answered within the timeout)", func() bool {
		var out struct {
			SuspendedRuns struct{ Runs []apptest.Run }
		}
		s.MustAs(t, apptest.TokenOf("alice"), `{ suspendedRuns(agentId: "mcp-gateway") { runs { runId toolCalls { interrupted } } } }`, nil, &out)
		r := out.SuspendedRuns.Runs
		return len(r) == 1 && r[0].RunID == id && r[0].ToolCalls[0].Interrupted
	})

	// The approved caller's held call ends when wait passes, the call interrupted.
	held := <-got
	if n := len(up.Calls("refund")); n != 1 {
		t.Fatalf("the upstream got refund %d times, want 1", n)
	}
	if text := resultText(held); strings.Contains(text, "has not run") {
		t.Errorf("the client whose approved call was sent to the upstream is told %q (status %v): "+
			"the call was sent and its outcome is unknown", text, approval(held)["status"])
	}

	// A person declines running it again; the identical call gets that decision.
	decide(t, s, "bob", id, `declineToolCall(runId: $id, reason: "checking with the bank first") { id }`)
	res := callTool(t, cs, "orders__refund", args, 30*time.Second, nil)
	if approval(res)["runId"] != id {
		t.Fatalf("the identical call after the decline = %v, want run %s's outcome", approval(res), id)
	}
	if text := resultText(res); strings.Contains(text, "did not run") {
		t.Errorf("after a decline of the interrupted call the client is told %q (status %v), "+
			"though the upstream received the call (%d refund calls)", text, approval(res)["status"], len(up.Calls("refund")))
	}
}
