package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
	"interlock/tools"
)

// askingUpstream is an MCP server of the 2025 protocols (it keeps sessions) whose refund_ask
// asks its client why, in the middle of the call (elicitation/create), and refunds only with an
// answer. It counts its executions and records how each question was answered.
type askingUpstream struct {
	url        string
	executions atomic.Int64
	// patience, when set, is how long the tool waits for the answer before it gives up.
	patience atomic.Int64

	mu      sync.Mutex
	answers []string // "accept:<reason>", "decline", "cancel", or "error:<err>"
}

// whySchema is the question's schema: a reason of at least 3 characters.
const whySchema = `{"type":"object","properties":{"reason":{"type":"string","minLength":3}},"required":["reason"]}`

func newAskingUpstream(t *testing.T) *askingUpstream {
	u := &askingUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "refund_ask", InputSchema: json.RawMessage(`{"type":"object","properties":{"order":{"type":"integer"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.executions.Add(1)
			if p := u.patience.Load(); p > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(p))
				defer cancel()
			}
			var schema any
			_ = json.Unmarshal([]byte(whySchema), &schema)
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Why is this order refunded?", RequestedSchema: schema})
			switch {
			case err != nil:
				u.add("error:" + err.Error())
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "nobody said why: not refunded"}}}, nil
			case res.Action == "accept":
				u.add(fmt.Sprintf("accept:%v", res.Content["reason"]))
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded because %v", res.Content["reason"])}}}, nil
			default:
				u.add(res.Action)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not refunded: " + res.Action}}}, nil
			}
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	u.url = hs.URL
	return u
}

func (u *askingUpstream) add(a string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.answers = append(u.answers, a)
}

func (u *askingUpstream) got() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.answers...)
}

// askingAgent calls refund_ask once, then answers with what the tool said.
func askingAgent(t *testing.T, u *askingUpstream, timeout time.Duration) *agent.Agent {
	t.Helper()
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "orders", URL: u.url, Timeout: 5 * time.Second}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m := &scripted{steps: []step{
		func(context.Context, llm.Request, func(string) error) (llm.Response, error) {
			return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "refund_ask", Args: json.RawMessage(`{"order":7}`)}}}, nil
		},
		func(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
			last := req.Messages[len(req.Messages)-1]
			return answer("the tool said: "+last.Content)(ctx, req, onText)
		},
	}}
	return &agent.Agent{ID: "asking-agent", Model: m, Tools: []*agent.Tool{{
		Name: "refund_ask", InputSchema: json.RawMessage(`{"type":"object"}`), ApprovalTimeout: timeout, ExecuteFunc: srv.Execute("refund_ask"),
	}}}
}

// TestMidCallQuestionWaitsForAPerson: an MCP server that asks in the middle of its call holds
// the run SUSPENDED on the call (in suspendedRuns, the question as payload, its schema as
// resumeSchema, no approval asked) while the call stays open under the executing instance's
// lease; resume data the schema refuses is BAD_USER_INPUT and the question still waits; the
// answer reaches the server as it was given, the call runs once, and the run completes with
// the call's result.
func TestMidCallQuestionWaitsForAPerson(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		u := newAskingUpstream(t)
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{askingAgent(t, u, 0)}})
		r := f.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
		checkAsked(t, f, r)
		_, err := f.svc.Resume(bg(), runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"reason":"no"}`))
		wantCode(t, err, runtype.CodeBadUserInput)
		if got, _ := f.svc.Get(bg(), r.ID); got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 {
			t.Fatalf("after refused resume data: %s with %d calls, want the question still waiting", got.Status, len(got.ToolCalls))
		}
		if a := u.got(); len(a) != 0 {
			t.Fatalf("the server was answered %q before anyone answered", a)
		}
		if _, err := f.svc.Resume(bg(), runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"reason":"arrived broken"}`)); err != nil {
			t.Fatal(err)
		}
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || show(done.Output) != "the tool said: refunded because arrived broken" {
			t.Fatalf("run %s, output %q", done.Status, show(done.Output))
		}
		if a := u.got(); len(a) != 1 || a[0] != "accept:arrived broken" || u.executions.Load() != 1 {
			t.Fatalf("the server got %q in %d executions; want the answer once, in one", a, u.executions.Load())
		}
		evs := allEvents(t, f, r.ID)
		if n := len(ofType(evs, runtype.EventToolResult)); n != 1 {
			t.Fatalf("%d TOOL_RESULT events: %s", n, typesOf(evs))
		}
		if len(humanDecisions(done.Decisions)) != 1 || humanDecisions(done.Decisions)[0].Kind != runtype.DecisionResumed {
			t.Fatalf("decisions %+v, want the one resume", done.Decisions)
		}
	})
}

// TestMidCallQuestionDeclined: a person declines a question asked in the middle of a call: the
// server is answered "decline", its call goes on and its result is the call's, once; the
// decision is that person's DECLINED with the reason. An approval of the question is
// BAD_USER_INPUT saying to answer or decline it, and the question still waits; the call is
// shown as asked mid-call.
func TestMidCallQuestionDeclined(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		u := newAskingUpstream(t)
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{askingAgent(t, u, 0)}})
		r := f.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
		checkAsked(t, f, r)
		if got, _ := f.svc.Get(bg(), r.ID); len(got.ToolCalls) != 1 || !got.ToolCalls[0].AskedMidCall {
			t.Fatalf("calls %+v: want the question marked as asked in the middle of its call", got.ToolCalls)
		}
		alice := as("alice", nil, runtype.RoleApprover)
		_, err := f.svc.Approve(alice, runs.DecideParams{RunID: r.ID})
		wantCode(t, err, runtype.CodeBadUserInput)
		if err == nil || !strings.Contains(err.Error(), "resumeRun") || !strings.Contains(err.Error(), "declineToolCall") {
			t.Fatalf("approval of the question: %v; want it told to answer or decline", err)
		}
		if got, _ := f.svc.Get(bg(), r.ID); got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 {
			t.Fatalf("after the refused approval: %s with %d calls, want the question still waiting", got.Status, len(got.ToolCalls))
		}
		if _, err := f.svc.Decline(alice, runs.DecideParams{RunID: r.ID}, "do not refund"); err != nil {
			t.Fatal(err)
		}
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || show(done.Output) != "the tool said: not refunded: decline" {
			t.Fatalf("run %s, output %q", done.Status, show(done.Output))
		}
		if a := u.got(); len(a) != 1 || a[0] != "decline" || u.executions.Load() != 1 {
			t.Fatalf("the server got %q in %d executions; want decline once, in one", a, u.executions.Load())
		}
		ds := humanDecisions(done.Decisions)
		if len(ds) != 1 || ds[0].Kind != runtype.DecisionDeclined || deref(ds[0].DecidedBy) != "alice" || deref(ds[0].Reason) != "do not refund" {
			t.Fatalf("decisions %+v, want alice's decline with her reason", done.Decisions)
		}
		if n := len(ofType(allEvents(t, f, r.ID), runtype.EventToolResult)); n != 1 {
			t.Fatalf("%d TOOL_RESULT events, want the call's one", n)
		}
	})
}

// TestMidCallQuestionsOfOverlappingCalls: two runs call one url server at once, and each call
// asks in the middle of it; each call has a session of its own, so both questions are held,
// each on its own run, and each answer (different data, answered in the other order) reaches
// its own call: each run completes with its own reason, each call executed once.
func TestMidCallQuestionsOfOverlappingCalls(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		u := newAskingUpstream(t)
		a := askingAgent(t, u, 0)
		// One script for both runs: call the tool, then say what it answered.
		a.Model = &scripted{steps: []step{func(ctx context.Context, req llm.Request, onText func(string) error) (llm.Response, error) {
			if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleTool {
				return answer("the tool said: "+last.Content)(ctx, req, onText)
			}
			return llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "refund_ask", Args: json.RawMessage(`{"order":7}`)}}}, nil
		}}}
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{a}})
		first := f.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
		second := f.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7 again"})
		for _, r := range []*runtype.Run{first, second} {
			if len(r.ToolCalls) != 1 || !r.ToolCalls[0].AskedMidCall {
				t.Fatalf("run %s waits on %+v; want its call's question", r.ID, r.ToolCalls)
			}
		}
		if _, err := f.svc.Resume(bg(), runs.DecideParams{RunID: second.ID}, json.RawMessage(`{"reason":"second reason"}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Resume(bg(), runs.DecideParams{RunID: first.ID}, json.RawMessage(`{"reason":"first reason"}`)); err != nil {
			t.Fatal(err)
		}
		for r, want := range map[string]string{first.ID: "first reason", second.ID: "second reason"} {
			done := f.finished(t, r)
			if done.Status != runtype.StatusCompleted || show(done.Output) != "the tool said: refunded because "+want {
				t.Fatalf("run %s: %s, output %q; want its own answer, %q", r, done.Status, show(done.Output), want)
			}
		}
		if u.executions.Load() != 2 || len(u.got()) != 2 {
			t.Fatalf("%d executions, answers %q; want one each", u.executions.Load(), u.got())
		}
	})
}

