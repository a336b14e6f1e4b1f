package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"interlock/agent"
	"interlock/llm"
)

// The agent loop against a fake Host and a scripted model: no database, no network. Each test
// asserts the calls the loop makes on its Host, in order, with the state of the step's calls
// in the snapshot each call hands over (what the host would store), and the snapshot the loop
// leaves.

// host is a fake agent.Host that records each call as one line: the method, what it was told,
// and the states of the snapshot's pending calls at that moment ("tc_1=executing,tc_2=new").
type host struct {
	calls []string
	// fail makes the named method return its error.
	fail map[string]error
}

var testRun = agent.RunInfo{RunID: "run-1", AgentID: "agent", ThreadID: "thread-1", ResourceID: "user-1"}

func (h *host) record(method string, snap *agent.Snapshot, what string) error {
	line := method
	if what != "" {
		line += " " + what
	}
	if snap != nil {
		line += " [" + pending(snap) + "]"
	}
	h.calls = append(h.calls, line)
	return h.fail[method]
}

// pending is the states of snap's pending calls, in order.
func pending(snap *agent.Snapshot) string {
	var out []string
	for _, c := range snap.Pending {
		out = append(out, c.CallID()+"="+string(c.State))
	}
	return strings.Join(out, ",")
}

func (h *host) Run() agent.RunInfo { return testRun }

func (h *host) TextDelta(_ context.Context, text string) error {
	return h.record("TextDelta", nil, fmt.Sprintf("%q", text))
}

func (h *host) ModelCallRetried(context.Context) error { return h.record("ModelCallRetried", nil, "") }

func (h *host) ToolCalls(_ context.Context, snap *agent.Snapshot, calls []agent.PendingCall) error {
	var names []string
	for _, c := range calls {
		names = append(names, c.CallID()+":"+c.Name)
	}
	return h.record("ToolCalls", snap, strings.Join(names, ","))
}

func (h *host) ToolStarted(_ context.Context, snap *agent.Snapshot, c agent.PendingCall) error {
	return h.record("ToolStarted", snap, c.CallID())
}

func (h *host) ToolResult(_ context.Context, snap *agent.Snapshot, c agent.PendingCall, result json.RawMessage, errMsg string) error {
	if errMsg != "" {
		return h.record("ToolResult", snap, fmt.Sprintf("%s error: %s", c.CallID(), errMsg))
	}
	return h.record("ToolResult", snap, fmt.Sprintf("%s %s", c.CallID(), result))
}

func (h *host) ToolDeclined(_ context.Context, snap *agent.Snapshot, c agent.PendingCall) error {
	return h.record("ToolDeclined", snap, c.CallID())
}

func (h *host) StepFinished(_ context.Context, snap *agent.Snapshot) error {
	return h.record("StepFinished", snap, fmt.Sprintf("steps=%d", snap.Steps))
}

var _ agent.Host = (*host)(nil)

// turn is one scripted model answer: text streamed in pieces, then tool calls, or an error.
type turn struct {
	text  []string
	calls []llm.ToolCall
	err   error
	retry bool // the answer is cut off once first: RetryFunc is called before the text
}

// model answers each call with the next turn and keeps every request.
type model struct {
	mu    sync.Mutex
	turns []turn
	reqs  []llm.Request
}

var _ llm.Model = (*model)(nil)

func (m *model) Name() string { return "test/scripted" }

func (m *model) Stream(_ context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
	m.mu.Lock()
	req.Messages = slices.Clone(req.Messages)
	m.reqs = append(m.reqs, req)
	n := len(m.reqs)
	m.mu.Unlock()
	if n > len(m.turns) {
		return llm.Response{}, fmt.Errorf("model called %d times, scripted %d", n, len(m.turns))
	}
	tr := m.turns[n-1]
	if tr.retry {
		if err := req.RetryFunc(); err != nil {
			return llm.Response{}, err
		}
	}
	for _, piece := range tr.text {
		if err := onText(piece); err != nil {
			return llm.Response{}, err
		}
	}
	if tr.err != nil {
		return llm.Response{}, tr.err
	}
	return llm.Response{Text: strings.Join(tr.text, ""), ToolCalls: tr.calls}, nil
}

// lastMessage is the last message of the conversation the model was given at call n (from 1).
func (m *model) lastMessage(t *testing.T, n int) llm.Message {
	t.Helper()
	if len(m.reqs) < n {
		t.Fatalf("the model was called %d times, not %d", len(m.reqs), n)
	}
	msgs := m.reqs[n-1].Messages
	return msgs[len(msgs)-1]
}

// say is a turn of final text; ask a turn of tool calls (name, args JSON, the model's id).
func say(text ...string) turn { return turn{text: text} }

