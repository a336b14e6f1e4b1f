package app_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"interlock/internal/app"
	"interlock/internal/apptest"
)

var protocols = []string{"graphql-transport-ws", "graphql-ws"}

// TestApproveEndToEnd: start a demo run, watch it suspend, find it with suspendedRuns, approve it
// the moment RUN_SUSPENDED arrives, and follow runEvents to RUN_FINISHED — on each database,
// over each WebSocket subprotocol.
func TestApproveEndToEnd(t *testing.T) {
	t.Parallel()
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		for _, proto := range protocols {
			t.Run(proto, func(t *testing.T) {
				run := s.StartRun(t, "refund order 42 for 30", map[string]any{"threadId": "th-" + proto, "resourceId": "cust-1"})
				ws := apptest.DialWS(t, s.URL, proto)
				op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": 0})
				evs := apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))

				// Discovery by thread, and the inbox (no filter).
				var list struct {
					SuspendedRuns struct {
						Total int
						Runs  []apptest.Run
					}
				}
				s.Must(t, `query($t: ID) { suspendedRuns(threadId: $t, page: 0, perPage: 10) { total runs { `+apptest.RunFields+` } } }`, map[string]any{"t": "th-" + proto}, &list)
				if list.SuspendedRuns.Total != 1 || list.SuspendedRuns.Runs[0].RunID != run.RunID {
					t.Fatalf("suspendedRuns = %+v", list.SuspendedRuns)
				}
				found := list.SuspendedRuns.Runs[0]
				tc := found.ToolCalls[0]
				if found.Status != "SUSPENDED" || found.SuspendedAt == nil || tc.ToolName != "issue_refund" || !tc.RequiresApproval || tc.ID != run.RunID+":"+tc.ToolCallID {
					t.Fatalf("suspended run = %+v", found)
				}
				var args struct {
					OrderID string  `json:"orderId"`
					Amount  float64 `json:"amount"`
				}
				json.Unmarshal(tc.Args, &args)
				if args.OrderID != "42" || args.Amount != 30 {
					t.Fatalf("args = %s", tc.Args)
				}
				if found.LastEventSeq != evs[len(evs)-1].Seq {
					t.Fatalf("lastEventSeq %d, last event seen %d", found.LastEventSeq, evs[len(evs)-1].Seq)
				}

				var approved struct{ ApproveToolCall apptest.Run }
				s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { `+apptest.RunFields+` } }`, map[string]any{"id": run.RunID}, &approved)
				if approved.ApproveToolCall.Status != "RUNNING" || len(approved.ApproveToolCall.ToolCalls) != 0 {
					t.Fatalf("approve returned %+v", approved.ApproveToolCall)
				}
				evs = append(evs, apptest.Follow(t, ws, op, nil)...) // to the complete message
				checkSeqs(t, evs)
				last := evs[len(evs)-1]
				if last.Type != "RUN_FINISHED" || *last.Status != "COMPLETED" {
					t.Fatalf("last event %+v", last)
				}
				types := map[string]int{}
				for _, e := range evs {
					types[e.Type]++
				}
				for _, want := range []string{"RUN_STARTED", "TOOL_CALL", "TOOL_CALL_APPROVAL", "RUN_SUSPENDED", "TOOL_CALL_APPROVED", "RUN_RESUMED", "TOOL_RESULT", "STEP_FINISHED", "RUN_FINISHED"} {
					if types[want] == 0 {
						t.Errorf("no %s event in %v", want, types)
					}
				}
				if types["TEXT_DELTA"] < 1 {
					t.Errorf("final text came in %d TEXT_DELTA events", types["TEXT_DELTA"])
				}
				done := s.Run(t, run.RunID)
				if done.Status != "COMPLETED" || done.Output == nil || *done.Output != apptest.Text(evs) || !strings.Contains(*done.Output, "rf_42") {
					t.Fatalf("run after finish: %+v (streamed %q)", done, apptest.Text(evs))
				}
				if done.SuspendedAt != nil || len(done.ToolCalls) != 0 {
					t.Fatalf("finished run still shows a suspension: %+v", done)
				}

				// Replaying from the middle gives exactly the rest, then completes.
				op2 := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": 3})
				rest := apptest.Follow(t, ws, op2, nil)
				if len(rest) != len(evs)-3 || rest[0].Seq != 4 {
					t.Fatalf("replay after 3: %d events from seq %d, want %d", len(rest), rest[0].Seq, len(evs)-3)
				}
				// Nothing after the end: completes at once.
				op3 := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": done.LastEventSeq})
				if rest := apptest.Follow(t, ws, op3, nil); len(rest) != 0 {
					t.Fatalf("after the last event got %d more", len(rest))
				}
			})
		}
	})
}

func checkSeqs(t *testing.T, evs []apptest.Event) {
	t.Helper()
	for i, e := range evs {
		if e.Seq != i+1 {
			t.Fatalf("event %d has seq %d (%s)", i+1, e.Seq, e.Type)
		}
		if _, err := time.Parse(time.RFC3339, e.At); err != nil || !strings.HasSuffix(e.At, "Z") || len(e.At) != len("2026-12-02T10:00:00.000Z") {
			t.Fatalf("event at %q is not RFC 3339 UTC with milliseconds", e.At)
		}
	}
}

func TestDeclineEndToEnd(t *testing.T) {
	t.Parallel()
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		run := s.StartRun(t, "please refund order 5", nil)
		ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
		op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
		apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
		var out struct{ DeclineToolCall apptest.Run }
		s.Must(t, `mutation($id: ID!, $r: String) { declineToolCall(runId: $id, reason: $r) { status } }`, map[string]any{"id": run.RunID, "r": "refunds need a receipt"}, &out)
		evs := apptest.Follow(t, ws, op, nil)
		var declined *apptest.Event
		for i := range evs {
			if evs[i].Type == "TOOL_CALL_DECLINED" {
				declined = &evs[i]
			}
			if evs[i].Type == "TOOL_RESULT" && strings.Contains(string(mustJSON(evs[i].Result)), "rf_5") {
				t.Fatal("the declined tool ran")
			}
		}
		if declined == nil || declined.Reason == nil || *declined.Reason != "refunds need a receipt" {
			t.Fatalf("TOOL_CALL_DECLINED = %+v", declined)
		}
		if final := apptest.Text(evs); !strings.Contains(final, "refunds need a receipt") {
			t.Fatalf("final text %q does not carry the reason", final)
		}
	})
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func TestResumeEndToEnd(t *testing.T) {
	t.Parallel()
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		run := s.StartRun(t, "ask the customer which size they want", nil)
		ws := apptest.DialWS(t, s.URL, "graphql-ws")
		op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
		evs := apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
		susp := evs[len(evs)-2]
		if susp.Type != "TOOL_CALL_SUSPENDED" || susp.ToolCall.RequiresApproval || !strings.Contains(string(susp.ToolCall.SuspendPayload), "which size") {
			t.Fatalf("suspension event %+v", susp)
		}
		got := s.Run(t, run.RunID)
		if len(got.ToolCalls) != 1 || got.ToolCalls[0].Args != nil && string(got.ToolCalls[0].Args) != "null" {
			t.Fatalf("a resume suspension lists %+v", got.ToolCalls)
		}
		s.WantError(t, "BAD_USER_INPUT", `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID})
		e := s.WantError(t, "BAD_USER_INPUT", `mutation($id: ID!, $d: JSON!) { resumeRun(runId: $id, resumeData: $d) { status } }`, map[string]any{"id": run.RunID, "d": map[string]any{"answer": 42}})
		if !strings.Contains(e.Message, "answer") {
			t.Fatalf("validation message %q does not name the field", e.Message)
		}
		if r := s.Run(t, run.RunID); r.Status != "SUSPENDED" {
			t.Fatalf("after a bad resume the run is %s", r.Status)
		}
		var out struct{ ResumeRun apptest.Run }
		s.Must(t, `mutation($id: ID!, $d: JSON!, $c: ID) { resumeRun(runId: $id, resumeData: $d, toolCallId: $c) { status } }`,
			map[string]any{"id": run.RunID, "d": map[string]any{"answer": "size M"}, "c": got.ToolCalls[0].ToolCallID}, &out)
		evs = append(evs, apptest.Follow(t, ws, op, nil)...)
		checkSeqs(t, evs)
		if !strings.Contains(apptest.Text(evs), "size M") || evs[len(evs)-1].Type != "RUN_FINISHED" {
			t.Fatalf("final text %q, last %s", apptest.Text(evs), evs[len(evs)-1].Type)
		}
	})
}

