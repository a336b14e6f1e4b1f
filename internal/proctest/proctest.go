// Package proctest starts a test's child processes so that none of them outlives the test.
//
// A child that builds (go build, gqlgen generate) or installs (npm ci) starts children of its
// own; killing only the direct child leaves those compiling as orphans. So each command runs in
// a process group of its own, and the group is killed when the test ends, passed or failed. A
// test that runs into `go test -timeout` is ended by a panic that runs no cleanup, so the group
// is also killed a little before the test binary's deadline: the test then fails with the
// child's output, and nothing is left to compile on. Should the test binary die regardless
// (SIGKILL), its direct children are sent SIGKILL by the kernel (Linux).
package proctest

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// ErrDeadline is why a command's context ended when the test binary's -timeout was near.
var ErrDeadline = errors.New("proctest: the test binary's -timeout is near: the command was killed")

// Command is exec.Command for a test: its context is the test's (ending a little before the
// test binary's deadline), it runs in a process group of its own, and the whole group is killed
// when the context ends or the test's cleanup runs. Wait (or Run, Output) as usual: after a
// kill, Wait returns within WaitDelay even when a grandchild kept a pipe open.
func Command(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	return CommandContext(t.Context(), t, name, args...)
}

// CommandContext is Command with a context of the test's own (a bound on how long the command
// may take, derived from t.Context()); the group is killed when ctx ends too.
func CommandContext(ctx context.Context, t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadlineCause(ctx, d.Add(-grace(time.Until(d))), ErrDeadline)
			t.Cleanup(cancel)
		}
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = sysProcAttr()
	cmd.Cancel = func() error { return killGroup(cmd) }
	cmd.WaitDelay = 5 * time.Second
	t.Cleanup(func() {
		if cmd.Process == nil {
			return
		}
		killGroup(cmd)
		if left := waitGone(cmd.Process.Pid, 10*time.Second); len(left) > 0 {
			t.Errorf("%s: processes %v of its group still run after SIGKILL", cmd, left)
		}
	})
	return cmd
}

// grace is how long before the test binary's deadline a command is killed: long enough for
// the test to fail and report, short against the time the test has.
func grace(left time.Duration) time.Duration {
	return min(max(left/20, time.Second), 30*time.Second)
}

// killGroup sends SIGKILL to the command's process group (the command and every process it
// started that did not leave the group).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// waitGone waits until no process of the group pgid runs (a zombie, dead and waiting to be
// reaped, does not count), and returns the pids still running when it gives up.
func waitGone(pgid int, within time.Duration) []int {
	deadline := time.Now().Add(within)
	for {
		left := Running(pgid)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond)
	}
}
