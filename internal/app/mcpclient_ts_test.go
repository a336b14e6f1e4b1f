package app_test

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/internal/apptest"
	"interlock/internal/proctest"
)

// mcpClientDir is examples/mcp-client: client.mjs, a scripted MCP client on the official
// TypeScript SDK, a Node project with its own package-lock.json. The MCP tests drive it so
// that a server is checked against the client most MCP hosts are built on.
var mcpClientDir = apptest.RepoPath("examples", "mcp-client")

// tsMCPClientTimeout bounds one run of client.mjs: its steps and the wait for its exit.
const tsMCPClientTimeout = 2 * time.Minute

var (
	mcpClientOnce sync.Once
	mcpClientErr  error
)

// tsMCPRun is client.mjs running: the lines it printed so far, and its exit.
type tsMCPRun struct {
	cmd    *exec.Cmd
	ctx    context.Context // the command's: it ends after tsMCPClientTimeout
	stderr *apptest.SyncBuffer
	read   chan struct{} // closed when stdout reached its end

	mu      sync.Mutex
	lines   []map[string]any
	bad     []string      // stdout lines that were not JSON objects
	changed chan struct{} // closed (and replaced) when a line is added
	next    int           // lines before it were returned by Next (or skipped by it)
}

// startTSMCPClient runs client.mjs against the MCP endpoint url (Streamable HTTP) with token
// as its bearer token, running steps on one session (the step and line formats are in
// examples/mcp-client/client.mjs). It installs the client's locked packages once per test
// binary; without node or npm the test skips, except under CI=true, where it fails. Use Next
// to act while the client waits (approve a held call), then Wait.
func startTSMCPClient(t *testing.T, url, token string, steps []map[string]any) *tsMCPRun {
	t.Helper()
	node, npm := nodeTools(t)
	mcpClientOnce.Do(func() { mcpClientErr = npmCIIn(t, npm, mcpClientDir) })
	if mcpClientErr != nil {
		t.Fatal(mcpClientErr)
	}
	stepsJSON, err := json.Marshal(steps)
	if err != nil {
		t.Fatalf("the client's steps: %v", err)
	}
	file := filepath.Join(t.TempDir(), "steps.json")
	if err := os.WriteFile(file, stepsJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), tsMCPClientTimeout)
	t.Cleanup(cancel)
	r := &tsMCPRun{ctx: ctx, stderr: &apptest.SyncBuffer{}, read: make(chan struct{}), changed: make(chan struct{})}
	r.cmd = proctest.CommandContext(ctx, t, node, "client.mjs", url, token, file)
	r.cmd.Dir = mcpClientDir
	r.cmd.Stderr = r.stderr
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("node client.mjs: %v", err)
	}
	go r.readLines(bufio.NewScanner(stdout))
	return r
}

// readLines keeps every line client.mjs prints, until its stdout ends.
func (r *tsMCPRun) readLines(sc *bufio.Scanner) {
	defer close(r.read)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20) // a list of many tools is one long line
	for sc.Scan() {
		var line map[string]any
		err := json.Unmarshal(sc.Bytes(), &line)
		r.mu.Lock()
		if err != nil {
			r.bad = append(r.bad, sc.Text())
		} else {
			r.lines = append(r.lines, line)
		}
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
}

// Next waits for the next line whose "op" is op (skipping others, which Wait still returns)
// and returns it; the test fails when the client exits first or 30 seconds pass.
func (r *tsMCPRun) Next(t *testing.T, op string) map[string]any {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		for ; r.next < len(r.lines); r.next++ {
			if line := r.lines[r.next]; line["op"] == op {
				r.next++
				r.mu.Unlock()
				return line
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-r.read:
			r.mu.Lock()
			more := r.next < len(r.lines)
			r.mu.Unlock()
			if !more {
				t.Fatalf("client.mjs ended without a %q line: %s", op, r.output())
			}
		case <-deadline:
			t.Fatalf("no %q line from client.mjs in 30s: %s", op, r.output())
		}
	}
}

