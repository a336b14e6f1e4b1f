package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// unavailableServer is the app on a fresh MariaDB database reached through a proxy, with its log;
// args are further settings.
func unavailableServer(t *testing.T, args ...string) (*apptest.Server, *dbtest.Proxy, *apptest.SyncBuffer, string) {
	t.Helper()
	dsn := dbtest.MySQLDSN(t)
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := dbtest.NewProxy(t, cfg.Addr)
	cfg.Addr = p.Addr()
	c, err := app.ParseConfig(append([]string{"--auth=off", "--db", dbtest.MySQLURL(cfg.FormatDSN())}, args...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	logs := &apptest.SyncBuffer{}
	app, err := app.NewApp(context.Background(), c, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); app.Close() })
	return &apptest.Server{URL: srv.URL, App: app, CloseHTTP: srv.Close}, p, logs, dsn
}

// streamItem is one result of a runEvents subscription: an event's seq, an error's code, or
// the end of the stream.
type streamItem struct {
	seq  int64
	code string
	done bool
}

// eventStream is a runEvents subscription over one transport.
type eventStream interface{ next(t *testing.T) streamItem }

const followQuery = `subscription($id: ID!, $after: Int) { runEvents(runId: $id, after: $after) { seq type } }`

func decodeItem(t *testing.T, data, errs json.RawMessage) streamItem {
	t.Helper()
	if len(errs) > 0 && string(errs) != "null" {
		code, _ := apptest.FirstError(errs)
		if code == "" { // graphql-ws sends one error object, not a list
			var e apptest.Error
			json.Unmarshal(errs, &e)
			code, _ = e.Extensions["code"].(string)
		}
		return streamItem{code: code}
	}
	var d struct{ RunEvents struct{ Seq int64 } }
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("bad result %s", data)
	}
	return streamItem{seq: d.RunEvents.Seq}
}

type sseStream struct{ events *apptest.SSEReader }

func openSSE(t *testing.T, s *apptest.Server, vars map[string]any) *sseStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	resp := s.SubscribeSSE(t, ctx, "", followQuery, vars)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return &sseStream{events: apptest.NewSSEReader(resp.Body)}
}

func (s *sseStream) next(t *testing.T) streamItem {
	t.Helper()
	for {
		ev, ok := s.events.Next()
		if !ok || ev.Name == "complete" {
			return streamItem{done: true} // the stream closed, or completed
		}
		if ev.Name == "next" {
			data, errs := ev.Result()
			return decodeItem(t, data, errs)
		}
	}
}

type wsStream struct {
	c  *apptest.WSClient
	id string
}

func openWS(t *testing.T, s *apptest.Server, protocol string, vars map[string]any) *wsStream {
	t.Helper()
	c := apptest.DialWS(t, s.URL, protocol)
	return &wsStream{c: c, id: c.Subscribe(followQuery, vars)}
}

func (w *wsStream) next(t *testing.T) streamItem {
	t.Helper()
	data, done, errs := w.c.Next(w.id)
	if done {
		return streamItem{done: true}
	}
	return decodeItem(t, data, errs)
}

// openEach opens a runEvents subscription over SSE and both WebSocket subprotocols.
func openEach(t *testing.T, s *apptest.Server, vars map[string]any) map[string]eventStream {
	return map[string]eventStream{
		"sse":                  openSSE(t, s, vars),
		"graphql-transport-ws": openWS(t, s, "graphql-transport-ws", vars),
		"graphql-ws":           openWS(t, s, "graphql-ws", vars),
	}
}

// readUntil reads a stream's events up to seq, failing on anything else.
func readUntil(t *testing.T, name string, st eventStream, seq int64) {
	t.Helper()
	for {
		it := st.next(t)
		if it.done || it.code != "" {
			t.Fatalf("%s: %+v before seq %d", name, it, seq)
		}
		if it.seq >= seq {
			return
		}
	}
}

