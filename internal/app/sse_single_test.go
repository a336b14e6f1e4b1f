package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"interlock/gqlhttp"
	"interlock/internal/apptest"
)

// sseReader reads an event stream as its events come; comment lines (the heartbeat) are
// skipped.
type sseReader struct {
	resp   *http.Response
	events chan apptest.SSEEvent
	ended  chan struct{} // closed when the server ends the stream
	cancel func()
}

// openSSEReader sends req and, when it is answered 200 as text/event-stream, reads its events
// in the background; otherwise it returns the exchange that refused it.
func openSSEReader(t *testing.T, req *http.Request) (*sseReader, *exchange) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		cancel()
		return nil, &exchange{status: resp.StatusCode, header: resp.Header, body: b.String()}
	}
	es := &sseReader{resp: resp, events: make(chan apptest.SSEEvent, 100), ended: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(es.ended)
		defer resp.Body.Close()
		events := apptest.NewSSEReader(resp.Body)
		for {
			ev, ok := events.Next()
			if !ok {
				return
			}
			es.events <- ev
		}
	}()
	return es, nil
}

// next returns the stream's next event; the test fails when none comes within 20 s.
func (es *sseReader) next(t *testing.T) apptest.SSEEvent {
	t.Helper()
	select {
	case ev := <-es.events:
		return ev
	case <-es.ended:
		select { // the events read before the end come first
		case ev := <-es.events:
			return ev
		default:
			t.Fatal("the event stream ended")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20s")
	}
	return apptest.SSEEvent{}
}

// singleEvent is the data of an event of a single connection stream.
type singleEvent struct {
	ID      string `json:"id"`
	Payload struct {
		Data   json.RawMessage `json:"data"`
		Errors []apptest.Error `json:"errors"`
	} `json:"payload"`
}

func single(t *testing.T, ev apptest.SSEEvent) singleEvent {
	t.Helper()
	var se singleEvent
	if err := json.Unmarshal(ev.Data, &se); err != nil {
		t.Fatalf("%s event data %s: %v", ev.Name, ev.Data, err)
	}
	return se
}

// reserveStream makes a single connection reservation (PUT) as token's principal.
func reserveStream(t *testing.T, s *apptest.Server, token string) exchange {
	t.Helper()
	return doGraphQL(t, s, http.MethodPut, "", "", map[string]string{"Authorization": "Bearer " + token})
}

// connectSingle connects the stream of the reservation streamToken as token's principal.
func connectSingle(t *testing.T, s *apptest.Server, token, streamToken string) (*sseReader, *exchange) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/graphql", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(gqlhttp.TokenHeader, streamToken)
	return openSSEReader(t, req)
}

// postOnStream POSTs an operation with id opID to the stream of streamToken as token's principal.
func postOnStream(t *testing.T, s *apptest.Server, token, streamToken, opID, query string, vars map[string]any, accept string) exchange {
	t.Helper()
	req := map[string]any{"query": query, "variables": vars}
	if opID != "" {
		req["extensions"] = map[string]any{"operationId": opID}
	}
	return postAccept(t, s, accept, req, "Authorization", "Bearer "+token, gqlhttp.TokenHeader, streamToken)
}

// stopOnStream DELETEs operation opID of the stream of streamToken as token's principal.
func stopOnStream(t *testing.T, s *apptest.Server, token, streamToken, opID string) exchange {
	t.Helper()
	return doGraphQL(t, s, http.MethodDelete, "operationId="+url.QueryEscape(opID), "", map[string]string{
		"Authorization": "Bearer " + token, gqlhttp.TokenHeader: streamToken})
}

