package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPUpstream is an MCP server over streamable HTTP for the gateway's tests: refund (which the
// tests gate; order, amount and an optional note) and lookup (which they do not), each call
// counted with the arguments and _meta it came with; Hold, when set, is waited on by every refund call before it answers (a test
// closes it, or kills the gateway while a call is held).
type MCPUpstream struct {
	URL  string
	Hold chan struct{}

	mu    sync.Mutex
	calls []MCPCall
	// started is told of each refund call as it arrives (buffered; never blocks the call).
	started chan MCPCall
}

// MCPCall is one call the upstream received.
type MCPCall struct {
	Tool string
	Args map[string]any
	Meta map[string]any
}

// NewMCPUpstream starts the upstream for the test's life, keeping sessions (the 2025
// protocols: a client speaking 2026-07-28 falls back to them).
func NewMCPUpstream(t testing.TB) *MCPUpstream { return newMCPUpstreamWith(t, false, false) }

// NewMCPUpstreamAsking is NewMCPUpstream with refund_ask, which asks why in the middle of its
// call (elicitation/create, the 2025 protocols' way) and refunds only with an answer.
func NewMCPUpstreamAsking(t testing.TB) *MCPUpstream { return newMCPUpstreamWith(t, false, true) }

// NewMCPUpstreamSessionless is NewMCPUpstream serving the 2026-07-28 protocol (no sessions), whose
// questions are input-required results: its refund_why asks why before it refunds.
func NewMCPUpstreamSessionless(t testing.TB) *MCPUpstream { return newMCPUpstreamWith(t, true, false) }

func newMCPUpstreamWith(t testing.TB, sessionless, asking bool) *MCPUpstream {
	u := &MCPUpstream{started: make(chan MCPCall, 100)}
	s := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	type refundIn struct {
		Order  int     `json:"order" jsonschema:"the order number"`
		Amount float64 `json:"amount" jsonschema:"the amount to refund"`
		// Note is free text, optional: where a console test puts characters that matter.
		Note string `json:"note,omitempty" jsonschema:"a note for the customer"`
	}
	type refundOut struct {
		Refunded float64 `json:"refunded"`
		Order    int     `json:"order"`
	}
	yes := true
	mcp.AddTool(s, &mcp.Tool{Name: "refund", Title: "Refund an order", Description: "Refund an order",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, Title: "Refund"}},
		func(ctx context.Context, req *mcp.CallToolRequest, in refundIn) (*mcp.CallToolResult, refundOut, error) {
			c := u.record("refund", req)
			select {
			case u.started <- c:
			default:
			}
			if u.Hold != nil {
				select {
				case <-u.Hold:
				case <-ctx.Done():
					return nil, refundOut{}, ctx.Err()
				}
			}
			return nil, refundOut{Refunded: in.Amount, Order: in.Order}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Look up an order", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Order int `json:"order"`
		}) (*mcp.CallToolResult, any, error) {
			u.record("lookup", req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("order %d: shipped", in.Order)}}}, nil, nil
		})
	if sessionless {
		addRefundWhy(s, u)
	}
	if asking {
		addRefundAsk(s, u)
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: sessionless}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	return u
}

// addRefundWhy adds refund_why to s: it asks, in the 2026-07-28 way (an input-required result),
// why the refund is made, and refunds only with an answer (a call without one records nothing).
func addRefundWhy(s *mcp.Server, u *MCPUpstream) {
	s.AddTool(&mcp.Tool{Name: "refund_why", Description: "Refund an order, asking why first",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order":{"type":"integer"}},"required":["order"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			answer, ok := req.Params.InputResponses["why"].(*mcp.ElicitResult)
			if !ok || answer.Action != "accept" {
				return &mcp.CallToolResult{RequestState: "state-1", InputRequests: mcp.InputRequestMap{"why": &mcp.ElicitParams{
					Mode: "form", Message: "Why is this order refunded?",
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"reason": map[string]any{"type": "string", "minLength": 3}}, "required": []string{"reason"}},
				}}}, nil
			}
			c := u.record("refund_why", req)
			c.Args["why"] = answer.Content["reason"]
			c.Args["requestState"] = req.Params.RequestState
			u.mu.Lock()
			u.calls[len(u.calls)-1] = c
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded because %v", answer.Content["reason"])}}}, nil
		})
}

// addRefundAsk adds refund_ask to s: it asks why in the middle of the call (elicitation/create)
// and refunds only with an accepted answer; each call is recorded as it arrives (executions),
// with the answer's reason, or the action, under "why" once it has one.
func addRefundAsk(s *mcp.Server, u *MCPUpstream) {
	s.AddTool(&mcp.Tool{Name: "refund_ask", Description: "Refund an order, asking why during the call",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order":{"type":"integer"}},"required":["order"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.record("refund_ask", req)
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Why is this order refunded?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"reason": map[string]any{"type": "string", "minLength": 3}}, "required": []string{"reason"}}})
			why := "error"
			switch {
			case err == nil && res.Action == "accept":
				why = fmt.Sprint(res.Content["reason"])
			case err == nil:
				why = res.Action
			}
			u.mu.Lock()
			for i := len(u.calls) - 1; i >= 0; i-- {
				if u.calls[i].Tool == "refund_ask" {
					u.calls[i].Args["why"] = why
					break
				}
			}
			u.mu.Unlock()
			if err != nil || res.Action != "accept" {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not refunded: " + why}}}, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded because " + why}}}, nil
		})
}

func (u *MCPUpstream) record(tool string, req *mcp.CallToolRequest) MCPCall {
	c := MCPCall{Tool: tool, Meta: map[string]any(req.Params.Meta)}
	_ = json.Unmarshal(req.Params.Arguments, &c.Args)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, c)
	return c
}

// Calls are the calls received so far of tool ("" for all).
func (u *MCPUpstream) Calls(tool string) []MCPCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []MCPCall
	for _, c := range u.calls {
		if tool == "" || c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// Started is told of each refund call as it arrives.
func (u *MCPUpstream) Started() <-chan MCPCall { return u.started }
