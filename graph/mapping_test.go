package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"interlock/agent"
	"interlock/runs"
	"interlock/runtype"
)

var (
	t0 = time.Date(2026, 12, 6, 1, 2, 3, 456_000_000, time.UTC)
	t1 = t0.Add(time.Minute)
)

func ptr[T any](v T) *T { return &v }

// suspendedRun is a run as the service returns it, with something in every field the API shows:
// a call waiting for approval (its tool's name holding a right-to-left override), one waiting
// for resume data, and an interrupted one whose late answer is recorded; an edited approval and
// a decline.
func suspendedRun() *runtype.Run {
	return &runtype.Run{
		ID: "r1", AgentID: "support-agent", ParentRunID: ptr("r0"), ThreadID: ptr("th1"), ResourceID: ptr("acme"),
		StartedBy: ptr("alice"), Prompt: "refund order 42", Context: ptr("**why**"), Status: runtype.StatusSuspended,
		CreatedAt: t0, UpdatedAt: t1, SuspendedAt: &t1, LastSeq: 7,
		ToolCalls: []runtype.ToolCall{
			{ToolCallID: "tc_2", ToolName: "refund\u202e", Args: json.RawMessage(`{"amount":10}`), RequiresApproval: true, ExpiresAt: &t1},
			{ToolCallID: "tc_3", ToolName: "ask", Args: json.RawMessage(`{"q":"secret"}`), SuspendPayload: json.RawMessage(`{"form":1}`)},
			{ToolCallID: "tc_5", ToolName: "ship", Args: json.RawMessage(`{}`), RequiresApproval: true, Interrupted: true, InterruptedToolCallID: "tc_4"},
		},
		Decisions: []runtype.Decision{
			{ID: 9, RunID: "r1", ToolCallID: "tc_1", ToolName: "lookup", Kind: runtype.DecisionApproved, DecidedBy: ptr("bob"), DecidedAt: t0,
				Args: json.RawMessage(`{"id":1}`), EditedArgs: json.RawMessage(`{"id":2}`), Receipt: ptr("eyJ.x.y")},
			{ID: 10, RunID: "r1", ToolCallID: "tc_0", ToolName: "wipe", Kind: runtype.DecisionDeclined, DecidedAt: t0, Reason: ptr("too risky")},
		},
		LateResults: []runtype.LateResult{
			{RunID: "r1", ToolCallID: "tc_4", ToolName: "ship", Result: json.RawMessage(`"shipped"`), InstanceID: "i-1", FinishedAt: t0, RecordedAt: t1},
		},
	}
}

const runFields = `id runId agentId status threadId resourceId startedBy parentRunId createdAt updatedAt suspendedAt
	lastEventSeq output error errorCode prompt context external
	toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted interruptedToolCallId expiresAt
		hiddenCharacters lateResult { toolCallId } }
	decisions { id toolCallId toolName kind decidedBy decidedAt reason resumeData args editedArgs receipt }
	lateResults { toolCallId toolName result error suspendPayload instanceId finishedAt recordedAt }`

