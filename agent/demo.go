package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"interlock/llm"
)

// DemoAgents returns the built-in support-agent and supervisor, which `go run .` serves and the tests use. With
// the demo model it is deterministic (see llm.Demo).
func DemoAgents(model llm.Model) []*Agent {
	support := &Agent{
		ID:           "support-agent",
		Name:         "Support agent",
		Description:  "Answers customers: looks up orders, issues refunds (each needs approval) and asks the customer for details.",
		Instructions: "You are a customer support agent. Use the tools to look up orders, issue refunds and ask the customer questions.",
		Model:        model,
		Tools:        []*Tool{lookupOrder(), issueRefund(), askCustomer(), slowTask()},
	}
	// The supervisor hands every request to support-agent (delegate_to_support-agent): its
	// refunds and questions surface as suspensions of the supervisor's run.
	supervisor := &Agent{
		ID:           "supervisor",
		Name:         "Supervisor",
		Description:  "Takes a customer's request and delegates it to the support agent.",
		Instructions: "You are a supervisor. Delegate each customer request to the support agent and report its answer.",
		Model:        model,
		SubAgents:    []*Agent{support},
	}
	return []*Agent{support, supervisor}
}

func lookupOrder() *Tool {
	return &Tool{
		Name:        "lookup_order",
		Description: "Look up an order's status and total.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string","description":"The order number"}},"required":["orderId"]}`),
		ExecuteFunc: func(ctx context.Context, c *Call) (any, error) {
			var in struct{ OrderID string }
			if err := json.Unmarshal(c.Args, &in); err != nil {
				return nil, fmt.Errorf("bad arguments: %w", err)
			}
			return map[string]any{"orderId": in.OrderID, "status": "shipped", "total": 42.5}, nil
		},
	}
}

func issueRefund() *Tool {
	return &Tool{
		Name:            "issue_refund",
		Description:     "Refund an amount of an order to the customer. Every refund waits for a person's approval.",
		InputSchema:     json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string","description":"The order number"},"amount":{"type":"number","description":"Amount to refund"}},"required":["orderId","amount"]}`),
		RequireApproval: true,
		ExecuteFunc: func(ctx context.Context, c *Call) (any, error) {
			var in struct {
				OrderID string  `json:"orderId"`
				Amount  float64 `json:"amount"`
			}
			if err := json.Unmarshal(c.Args, &in); err != nil {
				return nil, fmt.Errorf("bad arguments: %w", err)
			}
			return map[string]any{"refundId": "rf_" + in.OrderID, "orderId": in.OrderID, "amount": in.Amount}, nil
		},
	}
}

func askCustomer() *Tool {
	return &Tool{
		Name:          "ask_customer",
		Description:   "Ask the customer a question and wait for the answer.",
		InputSchema:   json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`),
		SuspendSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`),
		ResumeSchema:  json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","minLength":1,"description":"The customer's answer"}},"required":["answer"]}`),
		ExecuteFunc: func(ctx context.Context, c *Call) (any, error) {
			var in struct {
				Question string `json:"question"`
			}
			if err := json.Unmarshal(c.Args, &in); err != nil {
				return nil, fmt.Errorf("bad arguments: %w", err)
			}
			if !c.Resumed() {
				return nil, c.Suspend(map[string]any{"question": in.Question})
			}
			var out struct {
				Answer string `json:"answer"`
			}
			if err := json.Unmarshal(c.ResumeData, &out); err != nil {
				return nil, fmt.Errorf("bad resume data: %w", err)
			}
			return map[string]any{"answer": out.Answer}, nil
		},
	}
}

// slowTask takes as long as asked (at most 10 minutes): a step long enough to watch, or to kill
// an instance in the middle of.
func slowTask() *Tool {
	return &Tool{
		Name:        "slow_task",
		Description: "A task that takes the given number of seconds.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number","minimum":0,"maximum":600}},"required":["seconds"]}`),
		ExecuteFunc: func(ctx context.Context, c *Call) (any, error) {
			var in struct {
				Seconds float64 `json:"seconds"`
			}
			if err := json.Unmarshal(c.Args, &in); err != nil {
				return nil, fmt.Errorf("bad arguments: %w", err)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			}
			return map[string]any{"sleptSeconds": in.Seconds}, nil
		},
	}
}
