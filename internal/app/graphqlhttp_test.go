package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
)

// The Accept headers real clients send.
const (
	acceptURQL    = "application/graphql-response+json, application/graphql+json, application/json, text/event-stream, multipart/mixed"
	acceptApollo4 = "application/graphql-response+json,application/json;q=0.9"
)

// exchange is one HTTP request to /graphql and its answer, read in full within 10 s (a request
// the server would hold open fails the test instead of hanging it).
type exchange struct {
	status int
	header http.Header
	body   string
}

// contentType is the answer's media type without parameters.
func (e exchange) contentType() string {
	ct, _, _ := strings.Cut(e.header.Get("Content-Type"), ";")
	return strings.TrimSpace(ct)
}

// gql decodes the answer as a GraphQL response, failing the test when it is not one.
func (e exchange) gql(t *testing.T) apptest.Response {
	t.Helper()
	var r apptest.Response
	if err := json.Unmarshal([]byte(e.body), &r); err != nil {
		t.Fatalf("status %d, body is not a GraphQL response: %s", e.status, e.body)
	}
	return r
}

// hasDataKey reports whether the answer's JSON object has a "data" entry, even null.
func (e exchange) hasDataKey(t *testing.T) bool {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(e.body), &m); err != nil {
		t.Fatalf("body is not a JSON object: %s", e.body)
	}
	_, ok := m["data"]
	return ok
}

// doGraphQL makes one request to s's /graphql: method, the query string (GET) or body (others),
// and headers.
func doGraphQL(t *testing.T, s *apptest.Server, method, query string, body string, headers map[string]string) exchange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	target := s.URL + "/graphql"
	if query != "" {
		target += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v (a stream that did not end?)", method, target, err)
	}
	return exchange{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

// postAccept POSTs a GraphQL request as JSON with Accept (none when empty) and more headers.
func postAccept(t *testing.T, s *apptest.Server, accept string, request map[string]any, more ...string) exchange {
	t.Helper()
	b, _ := json.Marshal(request)
	h := map[string]string{"Content-Type": "application/json"}
	if accept != "" {
		h["Accept"] = accept
	}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = more[i+1]
	}
	return doGraphQL(t, s, http.MethodPost, "", string(b), h)
}

// TestRequestErrorsByAccept: every kind of request error (parse, validation, depth, complexity,
// token limit, variable coercion, an operation that cannot be picked) is 200 for a client that
// takes application/json — asked for, "*/*" (Apollo Client 3, curl) or no Accept — and 400 for
// one that prefers application/graphql-response+json (urql, Apollo Client 4, the spec's own);
// each in the media type negotiated, with the error's code, and no data key at all.
func TestRequestErrorsByAccept(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/accept.db", "--max-query-tokens", "500")
	errs := map[string]struct {
		request map[string]any
		code    string
	}{
		"parse":               {map[string]any{"query": "{ agents { id "}, "GRAPHQL_PARSE_FAILED"},
		"validation":          {map[string]any{"query": "{ nope }"}, "GRAPHQL_VALIDATION_FAILED"},
		"depth":               {map[string]any{"query": "{ __schema { types { " + strings.Repeat("ofType { ", 14) + "name" + strings.Repeat(" }", 16) + " }"}, "QUERY_TOO_DEEP"},
		"complexity":          {map[string]any{"query": `{ threads(perPage: 500) { threads { runs(perPage: 500) { runs { id } } } } }`}, "COMPLEXITY_LIMIT_EXCEEDED"},
		"token limit":         {map[string]any{"query": "{ agents { " + strings.Repeat("id ", 600) + "} }"}, "GRAPHQL_VALIDATION_FAILED"},
		"variable coercion":   {map[string]any{"query": `query($r: ID!) { run(runId: $r) { id } }`, "variables": map[string]any{"r": nil}}, "GRAPHQL_VALIDATION_FAILED"},
		"unknown operation":   {map[string]any{"query": `query A { agents { id } }`, "operationName": "B"}, "GRAPHQL_VALIDATION_FAILED"},
		"several, none named": {map[string]any{"query": `query A { agents { id } } query B { agents { name } }`}, "GRAPHQL_VALIDATION_FAILED"},
		"missing variable":    {map[string]any{"query": `query Q($n: String!) { __type(name: $n) { name } }`, "variables": map[string]any{}}, "GRAPHQL_VALIDATION_FAILED"},
	}
	accepts := []struct {
		accept, contentType string
		status              int
	}{
		{"", "application/json", http.StatusOK},
		{"application/json", "application/json", http.StatusOK},
		{"*/*", "application/json", http.StatusOK},
		{"application/graphql-response+json", "application/graphql-response+json", http.StatusBadRequest},
		{acceptURQL, "application/graphql-response+json", http.StatusBadRequest},
		{acceptApollo4, "application/graphql-response+json", http.StatusBadRequest},
		{"application/json, application/graphql-response+json;q=0.5", "application/json", http.StatusOK},
	}
	for name, e := range errs {
		for _, a := range accepts {
			got := postAccept(t, s, a.accept, e.request)
			r := got.gql(t)
			if got.status != a.status || got.contentType() != a.contentType || r.Code() != e.code || got.hasDataKey(t) {
				t.Errorf("%s with Accept %q: %d %s %s; want %d %s, code %s and no data key", name, a.accept, got.status, got.contentType(), got.body, a.status, a.contentType, e.code)
			}
		}
	}
	// An executed operation has its data (null included) and is 200 whatever the media type.
	for _, a := range accepts {
		got := postAccept(t, s, a.accept, map[string]any{"query": `{ run(runId: "nope") { id } }`})
		if got.status != http.StatusOK || got.contentType() != a.contentType || !got.hasDataKey(t) || got.gql(t).Code() != "" {
			t.Errorf("an executed query with Accept %q: %d %s %s", a.accept, got.status, got.contentType(), got.body)
		}
	}
}