func ask(calls ...llm.ToolCall) turn { return turn{calls: calls} }

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

// tool is a tool whose executions are recorded; run answers each.
type tool struct {
	*agent.Tool
	mu    sync.Mutex
	calls []agent.Call
}

func newTool(name string, needsApproval bool, run func(ctx context.Context, c *agent.Call) (any, error)) *tool {
	tl := &tool{}
	tl.Tool = &agent.Tool{
		Name: name, RequireApproval: needsApproval,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"orderId":{"type":"string"}},"required":["orderId"]}`),
		ExecuteFunc: func(ctx context.Context, c *agent.Call) (any, error) {
			tl.mu.Lock()
			tl.calls = append(tl.calls, *c)
			tl.mu.Unlock()
			return run(ctx, c)
		},
	}
	return tl
}

func (tl *tool) executed() []agent.Call {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.calls)
}

// lookup answers with the order; refund needs approval and answers with a refund id.
func lookup() *tool {
	return newTool("lookup_order", false, func(_ context.Context, c *agent.Call) (any, error) {
		var in struct{ OrderID string }
		if err := json.Unmarshal(c.Args, &in); err != nil {
			return nil, err
		}
		return map[string]string{"order": in.OrderID, "status": "shipped"}, nil
	})
}

func refund() *tool {
	return newTool("issue_refund", true, func(_ context.Context, c *agent.Call) (any, error) {
		var in struct{ OrderID string }
		if err := json.Unmarshal(c.Args, &in); err != nil {
			return nil, err
		}
		return map[string]string{"refund": "rf_" + in.OrderID}, nil
	})
}

// newAgent is agent "agent" over m with the tools, as a registry holds it (with the compiled
// schemas the loop checks arguments against).
func newAgent(t *testing.T, m llm.Model, tools ...*tool) *agent.Agent {
	t.Helper()
	a := &agent.Agent{ID: "agent", Name: "Agent", Instructions: "Be brief.", Model: m}
	for _, tl := range tools {
		a.Tools = append(a.Tools, tl.Tool)
	}
	reg, err := agent.NewRegistry([]*agent.Agent{a})
	if err != nil {
		t.Fatal(err)
	}
	return reg.Get(a.ID)
}

func wantCalls(t *testing.T, h *host, want ...string) {
	t.Helper()
	if !slices.Equal(h.calls, want) {
		t.Errorf("host calls:\n\t%s\nwant:\n\t%s", strings.Join(h.calls, "\n\t"), strings.Join(want, "\n\t"))
	}
	h.calls = nil
}

// run runs the loop on snap and fails the test on an error.
func run(t *testing.T, a *agent.Agent, snap *agent.Snapshot, h *host) agent.Outcome {
	t.Helper()
	out, err := a.Run(t.Context(), snap, h)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

// roles is the conversation in one line: role and content (or tool calls) of each message.
func roles(msgs []llm.Message) string {
	var out []string
	for _, m := range msgs {
		s := string(m.Role)
		switch {
		case len(m.ToolCalls) > 0:
			var names []string
			for _, c := range m.ToolCalls {
				names = append(names, c.ID+":"+c.Name)
			}
			s += "(" + strings.Join(names, ",") + ")"
		case m.Role == llm.RoleTool:
			s += "(" + m.ToolCallID + ") " + m.Content
		default:
			s += " " + m.Content
		}
		out = append(out, s)
	}
	return strings.Join(out, " | ")
}

func wantConversation(t *testing.T, snap *agent.Snapshot, want string) {
	t.Helper()
	if got := roles(snap.Messages); got != want {
		t.Errorf("conversation:\n\t%s\nwant:\n\t%s", got, want)
	}
}

func TestLoopFinalTextCompletes(t *testing.T) {
	t.Parallel()
	m := &model{turns: []turn{say("Hel", "lo")}}
	a := newAgent(t, m, lookup())
	snap := agent.NewSnapshot([]llm.Message{{Role: llm.RoleUser, Content: "earlier"}}, "hi", false)
	h := &host{}
	out := run(t, a, snap, h)
	if out.Text != "Hello" || out.Held != nil {
		t.Errorf("outcome = %+v, want the text Hello", out)
	}
	wantCalls(t, h, `TextDelta "Hel"`, `TextDelta "lo"`)
	wantConversation(t, snap, "user earlier | user hi | assistant Hello")
	if snap.Steps != 1 || len(snap.Pending) != 0 {
		t.Errorf("snapshot: steps %d, pending %d; want 1 step, none pending", snap.Steps, len(snap.Pending))
	}
	// The model is given the instructions first, and the agent's tools.
	req := m.reqs[0]
	if req.Messages[0].Role != llm.RoleSystem || req.Messages[0].Content != "Be brief." || len(req.Messages) != 3 {
		t.Errorf("the model was given %s", roles(req.Messages))
	}
	if len(req.Tools) != 1 || req.Tools[0].Name != "lookup_order" || string(req.Tools[0].Parameters) != string(a.Tools[0].InputSchema) {
		t.Errorf("tools offered: %+v", req.Tools)
	}
}

// TestLoopRunsAToolAndGoesOn: a call that needs no approval is stored (ToolCalls), marked
// executing before the tool runs (ToolStarted), run with the server's id and the run's info,
// and its result stored (ToolResult) and given to the model at the next step.
func TestLoopRunsAToolAndGoesOn(t *testing.T) {
	t.Parallel()
	m := &model{turns: []turn{ask(call("m1", "lookup_order", `{ "orderId" : "7" }`)), say("Shipped.")}}
	look := lookup()
	a := newAgent(t, m, look)
	snap := agent.NewSnapshot(nil, "where is order 7?", false)
	h := &host{}
	out := run(t, a, snap, h)
	if out.Text != "Shipped." {
		t.Errorf("outcome = %+v", out)
	}
	wantCalls(t, h,
		`ToolCalls tc_1:lookup_order [tc_1=new]`,
		`ToolStarted tc_1 [tc_1=executing]`,
		`ToolResult tc_1 {"order":"7","status":"shipped"} [tc_1=done]`,
		`StepFinished steps=1 []`,
		`TextDelta "Shipped."`)
	got := look.executed()
	if len(got) != 1 || got[0].ID != "tc_1" || string(got[0].Args) != `{"orderId":"7"}` || got[0].Run != testRun || got[0].Resumed() {
		t.Errorf("the tool got %+v; want id tc_1, the canonical arguments and the run", got)
	}
	wantConversation(t, snap, `user where is order 7? | assistant(m1:lookup_order) | tool(m1) {"order":"7","status":"shipped"} | assistant Shipped.`)
	if snap.Steps != 2 || snap.CallIDs != 1 {
		t.Errorf("steps %d, call ids %d; want 2 and 1", snap.Steps, snap.CallIDs)
	}
}

// TestLoopHoldsACallForApproval: a call that needs approval is stored and held, and its tool
// does not run; once approved, the loop runs it and goes on.
func TestLoopHoldsACallForApproval(t *testing.T) {
	t.Parallel()
	m := &model{turns: []turn{ask(call("m1", "issue_refund", `{"orderId":"42"}`)), say("Refunded.")}}
	pay := refund()
	a := newAgent(t, m, pay)
	snap := agent.NewSnapshot(nil, "refund 42", false)
	h := &host{}
	out := run(t, a, snap, h)
	if out.Held == nil || out.Held.CallID() != "tc_1" || out.Held.State != agent.CallAwaitingApproval {
		t.Fatalf("outcome = %+v, want held on tc_1 awaiting approval", out)
	}
	wantCalls(t, h, `ToolCalls tc_1:issue_refund [tc_1=new]`)
	if len(pay.executed()) != 0 || snap.Waiting() == nil || snap.Waiting().CallID() != "tc_1" || snap.Steps != 0 {
		t.Fatalf("before the approval: executed %d, waiting %v, steps %d", len(pay.executed()), snap.Waiting(), snap.Steps)
	}

	if err := snap.Decide("tc_1", agent.Decision{Kind: agent.CallApproved}); err != nil {
		t.Fatal(err)
	}
	out = run(t, a, snap, h)
	if out.Text != "Refunded." || len(pay.executed()) != 1 {
		t.Errorf("after the approval: outcome %+v, executed %d", out, len(pay.executed()))
	}
	wantCalls(t, h,
		`ToolStarted tc_1 [tc_1=executing]`,
		`ToolResult tc_1 {"refund":"rf_42"} [tc_1=done]`,
		`StepFinished steps=1 []`,
		`TextDelta "Refunded."`)
}

// TestLoopRequireToolApprovalHoldsEveryCall: the run's (or the agent's) requireToolApproval
// holds a call whose tool does not ask for it.
func TestLoopRequireToolApprovalHoldsEveryCall(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(a *agent.Agent, snap *agent.Snapshot){
		"run":   func(_ *agent.Agent, snap *agent.Snapshot) { snap.RequireToolApproval = true },
		"agent": func(a *agent.Agent, _ *agent.Snapshot) { a.RequireToolApproval = true },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			look := lookup()
			a := newAgent(t, &model{turns: []turn{ask(call("m1", "lookup_order", `{"orderId":"1"}`))}}, look)
			snap := agent.NewSnapshot(nil, "status of 1", false)
			setup(a, snap)
			out := run(t, a, snap, &host{})
			if out.Held == nil || out.Held.State != agent.CallAwaitingApproval || len(look.executed()) != 0 {
				t.Errorf("outcome %+v, executed %d; want held, not run", out, len(look.executed()))
			}
		})
	}
}

// TestLoopStepWithSeveralCalls: calls run in the model's order; the first that needs approval
// holds the run, and every later one that needs approval waits with it, while a later call
// that needs none waits for its turn. After both decisions the rest run in order.
func TestLoopStepWithSeveralCalls(t *testing.T) {
	t.Parallel()
	m := &model{turns: []turn{
		ask(call("m1", "lookup_order", `{"orderId":"1"}`), call("m2", "issue_refund", `{"orderId":"2"}`),
			call("m3", "lookup_order", `{"orderId":"3"}`), call("m4", "issue_refund", `{"orderId":"4"}`)),
		say("Done."),
	}}
	look, pay := lookup(), refund()
	a := newAgent(t, m, look, pay)
	snap := agent.NewSnapshot(nil, "go", false)
	h := &host{}
	out := run(t, a, snap, h)
	if out.Held == nil || out.Held.CallID() != "tc_2" {
		t.Fatalf("outcome = %+v, want held on tc_2", out)
	}
	wantCalls(t, h,
		`ToolCalls tc_1:lookup_order,tc_2:issue_refund,tc_3:lookup_order,tc_4:issue_refund [tc_1=new,tc_2=new,tc_3=new,tc_4=new]`,
		`ToolStarted tc_1 [tc_1=executing,tc_2=new,tc_3=new,tc_4=new]`,
		`ToolResult tc_1 {"order":"1","status":"shipped"} [tc_1=done,tc_2=new,tc_3=new,tc_4=new]`)
	if got := pending(snap); got != "tc_1=done,tc_2=awaiting_approval,tc_3=new,tc_4=awaiting_approval" {
		t.Errorf("held snapshot: %s", got)
	}
	if w := snap.WaitingCalls(); len(w) != 2 || w[0].CallID() != "tc_2" || w[1].CallID() != "tc_4" {
		t.Errorf("waiting calls %+v, want tc_2 and tc_4", w)
	}

	// Deciding one of them does not start the step again while the other waits.
	if err := snap.Decide("tc_4", agent.Decision{Kind: agent.CallApproved}); err != nil {
		t.Fatal(err)
	}
	out = run(t, a, snap, h)
	if out.Held == nil || out.Held.CallID() != "tc_2" {
		t.Fatalf("with tc_2 still waiting: outcome = %+v", out)
	}
	wantCalls(t, h)
	if err := snap.Decide("tc_2", agent.Decision{Kind: agent.CallApproved}); err != nil {
		t.Fatal(err)
	}
	out = run(t, a, snap, h)
	if out.Text != "Done." {
		t.Fatalf("outcome = %+v", out)
	}
	wantCalls(t, h,
		`ToolStarted tc_2 [tc_1=done,tc_2=executing,tc_3=new,tc_4=approved]`,
		`ToolResult tc_2 {"refund":"rf_2"} [tc_1=done,tc_2=done,tc_3=new,tc_4=approved]`,
		`ToolStarted tc_3 [tc_1=done,tc_2=done,tc_3=executing,tc_4=approved]`,
		`ToolResult tc_3 {"order":"3","status":"shipped"} [tc_1=done,tc_2=done,tc_3=done,tc_4=approved]`,
		`ToolStarted tc_4 [tc_1=done,tc_2=done,tc_3=done,tc_4=executing]`,
		`ToolResult tc_4 {"refund":"rf_4"} [tc_1=done,tc_2=done,tc_3=done,tc_4=done]`,
		`StepFinished steps=1 []`,
		`TextDelta "Done."`)
	wantConversation(t, snap, `user go | assistant(m1:lookup_order,m2:issue_refund,m3:lookup_order,m4:issue_refund) | `+
		`tool(m1) {"order":"1","status":"shipped"} | tool(m2) {"refund":"rf_2"} | tool(m3) {"order":"3","status":"shipped"} | tool(m4) {"refund":"rf_4"} | assistant Done.`)
}

// TestLoopDeclineIsAnsweredToTheModel: a declined call is not run; the model is told the
// reason, or DeclinedMessage without one, and an expired call the timeout, and the run goes on.
func TestLoopDeclineIsAnsweredToTheModel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		decision agent.Decision
		told     string
	}{
		{"with a reason", agent.Decision{Kind: agent.CallDeclined, Reason: "Too much."}, "Too much."},
		{"without a reason", agent.Decision{Kind: agent.CallDeclined}, agent.DeclinedMessage},
		{"expired", agent.Decision{Kind: agent.CallExpired}, agent.ExpiredMessage("issue_refund", 0, true)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := &model{turns: []turn{ask(call("m1", "issue_refund", `{"orderId":"9"}`)), say("OK.")}}
			pay := refund()
			a := newAgent(t, m, pay)
			snap := agent.NewSnapshot(nil, "refund 9", false)
			h := &host{}
			run(t, a, snap, h)
			h.calls = nil
			if err := snap.Decide("tc_1", c.decision); err != nil {
				t.Fatal(err)
			}
			if out := run(t, a, snap, h); out.Text != "OK." {
				t.Fatalf("outcome = %+v", out)
			}
			wantCalls(t, h, `ToolDeclined tc_1 [tc_1=done]`, `StepFinished steps=1 []`, `TextDelta "OK."`)
			if len(pay.executed()) != 0 {
				t.Error("a declined call ran")
			}
			if got := m.lastMessage(t, 2); got.Role != llm.RoleTool || got.ToolCallID != "m1" || got.Content != c.told {
				t.Errorf("the model was told %+v, want %q", got, c.told)
			}
		})
	}
}

// TestLoopEditedArgumentsRunAndAreTold: a call approved with edited arguments runs with them,
// and the model learns that before the result, in characters (the canonical form's escapes of
// <, > and & are not pasted into the text).
func TestLoopEditedArgumentsRunAndAreTold(t *testing.T) {
	t.Parallel()
	m := &model{turns: []turn{ask(call("m1", "issue_refund", `{"orderId":"<1>"}`)), say("OK.")}}
	pay := refund()
	a := newAgent(t, m, pay)
	snap := agent.NewSnapshot(nil, "refund", false)
	run(t, a, snap, &host{})
	if err := snap.Decide("tc_1", agent.Decision{Kind: agent.CallApproved, Args: json.RawMessage(`{"orderId":"2 \u0026 3"}`)}); err != nil {
		t.Fatal(err)
	}
	run(t, a, snap, &host{})
	if got := pay.executed(); len(got) != 1 || string(got[0].Args) != `{"orderId":"2 \u0026 3"}` {
		t.Fatalf("the tool got %+v, want the edited arguments", got)
	}
	want := fmt.Sprintf(agent.EditedNote, `{"orderId":"2 & 3"}`, `{"orderId":"<1>"}`) + `{"refund":"rf_2 & 3"}`
	if got := m.lastMessage(t, 2).Content; got != want {
		t.Errorf("the model was told %q, want %q", got, want)
	}
}

// TestLoopSuspendAndResume: a tool that calls Suspend holds the run with its payload (the call
// was stored executing first); resumed, it runs again from the start with the person's data
// and the payload, and may suspend again (the data it had is dropped); its result goes to the
// model.
func TestLoopSuspendAndResume(t *testing.T) {
	t.Parallel()
	askCustomer := newTool("ask_customer", false, func(_ context.Context, c *agent.Call) (any, error) {
		switch {
		case !c.Resumed():
			return nil, c.Suspend(map[string]string{"question": "Which size?"})
		case string(c.ResumeData) == `"?"`:
			return nil, c.Suspend(map[string]string{"question": "S, M or L?"})
		}
		return map[string]json.RawMessage{"answer": c.ResumeData, "asked": c.SuspendPayload}, nil
	})
	m := &model{turns: []turn{ask(call("m1", "ask_customer", `{"orderId":"5"}`)), say("Thanks.")}}
	a := newAgent(t, m, askCustomer)
	snap := agent.NewSnapshot(nil, "change order 5", false)
	h := &host{}
	out := run(t, a, snap, h)
	if out.Held == nil || out.Held.State != agent.CallSuspended || string(out.Held.SuspendPayload) != `{"question":"Which size?"}` {
		t.Fatalf("outcome = %+v, want suspended with the question", out)
	}
	wantCalls(t, h, `ToolCalls tc_1:ask_customer [tc_1=new]`, `ToolStarted tc_1 [tc_1=executing]`)
	if w := snap.Waiting(); w == nil || w.State != agent.CallSuspended || w.ResumeData != nil {
		t.Fatalf("waiting call %+v", w)
	}

	if err := snap.Decide("tc_1", agent.Decision{Kind: agent.CallResumed, ResumeData: json.RawMessage(`"?"`)}); err != nil {
		t.Fatal(err)
	}
	out = run(t, a, snap, h)
	if out.Held == nil || out.Held.State != agent.CallSuspended || string(out.Held.SuspendPayload) != `{"question":"S, M or L?"}` || out.Held.ResumeData != nil {
		t.Fatalf("resumed with a question back: outcome = %+v, want suspended again with the new question and no data", out)
	}
	wantCalls(t, h, `ToolStarted tc_1 [tc_1=executing]`)

	if err := snap.Decide("tc_1", agent.Decision{Kind: agent.CallResumed, ResumeData: json.RawMessage(`"M"`)}); err != nil {
		t.Fatal(err)
	}
	if out := run(t, a, snap, h); out.Text != "Thanks." {
		t.Fatalf("outcome = %+v", out)
	}
	wantCalls(t, h,
		`ToolStarted tc_1 [tc_1=executing]`,
		`ToolResult tc_1 {"answer":"M","asked":{"question":"S, M or L?"}} [tc_1=done]`,
		`StepFinished steps=1 []`,
		`TextDelta "Thanks."`)
	got := askCustomer.executed()
	if len(got) != 3 || got[0].Resumed() || !got[1].Resumed() || !got[2].Resumed() || got[2].ID != "tc_1" {
		t.Errorf("executions %+v; want one, then two resumed under the same id", got)
	}
}

// TestLoopDelegatesToASubAgent: a call of a delegate tool is stored and held as delegated
// (the host starts the sub-agent's run; nothing executes here); when the sub-agent's run
// returns, its outcome is the call's result, or its error.
func TestLoopDelegatesToASubAgent(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		result        json.RawMessage
		errMsg        string
		stored, shown string
	}{
		{"result", json.RawMessage(`"All done."`), "", `tc_1 "All done."`, "All done."},
		{"error", nil, "the sub-agent failed", `tc_1 error: the sub-agent failed`, "Error: the sub-agent failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sub := &agent.Agent{ID: "helper", Name: "Helper", Description: "Helps.", Model: &model{}}
			m := &model{turns: []turn{ask(call("m1", agent.DelegateToolName("helper"), `{"task":"help"}`)), say("Reported.")}}
			boss := &agent.Agent{ID: "boss", Model: m, SubAgents: []*agent.Agent{sub}}
			reg, err := agent.NewRegistry([]*agent.Agent{boss, sub})
			if err != nil {
				t.Fatal(err)
			}
			snap := agent.NewSnapshot(nil, "get help", false)
			h := &host{}
			out := run(t, reg.Get("boss"), snap, h)
			if out.Held == nil || out.Held.State != agent.CallDelegated || snap.Delegated() == nil {
				t.Fatalf("outcome = %+v, want held on the delegated call", out)
			}
			wantCalls(t, h, `ToolCalls tc_1:delegate_to_helper [tc_1=new]`)
			if task, err := agent.Task(out.Held.Args); err != nil || task != "help" {
				t.Errorf("task = %q, %v", task, err)
			}
			if tools := m.reqs[0].Tools; len(tools) != 1 || tools[0].Name != "delegate_to_helper" || !strings.Contains(tools[0].Description, "Helps.") {
				t.Errorf("the supervisor's model was offered %+v", tools)
			}

			snap.Delegated().ChildRunID = "child-1" // what the host records when it starts the run
			if err := snap.Return("other-run", c.result, c.errMsg); !errors.Is(err, agent.ErrUnknownCall) {
				t.Errorf("Return of another run = %v, want ErrUnknownCall", err)
			}
			if err := snap.Return("child-1", c.result, c.errMsg); err != nil {
				t.Fatal(err)
			}
			if out := run(t, boss, snap, h); out.Text != "Reported." {
				t.Fatalf("outcome = %+v", out)
			}
			wantCalls(t, h, `ToolResult `+c.stored+` [tc_1=done]`, `StepFinished steps=1 []`, `TextDelta "Reported."`)
			if got := m.lastMessage(t, 2).Content; got != c.shown {
				t.Errorf("the model was told %q, want %q", got, c.shown)
			}
		})
	}
}

// TestLoopToolFailuresAreResults: a tool's error, a panic, a result that is not JSON, a
// suspend payload that is not JSON, and a call of a tool the agent does not have are answered
// to the model as errors, and the run goes on.
func TestLoopToolFailuresAreResults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		tool string
		run  func(context.Context, *agent.Call) (any, error)
		err  string
	}{
		{"error", "flaky", func(context.Context, *agent.Call) (any, error) { return nil, errors.New("backend down") }, "backend down"},
		{"panic", "flaky", func(context.Context, *agent.Call) (any, error) { panic("bug") }, "tool flaky panicked: bug"},
		{"result not JSON", "flaky", func(context.Context, *agent.Call) (any, error) { return func() {}, nil }, "result is not JSON: "},
		{"payload not JSON", "flaky", func(_ context.Context, c *agent.Call) (any, error) { return nil, c.Suspend(make(chan int)) }, "suspend payload is not JSON: "},
		{"unknown tool", "nosuch", nil, `unknown tool "nosuch"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			flaky := newTool("flaky", false, c.run)
			m := &model{turns: []turn{ask(call("m1", c.tool, `{"orderId":"1"}`)), say("Sorry.")}}
			a := newAgent(t, m, flaky)
			snap := agent.NewSnapshot(nil, "try", false)
			h := &host{}
			if out := run(t, a, snap, h); out.Text != "Sorry." {
				t.Fatalf("outcome = %+v", out)
			}
			var result string
			for _, line := range h.calls {
				if strings.HasPrefix(line, "ToolResult") {
					result = line
				}
			}
			if !strings.HasPrefix(result, "ToolResult tc_1 error: "+c.err) {
				t.Errorf("stored result %q, want the error %q", result, c.err)
			}
			if got := m.lastMessage(t, 2).Content; !strings.HasPrefix(got, "Error: "+c.err) {
				t.Errorf("the model was told %q, want Error: %s", got, c.err)
			}
			started := slices.ContainsFunc(h.calls, func(l string) bool { return strings.HasPrefix(l, "ToolStarted") })
			if started != (c.tool == "flaky") {
				t.Errorf("ToolStarted called: %v; host calls %q", started, h.calls)
			}
		})
	}
}