// TestTwoRefundsWaitTogether: two refunds asked for in one step wait together; over the API the
// first approval answers SUSPENDED with the other call still waiting, the suspended set sends the
// run as CHANGED with one call, and the second approval resumes it.
func TestTwoRefundsWaitTogether(t *testing.T) {
	t.Parallel()
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		run := s.StartRun(t, "refund orders 7 and 8", nil)
		ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
		op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
		evs := apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
		r := s.Run(t, run.RunID)
		if len(r.ToolCalls) != 2 || !strings.Contains(string(r.ToolCalls[0].Args), `"7"`) || !strings.Contains(string(r.ToolCalls[1].Args), `"8"`) {
			t.Fatalf("waiting on %+v, want orders 7 and 8", r.ToolCalls)
		}
		cws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
		changes := cws.Subscribe(`subscription { suspendedRunsChanged { kind run { id status toolCalls { toolCallId } } } }`, nil)
		s.WaitWatchers(t, 1)
		approve := `mutation($id: ID!, $c: ID) { approveToolCall(runId: $id, toolCallId: $c) { status toolCalls { toolCallId } decisions { toolCallId kind } } }`
		var out struct {
			ApproveToolCall struct {
				Status    string
				ToolCalls []struct{ ToolCallID string }
				Decisions []struct{ ToolCallID, Kind string }
			}
		}
		s.Must(t, approve, map[string]any{"id": run.RunID, "c": r.ToolCalls[0].ToolCallID}, &out)
		if a := out.ApproveToolCall; a.Status != "SUSPENDED" || len(a.ToolCalls) != 1 || a.ToolCalls[0].ToolCallID != r.ToolCalls[1].ToolCallID || len(a.Decisions) != 1 {
			t.Fatalf("first approval answered %+v, want SUSPENDED on the second call with one decision", a)
		}
		data, _, errs := cws.Next(changes)
		if strings.Contains(string(data), `"kind":"SUSPENDED"`) {
			// The run's suspension itself, when the subscription started before it was told
			// (on a loaded machine the 200 ms above are not always enough): the next is the change.
			data, _, errs = cws.Next(changes)
		}
		if !strings.Contains(string(data), `"kind":"CHANGED"`) || !strings.Contains(string(data), r.ToolCalls[1].ToolCallID) || strings.Contains(string(data), `"`+r.ToolCalls[0].ToolCallID+`"`) {
			t.Fatalf("suspended set after the first approval: %s %s; want the run again with the second call only", data, errs)
		}
		s.Must(t, approve, map[string]any{"id": run.RunID, "c": r.ToolCalls[1].ToolCallID}, &out)
		if out.ApproveToolCall.Status != "RUNNING" {
			t.Fatalf("second approval answered %+v, want RUNNING", out.ApproveToolCall)
		}
		evs = append(evs, apptest.Follow(t, ws, op, nil)...)
		checkSeqs(t, evs)
		if final := apptest.Text(evs); !strings.Contains(final, "rf_7") || !strings.Contains(final, "rf_8") {
			t.Fatalf("final text %q", final)
		}
	})
}