// TestSSESingleConnection: graphql-sse's single connection mode over real HTTP, with
// authentication on, over SQLite and MySQL. PUT reserves a stream (201, its token as
// text/plain); GET with the token connects it; operations POSTed with the token are accepted
// (202) and stream back as events carrying their ids, ending with complete; DELETE stops one
// (its subscription is released); a request error is answered on the POST as any GraphQL
// request; a reservation is its owner's alone (404 to anyone else); a second connection is 409;
// when the stream closes its operations end and its token is forgotten.
func TestSSESingleConnection(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		alice, bob := apptest.TokenOf("alice"), apptest.TokenOf("bob")
		put := reserveStream(t, s, alice)
		tok := strings.TrimSpace(put.body)
		if put.status != http.StatusCreated || put.contentType() != "text/plain" || len(tok) < 20 {
			t.Fatalf("PUT: %d %q %q", put.status, put.contentType(), put.body)
		}
		// Before the stream connects, bob can do nothing with alice's token.
		if _, refused := connectSingle(t, s, bob, tok); refused == nil || refused.status != http.StatusNotFound || refused.gql(t).Code() != "NOT_FOUND" {
			t.Fatalf("bob connects alice's reservation: %+v", refused)
		}
		st, refused := connectSingle(t, s, alice, tok)
		if refused != nil {
			t.Fatalf("alice connects her reservation: %d %s", refused.status, refused.body)
		}
		if _, again := connectSingle(t, s, alice, tok); again == nil || again.status != http.StatusConflict || again.gql(t).Code() != "CONFLICT" {
			t.Fatalf("a second connection: %+v", again)
		}

		// A query: accepted, then its result and complete on the stream.
		if got := postOnStream(t, s, alice, tok, "q1", `{ agents { id } }`, nil, ""); got.status != http.StatusAccepted || got.body != "" {
			t.Fatalf("POST q1: %d %s", got.status, got.body)
		}
		if ev := st.next(t); ev.Name != "next" || single(t, ev).ID != "q1" || !strings.Contains(string(single(t, ev).Payload.Data), "support-agent") {
			t.Fatalf("q1's result: %s %s", ev.Name, ev.Data)
		}
		if ev := st.next(t); ev.Name != "complete" || single(t, ev).ID != "q1" {
			t.Fatalf("q1's end: %s %s", ev.Name, ev.Data)
		}

		// A subscription: its events, then DELETE releases it.
		run := s.SuspendAs(t, alice, "refund order 7 for 5", nil)
		if got := postOnStream(t, s, alice, tok, "f", apptest.EventsQuery, map[string]any{"runId": run.ID}, ""); got.status != http.StatusAccepted {
			t.Fatalf("POST f: %d %s", got.status, got.body)
		}
		for {
			ev := st.next(t)
			se := single(t, ev)
			if ev.Name != "next" || se.ID != "f" || len(se.Payload.Errors) > 0 {
				t.Fatalf("f's events: %s %s", ev.Name, ev.Data)
			}
			if strings.Contains(string(se.Payload.Data), `"RUN_SUSPENDED"`) {
				break
			}
		}
		apptest.Until(t, "f follows the run", func() bool { return s.App.Service.Followers(run.ID) == 1 })
		for _, other := range []exchange{
			postOnStream(t, s, bob, tok, "b", `{ agents { id } }`, nil, ""),
			stopOnStream(t, s, bob, tok, "f"),
			postOnStream(t, s, alice, "no-such-token", "x", `{ agents { id } }`, nil, ""),
		} {
			if other.status != http.StatusNotFound || other.gql(t).Code() != "NOT_FOUND" {
				t.Fatalf("another client's or an unknown token: %d %s", other.status, other.body)
			}
		}
		if got := stopOnStream(t, s, alice, tok, "f"); got.status != http.StatusOK {
			t.Fatalf("DELETE f: %d %s", got.status, got.body)
		}
		apptest.Until(t, "DELETE releases f's subscription", func() bool { return s.App.Service.Followers(run.ID) == 0 })

		// Refusals on the POST itself, before anything streams.
		if got := postOnStream(t, s, alice, tok, "", `{ agents { id } }`, nil, ""); got.status != http.StatusBadRequest || !strings.Contains(got.body, "operationId") {
			t.Fatalf("no operation id: %d %s", got.status, got.body)
		}
		if got := postOnStream(t, s, alice, tok, "bad", `{ nope }`, nil, ""); got.status != http.StatusOK || got.contentType() != "application/json" ||
			got.gql(t).Code() != "GRAPHQL_VALIDATION_FAILED" || got.hasDataKey(t) {
			t.Fatalf("a request error as application/json: %d %s", got.status, got.body)
		}
		if got := postOnStream(t, s, alice, tok, "bad", `{ nope }`, nil, acceptApollo4); got.status != http.StatusBadRequest || got.gql(t).Code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Fatalf("a request error as application/graphql-response+json: %d %s", got.status, got.body)
		}
		if got := postOnStream(t, s, alice, tok, "w", `subscription { suspendedRunsChanged { kind } }`, nil, ""); got.status != http.StatusAccepted {
			t.Fatalf("POST w: %d %s", got.status, got.body)
		}
		if got := postOnStream(t, s, alice, tok, "w", `{ agents { id } }`, nil, ""); got.status != http.StatusConflict || got.gql(t).Code() != "CONFLICT" {
			t.Fatalf("an operation id in use: %d %s", got.status, got.body)
		}

		// The stream closes: its operations end, its token is forgotten.
		if got := postOnStream(t, s, alice, tok, "f2", apptest.EventsQuery, map[string]any{"runId": run.ID}, ""); got.status != http.StatusAccepted {
			t.Fatalf("POST f2: %d %s", got.status, got.body)
		}
		apptest.Until(t, "f2 follows the run", func() bool { return s.App.Service.Followers(run.ID) == 1 })
		st.cancel()
		apptest.Until(t, "the closed stream's subscriptions end", func() bool { return s.App.Service.Followers(run.ID) == 0 })
		apptest.Until(t, "the closed stream's token is forgotten", func() bool {
			return postOnStream(t, s, alice, tok, "late", `{ agents { id } }`, nil, "").status == http.StatusNotFound
		})
	})
}