// TestLoopUnusableArgumentsAreAnsweredNotRun: arguments that are not JSON, or do not match
// the tool's input schema, are answered to the model as an error without running the tool or
// asking anyone to approve it; arguments that are not JSON are kept as a JSON string.
func TestLoopUnusableArgumentsAreAnsweredNotRun(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, args, stored, err string
	}{
		{"not JSON", `{"orderId":`, `"{\"orderId\":"`, "invalid arguments: "},
		{"a key twice", `{"orderId":"1","orderId":"2"}`, `"{\"orderId\":\"1\",\"orderId\":\"2\"}"`, "invalid arguments: "},
		{"against the schema", `{"amount":5}`, `{"amount":5}`, "invalid arguments: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pay := refund()
			m := &model{turns: []turn{ask(call("m1", "issue_refund", c.args)), say("Oops.")}}
			a := newAgent(t, m, pay)
			snap := agent.NewSnapshot(nil, "refund", false)
			h := &host{}
			out := run(t, a, snap, h)
			if out.Text != "Oops." || len(pay.executed()) != 0 {
				t.Fatalf("outcome %+v, executed %d; want the run to go on without running the tool", out, len(pay.executed()))
			}
			if len(h.calls) < 2 || !strings.HasPrefix(h.calls[1], "ToolResult tc_1 error: "+c.err) {
				t.Errorf("host calls %q, want the call answered with %q", h.calls, c.err)
			}
			if args := string(snap.Messages[1].ToolCalls[0].Args); args != c.stored {
				t.Errorf("arguments kept as %s, want %s", args, c.stored)
			}
			if got := m.lastMessage(t, 2).Content; !strings.HasPrefix(got, "Error: "+c.err) {
				t.Errorf("the model was told %q", got)
			}
		})
	}
}