// TestAcceptNegotiation: the answer's media type is the one Accept prefers, by q-value and
// then by order, not whichever is listed: urql's default Accept lists text/event-stream after
// the JSON types, so its queries are answered as JSON; a client that prefers the stream gets
// one; nothing acceptable is 406 with a GraphQL error.
func TestAcceptNegotiation(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/negotiate.db")
	for _, tc := range []struct{ accept, want string }{
		{"", "application/json"},
		{"*/*", "application/json"},
		{"application/*", "application/json"},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "application/json"}, // a browser
		{acceptURQL, "application/graphql-response+json"},
		{acceptApollo4, "application/graphql-response+json"},
		{"application/json, text/event-stream", "application/json"},
		{"text/event-stream", "text/event-stream"},
		{"text/event-stream, application/json", "text/event-stream"},
		{"application/json;q=0.5, text/event-stream", "text/event-stream"},
		{"text/event-stream;q=0.5, application/json", "application/json"},
		{"multipart/mixed;deferSpec=20220824,application/json", "multipart/mixed"},
		{"application/json;q=0, */*", "application/graphql-response+json"},
		{"text/html", ""},
		{"application/xml, image/png", ""},
	} {
		got := postAccept(t, s, tc.accept, map[string]any{"query": "{ __typename }"})
		if tc.want == "" {
			if got.status != http.StatusNotAcceptable || got.gql(t).Code() != "BAD_USER_INPUT" {
				t.Errorf("Accept %q: %d %s, want 406 with BAD_USER_INPUT", tc.accept, got.status, got.body)
			}
			continue
		}
		if got.status != http.StatusOK || got.contentType() != tc.want || !strings.Contains(got.body, `"__typename":"Query"`) {
			t.Errorf("Accept %q: %d %q %s, want 200 %s", tc.accept, got.status, got.contentType(), got.body, tc.want)
		}
	}
}

// TestRateLimitedMutationWithURQLAccept: a mutation over the rate sent with urql's default
// Accept (which lists text/event-stream) is answered as one JSON document, so it gets its 429
// and Retry-After, not a 200 stream; a mutation over GET is refused before it costs a token.
func TestRateLimitedMutationWithURQLAccept(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/urql.db", "--mutation-rate", "1/h", "--mutation-burst", "1")
	const mutation = `mutation { declineToolCall(runId: "nope") { status } }`
	get := doGraphQL(t, s, http.MethodGet, "query="+url.QueryEscape(mutation), "", map[string]string{"Accept": acceptURQL})
	if get.status != http.StatusMethodNotAllowed || get.header.Get("Allow") != "POST" || get.gql(t).Code() != "BAD_USER_INPUT" {
		t.Fatalf("a mutation over GET: %d Allow %q %s", get.status, get.header.Get("Allow"), get.body)
	}
	first := postAccept(t, s, acceptURQL, map[string]any{"query": mutation})
	if first.status != http.StatusOK || first.gql(t).Code() != "NOT_FOUND" {
		t.Fatalf("the first mutation (the GET cost nothing): %d %s", first.status, first.body)
	}
	second := postAccept(t, s, acceptURQL, map[string]any{"query": mutation})
	if second.status != http.StatusTooManyRequests || second.header.Get("Retry-After") == "" || second.contentType() != "application/graphql-response+json" ||
		second.gql(t).Code() != "RATE_LIMITED" || second.hasDataKey(t) {
		t.Fatalf("the mutation over the rate: %d %q Retry-After %q %s", second.status, second.contentType(), second.header.Get("Retry-After"), second.body)
	}
	// Legacy clients get the 429 too: it is a refusal to retry later, not a request error.
	if legacy := postAccept(t, s, "*/*", map[string]any{"query": mutation}); legacy.status != http.StatusTooManyRequests || legacy.contentType() != "application/json" {
		t.Fatalf("over the rate with */*: %d %s", legacy.status, legacy.body)
	}
}

