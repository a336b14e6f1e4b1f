package app_test

import (
	"bufio"
	"bytes"
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
// until the stream completes (or stop says to hang up).
func sse(t *testing.T, ctx context.Context, url, query string, vars map[string]any, stop func(json.RawMessage) bool) []json.RawMessage {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	var out []json.RawMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
			if event == "complete" {
				return out
			}
		case strings.HasPrefix(line, "data: ") && event == "next":
			var r struct {
				Data   json.RawMessage
				Errors json.RawMessage
			}
			json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &r)
			if len(r.Errors) > 0 {
				out = append(out, r.Errors)
				return out
			}
			out = append(out, r.Data)
			if stop != nil && stop(r.Data) {
				return out
			}
		}
	}
	return out
}

func TestRunEventsOverSSE(t *testing.T) {
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/sse.db")
	run := s.StartRun(t, "refund order 3 for 4", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := sse(t, ctx, s.URL, apptest.EventsQuery, map[string]any{"runId": run.RunID}, func(d json.RawMessage) bool {
		return strings.Contains(string(d), `"RUN_SUSPENDED"`)
	})
	var out struct{ ApproveToolCall apptest.Run }
	s.Must(t, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, &out)
	rest := sse(t, ctx, s.URL, apptest.EventsQuery, map[string]any{"runId": run.RunID, "after": len(got)}, nil)
	if len(rest) == 0 || !strings.Contains(string(rest[len(rest)-1]), `"RUN_FINISHED"`) {
		t.Fatalf("SSE stream after approval: %d events, last %s", len(rest), rest[len(rest)-1])
	}
	// An unknown run is NOT_FOUND over SSE too, and the server keeps serving.
	errs := sse(t, ctx, s.URL, apptest.EventsQuery, map[string]any{"runId": "nope"}, nil)
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
		sse(t, ctx, s.URL, apptest.EventsQuery, map[string]any{"runId": run.RunID}, func(json.RawMessage) bool { n++; return n == 2 })
		cancel()
	}
	http.DefaultClient.CloseIdleConnections()
	goleak.VerifyNone(t, ignore)
	if n := s.App.Service.Followers(run.RunID); n != 0 {
		t.Fatalf("%d followers still registered", n)
	}
}
