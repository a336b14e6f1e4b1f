package apptest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// ScriptedCall is one tool call a scripted model asks for: its id (the model's), tool and
// arguments exactly as the model writes them.
type ScriptedCall struct{ ID, Tool, Args string }

// ScriptedModel is a local server speaking the streamed chat-completions wire format that asks,
// in its step n (the number of assistant messages with tool calls so far), for the calls of
// steps[n], and once the steps are done answers with the content of the last tool message.
func ScriptedModel(t *testing.T, steps ...[]ScriptedCall) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role      string `json:"role"`
				Content   any    `json:"content"`
				ToolCalls []any  `json:"tool_calls"`
			} `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		step := 0
		for _, m := range body.Messages {
			if m.Role == "assistant" && len(m.ToolCalls) > 0 {
				step++
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(delta string) { SendChunk(w, delta) }
		if step < len(steps) {
			var calls []string
			for i, c := range steps[step] {
				args, _ := json.Marshal(c.Args)
				calls = append(calls, fmt.Sprintf(`{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}`, i, c.ID, c.Tool, args))
			}
			send(`{"role":"assistant","tool_calls":[` + strings.Join(calls, ",") + `]}`)
		} else {
			last := body.Messages[len(body.Messages)-1]
			content, _ := json.Marshal(fmt.Sprint("Done: ", last.Content))
			send(`{"role":"assistant","content":` + string(content) + `}`)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// IdRun is a run as these tests read it.
type IdRun struct {
	RunID     string
	Status    string
	Output    *string
	ToolCalls []ToolCall
	Decisions []struct {
		ToolCallID string
		ToolName   string
		Kind       string
		DecidedBy  *string
		DecidedAt  string
		Args       json.RawMessage
		EditedArgs json.RawMessage
	}
}

const IdRunFields = `runId status output toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted }
	decisions { toolCallId toolName kind decidedBy decidedAt args editedArgs }`

func (s *Server) IdStart(t *testing.T, agentID, prompt string) string {
	t.Helper()
	var out struct{ StartRun IdRun }
	s.MustAs(t, TokenOf("root"), `mutation($in: StartRunInput!) { startRun(input: $in) { runId } }`,
		map[string]any{"in": map[string]any{"agentId": agentID, "prompt": prompt}}, &out)
	return out.StartRun.RunID
}

func (s *Server) IdRun(t *testing.T, runID string) IdRun {
	t.Helper()
	var out struct{ Run IdRun }
	s.MustAs(t, TokenOf("root"), `query($id: ID!) { run(runId: $id) { `+IdRunFields+` } }`, map[string]any{"id": runID}, &out)
	return out.Run
}

// WaitRun polls the run until ok says it is as wanted.
func (s *Server) WaitRun(t *testing.T, runID string, what string, ok func(IdRun) bool) IdRun {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := s.IdRun(t, runID)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: not %s within 20s: %+v", runID, what, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SuspendedOn waits until the run is SUSPENDED on n calls none of which is in not.
func (s *Server) SuspendedOn(t *testing.T, runID string, n int, not ...string) IdRun {
	t.Helper()
	return s.WaitRun(t, runID, fmt.Sprintf("suspended on %d new calls", n), func(r IdRun) bool {
		if r.Status != "SUSPENDED" || len(r.ToolCalls) != n {
			return false
		}
		for _, c := range r.ToolCalls {
			for _, old := range not {
				if c.ToolCallID == old {
					return false
				}
			}
		}
		return true
	})
}

func (s *Server) Finished(t *testing.T, runID string) IdRun {
	t.Helper()
	return s.WaitRun(t, runID, "finished", func(r IdRun) bool { return r.Status == "COMPLETED" || r.Status == "FAILED" })
}

// AllEvents reads every event of a finished run.
func (s *Server) AllEvents(t *testing.T, runID string) []Event {
	t.Helper()
	ws := DialAs(t, s.URL, "graphql-transport-ws", TokenOf("root"))
	defer ws.Conn.CloseNow()
	ws.Conn.SetReadLimit(1 << 20) // a refused call's arguments are shown whole
	return Follow(t, ws, ws.Subscribe(EventsQuery, map[string]any{"runId": runID, "after": 0}), nil)
}

// DeepJSON is a value nested n levels deep.
func DeepJSON(n int) string {
	return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
}
