package proctest_test

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"interlock/internal/proctest"
)

// TestNoProcessOutlivesTheTest runs a test (this file's helper, in a test binary of its own)
// whose child, sh, starts a grandchild, sleep 600, and then passes, fails, or runs into the
// test binary's -timeout. In each case neither process may run once the test binary exited;
// the timeout must end the child before the binary's own deadline panic does.
func TestNoProcessOutlivesTheTest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		args    []string
		wantOK  bool
		wantOut string
	}{
		{"passes", nil, true, "PASS"},
		{"fails", nil, false, "the test failed on purpose"},
		{"times out", []string{"-test.timeout=4s"}, false, "signal: killed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := proctest.Command(t, os.Args[0], append([]string{"-test.run=^TestHelperChild$", "-test.v"}, c.args...)...)
			cmd.Env = append(os.Environ(), "PROCTEST_HELPER="+c.name)
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.wantOK || !strings.Contains(string(out), c.wantOut) || strings.Contains(string(out), "panic: test timed out") {
				t.Fatalf("the helper test: %v, want ok=%v and %q in its output:\n%s", err, c.wantOK, c.wantOut, out)
			}
			m := regexp.MustCompile(`PIDS sh=(\d+) sleep=(\d+)`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("the helper printed no pids:\n%s", out)
			}
			for i, name := range []string{"sh", "sleep"} {
				pid, _ := strconv.Atoi(string(m[i+1]))
				if proctest.Alive(pid) {
					t.Errorf("%s (pid %d) still runs after its test ended", name, pid)
				}
			}
		})
	}
}

// TestHelperChild is the test TestNoProcessOutlivesTheTest runs; it does nothing otherwise.
func TestHelperChild(t *testing.T) {
	how := os.Getenv("PROCTEST_HELPER")
	if how == "" {
		t.Skip("run by TestNoProcessOutlivesTheTest")
	}
	cmd := proctest.Command(t, "sh", "-c", "sleep 600 & echo $!; wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("PIDS sh=%d sleep=%s\n", cmd.Process.Pid, strings.TrimSpace(line))
	switch how {
	case "fails":
		t.Fatal("the test failed on purpose")
	case "times out":
		t.Fatalf("sh: %v", cmd.Wait()) // returns only when the deadline's kill ended sh
	}
}
