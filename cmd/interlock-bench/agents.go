package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// agentConfig is the config file the measured server runs: n agents on the built-in demo
// model (agent-1 … agent-n), each offering issue_refund, which waits for approval and then
// POSTs to refundURL. Memory is off (lastMessages: 0), so a run's snapshot holds its own
// prompt only and a seeded run's rows are exactly those the service writes for the same prompt
// on any thread, however many runs the thread already has.
func agentConfig(n int, refundURL string) string {
	var b strings.Builder
	b.WriteString("agents:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  - id: %s\n    name: Bench agent %d\n    model: {provider: demo}\n    tools: [issue_refund]\n    memory: {lastMessages: 0}\n", agentID(i-1), i)
	}
	fmt.Fprintf(&b, `tools:
  - name: issue_refund
    description: Refund an order
    inputSchema:
      type: object
      properties:
        orderId: {type: string}
        amount: {type: number}
      required: [orderId, amount]
    requireApproval: true
    http:
      url: %s
      timeout: 10s
`, refundURL)
	return b.String()
}

// agentID names the i-th (zero-based) bench agent.
func agentID(i int) string { return fmt.Sprintf("agent-%d", i+1) }

// refundServer is the edge the measured server calls when an approved refund runs: an
// in-process HTTP endpoint speaking the webhook tool's wire format ({"result": …}).
type refundServer struct {
	URL string
	srv *http.Server
}

func startRefundServer() (*refundServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the refund tool: %w", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Args json.RawMessage `json:"args"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &in)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"result":{"refunded":true,"args":%s}}`, orNull(in.Args))
	})
	s := &refundServer{URL: "http://" + ln.Addr().String() + "/refund", srv: &http.Server{Handler: h}}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *refundServer) Close() { s.srv.Close() }

func orNull(b json.RawMessage) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}