const suspendedRunJSON = `{
	"id": "r1", "runId": "r1", "agentId": "support-agent", "status": "SUSPENDED", "threadId": "th1", "resourceId": "acme",
	"startedBy": "alice", "parentRunId": "r0", "createdAt": "2026-12-06T01:02:03.456Z", "updatedAt": "2026-12-06T01:03:03.456Z",
	"suspendedAt": "2026-12-06T01:03:03.456Z", "lastEventSeq": 7, "output": null, "error": null, "errorCode": null,
	"prompt": "refund order 42", "context": "**why**", "external": null,
	"toolCalls": [
		{"id": "r1:tc_2", "toolCallId": "tc_2", "toolName": "refund\u202e", "args": {"amount": 10}, "requiresApproval": true,
			"suspendPayload": null, "interrupted": false, "interruptedToolCallId": null, "expiresAt": "2026-12-06T01:03:03.456Z",
			"hiddenCharacters": ["U+202E"], "lateResult": null},
		{"id": "r1:tc_3", "toolCallId": "tc_3", "toolName": "ask", "args": null, "requiresApproval": false,
			"suspendPayload": {"form": 1}, "interrupted": false, "interruptedToolCallId": null, "expiresAt": null,
			"hiddenCharacters": [], "lateResult": null},
		{"id": "r1:tc_5", "toolCallId": "tc_5", "toolName": "ship", "args": {}, "requiresApproval": true,
			"suspendPayload": null, "interrupted": true, "interruptedToolCallId": "tc_4", "expiresAt": null,
			"hiddenCharacters": [], "lateResult": {"toolCallId": "tc_4"}}
	],
	"decisions": [
		{"id": "r1:tc_1:9", "toolCallId": "tc_1", "toolName": "lookup", "kind": "APPROVED", "decidedBy": "bob",
			"decidedAt": "2026-12-06T01:02:03.456Z", "reason": null, "resumeData": null, "args": {"id": 1}, "editedArgs": {"id": 2},
			"receipt": "eyJ.x.y"},
		{"id": "r1:tc_0:10", "toolCallId": "tc_0", "toolName": "wipe", "kind": "DECLINED", "decidedBy": null,
			"decidedAt": "2026-12-06T01:02:03.456Z", "reason": "too risky", "resumeData": null, "args": null, "editedArgs": null,
			"receipt": null}
	],
	"lateResults": [
		{"toolCallId": "tc_4", "toolName": "ship", "result": "shipped", "error": null, "suspendPayload": null, "instanceId": "i-1",
			"finishedAt": "2026-12-06T01:02:03.456Z", "recordedAt": "2026-12-06T01:03:03.456Z"}
	]
}`

// sameJSON fails unless got and want are the same JSON value.
func sameJSON(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("got  %s\nwant %s", gb, wb)
	}
}

// TestRunMapsEveryField: run(runId) asks the service for that run and shows every field of it
// (a call's arguments only when it waits for approval, a late answer beside the interrupted
// call that names it), and nothing of what only the service's rules read.
func TestRunMapsEveryField(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{get: func(_ context.Context, id string) (*runtype.Run, error) {
		if id != "r1" {
			return nil, runtype.Errorf(runtype.CodeNotFound, "run %s not found", id)
		}
		return suspendedRun(), nil
	}}
	a := serve(t, f)
	var got struct{ Run json.RawMessage }
	a.data(t, `query($id: ID!) { run(runId: $id) { `+runFields+` } }`, map[string]any{"id": "r1"}, &got)
	sameJSON(t, got.Run, suspendedRunJSON)

	a.data(t, `{ run(runId: "nope") { id } }`, nil, &got)
	if string(got.Run) != "null" {
		t.Errorf("an unknown run: %s", got.Run)
	}
}

// TestRunStatusIsPublic: a run the service holds WAITING (between two steps) is RUNNING to
// clients, and a finished run shows its output or error.
func TestRunStatusIsPublic(t *testing.T) {
	t.Parallel()
	r := &runtype.Run{ID: "r1", AgentID: "a", Status: runtype.StatusWaiting, CreatedAt: t0, UpdatedAt: t0}
	f := &fakeRuns{get: func(context.Context, string) (*runtype.Run, error) { return r, nil }}
	a := serve(t, f)
	var got struct{ Run json.RawMessage }
	a.data(t, `{ run(runId: "r1") { status output error errorCode toolCalls { id } decisions { id } lateResults { toolCallId } } }`, nil, &got)
	sameJSON(t, got.Run, `{"status": "RUNNING", "output": null, "error": null, "errorCode": null, "toolCalls": [], "decisions": [], "lateResults": []}`)

	r.Status, r.Error, r.ErrorCode = runtype.StatusFailed, ptr("the model could not be reached"), ptr("MODEL_ERROR")
	a.data(t, `{ run(runId: "r1") { status error errorCode } }`, nil, &got)
	sameJSON(t, got.Run, `{"status": "FAILED", "error": "the model could not be reached", "errorCode": "MODEL_ERROR"}`)
}