// TestLoopModelError: a failed model call ends Run with a ModelError naming the model; the
// conversation is unchanged, and text it streamed was reported.
func TestLoopModelError(t *testing.T) {
	t.Parallel()
	overloaded := errors.New("overloaded")
	m := &model{turns: []turn{{text: []string{"Let me"}, err: overloaded}}}
	a := newAgent(t, m, lookup())
	snap := agent.NewSnapshot(nil, "hi", false)
	h := &host{}
	_, err := a.Run(t.Context(), snap, h)
	var me *agent.ModelError
	if !errors.As(err, &me) || me.Model != "test/scripted" || !errors.Is(err, overloaded) {
		t.Fatalf("Run = %v, want a ModelError of test/scripted wrapping the cause", err)
	}
	wantCalls(t, h, `TextDelta "Let me"`)
	wantConversation(t, snap, "user hi")
	if snap.Steps != 0 {
		t.Errorf("steps = %d after a failed model call", snap.Steps)
	}
}

// TestLoopModelCallRetried: a model call cut off and made again is reported before its text.
func TestLoopModelCallRetried(t *testing.T) {
	t.Parallel()
	m := &model{turns: []turn{{text: []string{"Hi."}, retry: true}}}
	h := &host{}
	run(t, newAgent(t, m), agent.NewSnapshot(nil, "hi", false), h)
	wantCalls(t, h, `ModelCallRetried`, `TextDelta "Hi."`)
}