// TestRefusalsBeforeGraphQLHonourAccept: what is refused before any GraphQL runs — no token
// (401), a body that is not JSON (400), too large (413), not sent as JSON (415), a method not
// served (405) — is a GraphQL error with extensions.code and no data key, as
// application/graphql-response+json when the client prefers it and application/json otherwise.
func TestRefusalsBeforeGraphQLHonourAccept(t *testing.T) {
	t.Parallel()
	s := apptest.AuthServer(t, "sqlite:"+t.TempDir()+"/refusals.db", "")
	auth := "Bearer " + apptest.TokenOf("alice")
	for _, tc := range []struct {
		name, method, contentType, body, authorization string
		status                                         int
		code                                           string
	}{
		{"no token", http.MethodPost, "application/json", `{"query":"{ __typename }"}`, "", http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"a wrong token", http.MethodPost, "application/json", `{"query":"{ __typename }"}`, "Bearer nope", http.StatusUnauthorized, "UNAUTHENTICATED"},
		{"not JSON", http.MethodPost, "application/json", `{"query":`, auth, http.StatusBadRequest, "BAD_USER_INPUT"},
		{"no query", http.MethodPost, "application/json", `{"qeury":"{ __typename }"}`, auth, http.StatusBadRequest, "BAD_USER_INPUT"},
		{"too large", http.MethodPost, "application/json", `{"query":"` + strings.Repeat("a", 2<<20) + `"}`, auth, http.StatusRequestEntityTooLarge, "BAD_USER_INPUT"},
		{"text/plain", http.MethodPost, "text/plain", `{"query":"{ __typename }"}`, auth, http.StatusUnsupportedMediaType, "BAD_USER_INPUT"},
		{"no content type", http.MethodPost, "", `{"query":"{ __typename }"}`, auth, http.StatusUnsupportedMediaType, "BAD_USER_INPUT"},
		{"a form", http.MethodPost, "application/x-www-form-urlencoded", `query=%7B__typename%7D`, auth, http.StatusUnsupportedMediaType, "BAD_USER_INPUT"},
		{"PATCH", http.MethodPatch, "application/json", `{"query":"{ __typename }"}`, auth, http.StatusMethodNotAllowed, "BAD_USER_INPUT"},
	} {
		for accept, want := range map[string]string{
			"":                                  "application/json",
			"application/json":                  "application/json",
			"application/graphql-response+json": "application/graphql-response+json",
			acceptURQL:                          "application/graphql-response+json",
		} {
			h := map[string]string{}
			for k, v := range map[string]string{"Content-Type": tc.contentType, "Accept": accept, "Authorization": tc.authorization} {
				if v != "" {
					h[k] = v
				}
			}
			got := doGraphQL(t, s, tc.method, "", tc.body, h)
			if got.status != tc.status || got.contentType() != want || got.gql(t).Code() != tc.code || got.hasDataKey(t) || len(got.body) > 400 {
				t.Errorf("%s with Accept %q: %d %q %.300s; want %d %s with %s and no data key", tc.name, accept, got.status, got.contentType(), got.body, tc.status, want, tc.code)
			}
			if tc.status == http.StatusMethodNotAllowed && !strings.Contains(got.header.Get("Allow"), "POST") {
				t.Errorf("%s: Allow %q", tc.name, got.header.Get("Allow"))
			}
		}
	}
}

