package apptest

// Fixtures the tests' servers call or are configured with: an HTTP tool's backend that records
// its calls, a config whose tool waits for approval within a timeout, deeply nested JSON.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// RefundEndpoint is the HTTP tool's backend: it records each call.
type RefundEndpoint struct {
	*httptest.Server
	Mu    sync.Mutex
	Calls []map[string]any
	Auth  []string
}

func NewRefundEndpoint(t *testing.T) *RefundEndpoint {
	e := &RefundEndpoint{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		e.Mu.Lock()
		e.Calls = append(e.Calls, body)
		e.Auth = append(e.Auth, r.Header.Get("Authorization"))
		e.Mu.Unlock()
		io.WriteString(w, `{"result": {"refundId": "rf_7"}}`)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *RefundEndpoint) Got() ([]map[string]any, []string) {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	return append([]map[string]any(nil), e.Calls...), append([]string(nil), e.Auth...)
}

// ExpiryConfig is a config file whose billing agent, on the fake model, calls an HTTP refund
// tool that needs approval within timeout; more is appended (further top-level sections).
func ExpiryConfig(t *testing.T, timeout string, more ...string) (file string, refunds *RefundEndpoint) {
	t.Helper()
	model, refunds := FakeModel(t, "refund"), NewRefundEndpoint(t)
	return WriteConfig(t, `
agents:
  - id: billing
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [refund]
tools:
  - name: refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    approvalTimeout: `+timeout+`
    http: {url: `+refunds.URL+`/refund, timeout: 5s}
`+strings.Join(more, "")), refunds
}

// DeepJSON is a value nested n levels deep.
func DeepJSON(n int) string {
	return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
}
