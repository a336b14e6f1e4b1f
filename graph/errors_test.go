package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"interlock/runs"
	"interlock/runtype"
)

// operation is one query or mutation of the API, named Op, and how to make the one service
// method it calls fail.
type operation struct {
	name  string // the subtest's
	field string // the top-level field, the error's path
	typ   string // query or mutation
	query string
	fail  func(f *fakeRuns, err error)
}

var operations = []operation{
	{"run", "run", "query", `query Op { run(runId: "r1") { id } }`, func(f *fakeRuns, err error) {
		f.get = func(context.Context, string) (*runtype.Run, error) { return nil, err }
	}},
	{"suspendedRuns", "suspendedRuns", "query", `query Op { suspendedRuns(page: 0, perPage: 10) { total runs { id } } }`, func(f *fakeRuns, err error) {
		f.listSuspended = func(context.Context, runs.ListSuspendedParams) (*runs.ListResult, error) { return nil, err }
	}},
	{"recentRuns", "recentRuns", "query", `query Op { recentRuns { total } }`, func(f *fakeRuns, err error) {
		f.recentRuns = func(context.Context, runs.RecentParams) (*runs.ListResult, error) { return nil, err }
	}},
	{"startRun", "startRun", "mutation", `mutation Op { startRun(input: {agentId: "support-agent", prompt: "refund order 42"}) { id } }`, func(f *fakeRuns, err error) {
		f.startRun = func(context.Context, runs.StartParams) (*runtype.Run, error) { return nil, err }
	}},
	{"approve", "approveToolCall", "mutation", `mutation Op { approveToolCall(runId: "r1", toolCallId: "tc_1") { id } }`, func(f *fakeRuns, err error) {
		f.approve = func(context.Context, runs.DecideParams) (*runtype.Run, error) { return nil, err }
	}},
	{"editAndApprove", "approveToolCall", "mutation", `mutation Op { approveToolCall(runId: "r1", args: {amount: 10}) { id } }`, func(f *fakeRuns, err error) {
		f.editAndApprove = func(context.Context, runs.DecideParams, json.RawMessage) (*runtype.Run, error) { return nil, err }
	}},
	{"decline", "declineToolCall", "mutation", `mutation Op { declineToolCall(runId: "r1", reason: "no") { id } }`, func(f *fakeRuns, err error) {
		f.decline = func(context.Context, runs.DecideParams, string) (*runtype.Run, error) { return nil, err }
	}},
	{"resume", "resumeRun", "mutation", `mutation Op { resumeRun(runId: "r1", resumeData: {ok: true}) { id } }`, func(f *fakeRuns, err error) {
		f.resume = func(context.Context, runs.DecideParams, json.RawMessage) (*runtype.Run, error) { return nil, err }
	}},
	{"requestApproval", "requestApproval", "mutation", `mutation Op { requestApproval(input: {agentId: "deployer", toolName: "deploy", args: {}}) { id } }`, func(f *fakeRuns, err error) {
		f.requestApproval = func(context.Context, runs.ApprovalParams) (*runtype.Run, error) { return nil, err }
	}},
}

// storageFault is what a store's query error looks like once wrapped on its way up: SQL, a
// table's name and the driver's words, none of which a client may read.
var storageFault = fmt.Errorf("gormstore: list runs: %w",
	errors.New("Error 1146 (42S02): Table 'interlock.agent_runs' doesn't exist; SELECT * FROM `agent_runs` WHERE status = 'SUSPENDED'"))