// checkAsked checks run r waits on the question: listed in suspendedRuns, the call needing no
// approval, the question's message and schema, and the lease kept by the executing instance.
func checkAsked(t *testing.T, f *fixture, r *runtype.Run) {
	t.Helper()
	list, err := f.svc.ListSuspended(bg(), runs.ListSuspendedParams{AgentID: ptr("asking-agent"), PerPage: ptr(50)})
	if err != nil {
		t.Fatal(err)
	}
	var listed *runtype.Run
	for _, l := range list.Runs {
		if l.ID == r.ID {
			listed = l
		}
	}
	if listed == nil || len(listed.ToolCalls) != 1 {
		t.Fatalf("run %s not in suspendedRuns with its call: %+v", r.ID, list.Runs)
	}
	c := listed.ToolCalls[0]
	var payload struct {
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	}
	if err := json.Unmarshal(c.SuspendPayload, &payload); err != nil || payload.Message != "Why is this order refunded?" {
		t.Fatalf("suspendPayload %s (%v)", c.SuspendPayload, err)
	}
	if c.RequiresApproval || !sameJSONText(c.ResumeSchema, whySchema) || !sameJSONText(payload.RequestedSchema, whySchema) {
		t.Fatalf("call %+v: want no approval and the question's schema as resumeSchema (%s)", c, c.ResumeSchema)
	}
	if rec := f.record(t, r.ID); rec.LeaseOwner == nil || *rec.LeaseOwner == "" {
		t.Fatal("the run waits without a lease: the instance executing the call gave it up")
	}
}

