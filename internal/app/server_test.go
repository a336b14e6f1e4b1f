package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"interlock/dbtest"
)

// testServer is the real app over a real database, served over real HTTP.
type testServer struct {
	url       string
	app       *App
	closeHTTP func()
}

// startServer serves the app over db, with any further settings as command-line args.
func startServer(t testing.TB, db string, args ...string) *testServer {
	t.Helper()
	// Authentication is off unless a test turns it on: a later --auth in args wins.
	cfg, err := ParseConfig(append([]string{"--auth=off", "--db", db}, args...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	app, err := NewApp(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler())
	var once sync.Once
	closeHTTP := func() { once.Do(func() { srv.CloseClientConnections(); srv.Close() }) }
	t.Cleanup(func() {
		closeHTTP()
		app.Close()
	})
	return &testServer{url: srv.URL, app: app, closeHTTP: closeHTTP}
}

// eachDB runs fn against a server on SQLite and one on MySQL, each started with args.
func eachDB(t *testing.T, fn func(t *testing.T, s *testServer), args ...string) {
	t.Run("sqlite", func(t *testing.T) {
		fn(t, startServer(t, "sqlite:"+filepath.Join(t.TempDir(), "interlock.db"), args...))
	})
	t.Run("mysql", func(t *testing.T) {
		fn(t, startServer(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)), args...))
	})
}

// writeConfig writes a config file for the test and returns its path.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "interlock.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

type gqlResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
}

func (e gqlResponse) code() string {
	if len(e.Errors) == 0 {
		return ""
	}
	c, _ := e.Errors[0].Extensions["code"].(string)
	return c
}

// post sends a GraphQL request over POST and decodes the answer.
func (s *testServer) post(t testing.TB, query string, vars map[string]any) gqlResponse {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	resp, err := http.Post(s.url+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return decodeGQL(t, resp)
}

// decodeGQL reads and closes a GraphQL answer over HTTP; a body that is not one fails the test.
func decodeGQL(t testing.TB, resp *http.Response) gqlResponse {
	t.Helper()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out gqlResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("status %d, body %s", resp.StatusCode, raw)
	}
	return out
}

// must sends a request that must succeed and decodes its data into v.
func (s *testServer) must(t testing.TB, query string, vars map[string]any, v any) {
	t.Helper()
	r := s.post(t, query, vars)
	if len(r.Errors) > 0 {
		t.Fatalf("%s: errors %+v", strings.SplitN(query, "(", 2)[0], r.Errors)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatal(err)
	}
}

// wantError sends a request that must fail with the given extensions.code.
func (s *testServer) wantError(t testing.TB, code, query string, vars map[string]any) gqlError {
	t.Helper()
	r := s.post(t, query, vars)
	if r.code() != code {
		t.Fatalf("%s: got %+v, want code %s", query, r.Errors, code)
	}
	return r.Errors[0]
}

const runFields = `id runId agentId status threadId resourceId createdAt updatedAt suspendedAt lastEventSeq output error
	toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted }`

type apiToolCall struct {
	ID               string          `json:"id"`
	ToolCallID       string          `json:"toolCallId"`
	ToolName         string          `json:"toolName"`
	Args             json.RawMessage `json:"args"`
	RequiresApproval bool            `json:"requiresApproval"`
	SuspendPayload   json.RawMessage `json:"suspendPayload"`
	Interrupted      bool            `json:"interrupted"`
}

type apiRun struct {
	ID           string        `json:"id"`
	RunID        string        `json:"runId"`
	Status       string        `json:"status"`
	ThreadID     *string       `json:"threadId"`
	CreatedAt    string        `json:"createdAt"`
	SuspendedAt  *string       `json:"suspendedAt"`
	LastEventSeq int           `json:"lastEventSeq"`
	Output       *string       `json:"output"`
	ToolCalls    []apiToolCall `json:"toolCalls"`
}

