package apptest

import (
	"testing"
)

// DecisionsAs reads a run's decisions with the token.
func (s *Server) DecisionsAs(t *testing.T, token, runID string) []map[string]any {
	t.Helper()
	var out struct {
		Run struct{ Decisions []map[string]any }
	}
	s.MustAs(t, token, `query($id: ID!) { run(runId: $id) { decisions { kind decidedBy decidedAt } } }`, map[string]any{"id": runID}, &out)
	return out.Run.Decisions
}

// RunAs reads a run's status with the token.
func (s *Server) RunAs(t *testing.T, token, runID string) string {
	t.Helper()
	var out struct{ Run struct{ Status string } }
	s.MustAs(t, token, `query($id: ID!) { run(runId: $id) { status } }`, map[string]any{"id": runID}, &out)
	return out.Run.Status
}
