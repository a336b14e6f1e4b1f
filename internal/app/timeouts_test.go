package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"interlock/internal/app"
	"interlock/internal/apptest"
)

// serveOnPort runs the real app with App.Serve (the server's own timeouts and shutdown) on a
// local port, over a fresh SQLite database, with any further settings as args. stop ends
// Serve as SIGTERM does and returns its error.
func serveOnPort(t *testing.T, args ...string) (s *apptest.Server, stop func() error) {
	t.Helper()
	cfg, err := app.ParseConfig(append([]string{"--auth=off", "--db", "sqlite:" + t.TempDir() + "/serve.db"}, args...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	app, err := app.NewApp(context.Background(), cfg, apptest.DiscardLog())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { stop(); app.Close() })
	return &apptest.Server{URL: "http://" + ln.Addr().String(), App: app}, stop
}

// rawConn opens a TCP connection to s; reads on it give up after 20s.
func rawConn(t *testing.T, s *apptest.Server) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	return conn, bufio.NewReader(conn)
}

// TestIdleKeepAliveConnectionIsClosed: a keep-alive connection with no request is closed by
// the server after --idle-timeout.
func TestIdleKeepAliveConnectionIsClosed(t *testing.T) {
	s, _ := serveOnPort(t, "--idle-timeout", "200ms")
	conn, br := rawConn(t, s)
	fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: interlock\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("status %d, close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection was not closed by the server: %v", err)
	}
}

// TestSlowRequestIsCutByReadTimeout: a client that never finishes sending its body does not
// hold a connection past --read-timeout.
func TestSlowRequestIsCutByReadTimeout(t *testing.T) {
	s, _ := serveOnPort(t, "--read-timeout", "300ms")
	conn, br := rawConn(t, s)
	fmt.Fprint(conn, "POST /graphql HTTP/1.1\r\nHost: interlock\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":")
	resp, err := http.ReadResponse(br, nil)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "could not be read") {
			t.Fatalf("status %d %s, want 400", resp.StatusCode, body)
		}
		_, err = br.ReadByte()
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("the server still holds the slow request: %v", err)
	}
}

// TestSubscriptionsOutliveReadAndWriteTimeouts: with both timeouts far shorter than a
// subscription, WebSocket (both subprotocols) and SSE subscribers still get every event.
func TestSubscriptionsOutliveReadAndWriteTimeouts(t *testing.T) {
	s, _ := serveOnPort(t, "--read-timeout", "300ms", "--write-timeout", "300ms")
	run := s.StartRun(t, "refund order 5 for 6", nil)
	type sub struct {
		c  *apptest.WSClient
		op string
	}
	var subs []sub
	for _, proto := range protocols {
		c := apptest.DialWS(t, s.URL, proto)
		op := c.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
		apptest.Follow(t, c, op, apptest.IsType("RUN_SUSPENDED"))
		subs = append(subs, sub{c, op})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := sse(t, ctx, s, apptest.EventsQuery, map[string]any{"runId": run.RunID}, func(d json.RawMessage) bool {
		if strings.Contains(string(d), `"RUN_SUSPENDED"`) {
			time.Sleep(time.Second) // outlive both timeouts, then make events happen
			var out struct{ ApproveToolCall apptest.Run }
			s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, &out)
		}
		return false
	})
	if len(got) == 0 || !strings.Contains(string(got[len(got)-1]), `"RUN_FINISHED"`) {
		t.Fatalf("SSE: %d events, want the stream to RUN_FINISHED", len(got))
	}
	for _, sb := range subs {
		evs := apptest.Follow(t, sb.c, sb.op, nil)
		if len(evs) == 0 || evs[len(evs)-1].Type != "RUN_FINISHED" {
			t.Fatalf("%s: %d events after the timeouts, want them to RUN_FINISHED", sb.c.Protocol, len(evs))
		}
	}
}

// TestShutdownCompletesSubscriptions: on shutdown every WebSocket subscription gets its complete
// message before its socket closes, over both subprotocols and many at once.
func TestShutdownCompletesSubscriptions(t *testing.T) {
	s, stop := serveOnPort(t)
	run := s.StartRun(t, "refund order 9", nil)
	const perConn = 10
	var conns []*apptest.WSClient
	for _, proto := range protocols {
		for i := 0; i < 3; i++ {
			c := apptest.DialWS(t, s.URL, proto)
			for j := 0; j < perConn; j++ {
				c.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
			}
			suspended := map[string]bool{}
			for len(suspended) < perConn { // every subscription is streaming
				m := c.Read()
				if strings.Contains(string(m.Payload), `"RUN_SUSPENDED"`) {
					suspended[m.ID] = true
				}
			}
			conns = append(conns, c)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- stop() }()
	for _, c := range conns {
		completed := map[string]bool{}
		for len(completed) < perConn {
			if m := c.Read(); m.Type == "complete" {
				completed[m.ID] = true
			} else {
				t.Fatalf("%s: %s %s before every complete", c.Protocol, m.Type, m.Payload)
			}
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
