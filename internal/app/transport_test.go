package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"interlock/internal/apptest"
)

// sse runs a subscription over Server-Sent Events and returns the data of each "next" event
// until the stream completes (or stop says to hang up); an event with errors ends it, its errors
// last.
func sse(t *testing.T, ctx context.Context, s *apptest.Server, query string, vars map[string]any, stop func(json.RawMessage) bool) []json.RawMessage {
	t.Helper()
	resp := s.SubscribeSSE(t, ctx, "", query, vars)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var out []json.RawMessage
	events := apptest.NewSSEReader(resp.Body)
	for {
		ev, ok := events.Next()
		if !ok || ev.Name == "complete" {
			return out
		}
		if ev.Name != "next" {
			continue
		}
		data, errs := ev.Result()
		if len(errs) > 0 {
			return append(out, errs)
		}
		out = append(out, data)
		if stop != nil && stop(data) {
			return out
		}
	}
}

func TestRunEventsOverSSE(t *testing.T) {
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/sse.db")
	run := s.StartRun(t, "refund order 3 for 4", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := sse(t, ctx, s, apptest.EventsQuery, map[string]any{"runId": run.RunID}, func(d json.RawMessage) bool {
		return strings.Contains(string(d), `"RUN_SUSPENDED"`)
	})
	var out struct{ ApproveToolCall apptest.Run }
	s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, &out)
	rest := sse(t, ctx, s, apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": len(got)}, nil)
	if len(rest) == 0 || !strings.Contains(string(rest[len(rest)-1]), `"RUN_FINISHED"`) {
		t.Fatalf("SSE stream after approval: %d events, last %s", len(rest), rest[len(rest)-1])
	}
	// An unknown run is NOT_FOUND over SSE too, and the server keeps serving.
	errs := sse(t, ctx, s, apptest.EventsQuery, map[string]any{"runId": "nope"}, nil)
	if len(errs) != 1 || !strings.Contains(string(errs[0]), "NOT_FOUND") {
		t.Fatalf("unknown run over SSE: %s", errs)
	}
	if r := s.Run(t, run.RunID); r.Status != "COMPLETED" {
		t.Fatalf("run is %s", r.Status)
	}
}

// TestGoneSubscribersReleaseEverything: clients that vanish mid-stream, over WebSocket (both
// subprotocols) and SSE, leave no goroutine behind.
func TestGoneSubscribersReleaseEverything(t *testing.T) {
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/leak.db")
	run := s.StartRun(t, "refund order 8", nil)
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID}), apptest.IsType("RUN_SUSPENDED"))
	ws.Conn.CloseNow()
	time.Sleep(100 * time.Millisecond)
	http.DefaultClient.CloseIdleConnections()
	ignore := goleak.IgnoreCurrent()

	for i := 0; i < 5; i++ {
		for _, proto := range protocols {
			c := apptest.DialWS(t, s.URL, proto)
			c.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID}) // waits: the run is suspended
			c.Subscribe(`subscription { suspendedRunsChanged { kind } }`, nil)
			c.Read()
			c.Conn.CloseNow()
		}
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		sse(t, ctx, s, apptest.EventsQuery, map[string]any{"runId": run.RunID}, func(json.RawMessage) bool { n++; return n == 2 })
		cancel()
	}
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
	if n := s.App.Service.Followers(run.RunID); n != 0 {
		t.Fatalf("%d followers still registered", n)
	}
}