// TestSuspendedRunsPassesItsFilterAndPage: every argument of suspendedRuns reaches the service
// as given — page and perPage only when given, since paginating only when both are is the
// service's rule — and the runs and total come back in the service's order.
func TestSuspendedRunsPassesItsFilterAndPage(t *testing.T) {
	t.Parallel()
	var got runs.ListSuspendedParams
	f := &fakeRuns{listSuspended: func(_ context.Context, p runs.ListSuspendedParams) (*runs.ListResult, error) {
		got = p
		return &runs.ListResult{Runs: []*runtype.Run{
			{ID: "r3", AgentID: "a", Status: runtype.StatusSuspended, CreatedAt: t1, UpdatedAt: t1},
			{ID: "r2", AgentID: "a", Status: runtype.StatusSuspended, CreatedAt: t0, UpdatedAt: t0},
		}, Total: 12}, nil
	}}
	a := serve(t, f)
	var out struct{ SuspendedRuns json.RawMessage }
	a.data(t, `query($from: DateTime) { suspendedRuns(agentId: "a", threadId: "th", resourceId: "acme", fromDate: $from,
		toDate: "2026-12-06T03:00:00+01:00", page: 2, perPage: 5, external: false) { total runs { runId } } }`,
		map[string]any{"from": "2026-12-06T01:02:03.456Z"}, &out)
	sameJSON(t, out.SuspendedRuns, `{"total": 12, "runs": [{"runId": "r3"}, {"runId": "r2"}]}`)
	if deref(got.AgentID) != "a" || deref(got.ThreadID) != "th" || deref(got.ResourceID) != "acme" ||
		got.FromDate == nil || !got.FromDate.Equal(t0) || got.ToDate == nil || !got.ToDate.Equal(time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)) ||
		got.Page == nil || *got.Page != 2 || got.PerPage == nil || *got.PerPage != 5 || got.External == nil || *got.External {
		t.Errorf("the service was asked for %+v", got)
	}

	a.data(t, `{ suspendedRuns(perPage: 5) { total } }`, nil, &out)
	if got.Page != nil || got.PerPage == nil || got.AgentID != nil || got.External != nil || got.FromDate != nil {
		t.Errorf("without page, agentId, external or dates: %+v", got)
	}
	sameJSON(t, out.SuspendedRuns, `{"total": 12}`)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// TestApproveToolCall: without args it approves, with args it edits and approves with exactly
// those arguments (big numbers keep their digits); toolCallId reaches the service as given, or
// nil when omitted; the answer is the run the service returned.
func TestApproveToolCall(t *testing.T) {
	t.Parallel()
	decided := func(p runs.DecideParams, edited json.RawMessage) *runtype.Run {
		return &runtype.Run{ID: p.RunID, AgentID: "a", Status: runtype.StatusRunning, CreatedAt: t0, UpdatedAt: t1,
			Decisions: []runtype.Decision{{ID: 1, RunID: p.RunID, ToolCallID: deref(p.ToolCallID), ToolName: "refund",
				Kind: runtype.DecisionApproved, DecidedAt: t1, Args: json.RawMessage(`{"amount":10}`), EditedArgs: edited}}}
	}
	var calls []string
	var gotP runs.DecideParams
	var gotArgs json.RawMessage
	f := &fakeRuns{
		approve: func(_ context.Context, p runs.DecideParams) (*runtype.Run, error) {
			calls, gotP = append(calls, "Approve"), p
			return decided(p, nil), nil
		},
		editAndApprove: func(_ context.Context, p runs.DecideParams, args json.RawMessage) (*runtype.Run, error) {
			calls, gotP, gotArgs = append(calls, "EditAndApprove"), p, args
			return decided(p, args), nil
		},
	}
	a := serve(t, f)
	const approve = `mutation($tc: ID, $args: JSON) { approveToolCall(runId: "r1", toolCallId: $tc, args: $args) {
		runId status decisions { toolCallId kind args editedArgs } } }`
	var out struct{ ApproveToolCall json.RawMessage }

	a.data(t, approve, map[string]any{"tc": "tc_2"}, &out)
	if len(calls) != 1 || calls[0] != "Approve" || gotP.RunID != "r1" || deref(gotP.ToolCallID) != "tc_2" {
		t.Fatalf("approve: %v %+v", calls, gotP)
	}
	sameJSON(t, out.ApproveToolCall, `{"runId": "r1", "status": "RUNNING",
		"decisions": [{"toolCallId": "tc_2", "kind": "APPROVED", "args": {"amount": 10}, "editedArgs": null}]}`)

	a.data(t, approve, map[string]any{"args": json.RawMessage(`{"amount": 12345678901234567890, "note": "half"}`)}, &out)
	if len(calls) != 2 || calls[1] != "EditAndApprove" || gotP.ToolCallID != nil {
		t.Fatalf("edit and approve: %v %+v", calls, gotP)
	}
	if !bytes.Contains(gotArgs, []byte("12345678901234567890")) {
		t.Errorf("the edited arguments lost their digits: %s", gotArgs)
	}
	sameJSON(t, gotArgs, `{"amount": 12345678901234567890, "note": "half"}`)
	sameJSON(t, out.ApproveToolCall, `{"runId": "r1", "status": "RUNNING",
		"decisions": [{"toolCallId": "", "kind": "APPROVED", "args": {"amount": 10}, "editedArgs": {"amount": 12345678901234567890, "note": "half"}}]}`)
}

