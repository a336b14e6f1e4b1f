package apptest

import (
	"fmt"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin for the offset-less link, whatever the machine has
)

// ApproveAPI approves the run's waiting call over the API (someone else, elsewhere).
func (s *Server) ApproveAPI(t *testing.T, id string) {
	t.Helper()
	var out map[string]any
	s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": id}, &out)
}

// SuspendedMany starts n refund runs, one after the other (so their createdAt differ), each
// waiting on issue_refund; their ids, oldest first.
func (s *Server) SuspendedMany(t *testing.T, n int, tag string) []string {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, s.Suspended(t, fmt.Sprintf("refund order %s%d for 5", tag, i+1)).RunID)
		time.Sleep(5 * time.Millisecond)
	}
	return ids
}
