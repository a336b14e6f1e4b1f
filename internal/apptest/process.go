package apptest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"interlock/internal/proctest"
)

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary builds the server once per test process and returns its path.
//
// Under the race detector tests that run the binary are skipped: the detector cannot see into
// another process, and the run without it covers them.
func Binary(t testing.TB) string {
	t.Helper()
	if raceEnabled {
		t.Skip("-race: tests of the server as a process run without the race detector")
	}
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "interlock-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "interlock")
		out, err := proctest.Command(t, "go", "build", "-o", build.path, RepoRoot).CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// Proc is the built server running as a process of its own (for crashes, signals, several
// instances over one database), with the API client of a Server (its App is nil).
type Proc struct {
	*Server
	cmd    *exec.Cmd
	out    SyncBuffer
	exited chan struct{}
	err    error // how the process exited, once exited is closed
}

// FreePort is a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// StartProc starts the built server on a free port over db, authentication off unless args
// turn it on, and waits until it answers /healthz. The test's end kills it (proctest.Command);
// its output is logged when the test failed.
func StartProc(t testing.TB, db string, args ...string) *Proc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	cmd := proctest.Command(t, Binary(t), append([]string{"--auth=off", "--addr", addr, "--db", db}, args...)...)
	p := &Proc{Server: &Server{URL: "http://" + addr}, cmd: cmd, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("server %s output:\n%s", addr, p.Output())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(p.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("server exited: %v\n%s", p.err, p.Output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server on %s did not start:\n%s", addr, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Terminate asks the server to stop, as an orchestrator does (SIGTERM); Wait tells how it ended.
func (p *Proc) Terminate() { p.cmd.Process.Signal(syscall.SIGTERM) }

// Wait waits for the process to exit and returns how it did (nil: exit status 0).
func (p *Proc) Wait() error {
	<-p.exited
	return p.err
}

// Kill9 ends the process the hard way, as a crash would, and waits until it is gone.
func (p *Proc) Kill9(t testing.TB) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Output is what the process wrote to stdout and stderr so far.
func (p *Proc) Output() string { return p.out.String() }

// SyncBuffer is a bytes.Buffer one goroutine (a process, a logger) writes while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