// TestSSEStreamsCountAgainstTheConnectionCap: a single connection reservation holds one of its
// principal's connection slots, as a distinct stream or a WebSocket does, from the PUT until its
// stream ends: over --max-connections-per-principal the next reservation or stream is 429
// TOO_MANY_CONNECTIONS with Retry-After; another principal is not affected; the slot is back
// once the stream is closed.
func TestSSEStreamsCountAgainstTheConnectionCap(t *testing.T) {
	t.Parallel()
	s := apptest.AuthServerWith(t, "sqlite:"+t.TempDir()+"/cap.db", "", "--max-connections-per-principal", "1")
	alice := apptest.TokenOf("alice")
	first := reserveStream(t, s, alice)
	if first.status != http.StatusCreated {
		t.Fatalf("the first reservation: %d %s", first.status, first.body)
	}
	second := reserveStream(t, s, alice)
	if second.status != http.StatusTooManyRequests || second.header.Get("Retry-After") == "" || second.gql(t).Code() != "TOO_MANY_CONNECTIONS" || second.hasDataKey(t) {
		t.Fatalf("a second reservation over the cap: %d Retry-After %q %s", second.status, second.header.Get("Retry-After"), second.body)
	}
	resp, body, _ := openStream(t, s.URL, nil, alice)
	wantStreamRefused(t, resp, body, "alice")
	if other := reserveStream(t, s, apptest.TokenOf("bob")); other.status != http.StatusCreated {
		t.Fatalf("bob's reservation: %d %s", other.status, other.body)
	}
	st, refused := connectSingle(t, s, alice, strings.TrimSpace(first.body))
	if refused != nil {
		t.Fatalf("connecting: %d %s", refused.status, refused.body)
	}
	st.cancel()
	apptest.Until(t, "the closed stream gives its slot back", func() bool { return reserveStream(t, s, alice).status == http.StatusCreated })
}