// TestDeclineToolCall: the reason reaches the service as given, or empty when omitted.
func TestDeclineToolCall(t *testing.T) {
	t.Parallel()
	var gotP runs.DecideParams
	var gotReason string
	f := &fakeRuns{decline: func(_ context.Context, p runs.DecideParams, reason string) (*runtype.Run, error) {
		gotP, gotReason = p, reason
		return &runtype.Run{ID: p.RunID, AgentID: "a", Status: runtype.StatusRunning, CreatedAt: t0, UpdatedAt: t1,
			Decisions: []runtype.Decision{{ID: 1, RunID: p.RunID, ToolCallID: "tc_2", ToolName: "wipe", Kind: runtype.DecisionDeclined,
				DecidedAt: t1, DecidedBy: ptr("carol"), Reason: ptr(reason)}}}, nil
	}}
	a := serve(t, f)
	var out struct{ DeclineToolCall json.RawMessage }
	a.data(t, `mutation { declineToolCall(runId: "r1", toolCallId: "tc_2", reason: "not on a Friday") { status decisions { kind reason decidedBy } } }`, nil, &out)
	if gotP.RunID != "r1" || deref(gotP.ToolCallID) != "tc_2" || gotReason != "not on a Friday" {
		t.Errorf("the service was asked %+v %q", gotP, gotReason)
	}
	sameJSON(t, out.DeclineToolCall, `{"status": "RUNNING", "decisions": [{"kind": "DECLINED", "reason": "not on a Friday", "decidedBy": "carol"}]}`)

	a.data(t, `mutation { declineToolCall(runId: "r2") { status } }`, nil, &out)
	if gotP.RunID != "r2" || gotP.ToolCallID != nil || gotReason != "" {
		t.Errorf("without reason or toolCallId: %+v %q", gotP, gotReason)
	}
}

// TestResumeRun: the resume data and the call reach the service as given.
func TestResumeRun(t *testing.T) {
	t.Parallel()
	var gotP runs.DecideParams
	var gotData json.RawMessage
	f := &fakeRuns{resume: func(_ context.Context, p runs.DecideParams, data json.RawMessage) (*runtype.Run, error) {
		gotP, gotData = p, data
		return &runtype.Run{ID: p.RunID, AgentID: "a", Status: runtype.StatusRunning, CreatedAt: t0, UpdatedAt: t1,
			Decisions: []runtype.Decision{{ID: 1, RunID: p.RunID, ToolCallID: "tc_3", ToolName: "ask", Kind: runtype.DecisionResumed,
				DecidedAt: t1, ResumeData: data}}}, nil
	}}
	a := serve(t, f)
	var out struct{ ResumeRun json.RawMessage }
	a.data(t, `mutation($d: JSON!) { resumeRun(runId: "r1", toolCallId: "tc_3", resumeData: $d) { runId decisions { kind resumeData } } }`,
		map[string]any{"d": map[string]any{"approved": true, "items": []int{1, 2}}}, &out)
	if gotP.RunID != "r1" || deref(gotP.ToolCallID) != "tc_3" {
		t.Errorf("the service was asked %+v", gotP)
	}
	sameJSON(t, gotData, `{"approved": true, "items": [1, 2]}`)
	sameJSON(t, out.ResumeRun, `{"runId": "r1", "decisions": [{"kind": "RESUMED", "resumeData": {"approved": true, "items": [1, 2]}}]}`)
}