func sameJSONText(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// TestMidCallQuestionAnsweredOnAnotherInstance: the question is answered on an instance that is
// not executing the call; the instance that is (and keeps the lease all along) hears of it
// through the shared database and answers the server; the other never runs the call.
func TestMidCallQuestionAnsweredOnAnotherInstance(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		u := newAskingUpstream(t)
		a := askingAgent(t, u, 0)
		holder := setupWith(t, db, runs.Config{InstanceID: "holder"}, setupOpts{agents: []*agent.Agent{a}})
		other := setupWith(t, db, runs.Config{InstanceID: "other"}, setupOpts{agents: []*agent.Agent{a}})
		r := holder.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
		owner := holder.record(t, r.ID).LeaseOwner
		if _, err := other.svc.Resume(bg(), runs.DecideParams{RunID: r.ID}, json.RawMessage(`{"reason":"lost in transit"}`)); err != nil {
			t.Fatal(err)
		}
		if rec := other.record(t, r.ID); rec.Status == runtype.StatusRunning && deref(rec.LeaseOwner) != deref(owner) {
			t.Fatalf("the decision leased the run to %s, not to its holder %s", deref(rec.LeaseOwner), deref(owner))
		}
		done := other.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || show(done.Output) != "the tool said: refunded because lost in transit" {
			t.Fatalf("run %s, output %q", done.Status, show(done.Output))
		}
		if a := u.got(); len(a) != 1 || a[0] != "accept:lost in transit" || u.executions.Load() != 1 {
			t.Fatalf("the server got %q in %d executions", a, u.executions.Load())
		}
	})
}

