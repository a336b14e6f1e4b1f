package tools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport starts a stdio server's command with pipes of its own (rather than the SDK's
// CommandTransport, which throws stderr away and reaps the process only when closed): the
// server's stderr goes to the log, its exit is logged when it happens, and its stdout is read
// to the end even after it exited.
type stdioTransport struct {
	cfg  MCPConfig
	proc *process
}

func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(t.cfg.Command[0], t.cfg.Command[1:]...)
	cmd.Env = stdioEnv(os.Environ(), t.cfg.Env)
	var files []*os.File // the child's ends, closed here once it has them
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		return
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
		return nil, err
	}
	files = append(files, inR, outW, errW)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	err = cmd.Start()
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	p := t.proc
	p.cmd, p.stdin = cmd, inW
	p.log = p.log.With("pid", cmd.Process.Pid)
	go p.logStderr(errR)
	go p.wait()
	inner, err := (&mcp.IOTransport{Reader: outR, Writer: p, MaxLineLength: maxMCPMessage}).Connect(ctx)
	if err != nil {
		p.stop()
		return nil, err
	}
	return &deliveryConn{Connection: inner, waiting: map[any]*delivery{}}, nil
}

// process is a running stdio server. It is the writer of the connection: closing the
// connection closes the server's stdin, which asks it to exit (then SIGTERM, then SIGKILL, as
// the MCP specification says), in the background.
type process struct {
	log      *slog.Logger
	cmd      *exec.Cmd
	stdin    *os.File
	stopping atomic.Bool // Interlock means the process to exit: its exit is not news
	exited   chan struct{}
	stopOnce sync.Once
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close is the connection's end (which the SDK also reaches when the process closed its
// stdout): the process is made to exit without waiting for it.
func (p *process) Close() error {
	p.shutdown()
	return nil
}

// stop is Interlock ending the process on purpose; its exit is not logged as a death.
func (p *process) stop() {
	p.stopping.Store(true)
	p.shutdown()
}

// shutdown makes the process exit: stdin closed; SIGTERM after 5 s; SIGKILL 5 s later.
func (p *process) shutdown() {
	p.stopOnce.Do(func() {
		if p.stdin != nil {
			p.stdin.Close()
		}
		if p.cmd == nil || p.cmd.Process == nil {
			close(p.exited)
			return
		}
		go func() {
			for _, sig := range []os.Signal{syscall.SIGTERM, os.Kill} {
				select {
				case <-p.exited:
					return
				case <-time.After(5 * time.Second):
					p.cmd.Process.Signal(sig)
				}
			}
		}()
	})
}

// abandon ends a process that did not answer initialize in time, and returns once it has
// exited: it has done no work for Interlock, so it gets SIGTERM at once and SIGKILL 2 s later,
// not the grace a working server gets. Returning before it is gone would leave it behind when
// Interlock exits right after a failed start (the command ends with the error).
func (p *process) abandon() {
	p.stop()
	if p.cmd == nil || p.cmd.Process == nil || p.exitedNow() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// waitExit waits for the process to exit, at most as long as stop takes to kill it.
func (p *process) waitExit() {
	p.stop()
	select {
	case <-p.exited:
	case <-time.After(12 * time.Second):
	}
}

func (p *process) exitedNow() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// wait reaps the process and logs its exit: as a warning when nobody asked it to stop.
func (p *process) wait() {
	err := p.cmd.Wait()
	close(p.exited)
	status := "exit status 0"
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		status = exit.ProcessState.String()
	} else if err != nil {
		status = err.Error()
	}
	if p.stopping.Load() {
		p.log.Debug("MCP server process stopped", "status", status)
		return
	}
	p.log.Warn("MCP server process exited", "status", status)
}

// Stderr lines are logged at most stderrBurst at once and stderrPerSecond after that; the rest
// are counted, and the count logged when lines may be logged again. Lines are cut at
// maxStderrLine bytes.
const (
	stderrBurst     = 50
	stderrPerSecond = 10
	maxStderrLine   = 4 << 10
)

// logStderr logs each line the server writes to stderr, at a bounded rate.
func (p *process) logStderr(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, maxStderrLine)
	tokens, last, dropped := float64(stderrBurst), time.Now(), 0
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// The rest of an over-long line is skipped (line is bufio's buffer: copied first).
			line = append(append([]byte(nil), line...), "…"...)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
		}
		if len(line) > 0 {
			now := time.Now()
			tokens = min(stderrBurst, tokens+now.Sub(last).Seconds()*stderrPerSecond)
			last = now
			if tokens >= 1 {
				tokens--
				if dropped > 0 {
					p.log.Warn(fmt.Sprintf("MCP server stderr: %d lines not logged (too many)", dropped))
					dropped = 0
				}
				p.log.Info("MCP server stderr", "line", string(trimEOL(line)))
			} else {
				dropped++
			}
		}
		if err != nil {
			if dropped > 0 {
				p.log.Warn(fmt.Sprintf("MCP server stderr: %d lines not logged (too many)", dropped))
			}
			return
		}
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