// TestRequestApproval: every field of the input reaches the service (the optional ones empty
// when omitted), and the answer shows the request's run, with its context and its agent's
// external flag.
func TestRequestApproval(t *testing.T) {
	t.Parallel()
	reg, err := agent.NewRegistry([]*agent.Agent{{ID: "deployer", Name: "Deployer", External: true, Tools: []*agent.Tool{{Name: "deploy", RequireApproval: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got runs.ApprovalParams
	f := &fakeRuns{agents: reg, requestApproval: func(_ context.Context, p runs.ApprovalParams) (*runtype.Run, error) {
		got = p
		var ctxText *string
		if p.Context != "" {
			ctxText = &p.Context
		}
		return &runtype.Run{ID: "r9", AgentID: p.AgentID, Status: runtype.StatusSuspended, Context: ctxText, StartedBy: ptr("bot"),
			CreatedAt: t0, UpdatedAt: t0, SuspendedAt: &t0,
			ToolCalls: []runtype.ToolCall{{ToolCallID: "tc_1", ToolName: p.ToolName, Args: p.Args, RequiresApproval: true}}}, nil
	}}
	a := serve(t, f)
	var out struct{ RequestApproval json.RawMessage }
	a.data(t, `mutation { requestApproval(input: {agentId: "deployer", toolName: "deploy", args: {env: "prod"}, threadId: "session-1",
		resourceId: "acme", context: "Deploying **v2**", idempotencyKey: "k1"}) {
		runId status startedBy context external toolCalls { toolCallId toolName args } } }`, nil, &out)
	want := runs.ApprovalParams{AgentID: "deployer", ToolName: "deploy", ThreadID: "session-1", ResourceID: "acme",
		Context: "Deploying **v2**", IdempotencyKey: "k1"}
	gotArgs := got.Args
	got.Args = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the service was asked %+v, want %+v", got, want)
	}
	sameJSON(t, gotArgs, `{"env": "prod"}`)
	sameJSON(t, out.RequestApproval, `{"runId": "r9", "status": "SUSPENDED", "startedBy": "bot", "context": "Deploying **v2**", "external": true,
		"toolCalls": [{"toolCallId": "tc_1", "toolName": "deploy", "args": {"env": "prod"}}]}`)

	a.data(t, `mutation { requestApproval(input: {agentId: "deployer", toolName: "deploy", args: {}}) { context } }`, nil, &out)
	got.Args = nil
	if !reflect.DeepEqual(got, runs.ApprovalParams{AgentID: "deployer", ToolName: "deploy"}) {
		t.Errorf("without the optional fields: %+v", got)
	}
	sameJSON(t, out.RequestApproval, `{"context": null}`)
}

// TestStartRun: the input reaches the service (requireToolApproval false when omitted).
func TestStartRun(t *testing.T) {
	t.Parallel()
	var got runs.StartParams
	f := &fakeRuns{startRun: func(_ context.Context, p runs.StartParams) (*runtype.Run, error) {
		got = p
		return &runtype.Run{ID: "r5", AgentID: p.AgentID, Prompt: p.Prompt, ThreadID: p.ThreadID, Status: runtype.StatusRunning, CreatedAt: t0, UpdatedAt: t0}, nil
	}}
	a := serve(t, f)
	var out struct{ StartRun json.RawMessage }
	a.data(t, `mutation { startRun(input: {agentId: "support-agent", prompt: "refund order 42", threadId: "th1", resourceId: "acme",
		requireToolApproval: true, idempotencyKey: "k"}) { runId agentId prompt threadId status } }`, nil, &out)
	if got.AgentID != "support-agent" || got.Prompt != "refund order 42" || deref(got.ThreadID) != "th1" || deref(got.ResourceID) != "acme" ||
		!got.RequireToolApproval || deref(got.IdempotencyKey) != "k" {
		t.Errorf("the service was asked %+v", got)
	}
	sameJSON(t, out.StartRun, `{"runId": "r5", "agentId": "support-agent", "prompt": "refund order 42", "threadId": "th1", "status": "RUNNING"}`)

	a.data(t, `mutation { startRun(input: {agentId: "a", prompt: "p"}) { runId } }`, nil, &out)
	if got.RequireToolApproval || got.ThreadID != nil || got.IdempotencyKey != nil {
		t.Errorf("without the optional fields: %+v", got)
	}
}