// TestLoopOutcomeUnknown: a tool that cannot tell whether its request took effect ends Run with
// its OutcomeUnknown, the call left executing (as a crash would leave it) and no result stored.
func TestLoopOutcomeUnknown(t *testing.T) {
	t.Parallel()
	lost := newTool("transfer", false, func(context.Context, *agent.Call) (any, error) {
		return nil, &agent.OutcomeUnknown{Reason: "the connection broke after the request was sent"}
	})
	m := &model{turns: []turn{ask(call("m1", "transfer", `{"orderId":"1"}`))}}
	a := newAgent(t, m, lost)
	snap := agent.NewSnapshot(nil, "pay", false)
	h := &host{}
	_, err := a.Run(t.Context(), snap, h)
	var unknown *agent.OutcomeUnknown
	if !errors.As(err, &unknown) || unknown.Reason != "the connection broke after the request was sent" {
		t.Fatalf("Run = %v, want the OutcomeUnknown", err)
	}
	wantCalls(t, h, `ToolCalls tc_1:transfer [tc_1=new]`, `ToolStarted tc_1 [tc_1=executing]`)
	if c := snap.Executing(); c == nil || c.CallID() != "tc_1" {
		t.Errorf("executing call = %+v, want tc_1", c)
	}
	// Run again on it (a recovering host must decide first), the loop refuses to guess.
	if _, err := a.Run(t.Context(), snap, h); err == nil || !strings.Contains(err.Error(), "tc_1 was executing") {
		t.Errorf("Run over an executing call = %v", err)
	}
	if n := len(lost.executed()); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}