// TestMidCallQuestionExpires: a question nobody answers within the tool's approvalTimeout
// expires: the server is told "cancel", the call goes on with what it then answers, once.
func TestMidCallQuestionExpires(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		u := newAskingUpstream(t)
		clock := &testClock{}
		f := setupWith(t, db, runs.Config{NowFunc: clock.now, ExpiryInterval: 20 * time.Millisecond}, setupOpts{agents: []*agent.Agent{askingAgent(t, u, 30*time.Minute)}})
		r := f.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
		if c := r.ToolCalls[0]; c.ExpiresAt == nil {
			t.Fatalf("call %+v has no deadline", c)
		}
		clock.advance(31 * time.Minute)
		done := f.finished(t, r.ID)
		if done.Status != runtype.StatusCompleted || show(done.Output) != "the tool said: not refunded: cancel" {
			t.Fatalf("run %s, output %q", done.Status, show(done.Output))
		}
		if a := u.got(); len(a) != 1 || a[0] != "cancel" || u.executions.Load() != 1 {
			t.Fatalf("the server got %q in %d executions; want cancel once", a, u.executions.Load())
		}
		if len(humanDecisions(done.Decisions)) != 1 || humanDecisions(done.Decisions)[0].Kind != runtype.DecisionExpired || humanDecisions(done.Decisions)[0].DecidedBy != nil {
			t.Fatalf("decisions %+v, want one EXPIRED by nobody", done.Decisions)
		}
	})
}

// TestMidCallQuestionTheServerGivesUpOn: a server that stops waiting for its answer ends its
// call; the question is taken back (EXPIRED by nobody, saying the tool stopped waiting), the run
// goes on with the call's answer, and a resume that comes later is CONFLICT.
func TestMidCallQuestionTheServerGivesUpOn(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		u := newAskingUpstream(t)
		u.patience.Store(int64(time.Second))
		f := setupWith(t, db, runs.Config{}, setupOpts{agents: []*agent.Agent{askingAgent(t, u, 0)}})
		r := f.start(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
		done := f.finished(t, r.ID)
		asked := ofType(allEvents(t, f, r.ID), runtype.EventToolCallSuspended)
		if len(asked) != 1 {
			t.Fatalf("%d TOOL_CALL_SUSPENDED events, want the question's", len(asked))
		}
		if done.Status != runtype.StatusCompleted || show(done.Output) != "the tool said: Error: nobody said why: not refunded" {
			t.Fatalf("run %s, output %q", done.Status, show(done.Output))
		}
		if len(humanDecisions(done.Decisions)) != 1 || humanDecisions(done.Decisions)[0].Kind != runtype.DecisionExpired || !strings.Contains(deref(humanDecisions(done.Decisions)[0].Reason), "stopped waiting") {
			t.Fatalf("decisions %+v, want the question taken back", done.Decisions)
		}
		_, err := f.svc.Resume(bg(), runs.DecideParams{RunID: r.ID, ToolCallID: ptr(asked[0].ToolCall.ToolCallID)}, json.RawMessage(`{"reason":"too late"}`))
		wantCode(t, err, runtype.CodeConflict)
		if u.executions.Load() != 1 {
			t.Fatalf("%d executions, want 1", u.executions.Load())
		}
	})
}