func TestErrorsCarryCodes(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/e.db")
	approve := `mutation($id: ID!, $c: ID) { approveToolCall(runId: $id, toolCallId: $c) { status } }`
	s.WantError(t, "NOT_FOUND", approve, map[string]any{"id": "nope"})
	s.WantError(t, "NOT_FOUND", `mutation { startRun(input: {agentId: "nobody", prompt: "hi"}) { status } }`, nil)
	s.WantError(t, "BAD_USER_INPUT", `mutation { startRun(input: {agentId: "support-agent", prompt: ""}) { status } }`, nil)
	s.WantError(t, "BAD_USER_INPUT", `{ suspendedRuns(page: 0, perPage: 0) { total } }`, nil)
	s.WantError(t, "BAD_USER_INPUT", `{ suspendedRuns(page: 0, perPage: 501) { total } }`, nil)
	s.WantError(t, "BAD_USER_INPUT", `{ suspendedRuns(page: -1, perPage: 10) { total } }`, nil)
	s.WantError(t, "BAD_USER_INPUT", `{ suspendedRuns(fromDate: "2026-12-02T10:00:00Z", toDate: "2026-12-01T10:00:00Z") { total } }`, nil)
	s.WantError(t, "BAD_USER_INPUT", `{ suspendedRuns(fromDate: "yesterday") { total } }`, nil)
	s.WantError(t, "GRAPHQL_VALIDATION_FAILED", `{ suspendedRuns(page: "x") { total } }`, nil)
	var out struct{ Run *apptest.Run }
	s.Must(t, `{ run(runId: "nope") { status } }`, nil, &out)
	if out.Run != nil {
		t.Fatal("run of an unknown id is not null")
	}

	run := s.StartRun(t, "refund order 1", nil)
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
	apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
	s.WantError(t, "BAD_USER_INPUT", approve, map[string]any{"id": run.RunID, "c": "tc_77"})
	s.WantError(t, "BAD_USER_INPUT", `mutation($id: ID!) { resumeRun(runId: $id, resumeData: {answer: "x"}) { status } }`, map[string]any{"id": run.RunID})
	var ok struct{ ApproveToolCall apptest.Run }
	s.Must(t, approve, map[string]any{"id": run.RunID}, &ok)
	s.WantError(t, "CONFLICT", approve, map[string]any{"id": run.RunID, "c": "tc_1"})
	apptest.Follow(t, ws, op, nil)
	s.WantError(t, "CONFLICT", approve, map[string]any{"id": run.RunID})

	// An unknown run in a subscription is NOT_FOUND, over both subprotocols.
	for _, proto := range protocols {
		c := apptest.DialWS(t, s.URL, proto)
		id := c.Subscribe(apptest.EventsQuery, map[string]any{"runId": "nope"})
		_, _, errs := c.Next(id)
		if !strings.Contains(string(errs), "NOT_FOUND") {
			t.Fatalf("%s: runEvents of an unknown run: %s", proto, errs)
		}
	}
}