// TestLoopStopsAfterMaxSteps: a model that keeps calling tools is stopped after the agent's
// MaxSteps model calls (10 when unset) with a StepsError.
func TestLoopStopsAfterMaxSteps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ max, want int }{{2, 2}, {0, 10}} {
		t.Run(fmt.Sprint(c.max), func(t *testing.T) {
			t.Parallel()
			m := &model{}
			for i := range c.want + 1 {
				m.turns = append(m.turns, ask(call(fmt.Sprint("m", i), "lookup_order", `{"orderId":"1"}`)))
			}
			look := lookup()
			a := newAgent(t, m, look)
			a.MaxSteps = c.max
			snap := agent.NewSnapshot(nil, "loop", false)
			_, err := a.Run(t.Context(), snap, &host{})
			var steps *agent.StepsError
			if !errors.As(err, &steps) || steps.Steps != c.want {
				t.Fatalf("Run = %v, want a StepsError after %d steps", err, c.want)
			}
			if len(m.reqs) != c.want || len(look.executed()) != c.want || snap.Steps != c.want || snap.CallIDs != c.want {
				t.Errorf("model calls %d, tool runs %d, steps %d, call ids %d; want %d of each", len(m.reqs), len(look.executed()), snap.Steps, snap.CallIDs, c.want)
			}
		})
	}
}

