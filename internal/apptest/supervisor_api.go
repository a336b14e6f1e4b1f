package apptest

import (
	"testing"
)

// SuspendedList is the answer of suspendedRuns with the fields the supervisor tests read.
type SuspendedList struct {
	SuspendedRuns struct {
		Total int
		Runs  []struct {
			RunID       string
			AgentID     string
			ParentRunID *string
			ToolCalls   []ToolCall
		}
	}
}

const SuspendedQuery = `query($agentId: ID) { suspendedRuns(agentId: $agentId) { total runs { runId agentId parentRunId
	toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted } } } }`

func (s *Server) SuspendedOf(t *testing.T, agentID any) SuspendedList {
	t.Helper()
	var out SuspendedList
	s.Must(t, SuspendedQuery, map[string]any{"agentId": agentID}, &out)
	return out
}

// StartSuspended starts a run of agentID and waits for its RUN_SUSPENDED.
func (s *Server) StartSuspended(t *testing.T, agentID, prompt string) Run {
	t.Helper()
	r := s.StartRun(t, prompt, map[string]any{"agentId": agentID})
	ws := DialWS(t, s.URL, "graphql-transport-ws")
	defer ws.Conn.CloseNow()
	Follow(t, ws, ws.Subscribe(EventsQuery, map[string]any{"runId": r.RunID}), IsType("RUN_SUSPENDED"))
	return r
}

// Finish follows a run to its end and returns it.
func (s *Server) Finish(t *testing.T, runID string) *Run {
	t.Helper()
	ws := DialWS(t, s.URL, "graphql-transport-ws")
	defer ws.Conn.CloseNow()
	Follow(t, ws, ws.Subscribe(EventsQuery, map[string]any{"runId": runID, "after": 0}), nil)
	return s.Run(t, runID)
}