// TestSSESingleConnectionEndsWithItsToken: a single connection stream lasts no longer than the
// credentials that connected it, as a WebSocket is closed with 4401 then: the server ends the
// stream at the token's expiry.
func TestSSESingleConnectionEndsWithItsToken(t *testing.T) {
	t.Parallel()
	const secret = jwtSecret
	file := apptest.WriteConfig(t, "auth:\n  jwt: {hs256SecretEnv: INTERLOCK_TEST_JWT, issuer: https://idp.test/, audience: interlock}\n")
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/jwt.db", "--auth=on", "--config", file)
	// exp 25 s ago is inside the 30 s leeway: the token is good for 4 to 5 more seconds (exp is
	// in whole seconds), time enough on a busy machine to reserve and connect the stream.
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "https://idp.test/", "aud": "interlock", "sub": "ada", "roles": "admin",
		"exp": time.Now().Add(-25 * time.Second).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	put := reserveStream(t, s, tok)
	if put.status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", put.status, put.body)
	}
	st, refused := connectSingle(t, s, tok, strings.TrimSpace(put.body))
	if refused != nil {
		t.Fatalf("connect: %d %s", refused.status, refused.body)
	}
	select {
	case <-st.ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream of an expired token went on")
	}
}

// TestRequestErrorOverDistinctSSE: over a distinct connection stream, an error found before
// execution is an event of the accepted stream, as graphql-sse says (an EventSource shows no
// body of a refused request), with no data; only a refused method is HTTP's own 405.
func TestRequestErrorOverDistinctSSE(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/distinct.db")
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/graphql", strings.NewReader(`{"query":"{ nope }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	st, refused := openSSEReader(t, req)
	if refused != nil {
		t.Fatalf("refused: %d %s", refused.status, refused.body)
	}
	ev := st.next(t)
	var r map[string]json.RawMessage
	json.Unmarshal(ev.Data, &r)
	if _, hasData := r["data"]; ev.Name != "next" || hasData || !strings.Contains(string(r["errors"]), "GRAPHQL_VALIDATION_FAILED") {
		t.Fatalf("the error event: %s %s", ev.Name, ev.Data)
	}
	if ev := st.next(t); ev.Name != "complete" {
		t.Fatalf("after the error: %s %s", ev.Name, ev.Data)
	}
	get := doGraphQL(t, s, http.MethodGet, "query="+url.QueryEscape(`mutation { declineToolCall(runId: "x") { status } }`), "", map[string]string{"Accept": "text/event-stream"})
	if get.status != http.StatusMethodNotAllowed || get.header.Get("Allow") != "POST" {
		t.Fatalf("a mutation over GET asking for a stream: %d %s", get.status, get.body)
	}
	// A query over GET as an event stream (an EventSource) is served.
	req, _ = http.NewRequest(http.MethodGet, s.URL+"/graphql?query="+url.QueryEscape("{ __typename }"), nil)
	req.Header.Set("Accept", "text/event-stream")
	st, refused = openSSEReader(t, req)
	if refused != nil {
		t.Fatalf("GET as an event stream: %d %s", refused.status, refused.body)
	}
	if ev := st.next(t); ev.Name != "next" || !strings.Contains(string(ev.Data), `"__typename":"Query"`) {
		t.Fatalf("GET as an event stream: %s %s", ev.Name, ev.Data)
	}
}

// TestCORSAllowsSingleConnectionStreams: a page of an allowed origin may use graphql-sse's
// single connection mode: its preflights for PUT and DELETE with the stream token header pass.
func TestCORSAllowsSingleConnectionStreams(t *testing.T) {
	t.Parallel()
	const origin = "https://console.example.com"
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/cors.db", "--cors-origins", origin)
	for _, method := range []string{http.MethodPut, http.MethodDelete, http.MethodPost} {
		got := doGraphQL(t, s, http.MethodOptions, "", "", map[string]string{
			"Origin": origin, "Access-Control-Request-Method": method,
			"Access-Control-Request-Headers": "authorization, content-type, " + strings.ToLower(gqlhttp.TokenHeader),
		})
		if got.status != http.StatusNoContent || got.header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(got.header.Get("Access-Control-Allow-Methods"), method) ||
			!strings.Contains(strings.ToLower(got.header.Get("Access-Control-Allow-Headers")), strings.ToLower(gqlhttp.TokenHeader)) {
			t.Errorf("preflight of %s: %d %v", method, got.status, got.header)
		}
	}
}
