package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"interlock/gormstore"
	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/observe"
)

// jsonLogApp starts the app with args over a fresh SQLite file, logging JSON at debug level
// into logs, served over real HTTP.
func jsonLogApp(t *testing.T, logs *apptest.SyncBuffer, args ...string) *apptest.Server {
	t.Helper()
	cfg, err := app.ParseConfig(append([]string{"--db", "sqlite:" + t.TempDir() + "/interlock.db"}, args...), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	app, err := app.NewApp(context.Background(), cfg, observe.NewLogger(logs, observe.LogJSON, -4))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler())
	t.Cleanup(func() { srv.Close(); app.Close() })
	return &apptest.Server{URL: srv.URL, App: app}
}

// logLines parses the JSON log, one object per line; a line that is not JSON fails the test.
func logLines(t *testing.T, logs *apptest.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// findLine returns the first log line with all the fields given, or nil.
func findLine(lines []map[string]any, fields map[string]any) map[string]any {
next:
	for _, l := range lines {
		for k, v := range fields {
			if l[k] != v {
				continue next
			}
		}
		return l
	}
	return nil
}

// TestRequestLogLines: one JSON line per operation with its name, type, duration, outcome and
// codes, the principal's subject and the run; refused requests logged by HTTP; and the
// secrets of a flow — the token, a refused token, resumeData, a model's API key — nowhere.
func TestRequestLogLines(t *testing.T) {
	const resumeSecret = "resume-secret-9f2c1e"
	const apiKey = "sk-observe-test-7d1a0b"
	var logs apptest.SyncBuffer
	s := jsonLogApp(t, &logs, "--auth=on")
	token := s.App.AdminToken
	r := s.SuspendAs(t, token, "ask the customer for their size", nil)
	s.PostAs(t, "wrong-"+token, `query Refused { suspendedRuns { total } }`, nil)
	s.MustAs(t, token, `mutation Resume($id: ID!, $data: JSON!) { resumeRun(runId: $id, resumeData: $data) { status } }`,
		map[string]any{"id": r.ID, "data": map[string]any{"answer": resumeSecret}}, nil)
	// Another answer after the first is late (the same one again would be a retry, answered with the run).
	if got := s.PostAs(t, token, `mutation Resume($id: ID!, $data: JSON!) { resumeRun(runId: $id, resumeData: $data) { status } }`,
		map[string]any{"id": r.ID, "data": map[string]any{"answer": resumeSecret + "-again"}}); got.Code != "CONFLICT" {
		t.Fatalf("second resume: %+v", got)
	}
	s.SSEAs(t, token, `subscription Stream($id: ID!) { runEvents(runId: $id, after: 0) { seq } }`, map[string]any{"id": r.ID})
	s.App.Service.Wait()

	// A model behind a key that answers 500: the failure is logged, the key is not.
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+apiKey {
			t.Errorf("the model got Authorization %q", r.Header.Get("Authorization"))
		}
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusInternalServerError)
	}))
	t.Cleanup(model.Close)
	t.Setenv("INTERLOCK_TEST_SECRET_KEY", apiKey)
	keyed := jsonLogApp(t, &logs, "--auth=off", "--config", apptest.WriteConfig(t, "agents:\n  - id: keyed\n    model: {provider: openai, name: m, baseURL: '"+model.URL+"', apiKeyEnv: INTERLOCK_TEST_SECRET_KEY, maxRetries: 0}\n"))
	var started struct{ StartRun apptest.Run }
	keyed.Must(t, `mutation Begin { startRun(input: {agentId: "keyed", prompt: "hi"}) { runId } }`, nil, &started)
	keyed.App.Service.Wait()

	text := logs.String()
	if testing.Verbose() {
		t.Log(text)
	}
	for what, secret := range map[string]string{"the token": token, "resumeData": resumeSecret, "the API key": apiKey} {
		if strings.Contains(text, secret) {
			t.Errorf("the log holds %s:\n%s", what, text)
		}
	}
	lines := logLines(t, &logs)
	resume := findLine(lines, map[string]any{"msg": "graphql", "operation": "Resume", "outcome": "ok"})
	if resume == nil {
		t.Fatalf("no line for the Resume mutation:\n%s", text)
	}
	for k, want := range map[string]any{"type": "mutation", "subject": "admin", "run": r.ID, "transport": "http"} {
		if resume[k] != want {
			t.Errorf("Resume line: %s = %v, want %v (%v)", k, resume[k], want, resume)
		}
	}
	if d, ok := resume["duration_ms"].(float64); !ok || d <= 0 {
		t.Errorf("Resume line: duration_ms %v", resume["duration_ms"])
	}
	if l := findLine(lines, map[string]any{"msg": "graphql", "operation": "Resume", "outcome": "CONFLICT"}); l == nil || strings.Join(strs(l["codes"]), ",") != "CONFLICT" {
		t.Errorf("the refused Resume: %v", l)
	}
	if l := findLine(lines, map[string]any{"msg": "graphql", "operation": "Stream", "type": "subscription"}); l == nil || l["transport"] != "sse" || l["run"] != r.ID {
		t.Errorf("the SSE subscription's line: %v", l)
	}
	if l := findLine(lines, map[string]any{"msg": "http request", "status": float64(401)}); l == nil || l["path"] != "/graphql" {
		t.Errorf("the request with a wrong token: %v", l)
	}
	if findLine(lines, map[string]any{"msg": "graphql", "operation": "Refused"}) != nil {
		t.Error("a request refused before GraphQL has an operation line")
	}
	if l := findLine(lines, map[string]any{"msg": "graphql", "operation": "Begin"}); l == nil || l["run"] != started.StartRun.RunID {
		t.Errorf("the startRun line does not name the run it made: %v", l)
	}
	if l := findLine(lines, map[string]any{"msg": "run failed"}); l == nil || l["run"] != started.StartRun.RunID {
		t.Errorf("the failed run's line has no run id: %v", l)
	}
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestInternalErrorsAreLoggedWithTheOperation: a query the database cannot answer shows the
// client INTERNAL and a plain message, and logs the error with the operation's name and type.
func TestInternalErrorsAreLoggedWithTheOperation(t *testing.T) {
	var logs apptest.SyncBuffer
	s := jsonLogApp(t, &logs, "--auth=off")
	// The tables are gone under the server: a fault (INTERNAL), not an outage (UNAVAILABLE).
	for _, table := range []string{"agent_runs", "suspended_counts"} {
		if err := s.App.DB().Exec("ALTER TABLE " + table + " RENAME TO " + table + "_gone").Error; err != nil {
			t.Fatal(err)
		}
	}
	e := s.WantError(t, "INTERNAL", `query Inbox { suspendedRuns { total } }`, nil)
	if e.Message != "internal server error" {
		t.Fatalf("the client was told %q", e.Message)
	}
	lines := logLines(t, &logs)
	l := findLine(lines, map[string]any{"msg": "graphql: internal error", "operation": "Inbox", "type": "query"})
	if l == nil {
		t.Fatalf("no internal error line with the operation:\n%s", logs.String())
	}
	if msg, _ := l["err"].(string); !strings.Contains(msg, "no such table") || l["level"] != "ERROR" {
		t.Fatalf("internal error line %v", l)
	}
	if n := strings.Count(logs.String(), "no such table: suspended_counts (1)\""); n != 1 {
		t.Errorf("the error is logged %d times, want once:\n%s", n, logs.String())
	}
	if findLine(lines, map[string]any{"msg": "graphql", "operation": "Inbox", "outcome": "INTERNAL"}) == nil {
		t.Errorf("no request line with outcome INTERNAL:\n%s", logs.String())
	}
}

