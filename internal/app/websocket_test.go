package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"interlock/internal/apptest"
)

// openFDs is how many file descriptors this process has open; the server runs in it.
func openFDs(t testing.TB) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(entries)
}

// TestMalformedInitFreesTheConnection: 200 sockets per subprotocol that send a connection_init
// whose payload is not an object and hang up leave no descriptor and no goroutine behind, and
// one that stays to listen is closed with 4400.
func TestMalformedInitFreesTheConnection(t *testing.T) {
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/init.db")
	for _, proto := range protocols { // warm up: the first connections allocate for good
		c := apptest.DialWS(t, s.URL, proto)
		c.Conn.CloseNow()
	}
	http.DefaultClient.CloseIdleConnections()
	fds0, g0 := openFDs(t), runtime.NumGoroutine()

	for _, proto := range protocols {
		for i := 0; i < 200; i++ {
			c := apptest.DialRawWS(t, s.URL, proto)
			payload := []string{`"x"`, `[1]`, `7`, `true`}[i%4]
			c.Send(apptest.WSMessage{Type: "connection_init", Payload: json.RawMessage(payload)})
			c.Conn.CloseNow()
		}
	}
	http.DefaultClient.CloseIdleConnections()
	apptest.Eventually(t, func() bool { return openFDs(t) <= fds0+5 && runtime.NumGoroutine() <= g0+5 }, func() string {
		return fmt.Sprintf("after 400 malformed inits: %d descriptors (were %d), %d goroutines (were %d)", openFDs(t), fds0, runtime.NumGoroutine(), g0)
	})
	for _, proto := range protocols {
		c := apptest.DialRawWS(t, s.URL, proto)
		c.Send(apptest.WSMessage{Type: "connection_init", Payload: json.RawMessage(`"x"`)})
		if code, reason := c.Closed(); code != 4400 || !strings.Contains(reason, "object") {
			t.Fatalf("%s: closed with %d %q, want 4400", proto, code, reason)
		}
	}
	// The server still serves.
	c := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	c.Conn.Close(websocket.StatusNormalClosure, "")
}

// TestInitTimeoutClosesWith4408: a socket that never sends connection_init is closed with 4408,
// over both subprotocols. The timeout is 2 s, so that the socket that does send it (at once,
// but the dial, the upgrade and the send may take a while on a busy machine) is surely in time;
// the sockets wait side by side.
func TestInitTimeoutClosesWith4408(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/timeout.db", "--ws-init-timeout", timeout.String())
	var wg sync.WaitGroup
	for _, proto := range protocols {
		c := apptest.DialRawWS(t, s.URL, proto)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, reason := c.Closed(); code != 4408 || reason != "Connection initialisation timeout" {
				t.Errorf("%s: closed with %d %q, want 4408", proto, code, reason)
			}
		}()
	}
	// One that does send it in time is served past the timeout.
	c := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	time.Sleep(timeout + 200*time.Millisecond)
	wg.Wait()
	var out struct{ Agents []struct{ ID string } }
	id := c.Subscribe(`{ agents { id } }`, nil)
	data, _, errs := c.Next(id)
	if errs != nil || json.Unmarshal(data, &out) != nil || len(out.Agents) == 0 {
		t.Fatalf("query after the init timeout: %s %s", data, errs)
	}
}

// TestDuplicateOperationIDClosesWith4409: subscribing with an id that is active closes the
// socket with 4409, as graphql-transport-ws demands (and for the legacy subprotocol too).
func TestDuplicateOperationIDClosesWith4409(t *testing.T) {
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/dup.db")
	for _, proto := range protocols {
		c := apptest.DialWS(t, s.URL, proto)
		typ := map[string]string{"graphql-transport-ws": "subscribe", "graphql-ws": "start"}[proto]
		payload := json.RawMessage(`{"query": "subscription { suspendedRunsChanged { kind } }"}`)
		c.Send(apptest.WSMessage{ID: "a", Type: typ, Payload: payload})
		c.Send(apptest.WSMessage{ID: "a", Type: typ, Payload: payload})
		if code, reason := c.Closed(); code != 4409 || reason != "Subscriber for a already exists" {
			t.Fatalf("%s: closed with %d %q, want 4409", proto, code, reason)
		}
	}
	apptest.Eventually(t, func() bool { return s.App.ActiveOperations() == 0 }, func() string {
		return fmt.Sprintf("%d operations still counted after the sockets closed", s.App.ActiveOperations())
	})
}

// TestSubscriptionsPerConnectionAreCapped: past the cap, a new operation gets an error message
// for its id and the connection goes on; completing one makes room for another.
func TestSubscriptionsPerConnectionAreCapped(t *testing.T) {
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/cap.db", "--max-subscriptions-per-connection", "3")
	const quiet = `subscription { suspendedRunsChanged { kind } }` // sends nothing until a run suspends
	for _, proto := range protocols {
		c := apptest.DialWS(t, s.URL, proto)
		for i := 0; i < 3; i++ {
			c.Subscribe(quiet, nil) // ids 1, 2, 3
		}
		wantRefused := func(id string) {
			t.Helper()
			m := c.Read()
			if m.ID != id || m.Type != "error" || !strings.Contains(string(m.Payload), "BAD_USER_INPUT") || !strings.Contains(string(m.Payload), "3 active operations") {
				t.Fatalf("%s: got %s %s %s, want an error for operation %s", proto, m.ID, m.Type, m.Payload, id)
			}
		}
		wantRefused(c.Subscribe(quiet, nil)) // 4
		stop := map[string]string{"graphql-transport-ws": "complete", "graphql-ws": "stop"}[proto]
		c.Send(apptest.WSMessage{ID: "2", Type: stop})
		if m := c.Read(); m.ID != "2" || m.Type != "complete" {
			t.Fatalf("%s: after stopping 2 got %s %s", proto, m.ID, m.Type)
		}
		c.Subscribe(quiet, nil)              // 5 takes 2's place: no message
		wantRefused(c.Subscribe(quiet, nil)) // 6 is refused, and is the next message
		// The connection still answers.
		id := c.Subscribe(`{ agents { id } }`, nil)
		wantRefused(id)
		c.Send(apptest.WSMessage{ID: "1", Type: stop})
		if m := c.Read(); m.ID != "1" || m.Type != "complete" {
			t.Fatalf("%s: after stopping 1 got %s %s", proto, m.ID, m.Type)
		}
		id = c.Subscribe(`{ agents { id } }`, nil)
		if data, _, errs := c.Next(id); errs != nil || !strings.Contains(string(data), "support-agent") {
			t.Fatalf("%s: query with room: %s %s", proto, data, errs)
		}
		c.Conn.Close(websocket.StatusNormalClosure, "")
	}
}
