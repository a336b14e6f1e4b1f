package apptest

import (
	"testing"
	"time"
)

// Eventually waits until cond holds, looking every 20 ms; when it still does not hold after
// 30 s (a bound for failures, not a timing the test relies on) the test fails with describe's
// words.
func Eventually(t testing.TB, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(describe())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Until is Eventually for a condition described once: "what" did not happen within 30 s.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Eventually(t, cond, func() string { return what + ": not within 30s" })
}

// WaitWatchers waits until the server serves n suspendedRunsChanged streams, so a test can
// change runs knowing its subscription is active. A server in another process is asked through
// its metrics: n GraphQL subscriptions open over WebSockets.
func (s *Server) WaitWatchers(t testing.TB, n int) {
	t.Helper()
	if s.App == nil {
		Until(t, "subscriptions open", func() bool {
			return s.Scrape(t).Value(t, "interlock_graphql_subscriptions_open", "transport=websocket") >= float64(n)
		})
		return
	}
	Until(t, "suspendedRunsChanged subscriptions active", func() bool { return s.App.Service.Watchers() >= n })
}
