package apptest

import (
	"strings"
	"testing"
	"time"
)

// ExpiryConfig is a config file whose billing agent, on the fake model, calls an HTTP refund
// tool that needs approval within timeout; more is appended (further top-level sections).
func ExpiryConfig(t *testing.T, timeout string, more ...string) (file string, refunds *RefundEndpoint) {
	t.Helper()
	model, refunds := FakeModel(t, "refund"), NewRefundEndpoint(t)
	return WriteConfig(t, `
agents:
  - id: billing
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model, apiKeyEnv: INTERLOCK_TEST_MODEL_KEY}
    tools: [refund]
tools:
  - name: refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    approvalTimeout: `+timeout+`
    http: {url: `+refunds.URL+`/refund, timeout: 5s}
`+strings.Join(more, "")), refunds
}

type ExpiryRun struct {
	RunID       string  `json:"runId"`
	Status      string  `json:"status"`
	SuspendedAt *string `json:"suspendedAt"`
	Output      *string `json:"output"`
	ToolCalls   []struct {
		ToolCallID string  `json:"toolCallId"`
		ExpiresAt  *string `json:"expiresAt"`
	} `json:"toolCalls"`
	Decisions []struct {
		ToolCallID string  `json:"toolCallId"`
		Kind       string  `json:"kind"`
		DecidedBy  *string `json:"decidedBy"`
		Reason     *string `json:"reason"`
	} `json:"decisions"`
}

const ExpiryRunFields = `runId status suspendedAt output toolCalls { toolCallId expiresAt } decisions { toolCallId kind decidedBy reason }`

func (s *Server) ExpiryRun(t *testing.T, id string) ExpiryRun {
	t.Helper()
	var out struct{ Run ExpiryRun }
	s.Must(t, `query($id: ID!) { run(runId: $id) { `+ExpiryRunFields+` } }`, map[string]any{"id": id}, &out)
	return out.Run
}

// WaitStatus polls a run until it has the status.
func (s *Server) WaitStatus(t *testing.T, id, status string) ExpiryRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := s.ExpiryRun(t, id)
		if r.Status == status {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after 20s, want %s", id, r.Status, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
