package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Demo is the built-in deterministic model: it needs no network and no key, so `go run .` works
// offline and tests are reproducible. It reads the latest user message:
//
//   - "refund": one issue_refund call per order number, all in one step ("refund order 42 for 30"
//     is {orderId:"42", amount:30}; without "for N" the amount is 10); offered no issue_refund
//     but a tool named refund (examples/interlock.yaml's), that tool with the same arguments;
//   - "ask": ask_customer with the prompt as the question;
//   - "status" or "look up": lookup_order for the first number;
//   - "slow": slow_task for the first number of seconds (default 2), to watch or crash a long step;
//   - "count to N": the numbers 1..N (at most 5000), one TEXT_DELTA each, for long streams;
//   - offered a delegate_to_<agent> tool (a supervisor): that tool with the prompt as the task;
//   - anything else: a short text reply.
//
// Once tool results (or declines) follow the user message, it streams a final text that names
// each result, in several pieces.
type Demo struct {
	// Delay is waited before each answer, to make steps slow enough to watch (or to crash).
	Delay time.Duration
}

var _ Model = (*Demo)(nil)

// Name reports the provider and model.
func (d *Demo) Name() string { return "demo/support-v1" }

var (
	numberRe = regexp.MustCompile(`\d+(?:\.\d+)?`)
	amountRe = regexp.MustCompile(`(?i)\bfor\s+\$?(\d+(?:\.\d+)?)`)
	countRe  = regexp.MustCompile(`(?i)\bcount to (\d+)`)
)

// Stream answers req deterministically; see the type's documentation.
func (d *Demo) Stream(ctx context.Context, req Request, onText func(string) error) (Response, error) {
	if d.Delay > 0 {
		select {
		case <-ctx.Done():
			return Response{}, ctx.Err()
		case <-time.After(d.Delay):
		}
	}
	last := -1
	for i, m := range req.Messages {
		if m.Role == RoleUser {
			last = i
		}
	}
	if last < 0 {
		return streamText(ctx, "There is no question to answer.", onText)
	}
	if results := req.Messages[last+1:]; hasToolResults(results) {
		return streamText(ctx, summarise(results), onText)
	}
	prompt := req.Messages[last].Content
	lower := strings.ToLower(prompt)
	next := countToolCalls(req.Messages)
	refund := refundTool(req)
	switch {
	case delegateTool(req) != "":
		return Response{ToolCalls: []ToolCall{call(next, delegateTool(req), map[string]any{"task": prompt})}}, nil
	case strings.Contains(lower, "slow") && offers(req, "slow_task"):
		secs := 2.0
		if n := numberRe.FindString(prompt); n != "" {
			fmt.Sscan(n, &secs)
		}
		return Response{ToolCalls: []ToolCall{call(next, "slow_task", map[string]any{"seconds": secs})}}, nil
	case strings.Contains(lower, "refund") && refund != "":
		return Response{ToolCalls: refundCalls(refund, prompt, next)}, nil
	case strings.Contains(lower, "ask") && offers(req, "ask_customer"):
		return Response{ToolCalls: []ToolCall{call(next, "ask_customer", map[string]any{"question": prompt})}}, nil
	case (strings.Contains(lower, "status") || strings.Contains(lower, "look up")) && offers(req, "lookup_order"):
		id := "unknown"
		if n := numberRe.FindString(prompt); n != "" {
			id = n
		}
		return Response{ToolCalls: []ToolCall{call(next, "lookup_order", map[string]any{"orderId": id})}}, nil
	case countRe.MatchString(prompt):
		var n int
		fmt.Sscan(countRe.FindStringSubmatch(prompt)[1], &n)
		return streamCount(ctx, min(n, 5000), onText)
	default:
		return streamText(ctx, `Hello! I can look up an order's status, issue refunds (a person approves each one) and ask you for details. Try "refund order 42 for 30".`, onText)
	}
}

func refundCalls(tool, prompt string, next int) []ToolCall {
	amount := 10.0
	skip := [2]int{-1, -1}
	if m := amountRe.FindStringSubmatchIndex(prompt); m != nil {
		fmt.Sscan(prompt[m[2]:m[3]], &amount)
		skip = [2]int{m[2], m[3]}
	}
	var calls []ToolCall
	for _, loc := range numberRe.FindAllStringIndex(prompt, -1) {
		if loc[0] == skip[0] && loc[1] == skip[1] {
			continue
		}
		calls = append(calls, call(next+len(calls), tool, map[string]any{"orderId": prompt[loc[0]:loc[1]], "amount": amount}))
	}
	if len(calls) == 0 {
		calls = append(calls, call(next, tool, map[string]any{"orderId": "unknown", "amount": amount}))
	}
	return calls
}

func call(n int, name string, args map[string]any) ToolCall {
	b, _ := json.Marshal(args)
	return ToolCall{ID: fmt.Sprintf("call_%d", n+1), Name: name, Args: b}
}

// refundTool is the refund tool offered: issue_refund (the demo agent's), else refund, else "".
func refundTool(req Request) string {
	for _, name := range []string{"issue_refund", "refund"} {
		if offers(req, name) {
			return name
		}
	}
	return ""
}

func offers(req Request, tool string) bool {
	for _, t := range req.Tools {
		if t.Name == tool {
			return true
		}
	}
	return false
}

// delegateTool is the first tool offered that delegates to a sub-agent, or "": a supervisor
// hands the whole prompt on.
func delegateTool(req Request) string {
	for _, t := range req.Tools {
		if strings.HasPrefix(t.Name, "delegate_to_") {
			return t.Name
		}
	}
	return ""
}

func hasToolResults(msgs []Message) bool {
	for _, m := range msgs {
		if m.Role == RoleTool {
			return true
		}
	}
	return false
}

func countToolCalls(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.ToolCalls)
	}
	return n
}

func summarise(msgs []Message) string {
	var b strings.Builder
	b.WriteString("Here is what happened:")
	for _, m := range msgs {
		if m.Role == RoleTool {
			fmt.Fprintf(&b, " %s (%s): %s.", m.ToolName, m.ToolCallID, m.Content)
		}
	}
	b.WriteString(" Anything else?")
	return b.String()
}

// streamText sends text in pieces of a few words, as a real model would.
func streamText(ctx context.Context, text string, onText func(string) error) (Response, error) {
	words := strings.SplitAfter(text, " ")
	for i := 0; i < len(words); i += 4 {
		if err := ctx.Err(); err != nil {
			return Response{}, err
		}
		piece := strings.Join(words[i:min(i+4, len(words))], "")
		if err := onText(piece); err != nil {
			return Response{}, err
		}
	}
	return Response{Text: text}, nil
}

// streamCount sends "1 2 3 … n", one number per piece.
func streamCount(ctx context.Context, n int, onText func(string) error) (Response, error) {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		if err := ctx.Err(); err != nil {
			return Response{}, err
		}
		piece := fmt.Sprintf("%d ", i)
		b.WriteString(piece)
		if err := onText(piece); err != nil {
			return Response{}, err
		}
	}
	return Response{Text: b.String()}, nil
}