func TestAgentsQuery(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/a.db")
	var out struct {
		Agents []struct {
			ID, Name, Model string
			Tools           []struct {
				Name             string
				RequiresApproval bool
				InputSchema      map[string]any
				ResumeSchema     map[string]any
			}
		}
		Agent *struct{ ID string }
		None  *struct{ ID string }
	}
	s.Must(t, `{ agents { id name model tools { name requiresApproval inputSchema resumeSchema } } agent(id: "support-agent") { id } none: agent(id: "x") { id } }`, nil, &out)
	// The demo agents, ordered by id: support-agent and the supervisor that delegates to it.
	if len(out.Agents) != 2 || out.Agents[1].ID != "support-agent" || out.Agents[0].ID != "supervisor" || out.Agents[1].Model != "demo/support-v1" || out.Agent == nil || out.None != nil {
		t.Fatalf("agents = %+v", out)
	}
	tools := map[string]bool{}
	for _, tl := range out.Agents[1].Tools {
		tools[tl.Name] = tl.RequiresApproval
		if tl.Name == "ask_customer" && tl.ResumeSchema["required"] == nil {
			t.Errorf("ask_customer resumeSchema = %v", tl.ResumeSchema)
		}
	}
	if len(tools) != 4 || tools["lookup_order"] || !tools["issue_refund"] || tools["ask_customer"] || tools["slow_task"] {
		t.Fatalf("tools = %v", tools)
	}
}