// TestUnavailableDuringOutage cuts the way to MariaDB under a running server: every operation
// answers extensions.code UNAVAILABLE (HTTP 503 with Retry-After over POST), run(runId) is an
// error rather than "no such run", a subscription opened during the outage is refused with
// UNAVAILABLE on every transport, the log holds a few lines per loop rather than one per poll,
// and after the outage everything works again.
func TestUnavailableDuringOutage(t *testing.T) {
	t.Parallel()
	s, proxy, logs, _ := unavailableServer(t)
	run := s.SuspendAs(t, "", "refund order 42", nil)

	proxy.Cut(true)
	outageStart := time.Now()
	body, _ := json.Marshal(map[string]any{"query": `query($id: ID!) { run(runId: $id) { id status } }`, "variables": map[string]any{"id": run.ID}})
	resp, err := http.Post(s.URL+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("run during the outage: status %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	got := apptest.DecodeGQL(t, resp)
	if got.Code() != "UNAVAILABLE" {
		t.Fatalf("run during the outage: %s %+v, want an UNAVAILABLE error (not null: that says no such run)", got.Data, got.Errors)
	}
	if string(got.Data) != `{"run":null}` {
		t.Errorf("run during the outage: data %s; want {\"run\":null} beside the error, as GraphQL answers a field that failed", got.Data)
	}
	if ra, _ := got.Errors[0].Extensions["retryAfter"].(float64); ra < 1 {
		t.Errorf("UNAVAILABLE without extensions.retryAfter: %+v", got.Errors[0])
	}
	if strings.Contains(got.Errors[0].Message, "tcp") || strings.Contains(got.Errors[0].Message, "invalid connection") {
		t.Errorf("driver text reaches the client: %q", got.Errors[0].Message)
	}
	start := s.PostAs(t, "", `mutation { startRun(input: {agentId: "support-agent", prompt: "hi"}) { id } }`, nil)
	if start.Status != http.StatusServiceUnavailable || start.Code != "UNAVAILABLE" {
		t.Errorf("startRun during the outage: status %d code %s, want 503 UNAVAILABLE", start.Status, start.Code)
	}
	for name, st := range openEach(t, s, map[string]any{"id": run.ID}) {
		if it := st.next(t); it.code != "UNAVAILABLE" {
			t.Errorf("%s: runEvents opened during the outage gave %+v, want an UNAVAILABLE error", name, it)
		}
	}

	// A multi-second outage: the poll every 50ms and the loops every second all fail.
	time.Sleep(3*time.Second - time.Since(outageStart))
	proxy.Restore()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := s.PostAs(t, "", `query($id: ID!) { run(runId: $id) { id status } }`, map[string]any{"id": run.ID})
		if r.Code == "" && r.Status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still failing after the outage: %+v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // every loop has run once more, and said it works again

	// After the outage a subscription with after: gets what follows.
	for name, st := range openEach(t, s, map[string]any{"id": run.ID, "after": run.LastEventSeq - 1}) {
		if it := st.next(t); it.seq != int64(run.LastEventSeq) {
			t.Errorf("%s: after the outage, runEvents after %d gave %+v", name, run.LastEventSeq-1, it)
		}
	}

	var warn, poll, again int
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") {
			warn++
		}
		if strings.Contains(line, "notify: poll") {
			poll++
		}
		if strings.Contains(line, "working again") {
			again++
		}
	}
	t.Logf("log during a 3s outage: %d warnings, %d notify-poll lines, %d recoveries", warn, poll, again)
	if poll > 3 || warn > 15 || again == 0 {
		t.Errorf("log of a 3s outage: %d warnings, %d notify-poll lines, %d 'working again'; want a state change per loop, not a line per poll:\n%s",
			warn, poll, again, logs.String())
	}
}

// TestRunEventsBreaksWithUnavailable makes a read of run_events fail mid-stream (the table is
// locked by another session past the server's lock wait timeout) after the notify poll saw a
// new event: every transport's subscriber gets an UNAVAILABLE error instead of a bare complete
// (which says the run has ended), and resubscribing with after: its last seq gets exactly the
// event it missed.
func TestRunEventsBreaksWithUnavailable(t *testing.T) {
	t.Parallel()
	dsn := dbtest.MySQLDSN(t)
	s := apptest.Start(t, dbtest.MySQLURL(dsn)+"?lock_wait_timeout=1")
	run := s.SuspendAs(t, "", "refund order 42", nil)
	last := int64(run.LastEventSeq)
	streams := openEach(t, s, map[string]any{"id": run.ID})
	for name, st := range streams {
		readUntil(t, name, st, last)
	}

	// An event stored meanwhile (by the session holding the lock), which the poll notices.
	unlock := apptest.LockRunEvents(t, dsn, run.ID, last+1, `{"delta":"x"}`)
	for name, st := range streams {
		if it := st.next(t); it.code != "UNAVAILABLE" {
			t.Errorf("%s: a failed read gave %+v, want an UNAVAILABLE error (a bare complete says the run ended)", name, it)
		}
	}
	unlock()
	for name, st := range openEach(t, s, map[string]any{"id": run.ID, "after": last}) {
		if it := st.next(t); it.seq != last+1 {
			t.Errorf("%s: resubscribed after %d, got %+v, want the missed event %d", name, last, it, last+1)
		}
	}
}
