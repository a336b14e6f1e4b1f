package tools_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"interlock/agent"
	"interlock/tools"
)

// faultServer is an MCP server whose tools misbehave on request. write_file counts its calls
// (through count) and then does what its "then" argument says: "die" calls die (the stdio
// server exits; the HTTP test cuts the connection). slow says it started and blocks until
// release returns, ignoring cancellation, as a stubborn server does. echo answers with the
// server's pid, big with n bytes of text, image with a PNG.
func faultServer(count func(), die func(), started func(), release func()) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	type writeIn struct {
		Then string `json:"then,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "write_file"}, func(ctx context.Context, _ *mcp.CallToolRequest, in writeIn) (*mcp.CallToolResult, any, error) {
		count()
		if in.Then == "die" {
			die()
		}
		return text("written"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "slow"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		started()
		release()
		return text("slow done"), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprintf("pid %d", os.Getpid())), nil, nil
	})
	type bigIn struct {
		N int `json:"n"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(ctx context.Context, _ *mcp.CallToolRequest, in bigIn) (*mcp.CallToolResult, any, error) {
		count()
		return text(strings.Repeat("x", in.N)), nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "image"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "the chart:"},
			&mcp.ImageContent{Data: []byte("\x89PNG"), MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///r.txt", MIMEType: "text/plain", Text: "notes"}},
		}}, nil, nil
	})
	return s
}