// TestMidCallQuestionOfADeadHolder: the instance executing a call whose question waits is cut
// off from the database; its lease expires with the run SUSPENDED, and another instance
// recovers the run with the call interrupted, waiting for a person's approval — the call is not
// sent again.
//
// Not parallel: what it checks turns on leases of a few seconds.
func TestMidCallQuestionOfADeadHolder(t *testing.T) {
	direct, proxied, proxy := cutOffPair(t)
	u := newAskingUpstream(t)
	a := askingAgent(t, u, 0)
	ttl := 2 * time.Second
	quiet := slog.New(slog.DiscardHandler)
	holder := setupWith(t, proxied, runs.Config{LeaseTTL: ttl, InstanceID: "holder", Logger: quiet}, setupOpts{agents: []*agent.Agent{a}})
	t.Cleanup(proxy.Restore)
	r := holder.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
	proxy.Freeze()
	other := setupWith(t, direct, runs.Config{LeaseTTL: ttl, InstanceID: "other", RecoveryInterval: 50 * time.Millisecond, Logger: quiet},
		setupOpts{agents: []*agent.Agent{a}})
	evs := other.until(t, r.ID, r.LastSeq, runtype.StatusSuspended)
	if len(ofType(evs, runtype.EventToolCallInterrupted)) != 1 {
		t.Fatalf("no TOOL_CALL_INTERRUPTED: %s", typesOf(evs))
	}
	got, err := other.svc.Get(bg(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || !got.ToolCalls[0].Interrupted || !got.ToolCalls[0].RequiresApproval {
		t.Fatalf("after recovery: %s with %+v; want the call interrupted, awaiting approval", got.Status, got.ToolCalls)
	}
	if n := len(humanDecisions(got.Decisions)); n != 1 || humanDecisions(got.Decisions)[0].Kind != runtype.DecisionExpired || !strings.Contains(deref(humanDecisions(got.Decisions)[0].Reason), "stopped") {
		t.Fatalf("decisions %+v: want the question closed, saying its instance stopped", got.Decisions)
	}
	if u.executions.Load() != 1 {
		t.Fatalf("the call was sent %d times, want once", u.executions.Load())
	}
}

// TestMidCallQuestionAtShutdown: a question still waiting when the instance holding its call
// stops holds the stop until its timeout; then the execution is cut as any is: the call is
// cancelled (the server's question fails with it), the question taken back (EXPIRED by nobody,
// saying the instance stopped), and another instance recovers the run with the call
// interrupted, waiting for a person's approval. The call is not sent again.
func TestMidCallQuestionAtShutdown(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		u := newAskingUpstream(t)
		a := askingAgent(t, u, 0)
		holder := setupWith(t, db, runs.Config{InstanceID: "holder"}, setupOpts{agents: []*agent.Agent{a}})
		r := holder.suspended(t, runs.StartParams{AgentID: "asking-agent", Prompt: "refund order 7"})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		holder.svc.Shutdown(ctx)
		// The server learns of the cancellation from the client's notification, after Shutdown
		// has returned: wait for it to arrive (up to 10 s).
		for end := time.Now().Add(10 * time.Second); len(u.got()) == 0 && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
		if a := u.got(); len(a) != 1 || !strings.Contains(a[0], "context canceled") {
			t.Fatalf("the server got %q at the shutdown; want its call cancelled", a)
		}
		other := setupWith(t, db, runs.Config{InstanceID: "other", RecoveryInterval: 50 * time.Millisecond}, setupOpts{agents: []*agent.Agent{a}})
		evs := other.until(t, r.ID, r.LastSeq, runtype.StatusSuspended)
		if len(ofType(evs, runtype.EventToolCallInterrupted)) != 1 {
			t.Fatalf("no TOOL_CALL_INTERRUPTED: %s", typesOf(evs))
		}
		got, err := other.svc.Get(bg(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runtype.StatusSuspended || len(got.ToolCalls) != 1 || !got.ToolCalls[0].Interrupted || !got.ToolCalls[0].RequiresApproval {
			t.Fatalf("after recovery: %s with %+v; want the call interrupted, awaiting approval", got.Status, got.ToolCalls)
		}
		if len(humanDecisions(got.Decisions)) != 1 || humanDecisions(got.Decisions)[0].Kind != runtype.DecisionExpired || !strings.Contains(deref(humanDecisions(got.Decisions)[0].Reason), "instance executing the call stopped") {
			t.Fatalf("decisions %+v, want the question taken back at the shutdown", got.Decisions)
		}
		if u.executions.Load() != 1 {
			t.Fatalf("%d executions, want 1", u.executions.Load())
		}
	})
}

// humanDecisions are the decisions of ds but those a policy took (the question's call was let through
// by its tool's policy before it asked: AUTO_APPROVED, on record like every call that ran).
func humanDecisions(ds []runtype.Decision) []runtype.Decision {
	var out []runtype.Decision
	for _, d := range ds {
		if d.Kind != runtype.DecisionAutoApproved {
			out = append(out, d)
		}
	}
	return out
}