type apiEvent struct {
	Seq      int          `json:"seq"`
	Type     string       `json:"type"`
	At       string       `json:"at"`
	Text     *string      `json:"text"`
	Status   *string      `json:"status"`
	Reason   *string      `json:"reason"`
	Error    *string      `json:"error"`
	ToolCall *apiToolCall `json:"toolCall"`
	Result   any          `json:"result"`
}

func (s *testServer) startRun(t testing.TB, prompt string, extra map[string]any) apiRun {
	t.Helper()
	input := map[string]any{"agentId": "support-agent", "prompt": prompt}
	for k, v := range extra {
		input[k] = v
	}
	var out struct{ StartRun apiRun }
	s.must(t, `mutation($input: StartRunInput!) { startRun(input: $input) { `+runFields+` } }`, map[string]any{"input": input}, &out)
	if out.StartRun.Status != "RUNNING" || out.StartRun.ID != out.StartRun.RunID {
		t.Fatalf("startRun returned %+v", out.StartRun)
	}
	return out.StartRun
}

func (s *testServer) run(t testing.TB, id string) *apiRun {
	t.Helper()
	var out struct{ Run *apiRun }
	s.must(t, `query($id: ID!) { run(runId: $id) { `+runFields+` } }`, map[string]any{"id": id}, &out)
	return out.Run
}

const eventsQuery = `subscription($runId: ID!, $after: Int) { runEvents(runId: $runId, after: $after) {
	runId seq type at text status reason error decidedBy result toolCall { id toolCallId toolName args requiresApproval suspendPayload interrupted } } }`

// follow reads events of an operation until one satisfies stop (returned last), or the stream completes.
func follow(t testing.TB, c *wsClient, id string, stop func(apiEvent) bool) []apiEvent {
	t.Helper()
	var evs []apiEvent
	for {
		data, done, errs := c.next(id)
		if errs != nil {
			t.Fatalf("subscription error: %s", errs)
		}
		if done {
			return evs
		}
		var d struct{ RunEvents apiEvent }
		json.Unmarshal(data, &d)
		evs = append(evs, d.RunEvents)
		if stop != nil && stop(d.RunEvents) {
			return evs
		}
	}
}

func isType(typ string) func(apiEvent) bool { return func(e apiEvent) bool { return e.Type == typ } }

func text(evs []apiEvent) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == "TEXT_DELTA" && e.Text != nil {
			b.WriteString(*e.Text)
		}
	}
	return b.String()
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// rawResponse is an HTTP answer from /graphql: its status, decoded GraphQL body and raw text.
type rawResponse struct {
	status int
	gqlResponse
	body string
}

// postBody sends body as it is to /graphql with the given content type.
func (s *testServer) postBody(t testing.TB, contentType string, body []byte) rawResponse {
	t.Helper()
	return s.postBodyWith(t, http.DefaultClient, contentType, body)
}

// postJSONWithin is postJSON with the whole exchange bounded by d: a guard against a server
// that would take minutes, not a measurement.
func (s *testServer) postJSONWithin(t testing.TB, d time.Duration, request any) rawResponse {
	t.Helper()
	body, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	return s.postBodyWith(t, &http.Client{Timeout: d}, "application/json", body)
}

func (s *testServer) postBodyWith(t testing.TB, client *http.Client, contentType string, body []byte) rawResponse {
	t.Helper()
	resp, err := client.Post(s.url+"/graphql", contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := rawResponse{status: resp.StatusCode, body: string(raw)}
	if err := json.Unmarshal(raw, &out.gqlResponse); err != nil {
		t.Fatalf("status %d, body is not a GraphQL response: %s", resp.StatusCode, raw)
	}
	return out
}

// postJSON marshals request (a map or struct) and sends it to /graphql.
func (s *testServer) postJSON(t testing.TB, request any) rawResponse {
	t.Helper()
	body, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	return s.postBody(t, "application/json", body)
}