// runFaultServer is the test binary as the stdio fault server: calls are counted as lines of
// the file INTERLOCK_TEST_MCP_CALLS; slow writes its pid to INTERLOCK_TEST_MCP_STARTED and
// waits for INTERLOCK_TEST_MCP_RELEASE to exist; "die" exits at once with status 3.
func runFaultServer() {
	appendLine := func(path, line string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
	fmt.Fprintln(os.Stderr, "fault server listening on stdio")
	s := faultServer(
		func() { appendLine(os.Getenv("INTERLOCK_TEST_MCP_CALLS"), fmt.Sprint(os.Getpid())) },
		func() { os.Exit(3) },
		func() { appendLine(os.Getenv("INTERLOCK_TEST_MCP_STARTED"), fmt.Sprint(os.Getpid())) },
		func() {
			for {
				if _, err := os.Stat(os.Getenv("INTERLOCK_TEST_MCP_RELEASE")); err == nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// stdioFault is a stdio fault server's config, with its files in dir, and a log tests read.
type stdioFault struct {
	cfg                     tools.MCPConfig
	calls, started, release string
	log                     *syncBuffer
}

func newStdioFault(t *testing.T) *stdioFault {
	t.Helper()
	dir := t.TempDir()
	f := &stdioFault{calls: filepath.Join(dir, "calls"), started: filepath.Join(dir, "started"), release: filepath.Join(dir, "release"), log: &syncBuffer{}}
	f.cfg = tools.MCPConfig{Name: "files", Command: []string{os.Args[0]}, Timeout: 20 * time.Second,
		Env: map[string]string{"INTERLOCK_TEST_MCP_STDIO": "fault", "INTERLOCK_TEST_MCP_CALLS": f.calls,
			"INTERLOCK_TEST_MCP_STARTED": f.started, "INTERLOCK_TEST_MCP_RELEASE": f.release},
		Logger: slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	return f
}

func (f *stdioFault) connect(t *testing.T) *tools.MCPServer {
	t.Helper()
	srv, err := tools.ConnectMCP(context.Background(), f.cfg, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(f.release, nil, 0o600) // let a slow call end, and its process exit
		srv.Close()
	})
	return srv
}

// lines reads a file of lines (calls, started), none when it does not exist.
func lines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Fields(string(b))
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually waits (boundedly) for cond, for things another process or goroutine does.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
	}
}

// wantUnknown checks err is an outcome-unknown error with the reason given.
func wantUnknown(t *testing.T, err error, reason string) {
	t.Helper()
	var unknown *agent.OutcomeUnknown
	if !errors.As(err, &unknown) || unknown.Reason != reason {
		t.Fatalf("error %v, want the outcome unknown: %q", err, reason)
	}
}

// TestMCPStdioServerDiesMidCall: a call the server received is never sent again, not even to
// the new process: its outcome is unknown, for a person to decide. The death is logged once
// with its status, and the restart once; the next call goes to a new process.
func TestMCPStdioServerDiesMidCall(t *testing.T) {
	t.Parallel()
	f := newStdioFault(t)
	srv := f.connect(t)
	_, err := srv.Execute("write_file")(context.Background(), call(`{"then":"die"}`))
	wantUnknown(t, err, "the MCP server files stopped while executing write_file, so whether it took effect is unknown; approve to run it again or decline")
	if got := lines(f.calls); len(got) != 1 {
		t.Fatalf("the call reached the server %d times (pids %v), want once", len(got), got)
	}
	v, err := srv.Execute("write_file")(context.Background(), call(`{}`))
	if err != nil || v != "written" {
		t.Fatalf("the next call: %v, %v", v, err)
	}
	got := lines(f.calls)
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("calls by pids %v, want one each by the dead process and its successor", got)
	}
	eventually(t, "the death in the log", func() bool { return strings.Contains(f.log.String(), "MCP server process exited") })
	log := f.log.String()
	if strings.Count(log, "MCP server process exited") != 1 || !strings.Contains(log, "status=\"exit status 3\"") ||
		strings.Count(log, "MCP server restarted") != 1 || !strings.Contains(log, "mcpServer=files") {
		t.Fatalf("log:\n%s", log)
	}
}

// TestMCPHTTPConnectionCutMidCall: the same for a url server whose connection is cut while it
// executes a call.
func TestMCPHTTPConnectionCutMidCall(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var hs *httptest.Server
	s := faultServer(func() { calls.Add(1) }, func() { hs.CloseClientConnections() }, func() {}, func() {})
	hs = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer hs.Close()
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "files", URL: hs.URL, Timeout: 20 * time.Second}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	_, err = srv.Execute("write_file")(context.Background(), call(`{"then":"die"}`))
	wantUnknown(t, err, "the connection to the MCP server files broke while executing write_file, so whether it took effect is unknown; approve to run it again or decline")
	if calls.Load() != 1 {
		t.Fatalf("the call reached the server %d times, want once", calls.Load())
	}
	if v, err := srv.Execute("write_file")(context.Background(), call(`{}`)); err != nil || v != "written" || calls.Load() != 2 {
		t.Fatalf("the next call: %v, %v, %d calls", v, err, calls.Load())
	}
}

// TestMCPOversizedResult: a result over 1 MiB is not passed on; the model is told the tool ran
// and its result was too large (not that its outcome is unknown), and it is not sent again.
// Past what Interlock reads of one message (16 MiB) the session ends, with the same answer.
func TestMCPOversizedResult(t *testing.T) {
	t.Parallel()
	f := newStdioFault(t)
	srv := f.connect(t)
	for i, n := range []int{2 << 20, 17 << 20} {
		_, err := srv.Execute("big")(context.Background(), call(fmt.Sprintf(`{"n":%d}`, n)))
		var unknown *agent.OutcomeUnknown
		if err == nil || errors.As(err, &unknown) || !strings.Contains(err.Error(), "the MCP tool ran, but its result") || !strings.Contains(err.Error(), "larger than the 1048576 bytes") {
			t.Fatalf("%d bytes: error %v", n, err)
		}
		if got := len(lines(f.calls)); got != i+1 {
			t.Fatalf("%d bytes: the server ran %d calls, want %d", n, got, i+1)
		}
	}
	if v, err := srv.Execute("big")(context.Background(), call(`{"n":10}`)); err != nil || v != "xxxxxxxxxx" {
		t.Fatalf("a small result: %v, %v", v, err)
	}

	var calls atomic.Int64
	s := faultServer(func() { calls.Add(1) }, func() {}, func() {}, func() {})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer hs.Close()
	hsrv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "files", URL: hs.URL}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer hsrv.Close()
	_, err = hsrv.Execute("big")(context.Background(), call(`{"n":2000000}`))
	if err == nil || !strings.Contains(err.Error(), "the MCP tool ran, but its result (2000000 bytes) is larger") || calls.Load() != 1 {
		t.Fatalf("url server: error %v after %d calls", err, calls.Load())
	}
}

