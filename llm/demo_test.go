package llm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestDemoModelUsesARefundToolNamedRefund: examples/interlock.yaml's demo agent offers its
// refund tool as "refund", not "issue_refund"; the demo model calls that one.
func TestDemoModelUsesARefundToolNamedRefund(t *testing.T) {
	t.Parallel()
	req := Request{Messages: []Message{{Role: RoleUser, Content: "refund order 42 for 30"}}, Tools: []ToolDef{{Name: "refund"}}}
	resp, err := (&Demo{}).Stream(context.Background(), req, func(string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name+" "+string(resp.ToolCalls[0].Args) != `refund {"amount":30,"orderId":"42"}` {
		t.Fatalf("calls %+v, want one refund call", resp.ToolCalls)
	}
	req.Tools = []ToolDef{{Name: "refund"}, {Name: "issue_refund"}}
	if resp, err = (&Demo{}).Stream(context.Background(), req, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "issue_refund" {
		t.Fatalf("offered both: calls %+v, want issue_refund", resp.ToolCalls)
	}
}

func TestDemoModel(t *testing.T) {
	t.Parallel()
	tools := []ToolDef{{Name: "lookup_order"}, {Name: "issue_refund"}, {Name: "ask_customer"}, {Name: "slow_task"}}
	cases := []struct {
		prompt string
		want   []string // tool name + args JSON per call; empty means a text answer
	}{
		{"refund order 42 for 30", []string{`issue_refund {"amount":30,"orderId":"42"}`}},
		{"Refund orders 7 and 8", []string{`issue_refund {"amount":10,"orderId":"7"}`, `issue_refund {"amount":10,"orderId":"8"}`}},
		{"refund order 3 for $12.5", []string{`issue_refund {"amount":12.5,"orderId":"3"}`}},
		{"ask them which colour", []string{`ask_customer {"question":"ask them which colour"}`}},
		{"what is the status of order 77", []string{`lookup_order {"orderId":"77"}`}},
		{"please look up 5", []string{`lookup_order {"orderId":"5"}`}},
		{"run a slow task for 5 seconds", []string{`slow_task {"seconds":5}`}},
		{"something slow", []string{`slow_task {"seconds":2}`}},
		{"hello there", nil},
		{"count to 7", nil},
	}
	for _, tc := range cases {
		var deltas []string
		resp, err := (&Demo{}).Stream(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: tc.prompt}}, Tools: tools},
			func(d string) error { deltas = append(deltas, d); return nil })
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range resp.ToolCalls {
			got = append(got, c.Name+" "+string(c.Args))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q: calls %v, want %v", tc.prompt, got, tc.want)
		}
		if tc.want == nil && (len(deltas) < 2 || strings.Join(deltas, "") != resp.Text) {
			t.Errorf("%q: text %q streamed as %q", tc.prompt, resp.Text, deltas)
		}
	}
}

func TestDemoModelSummarisesResults(t *testing.T) {
	t.Parallel()
	args, _ := json.Marshal(map[string]any{"orderId": "1"})
	msgs := []Message{
		{Role: RoleUser, Content: "refund orders 1 and 2"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "issue_refund", Args: args}, {ID: "call_2", Name: "issue_refund", Args: args}}},
		{Role: RoleTool, ToolCallID: "call_1", ToolName: "issue_refund", Content: `{"refundId":"rf_1"}`},
		{Role: RoleTool, ToolCallID: "call_2", ToolName: "issue_refund", Content: "customer is not eligible"},
	}
	var n int
	resp, err := (&Demo{}).Stream(context.Background(), Request{Messages: msgs}, func(string) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 0 || !strings.Contains(resp.Text, "rf_1") || !strings.Contains(resp.Text, "customer is not eligible") || n < 3 {
		t.Fatalf("final answer %q in %d pieces", resp.Text, n)
	}
}

func TestDemoModelCounts(t *testing.T) {
	t.Parallel()
	var deltas []string
	resp, _ := (&Demo{}).Stream(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "count to 1000"}}},
		func(d string) error { deltas = append(deltas, d); return nil })
	if len(deltas) != 1000 || deltas[999] != "1000 " || strings.Join(deltas, "") != resp.Text {
		t.Fatalf("%d deltas, last %q", len(deltas), deltas[len(deltas)-1])
	}
}
