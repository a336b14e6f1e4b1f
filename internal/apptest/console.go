package apptest

import (
	"testing"
)

// Suspended starts a run and waits until it is suspended.
func (s *Server) Suspended(t *testing.T, prompt string) Run {
	t.Helper()
	r := s.StartRun(t, prompt, nil)
	ws := DialWS(t, s.URL, "graphql-transport-ws")
	defer ws.Conn.CloseNow()
	Follow(t, ws, ws.Subscribe(EventsQuery, map[string]any{"runId": r.RunID}), IsType("RUN_SUSPENDED"))
	return r
}

// Decisions reads the decisions recorded on a run.
func (s *Server) Decisions(t *testing.T, runID string) []map[string]any {
	t.Helper()
	var out struct {
		Run struct{ Decisions []map[string]any }
	}
	s.Must(t, `query($id: ID!) { run(runId: $id) { decisions { kind reason resumeData } } }`, map[string]any{"id": runID}, &out)
	return out.Run.Decisions
}
