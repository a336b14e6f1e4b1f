package apptest

import (
	"testing"
)

// StoredRuns is how many runs the server holds, whatever their status.
func (s *Server) StoredRuns(t *testing.T) int {
	t.Helper()
	var out struct{ RecentRuns struct{ Total int } }
	s.Must(t, `{ recentRuns(statuses: [RUNNING, SUSPENDED, COMPLETED, FAILED]) { total } }`, nil, &out)
	return out.RecentRuns.Total
}
