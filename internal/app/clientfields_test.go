package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"interlock/internal/apptest"
)

// The fields a client cache needs (issue 11): RunEvent.run and Tool.id.

const eventsWithRun = `subscription($runId: ID!, $after: Int) { runEvents(runId: $runId, after: $after) {
	seq type status run { id status output lastEventSeq toolCalls { id toolCallId } } again: run { id } } }`

type eventWithRun struct {
	Seq    int
	Type   string
	Status *string
	Run    *struct {
		ID           string
		Status       string
		Output       *string
		LastEventSeq int
		ToolCalls    []struct{ ID, ToolCallID string }
	}
	Again *struct{ ID string }
}

// checkEventRuns checks that exactly the RUN_* events carry the run (under both aliases), with
// the status wantStatus gives for the event.
func checkEventRuns(t *testing.T, runID string, evs []eventWithRun, wantStatus func(eventWithRun) string) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	for _, ev := range evs {
		if !strings.HasPrefix(ev.Type, "RUN_") {
			if ev.Run != nil || ev.Again != nil {
				t.Errorf("event %d %s carries a run: %+v", ev.Seq, ev.Type, ev.Run)
			}
			continue
		}
		if ev.Run == nil || ev.Again == nil || ev.Run.ID != runID || ev.Again.ID != runID {
			t.Errorf("event %d %s: run %+v (alias %+v), want run %s", ev.Seq, ev.Type, ev.Run, ev.Again, runID)
			continue
		}
		if want := wantStatus(ev); ev.Run.Status != want {
			t.Errorf("event %d %s: run status %s, want %s", ev.Seq, ev.Type, ev.Run.Status, want)
		}
		if ev.Run.LastEventSeq < ev.Seq {
			t.Errorf("event %d %s: run's lastEventSeq %d is before the event", ev.Seq, ev.Type, ev.Run.LastEventSeq)
		}
	}
}

// TestRunEventsCarryTheRun: over WebSocket, a principal scoped to one resource follows its run;
// the RUN_* events carry the run as stored (SUSPENDED with its waiting call while it waits,
// COMPLETED with its output at RUN_FINISHED), the others none.
func TestRunEventsCarryTheRun(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		portal := apptest.TokenOf("portal")
		run := s.SuspendAs(t, portal, "refund order 42 for 30", map[string]any{"resourceId": "r2"})
		c := apptest.DialAs(t, s.URL, "graphql-transport-ws", portal)
		defer c.Conn.Close(websocket.StatusNormalClosure, "")
		id := c.Subscribe(eventsWithRun, map[string]any{"runId": run.ID})
		var before []eventWithRun
		for len(before) == 0 || before[len(before)-1].Type != "RUN_SUSPENDED" {
			before = append(before, nextEventWithRun(t, c, id))
		}
		checkEventRuns(t, run.ID, before, func(eventWithRun) string { return "SUSPENDED" })
		suspended := before[len(before)-1].Run
		if len(suspended.ToolCalls) != 1 || suspended.ToolCalls[0].ToolCallID != run.ToolCalls[0].ToolCallID {
			t.Errorf("RUN_SUSPENDED's run has tool calls %+v, want the waiting call %s", suspended.ToolCalls, run.ToolCalls[0].ToolCallID)
		}

		s.MustAs(t, portal, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.ID}, nil)
		var after []eventWithRun
		for {
			data, done, errs := c.Next(id)
			if errs != nil {
				t.Fatalf("subscription error: %s", errs)
			}
			if done {
				break
			}
			after = append(after, decodeEventWithRun(t, data))
		}
		last := after[len(after)-1]
		if last.Type != "RUN_FINISHED" || last.Run == nil || last.Run.Output == nil || *last.Run.Output == "" {
			t.Fatalf("last event %+v, want RUN_FINISHED with the completed run and its output", last)
		}
		checkEventRuns(t, run.ID, after, func(ev eventWithRun) string {
			if ev.Type == "RUN_FINISHED" {
				return "COMPLETED"
			}
			return ev.Run.Status // RUN_RESUMED: RUNNING, or already COMPLETED when the run was quick
		})
		var stored struct{ Run apptest.Run }
		s.MustAs(t, portal, `query($id: ID!) { run(runId: $id) { `+apptest.RunFields+` } }`, map[string]any{"id": run.ID}, &stored)
		if stored.Run.Status != "COMPLETED" || stored.Run.Output == nil || *stored.Run.Output != *last.Run.Output {
			t.Errorf("the stored run %+v, RUN_FINISHED carried output %q", stored.Run, *last.Run.Output)
		}
	})
}

