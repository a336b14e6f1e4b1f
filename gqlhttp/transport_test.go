package gqlhttp_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/testserver"

	"interlock/gqlhttp"
)

// serve runs gqlgen's test server (a schema with a subscription whose events the test sends)
// with the transport over real HTTP.
func serve(t *testing.T, opts gqlhttp.Options) (*testserver.TestServer, string) {
	t.Helper()
	ts := testserver.New()
	ts.AddTransport(gqlhttp.New(opts))
	srv := httptest.NewServer(ts)
	t.Cleanup(srv.Close)
	return ts, srv.URL
}

// TestHeartbeatOnIdleStreams: an event stream that has nothing to say sends a comment line
// every Heartbeat, so that proxies do not cut an idle subscription; the first comes after one
// Heartbeat of silence, not before.
func TestHeartbeatOnIdleStreams(t *testing.T) {
	t.Parallel()
	_, url := serve(t, gqlhttp.Options{Heartbeat: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"query":"subscription { name }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	comments := 0
	for comments < 4 && sc.Scan() {
		switch line := sc.Text(); {
		case line == ":":
			comments++
		case line != "":
			t.Fatalf("an idle stream sent %q", line)
		}
	}
	// The first comment opens the stream; three heartbeats follow, each after 50ms of silence.
	if comments != 4 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("%d comments in %s", comments, time.Since(start))
	}
}

// TestReservationTimeout: a single connection reservation that no stream connects to ends after
// ReservationTimeout, giving back its slot (StreamFunc's release) and forgetting its token.
func TestReservationTimeout(t *testing.T) {
	t.Parallel()
	var held atomic.Int32
	released := make(chan struct{})
	_, url := serve(t, gqlhttp.Options{
		ReservationTimeout: 50 * time.Millisecond,
		StreamFunc: func(context.Context) (func(), error) {
			if held.Add(1) > 1 {
				held.Add(-1)
				return nil, &gqlhttp.Refusal{Status: http.StatusTooManyRequests, Code: "TOO_MANY_CONNECTIONS", Message: "one at a time"}
			}
			return func() { held.Add(-1); close(released) }, nil
		},
	})
	put := func() (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPut, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := new(strings.Builder)
		bufio.NewReader(resp.Body).WriteTo(b)
		return resp, b.String()
	}
	resp, token := put()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d %s", resp.StatusCode, token)
	}
	if resp, body := put(); resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "TOO_MANY_CONNECTIONS") {
		t.Fatalf("a second PUT while the first holds the slot: %d %s", resp.StatusCode, body)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the unconnected reservation never gave its slot back")
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(gqlhttp.TokenHeader, token)
	got, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got.Body.Close()
	if got.StatusCode != http.StatusNotFound {
		t.Fatalf("connecting an expired reservation: %d", got.StatusCode)
	}
}