// serviceErrors are the errors the run service returns, and what a client and the log see of
// each. logged is the level of the presenter's one log line ("" for none: an application
// error is the client's business, not the operator's).
var serviceErrors = []struct {
	name    string
	err     error
	code    string
	message string
	logged  string
}{
	{"bad user input", runtype.Errorf(runtype.CodeBadUserInput, "perPage must be between 1 and 100, not 0"),
		"BAD_USER_INPUT", "perPage must be between 1 and 100, not 0", ""},
	{"not found", runtype.Errorf(runtype.CodeNotFound, "run r1 not found"), "NOT_FOUND", "run r1 not found", ""},
	{"conflict", runtype.Errorf(runtype.CodeConflict, "tool call tc_1 was already approved by alice at 2026-12-06T01:00:00.000Z"),
		"CONFLICT", "tool call tc_1 was already approved by alice at 2026-12-06T01:00:00.000Z", ""},
	{"unauthenticated", runtype.Errorf(runtype.CodeUnauthenticated, "reading runs needs a token"), "UNAUTHENTICATED", "reading runs needs a token", ""},
	{"forbidden", runtype.Errorf(runtype.CodeForbidden, "deciding needs the approver role"), "FORBIDDEN", "deciding needs the approver role", ""},
	{"wrapped application error", fmt.Errorf("deciding on run r1: %w", runtype.Errorf(runtype.CodeConflict, "run r1 is not suspended")),
		"CONFLICT", "run r1 is not suspended", ""},
	{"unavailable", runtype.Unavailable(fmt.Errorf("gormstore: get run r1: %w", errors.New("dial tcp 127.0.0.1:3306: connect: connection refused"))),
		"UNAVAILABLE", runtype.ErrUnavailable.Message, ""},
	{"internal", runtype.Errorf(runtype.CodeInternal, "snapshot of run r1 does not decode: unexpected end of JSON input"),
		"INTERNAL", "internal server error", "ERROR"},
	{"cancelled", runtype.Errorf(runtype.CodeCancelled, "the request was cancelled by its client"),
		"CANCELLED", "the request was cancelled by its client", "INFO"},
	{"context cancelled", fmt.Errorf("gormstore: get run r1: %w", context.Canceled),
		"CANCELLED", "the request was cancelled by its client", "INFO"},
	{"storage fault", storageFault, "INTERNAL", "internal server error", "ERROR"},
}

// TestServiceErrorsReachClients: every operation answers every error of the service with its
// extensions.code and a message the client may read (UNAVAILABLE with retryAfter; INTERNAL
// without the words of SQL or the driver), at the operation's field, and logs what it hides
// from the client once, with the operation — except run, where NOT_FOUND is a null run.
func TestServiceErrorsReachClients(t *testing.T) {
	t.Parallel()
	for _, op := range operations {
		for _, se := range serviceErrors {
			t.Run(op.name+"/"+se.name, func(t *testing.T) {
				t.Parallel()
				f := &fakeRuns{}
				op.fail(f, se.err)
				a := serve(t, f)
				ans := a.do(t, context.Background(), op.query, nil)
				if op.field == "run" && se.code == "NOT_FOUND" {
					if len(ans.Errors) != 0 || string(ans.Data) != `{"run":null}` {
						t.Fatalf("run of an unknown id: want data.run null and no error, got %s", ans.body)
					}
					return
				}
				if len(ans.Errors) != 1 {
					t.Fatalf("want one error, got %s", ans.body)
				}
				e := ans.Errors[0]
				if e.Extensions["code"] != se.code || e.Message != se.message {
					t.Errorf("got %v %q, want %s %q", e.Extensions["code"], e.Message, se.code, se.message)
				}
				if len(e.Path) != 1 || e.Path[0] != op.field {
					t.Errorf("path %v, want [%s]", e.Path, op.field)
				}
				if retry, ok := e.Extensions["retryAfter"]; (se.code == "UNAVAILABLE") != ok || ok && retry != float64(runtype.RetryAfter) {
					t.Errorf("retryAfter %v for %s", retry, se.code)
				}
				for _, secret := range []string{"1146", "agent_runs", "SELECT", "gormstore", "127.0.0.1", "snapshot", "JSON input"} {
					if strings.Contains(ans.body, secret) {
						t.Errorf("the client reads %q: %s", secret, ans.body)
					}
				}
				checkLogged(t, a, op, se.err, se.logged)
			})
		}
	}
}