// Wait waits for client.mjs to exit and returns every line it printed, JSON numbers as
// float64. Exit 0 (every step ran) and exit 2 after a connect-error line are answers; any
// other exit, or a line that is not JSON, fails the test.
func (r *tsMCPRun) Wait(t *testing.T) []map[string]any {
	t.Helper()
	<-r.read // stdout is read to its end before Wait closes it
	err := r.cmd.Wait()
	r.mu.Lock()
	lines, bad := r.lines, r.bad
	r.mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("client.mjs printed lines that are not JSON objects %q: %s", bad, r.output())
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 2 && len(lines) > 0 && lines[len(lines)-1]["op"] == "connect-error":
	default:
		if r.ctx.Err() != nil {
			err = fmt.Errorf("%w (killed: %w)", err, context.Cause(r.ctx))
		}
		t.Fatalf("node client.mjs: %v: %s", err, r.output())
	}
	return lines
}

// output is what client.mjs printed, for a failure's message.
func (r *tsMCPRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("stdout %v %q, stderr %q", r.lines, r.bad, r.stderr.String())
}

// runTSMCPClient runs client.mjs to its end (startTSMCPClient, then Wait) and returns the lines
// it printed.
func runTSMCPClient(t *testing.T, url, token string, steps []map[string]any) []map[string]any {
	t.Helper()
	return startTSMCPClient(t, url, token, steps).Wait(t)
}

// refundArgs are orders__refund's arguments: the go-sdk infers the tool's input schema from
// them (order, an integer, required).
type refundArgs struct {
	Order int `json:"order" jsonschema:"the order to refund"`
}