// TestLogFormat: auto is JSON when the output is not a terminal; text and json are forced.
func TestLogFormat(t *testing.T) {
	for format, json := range map[string]bool{observe.LogAuto: true, observe.LogJSON: true, observe.LogText: false} {
		var b apptest.SyncBuffer
		observe.NewLogger(&b, format, 0).Info("hello", "run", "r1")
		if got := strings.HasPrefix(b.String(), "{"); got != json {
			t.Errorf("--log-format %s wrote %q", format, b.String())
		}
	}
	for _, bad := range [][]string{{"--log-format", "yaml"}, {"--log-level", "loud"}} {
		if _, err := app.ParseConfig(bad, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	cfg, err := app.ParseConfig(nil, func(k string) string {
		return map[string]string{"INTERLOCK_LOG_FORMAT": "text", "INTERLOCK_LOG_LEVEL": "debug"}[k]
	})
	if err != nil || cfg.LogFormat != "text" || cfg.LogLevel != -4 {
		t.Fatalf("from the environment: %+v, %v", cfg, err)
	}
}

// TestMySQLDriverLogsInTheServersLog: when the database drops the server's connections, what
// the MySQL driver says about it is a warning in the server's own log (JSON here), and the next
// request is still answered.
func TestMySQLDriverLogsInTheServersLog(t *testing.T) {
	var logs apptest.SyncBuffer
	dsn := dbtest.MySQLDSN(t)
	s := jsonLogApp(t, &logs, "--auth=off", "--db", dbtest.MySQLURL(dsn))
	var out struct{ SuspendedRuns struct{ Total int } }
	s.Must(t, `{ suspendedRuns { total } }`, nil, &out) // the pool now holds idle connections
	admin, err := gormstore.OpenMySQL(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := admin.DB(); err == nil {
			sqlDB.Close()
		}
	})
	var ids []int64
	err = admin.Raw("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE() AND ID <> CONNECTION_ID()").Scan(&ids).Error
	if err != nil || len(ids) == 0 {
		t.Fatalf("the server's connections: %v, %v", ids, err)
	}
	for _, id := range ids {
		if err := admin.Exec("KILL CONNECTION ?", id).Error; err != nil {
			t.Fatal(err)
		}
	}
	s.Must(t, `{ suspendedRuns { total } }`, nil, &out)
	for _, l := range logLines(t, &logs) {
		if msg, _ := l["message"].(string); l["level"] == "WARN" && l["msg"] == "mysql driver" && strings.Contains(msg, "connection") {
			return
		}
	}
	t.Fatalf("no warning of the MySQL driver about a connection in the server's log after its connections were killed:\n%s", logs.String())
}