// checkLogged checks that the log holds exactly one line of the error, at level (or none when
// level is ""), naming the operation, its type and the field, with the error's own words.
func checkLogged(t *testing.T, a *api, op operation, err error, level string) {
	t.Helper()
	lines := a.lines(t)
	if level == "" {
		if len(lines) != 0 {
			t.Errorf("an application error is logged: %v", lines)
		}
		return
	}
	if len(lines) != 1 {
		t.Fatalf("want one log line, got %d: %v", len(lines), lines)
	}
	l := lines[0]
	if l["level"] != level || l["operation"] != "Op" || l["type"] != op.typ || l["path"] != op.field || l["err"] != err.Error() {
		t.Errorf("log line %v; want level %s, operation Op, type %s, path %s, err %q", l, level, op.typ, op.field, err)
	}
}

// TestAnAbandonedRequestIsCancelled: a request whose context its client cancelled is answered
// CANCELLED whatever the service's error (a storage error the cancellation caused, here), and
// logged at INFO, not as an internal error.
func TestAnAbandonedRequestIsCancelled(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{}
	a := serve(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	f.approve = func(context.Context, runs.DecideParams) (*runtype.Run, error) {
		cancel() // the client goes while the service waits on storage
		return nil, storageFault
	}
	ans := a.do(t, ctx, `mutation Op { approveToolCall(runId: "r1") { id } }`, nil)
	if len(ans.Errors) != 1 || ans.Errors[0].Extensions["code"] != "CANCELLED" || ans.Errors[0].Message != "the request was cancelled by its client" {
		t.Fatalf("got %s", ans.body)
	}
	checkLogged(t, a, operation{name: "approve", field: "approveToolCall", typ: "mutation"}, storageFault, "INFO")
}

// TestAPanicIsInternal: a resolver that panics is the server's fault even when its client has
// gone: INTERNAL, and logged once with the panic's value and the operation.
func TestAPanicIsInternal(t *testing.T) {
	t.Parallel()
	f := &fakeRuns{}
	a := serve(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	f.get = func(context.Context, string) (*runtype.Run, error) {
		cancel()
		panic("index out of range [3] with length 3")
	}
	ans := a.do(t, ctx, `query Op { run(runId: "r1") { id } }`, nil)
	if len(ans.Errors) != 1 || ans.Errors[0].Extensions["code"] != "INTERNAL" || ans.Errors[0].Message != "internal server error" {
		t.Fatalf("got %s", ans.body)
	}
	checkLogged(t, a, operation{name: "run", field: "run", typ: "query"}, errors.New("panic in resolver: index out of range [3] with length 3"), "ERROR")
}

// TestRequestErrorsAreTheClients: an error in the request itself (an argument of the wrong
// type) is gqlgen's, with its code, and is not logged.
func TestRequestErrorsAreTheClients(t *testing.T) {
	t.Parallel()
	a := serve(t, &fakeRuns{})
	ans := a.do(t, context.Background(), `query Op($p: Int) { suspendedRuns(perPage: $p) { total } }`, map[string]any{"p": "ten"})
	if len(ans.Errors) != 1 || ans.Errors[0].Extensions["code"] != "GRAPHQL_VALIDATION_FAILED" || !strings.Contains(ans.Errors[0].Message, `"$p"`) {
		t.Fatalf("got %s", ans.body)
	}
	ans = a.do(t, context.Background(), `query Op { suspendedRuns(fromDate: "yesterday") { total } }`, nil)
	if len(ans.Errors) != 1 || ans.Errors[0].Extensions["code"] != "BAD_USER_INPUT" {
		t.Fatalf("a bad DateTime: %s", ans.body)
	}
	if lines := a.lines(t); len(lines) != 0 {
		t.Errorf("a request error is logged: %v", lines)
	}
}
