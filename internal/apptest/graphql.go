package apptest

// The API's client over plain HTTP (POST), and the shapes of runs and events the tests read.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

type Error struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

type Response struct {
	Data   json.RawMessage `json:"data"`
	Errors []Error         `json:"errors"`
}

func (e Response) Code() string {
	if len(e.Errors) == 0 {
		return ""
	}
	c, _ := e.Errors[0].Extensions["code"].(string)
	return c
}

// Post sends a GraphQL request over POST and decodes the answer.
func (s *Server) Post(t testing.TB, query string, vars map[string]any) Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	resp, err := http.Post(s.URL+"/graphql", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return DecodeGQL(t, resp)
}

// DecodeGQL reads and closes a GraphQL answer over HTTP; a body that is not one fails the test.
func DecodeGQL(t testing.TB, resp *http.Response) Response {
	t.Helper()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out Response
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("status %d, body %s", resp.StatusCode, raw)
	}
	return out
}

// Must sends a request that must succeed and decodes its data into v.
func (s *Server) Must(t testing.TB, query string, vars map[string]any, v any) {
	t.Helper()
	r := s.Post(t, query, vars)
	if len(r.Errors) > 0 {
		t.Fatalf("%s: errors %+v", strings.SplitN(query, "(", 2)[0], r.Errors)
	}
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatal(err)
	}
}

// WantError sends a request that must fail with the given extensions.code.
func (s *Server) WantError(t testing.TB, code, query string, vars map[string]any) Error {
	t.Helper()
	r := s.Post(t, query, vars)
	if r.Code() != code {
		t.Fatalf("%s: got %+v, want code %s", query, r.Errors, code)
	}
	return r.Errors[0]
}

const RunFields = `id runId agentId status threadId resourceId createdAt updatedAt suspendedAt lastEventSeq output error
	toolCalls { id toolCallId toolName args requiresApproval suspendPayload interrupted }`

type ToolCall struct {
	ID               string          `json:"id"`
	ToolCallID       string          `json:"toolCallId"`
	ToolName         string          `json:"toolName"`
	Args             json.RawMessage `json:"args"`
	RequiresApproval bool            `json:"requiresApproval"`
	SuspendPayload   json.RawMessage `json:"suspendPayload"`
	Interrupted      bool            `json:"interrupted"`
}

type Run struct {
	ID           string     `json:"id"`
	RunID        string     `json:"runId"`
	Status       string     `json:"status"`
	ThreadID     *string    `json:"threadId"`
	CreatedAt    string     `json:"createdAt"`
	SuspendedAt  *string    `json:"suspendedAt"`
	LastEventSeq int        `json:"lastEventSeq"`
	Output       *string    `json:"output"`
	ToolCalls    []ToolCall `json:"toolCalls"`
}

type Event struct {
	Seq      int       `json:"seq"`
	Type     string    `json:"type"`
	At       string    `json:"at"`
	Text     *string   `json:"text"`
	Status   *string   `json:"status"`
	Reason   *string   `json:"reason"`
	Error    *string   `json:"error"`
	ToolCall *ToolCall `json:"toolCall"`
	Result   any       `json:"result"`
}

func (s *Server) StartRun(t testing.TB, prompt string, extra map[string]any) Run {
	t.Helper()
	input := map[string]any{"agentId": "support-agent", "prompt": prompt}
	for k, v := range extra {
		input[k] = v
	}
	var out struct{ StartRun Run }
	s.Must(t, `mutation($input: StartRunInput!) { startRun(input: $input) { `+RunFields+` } }`, map[string]any{"input": input}, &out)
	if out.StartRun.Status != "RUNNING" || out.StartRun.ID != out.StartRun.RunID {
		t.Fatalf("startRun returned %+v", out.StartRun)
	}
	return out.StartRun
}

func (s *Server) Run(t testing.TB, id string) *Run {
	t.Helper()
	var out struct{ Run *Run }
	s.Must(t, `query($id: ID!) { run(runId: $id) { `+RunFields+` } }`, map[string]any{"id": id}, &out)
	return out.Run
}

const EventsQuery = `subscription($runId: ID!, $after: Int) { runEvents(runId: $runId, after: $after) {
	runId seq type at text status reason error decidedBy result toolCall { id toolCallId toolName args requiresApproval suspendPayload interrupted } } }`

// Follow reads events of an operation until one satisfies stop (returned last), or the stream completes.
func Follow(t testing.TB, c *WSClient, id string, stop func(Event) bool) []Event {
	t.Helper()
	var evs []Event
	for {
		data, done, errs := c.Next(id)
		if errs != nil {
			t.Fatalf("subscription error: %s", errs)
		}
		if done {
			return evs
		}
		var d struct{ RunEvents Event }
		json.Unmarshal(data, &d)
		evs = append(evs, d.RunEvents)
		if stop != nil && stop(d.RunEvents) {
			return evs
		}
	}
}

func IsType(typ string) func(Event) bool { return func(e Event) bool { return e.Type == typ } }

func Text(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == "TEXT_DELTA" && e.Text != nil {
			b.WriteString(*e.Text)
		}
	}
	return b.String()
}

func HttpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// RawResponse is an HTTP answer from /graphql: its status, decoded GraphQL body and raw text.
type RawResponse struct {
	Status int
	Response
	Body string
}

// PostBody sends body as it is to /graphql with the given content type.
func (s *Server) PostBody(t testing.TB, contentType string, body []byte) RawResponse {
	t.Helper()
	return s.PostBodyWith(t, http.DefaultClient, contentType, body)
}

// PostJSONWithin is postJSON with the whole exchange bounded by d: a guard against a server
// that would take minutes, not a measurement.
func (s *Server) PostJSONWithin(t testing.TB, d time.Duration, request any) RawResponse {
	t.Helper()
	body, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	return s.PostBodyWith(t, &http.Client{Timeout: d}, "application/json", body)
}

func (s *Server) PostBodyWith(t testing.TB, client *http.Client, contentType string, body []byte) RawResponse {
	t.Helper()
	resp, err := client.Post(s.URL+"/graphql", contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := RawResponse{Status: resp.StatusCode, Body: string(raw)}
	if err := json.Unmarshal(raw, &out.Response); err != nil {
		t.Fatalf("status %d, body is not a GraphQL response: %s", resp.StatusCode, raw)
	}
	return out
}

// PostJSON marshals request (a map or struct) and sends it to /graphql.
func (s *Server) PostJSON(t testing.TB, request any) RawResponse {
	t.Helper()
	body, err := json.Marshal(request)
	if err != nil {
		t.Fatal(err)
	}
	return s.PostBody(t, "application/json", body)
}
