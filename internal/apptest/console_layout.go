package apptest

import (
	_ "embed"
	"testing"
	"time"
)

// DecideAs takes a decision on a suspended run with the token, and waits until the run is
// finished.
func (s *Server) DecideAs(t *testing.T, token, mutation string, vars map[string]any) {
	t.Helper()
	s.MustAs(t, token, mutation, vars, nil)
	deadline := time.Now().Add(20 * time.Second)
	for st := s.RunAs(t, token, vars["id"].(string)); st != "COMPLETED" && st != "FAILED"; st = s.RunAs(t, token, vars["id"].(string)) {
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s", vars["id"], st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