func TestPlaygroundAndConsoleAreServed(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/p.db")
	for path, want := range map[string]string{"/playground": "/graphql", "/": "Interlock", "/healthz": "ok"} {
		resp, err := apptest.HttpGet(s.URL + path)
		if err != nil || !strings.Contains(resp, want) {
			t.Errorf("GET %s: %v, body lacks %q", path, err, want)
		}
	}
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", "postgres://x"}, "INTERLOCK_DB"},
		{[]string{"--db", "mysql://root@127.0.0.1:1/none"}, "INTERLOCK_DB"},
		{[]string{"--max-per-page", "0"}, "INTERLOCK_MAX_PER_PAGE"},
		{[]string{"--demo-delay", "soon"}, "INTERLOCK_DEMO_DELAY"},
		{[]string{"--heap-floor-mib", "-1"}, "INTERLOCK_HEAP_FLOOR_MIB"},
		{[]string{"--heap-floor-mib", "64MiB"}, "INTERLOCK_HEAP_FLOOR_MIB"},
		{[]string{"--console-url", "interlock.example.com"}, "INTERLOCK_CONSOLE_URL"},
		{[]string{"--console-url", "ftp://interlock.example.com"}, "INTERLOCK_CONSOLE_URL"},
		{[]string{"--console-url", "https://interlock.example.com/?run=1"}, "INTERLOCK_CONSOLE_URL"},
		{[]string{"--db", "sqlite:" + t.TempDir() + "/x.db", "--addr", "256.0.0.1:99999"}, "INTERLOCK_ADDR"},
	} {
		err := app.RunCommand(tc.args, apptest.DiscardLog())
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("run(%v) = %v, want one line naming %s", tc.args, err, tc.want)
		}
	}
}

func TestRecentRunsShowDecisions(t *testing.T) {
	t.Parallel()
	apptest.EachDB(t, func(t *testing.T, s *apptest.Server) {
		run := s.StartRun(t, "refund order 6", map[string]any{"threadId": "hist"})
		ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
		op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
		apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
		var d struct{ DeclineToolCall apptest.Run }
		s.Must(t, `mutation($id: ID!) { declineToolCall(runId: $id, reason: "no receipt") { status } }`, map[string]any{"id": run.RunID}, &d)
		apptest.Follow(t, ws, op, nil)
		other := s.StartRun(t, "hello", nil) // finishes without decisions
		apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": other.RunID}), nil)

		var out struct {
			RecentRuns struct {
				Total int
				Runs  []struct {
					RunID, Status, Prompt string
					Decisions             []struct {
						ID, ToolName, Kind, DecidedAt string
						Reason                        *string
					}
				}
			}
		}
		s.Must(t, `{ recentRuns(perPage: 10) { total runs { runId status prompt decisions { id toolName kind decidedAt reason } } } }`, nil, &out)
		rr := out.RecentRuns
		if rr.Total != 2 || rr.Runs[0].RunID != other.RunID || rr.Runs[1].RunID != run.RunID {
			t.Fatalf("recentRuns = %+v", rr)
		}
		dec := rr.Runs[1].Decisions
		if rr.Runs[1].Prompt != "refund order 6" || len(dec) != 1 || dec[0].Kind != "DECLINED" || dec[0].Reason == nil || *dec[0].Reason != "no receipt" || dec[0].ToolName != "issue_refund" {
			t.Fatalf("history entry = %+v", rr.Runs[1])
		}
		s.WantError(t, "BAD_USER_INPUT", `{ recentRuns(perPage: 0) { total } }`, nil)
		var suspended struct{ RecentRuns struct{ Total int } }
		s.Must(t, `{ recentRuns(statuses: [SUSPENDED]) { total } }`, nil, &suspended)
		if suspended.RecentRuns.Total != 0 {
			t.Fatalf("suspended runs in history: %d", suspended.RecentRuns.Total)
		}
	})
}

// TestToolCallEventsCarryArguments: a tool that needs no approval shows its arguments too.
func TestToolCallEventsCarryArguments(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"))
	run := s.StartRun(t, "what is the status of order 4", nil)
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	evs := apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID}), nil)
	var saw int
	for _, e := range evs {
		if e.Type == "TOOL_CALL" || e.Type == "TOOL_RESULT" {
			saw++
			if e.ToolCall == nil || e.ToolCall.ToolName != "lookup_order" || !strings.Contains(string(e.ToolCall.Args), `"4"`) {
				t.Fatalf("%s event without the call's arguments: %+v", e.Type, e.ToolCall)
			}
		}
	}
	if saw != 2 {
		t.Fatalf("saw %d TOOL_CALL/TOOL_RESULT events in %+v", saw, evs)
	}
}