// TestRunEventsCarryTheRunOverSSE: the same over Server-Sent Events, and an event replayed
// after the run finished carries the run as it is now.
func TestRunEventsCarryTheRunOverSSE(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/sse-run.db")
	run := s.StartRun(t, "refund order 42 for 30", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := sse(t, ctx, s, eventsWithRun, map[string]any{"runId": run.RunID}, func(d json.RawMessage) bool {
		return strings.Contains(string(d), `"RUN_SUSPENDED"`)
	})
	s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, &struct{}{})
	var rest []eventWithRun
	for _, d := range sse(t, ctx, s, eventsWithRun, map[string]any{"runId": run.RunID, "after": len(got)}, nil) {
		rest = append(rest, decodeEventWithRun(t, d))
	}
	if len(rest) == 0 || rest[len(rest)-1].Type != "RUN_FINISHED" {
		t.Fatalf("SSE events after approval: %+v", rest)
	}
	checkEventRuns(t, run.RunID, rest, func(ev eventWithRun) string {
		if ev.Type == "RUN_FINISHED" {
			return "COMPLETED"
		}
		return ev.Run.Status
	})
	// Selected through a fragment, the run is there too.
	const viaFragment = `subscription($runId: ID!) { runEvents(runId: $runId) { ...E } }
	fragment E on RunEvent { seq type status run { id status output lastEventSeq toolCalls { id toolCallId } } again: run { id } }`
	var replay []eventWithRun
	for _, d := range sse(t, ctx, s, viaFragment, map[string]any{"runId": run.RunID}, nil) {
		replay = append(replay, decodeEventWithRun(t, d))
	}
	checkEventRuns(t, run.RunID, replay, func(eventWithRun) string { return "COMPLETED" })
}

func nextEventWithRun(t *testing.T, c *apptest.WSClient, id string) eventWithRun {
	t.Helper()
	data, done, errs := c.Next(id)
	if errs != nil || done {
		t.Fatalf("subscription ended early: done %v, errors %s", done, errs)
	}
	return decodeEventWithRun(t, data)
}

func decodeEventWithRun(t *testing.T, data json.RawMessage) eventWithRun {
	t.Helper()
	var d struct{ RunEvents eventWithRun }
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("event %s: %v", data, err)
	}
	return d.RunEvents
}

// TestToolIDsAreUniqueAcrossAgents: two agents offer a tool of the same name; every tool of
// every agent (sub-agents included) has an id of its own, the same from agents and agent(id:),
// and the same after a restart.
func TestToolIDsAreUniqueAcrossAgents(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + t.TempDir() + "/tools.db"
	file := apptest.WriteConfig(t, `
agents:
  - id: billing
    model: {provider: demo}
    tools: [refund]
  - id: shipping
    model: {provider: demo}
    tools: [refund, track]
  - id: desk
    model: {provider: demo}
    subAgents: [shipping]
tools:
  - name: refund
    http: {url: 'http://127.0.0.1:1/refund'}
  - name: track
    http: {url: 'http://127.0.0.1:1/track'}
`)
	query := `{ agents { id tools { id name } subAgents { id tools { id name } } } }`
	type tool struct{ ID, Name string }
	type agentTools struct {
		ID        string
		Tools     []tool
		SubAgents []agentTools
	}
	var first struct{ Agents []agentTools }
	s := apptest.Start(t, db, "--config", file)
	s.Must(t, query, nil, &first)
	seen := map[string]string{}
	names := map[string]int{}
	var walk func(a agentTools)
	walk = func(a agentTools) {
		for _, tl := range a.Tools {
			names[tl.Name]++
			if tl.ID != a.ID+"/"+tl.Name {
				t.Errorf("tool %s of %s has id %q, want %q", tl.Name, a.ID, tl.ID, a.ID+"/"+tl.Name)
			}
			if owner, dup := seen[tl.ID]; dup && owner != a.ID {
				t.Errorf("tool id %q of %s is also %s's", tl.ID, a.ID, owner)
			}
			seen[tl.ID] = a.ID
		}
		for _, sub := range a.SubAgents {
			walk(sub)
		}
	}
	for _, a := range first.Agents {
		walk(a)
		var one struct{ Agent agentTools }
		s.Must(t, `query($id: ID!) { agent(id: $id) { id tools { id name } subAgents { id tools { id name } } } }`, map[string]any{"id": a.ID}, &one)
		if a1, a2 := jsonText(t, a), jsonText(t, one.Agent); a1 != a2 {
			t.Errorf("agent(id: %s) %s, agents gave %s", a.ID, a2, a1)
		}
	}
	if len(seen) < 2 {
		t.Fatalf("the demo agents have %d tools: too few to compare", len(seen))
	}
	if names["refund"] < 2 || seen["billing/refund"] != "billing" || seen["shipping/refund"] != "shipping" {
		t.Fatalf("tools seen %v: want refund under billing and shipping, apart", seen)
	}
	s.CloseHTTP()
	s.App.Close()
	var again struct{ Agents []agentTools }
	apptest.Start(t, db, "--config", file).Must(t, query, nil, &again)
	if jsonText(t, again) != jsonText(t, first) {
		t.Errorf("after a restart tools are %s, were %s", jsonText(t, again), jsonText(t, first))
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