// TestTSMCPClientAgainstGoServer checks the harness itself against a plain go-sdk MCP server
// behind a bearer check, so that a gateway test failing through client.mjs is the gateway's
// fault: a wrong token is a connect-error; list prints the tools with their input schemas; a
// call with progress prints each notification the server sent, then the whole result (_meta,
// isError), and Next sees the first notification while the server holds the call; a call
// without progress sends no progressToken; an abort prints an error line and
// reaches the server as a cancellation; steps run in parallel; terminate ends the session.
func TestTSMCPClientAgainstGoServer(t *testing.T) {
	t.Parallel()
	const token = "harness-token"
	progressTokens := make(chan any, 16) // each orders__refund call's progress token, in call order
	cancelled := make(chan error, 1)     // why orders__wait's context ended
	release := make(chan struct{})       // closed when the test saw the first progress line
	server := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "orders__refund", Description: "Refund an order."},
		func(ctx context.Context, req *mcp.CallToolRequest, in refundArgs) (*mcp.CallToolResult, any, error) {
			progress := req.Params.GetProgressToken()
			progressTokens <- progress
			for i := 1; progress != nil && i <= 3; i++ {
				err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: progress, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d of 3", i)})
				if err != nil {
					return nil, nil, fmt.Errorf("progress %d: %w", i, err)
				}
				if i == 1 { // held, as a gateway holds a call for a person, until the test saw step 1
					select {
					case <-release:
					case <-time.After(30 * time.Second):
						return nil, nil, errors.New("the test never released the call")
					}
				}
			}
			if in.Order < 0 {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such order"}}}, nil, nil
			}
			return &mcp.CallToolResult{
				Meta:    mcp.Meta{"interlock/receipt": fmt.Sprintf("receipt-%d", in.Order)},
				Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded order %d", in.Order)}},
			}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "orders__wait", Description: "Waits until cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
				cancelled <- ctx.Err()
				return nil, nil, ctx.Err()
			case <-time.After(30 * time.Second): // so that a failing test still ends
				return nil, nil, errors.New("orders__wait was never cancelled")
			}
		})
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"

	t.Run("wrong token", func(t *testing.T) {
		lines := runTSMCPClient(t, url, "not-"+token, []map[string]any{{"op": "list"}})
		if len(lines) != 1 || lines[0]["op"] != "connect-error" || lines[0]["code"] != float64(401) {
			t.Fatalf("with a wrong token the client printed %v, want one connect-error with code 401", lines)
		}
	})

	run := startTSMCPClient(t, url, token, []map[string]any{
		{"op": "list"},
		{"op": "call", "name": "orders__refund", "args": map[string]any{"order": 42}, "progress": true, "timeoutMs": 120000},
		{"parallel": []map[string]any{
			{"op": "call", "id": "a", "name": "orders__wait", "abortAfterMs": 300},
			{"op": "call", "id": "b", "name": "orders__refund", "args": map[string]any{"order": 7}},
		}},
		{"op": "call", "name": "orders__refund", "args": map[string]any{"order": -1}},
		{"op": "terminate"},
	})
	// Next returns while the call is held: the first progress line is out, the others not yet.
	if first := run.Next(t, "progress"); first["progress"] != float64(1) {
		t.Fatalf("the first progress line is %v, want step 1", first)
	}
	close(release)
	lines := run.Wait(t)
	t.Logf("client.mjs printed:\n%s", jsonLines(lines))
	want := []any{"session", "list", "progress", "progress", "progress", "result", "error", "result", "result", "terminated"}
	got := ops(lines)
	if len(got) == len(want) && got[6] == "result" && got[7] == "error" {
		got[6], got[7] = got[7], got[6] // the parallel step's lines come in either order
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the client printed %v, want %v (the parallel error and result in either order)", got, want)
	}
	if lines[0]["op"] != "session" || lines[0]["id"] == "" || lines[0]["id"] == nil {
		t.Fatalf("first line %v, want the session with its id", lines[0])
	}

	// list: both tools, orders__refund with the schema the server inferred.
	tools, _ := lines[1]["tools"].([]any)
	var refund map[string]any
	for _, tool := range tools {
		if m, _ := tool.(map[string]any); m["name"] == "orders__refund" {
			refund = m
		}
	}
	schema, _ := refund["inputSchema"].(map[string]any)
	order, _ := schema["properties"].(map[string]any)["order"].(map[string]any)
	if len(tools) != 2 || refund["description"] != "Refund an order." || schema["type"] != "object" ||
		order["type"] != "integer" || !reflect.DeepEqual(schema["required"], []any{"order"}) {
		t.Fatalf("list printed %v, want orders__refund and orders__wait, refund's order an integer and required", lines[1])
	}

	// The call with progress: the server's three notifications, in order, then the result.
	for i, line := range lines[2:5] {
		want := map[string]any{"op": "progress", "name": "orders__refund", "progress": float64(i + 1), "total": float64(3), "message": fmt.Sprintf("step %d of 3", i+1)}
		if !reflect.DeepEqual(line, want) {
			t.Fatalf("progress line %d is %v, want %v", i, line, want)
		}
	}
	wantResult := map[string]any{
		"op": "result", "name": "orders__refund",
		"result": map[string]any{
			"_meta":   map[string]any{"interlock/receipt": "receipt-42"},
			"content": []any{map[string]any{"type": "text", "text": "refunded order 42"}},
		},
	}
	if !reflect.DeepEqual(lines[5], wantResult) {
		t.Fatalf("the call's result line is %v, want %v", lines[5], wantResult)
	}

	// The parallel step: the aborted call is an error (the SDK's RequestTimeout code), the
	// other call's result carries its id; the server saw the abort as a cancellation.
	byID := map[any]map[string]any{lines[6]["id"]: lines[6], lines[7]["id"]: lines[7]}
	aborted, other := byID["a"], byID["b"]
	if aborted["op"] != "error" || aborted["name"] != "orders__wait" || aborted["code"] != float64(-32001) ||
		!strings.Contains(fmt.Sprint(aborted["message"]), "aborted by the client after 300ms") {
		t.Fatalf("the aborted call printed %v, want an error with code -32001 saying it was aborted", aborted)
	}
	if other["op"] != "result" || other["name"] != "orders__refund" || other["result"].(map[string]any)["_meta"] == nil {
		t.Fatalf("the call beside the aborted one printed %v, want its result", other)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("orders__wait's context ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the aborted call cancelled")
	}

	// A tool's own failure is a result with isError, not an error line.
	if res, _ := lines[8]["result"].(map[string]any); lines[8]["op"] != "result" || res["isError"] != true {
		t.Fatalf("the failing call printed %v, want a result with isError", lines[8])
	}
	if lines[9]["id"] != lines[0]["id"] {
		t.Fatalf("terminate printed %v, want the session %v", lines[9], lines[0]["id"])
	}

	// Only the call that asked for progress sent a progress token.
	close(progressTokens)
	var sent []bool
	for p := range progressTokens {
		sent = append(sent, p != nil)
	}
	if !reflect.DeepEqual(sent, []bool{true, false, false}) {
		t.Fatalf("progress tokens sent per orders__refund call: %v, want only the first", sent)
	}
}

// ops lists the "op" of each line.
func ops(lines []map[string]any) []any {
	var out []any
	for _, l := range lines {
		out = append(out, l["op"])
	}
	return out
}

// jsonLines prints lines back as JSON, one a line, for a test's log.
func jsonLines(lines []map[string]any) string {
	var b strings.Builder
	for _, l := range lines {
		j, _ := json.Marshal(l)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}
