package app_test

import (
	"bytes"
	"fmt"
	"interlock/internal/apptest"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the server once per test process and returns its path.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "interlock-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "interlock")
		out, err := exec.Command("go", "build", "-o", binPath, apptest.RepoRoot).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a real server process.
type proc struct {
	*apptest.Server
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan error
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startProc starts the built server on a free port over db and waits until it answers.
func startProc(t testing.TB, db string, args ...string) *proc {
	t.Helper()
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(binary(t), append([]string{"--auth=off", "--addr", addr, "--db", db}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{Server: &apptest.Server{URL: "http://" + addr}, cmd: cmd, out: &out, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("server %s output:\n%s", addr, out.String())
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
		case err := <-p.done:
			t.Fatalf("server exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server on %s did not start:\n%s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill9 ends the process the hard way, as a crash would.
func (p *proc) kill9(t testing.TB) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.done <- nil // for the cleanup
}

var syscallSIGTERM = syscall.SIGTERM