// TestSubscriptionOverPlainHTTP: a subscription sent as a plain POST or GET — no Accept, "*/*",
// application/json or application/graphql-response+json — is answered at once with an error
// saying to send it as an event stream or over a WebSocket (it used to wait for its first event,
// or until the write timeout); a client whose Accept names text/event-stream, even after the
// JSON types (urql), gets the stream.
func TestSubscriptionOverPlainHTTP(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/plainsub.db")
	const sub = `subscription { suspendedRunsChanged { kind } }`
	for _, accept := range []string{"", "*/*", "application/json", "application/graphql-response+json", acceptApollo4} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			start := time.Now()
			var got exchange
			if method == http.MethodGet {
				h := map[string]string{}
				if accept != "" {
					h["Accept"] = accept
				}
				got = doGraphQL(t, s, method, "query="+url.QueryEscape(sub), "", h)
			} else {
				got = postAccept(t, s, accept, map[string]any{"query": sub})
			}
			r := got.gql(t)
			wantStatus := http.StatusOK
			if got.contentType() == "application/graphql-response+json" {
				wantStatus = http.StatusBadRequest
			}
			if got.status != wantStatus || r.Code() != "BAD_USER_INPUT" || !strings.Contains(r.Errors[0].Message, "text/event-stream") ||
				!strings.Contains(r.Errors[0].Message, "WebSocket") || got.hasDataKey(t) || time.Since(start) > 5*time.Second {
				t.Errorf("%s subscription with Accept %q: %d %s after %s", method, accept, got.status, got.body, time.Since(start))
			}
		}
	}
	// urql's Accept names text/event-stream: the subscription is streamed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql", bytes.NewReader([]byte(`{"query":"`+sub+`"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", acceptURQL)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("a subscription with urql's Accept: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestRequestErrorMessages: a variable error names the variable, the type it must have and,
// for an inner value, where and which type; an operation that cannot be picked says why. The
// path (variable.<name>…) and code stay gqlgen's.
func TestRequestErrorMessages(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, "sqlite:"+t.TempDir()+"/messages.db")
	const run = `query($r: ID!) { run(runId: $r) { id } }`
	const start = `mutation($i: StartRunInput!) { startRun(input: $i) { status } }`
	for _, tc := range []struct {
		name    string
		request map[string]any
		want    string
	}{
		{"missing", map[string]any{"query": run}, `Variable "$r" of required type "ID!" was not provided.`},
		{"null", map[string]any{"query": run, "variables": map[string]any{"r": nil}}, `Variable "$r" of non-null type "ID!" must not be null.`},
		{"wrong type", map[string]any{"query": run, "variables": map[string]any{"r": map[string]any{"x": 1}}}, `Variable "$r" of type "ID!" got an invalid value: cannot use map as ID.`},
		{"inner wrong type", map[string]any{"query": start, "variables": map[string]any{"i": map[string]any{"agentId": "a", "prompt": "p", "requireToolApproval": "yes"}}},
			`Variable "$i" of type "StartRunInput!" got an invalid value at i.requireToolApproval, which must be "Boolean": cannot use string as Boolean.`},
		{"inner missing", map[string]any{"query": start, "variables": map[string]any{"i": map[string]any{"prompt": "p"}}},
			`Variable "$i" of type "StartRunInput!" got an invalid value: i.agentId of required type "ID!" was not provided.`},
		{"inner unknown field", map[string]any{"query": start, "variables": map[string]any{"i": map[string]any{"agentId": "a", "prompt": "p", "nope": 1}}},
			`Variable "$i" of type "StartRunInput!" got an invalid value: "nope" is not a field of StartRunInput.`},
		{"several operations, none named", map[string]any{"query": `query A { agents { id } } query B { agents { name } }`},
			`The document holds 2 operations (A, B) and the request names none: set "operationName" to the one to run.`},
		{"an operation not in the document", map[string]any{"query": `query A { agents { id } } query B { agents { name } }`, "operationName": "C"},
			`No operation named "C" in the document: "operationName" must be one of A, B.`},
	} {
		r := s.PostJSON(t, tc.request)
		if len(r.Errors) != 1 || r.Errors[0].Message != tc.want || r.Code() != "GRAPHQL_VALIDATION_FAILED" {
			t.Errorf("%s: %+v\nwant %s", tc.name, r.Errors, tc.want)
		}
		if strings.HasPrefix(tc.want, "Variable") && (len(r.Errors[0].Path) < 2 || r.Errors[0].Path[0] != "variable") {
			t.Errorf("%s: path %v, want variable.<name>", tc.name, r.Errors[0].Path)
		}
	}
	// Over a WebSocket too.
	ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
	if _, _, errs := ws.Next(ws.Subscribe(run, nil)); !strings.Contains(string(errs), `Variable \"$r\" of required type \"ID!\" was not provided.`) {
		t.Errorf("over graphql-transport-ws: %s", errs)
	}
}