// TestLoopServerIDsAreNeverReused: a model that reuses its call ids still gets a new server
// id per call, and the tool is told the server's.
func TestLoopServerIDsAreNeverReused(t *testing.T) {
	t.Parallel()
	m := &model{turns: []turn{
		ask(call("same", "lookup_order", `{"orderId":"1"}`), call("same", "lookup_order", `{"orderId":"2"}`)),
		ask(call("same", "lookup_order", `{"orderId":"3"}`)),
		say("Done."),
	}}
	look := lookup()
	run(t, newAgent(t, m, look), agent.NewSnapshot(nil, "go", false), &host{})
	var ids []string
	for _, c := range look.executed() {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, []string{"tc_1", "tc_2", "tc_3"}) {
		t.Errorf("the tool was told ids %v, want tc_1, tc_2, tc_3", ids)
	}
}

// TestLoopStopsOnHostErrors: an error of the host ends Run with that error, at once: a step
// that could not be stored runs no tool, and a call whose start could not be stored does not
// run.
func TestLoopStopsOnHostErrors(t *testing.T) {
	t.Parallel()
	stored := errors.New("storage down")
	for _, c := range []struct {
		method string
		runs   int
	}{
		{"ToolCalls", 0}, {"ToolStarted", 0}, {"ToolResult", 1}, {"StepFinished", 1}, {"TextDelta", 0},
	} {
		t.Run(c.method, func(t *testing.T) {
			t.Parallel()
			m := &model{turns: []turn{{text: []string{"Looking."}, calls: []llm.ToolCall{call("m1", "lookup_order", `{"orderId":"1"}`)}}, say("Done.")}}
			look := lookup()
			a := newAgent(t, m, look)
			h := &host{fail: map[string]error{c.method: stored}}
			_, err := a.Run(t.Context(), agent.NewSnapshot(nil, "go", false), h)
			if !errors.Is(err, stored) {
				t.Fatalf("Run = %v, want the host's error", err)
			}
			if n := len(look.executed()); n != c.runs {
				t.Errorf("the tool ran %d times, want %d", n, c.runs)
			}
			if last := h.calls[len(h.calls)-1]; !strings.HasPrefix(last, c.method) {
				t.Errorf("the loop went on after %s failed: %q", c.method, h.calls)
			}
		})
	}
}