// TestMCPSlowCallDoesNotStallOthers: a call that blocks does not hold up other calls to the
// same server, and when it times out the session (and the stdio process) stays: the next call
// is answered by the same process while the stubborn call is still running in it.
func TestMCPSlowCallDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	f := newStdioFault(t)
	f.cfg.Timeout = 3 * time.Second
	srv := f.connect(t)
	echo := func() string {
		t.Helper()
		v, err := srv.Execute("echo")(context.Background(), call(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return v.(string)
	}
	slowDone := make(chan error, 1)
	go func() {
		_, err := srv.Execute("slow")(context.Background(), call(`{}`))
		slowDone <- err
	}()
	eventually(t, "the slow call starting", func() bool { return len(lines(f.started)) == 1 })
	pid := "pid " + lines(f.started)[0]
	if got := echo(); got != pid {
		t.Fatalf("echo while the slow call runs: %q, want %q", got, pid)
	}
	select {
	case err := <-slowDone:
		t.Fatalf("the slow call ended (%v) before the fast one was answered", err)
	default:
	}
	err := <-slowDone
	var unknown *agent.OutcomeUnknown
	if !errors.As(err, &unknown) || unknown.ModelError != "the MCP tool did not answer within 3s" ||
		!strings.HasPrefix(unknown.Reason, "the MCP server files did not answer slow within 3s after the call was sent") {
		t.Fatalf("slow call: %v; want its outcome unknown, the model told it timed out", err)
	}
	if got := echo(); got != pid {
		t.Fatalf("echo after the slow call timed out: %q, want the same process's %q", got, pid)
	}
	if strings.Contains(f.log.String(), "restarted") {
		t.Fatalf("a timeout restarted the server:\n%s", f.log.String())
	}
}

// TestMCPStartTimeout: a server that never answers initialize fails the start within the start
// timeout, with an error naming it (it hung for ever), and its process has ended by then: one
// left to exit later outlived an interlock that exits on the failed start (and these tests).
func TestMCPStartTimeout(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	done := make(chan error, 1)
	go func() {
		_, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "mute-server", Command: []string{os.Args[0]},
			Env:          map[string]string{"INTERLOCK_TEST_MCP_STDIO": "mute", "INTERLOCK_TEST_MCP_PIDFILE": pidFile},
			StartTimeout: 3 * time.Second}, "test") // long enough for the server to write its pid on a busy machine
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || err.Error() != "MCP server mute-server did not answer initialize within 3s (mcpServers[].startTimeout)" {
			t.Fatalf("error %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ConnectMCP still waits for a server that never answers")
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the mute server wrote no pid: %v", err)
	}
	pid, _ := strconv.Atoi(string(raw))
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Errorf("the mute server (pid %d) still runs after the failed start (%v): it is left behind when Interlock exits", pid, err)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestMCPStderrInTheLog: what a stdio server writes to stderr is in the log, with its name.
func TestMCPStderrInTheLog(t *testing.T) {
	t.Parallel()
	f := newStdioFault(t)
	f.connect(t)
	eventually(t, "the stderr line in the log", func() bool {
		return strings.Contains(f.log.String(), `msg="MCP server stderr" mcpServer=files`) &&
			strings.Contains(f.log.String(), `line="fault server listening on stdio"`)
	})
}

// TestMCPNonTextContent: an image or a resource in a result is described to the model, not
// dropped.
func TestMCPNonTextContent(t *testing.T) {
	t.Parallel()
	s := faultServer(func() {}, func() {}, func() {}, func() {})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer hs.Close()
	srv, err := tools.ConnectMCP(context.Background(), tools.MCPConfig{Name: "files", URL: hs.URL}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	v, err := srv.Execute("image")(context.Background(), call(`{}`))
	want := "the chart:\n[image: image/png, 4 bytes, not shown]\n[resource file:///r.txt (text/plain)]\nnotes"
	if err != nil || v != want {
		t.Fatalf("result %q, %v\nwant %q", v, err, want)
	}
}
