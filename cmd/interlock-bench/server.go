package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// server is a real Interlock process over the bench database, started with the bench agents.
type server struct {
	URL     string
	cmd     *exec.Cmd
	out     lockedBuffer
	done    chan error
	Started time.Time
	// Ready is how long the process took from exec to its first answer on /healthz.
	Ready time.Duration
}

// buildServer compiles the server (the module's root package) into dir.
func buildServer(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		return "", fmt.Errorf("find the module root (run from inside the repository, or pass --server): %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "interlock")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build the server: %v\n%s", err, out)
	}
	return bin, nil
}

// startServer runs bin on a free port over db with the config file cfgFile. Retention is long
// (seeded runs are up to Days old and must stay) and the mutation rate limit is off (the load
// generator is one client).
func startServer(ctx context.Context, bin, db, cfgFile string, extra ...string) (*server, error) {
	return startServerEnv(ctx, bin, db, cfgFile, nil, extra...)
}

// startServerEnv is startServer with env added to the process's environment.
func startServerEnv(ctx context.Context, bin, db, cfgFile string, env []string, extra ...string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	args := append([]string{"--auth=off", "--addr", addr, "--db", db, "--config", cfgFile,
		"--retention", "87600h", "--mutation-rate", "0", "--max-connections-per-principal", "0"}, extra...)
	s := &server{URL: "http://" + addr, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	if env != nil {
		s.cmd.Env = append(os.Environ(), env...)
	}
	s.Started = time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(s.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.Ready = time.Since(s.Started)
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("the server exited: %v\n%s", err, s.out.String())
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("the server did not answer within 2 minutes:\n%s", s.out.String())
		}
	}
}

// lockedBuffer is the server's output, which its process writes while the bench reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// RSS is the server process's resident set size in bytes, from /proc.
func (s *server) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read the server's memory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", s.cmd.Process.Pid)
}

// Counters reads the server's CPU time (user and system) and number of garbage collections
// so far from its /metrics: what a stretch of requests cost the server is the difference.
func (s *server) Counters(ctx context.Context) (cpuSeconds, gcs float64, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("read the server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("read the server's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, 0, fmt.Errorf("parse the server's metrics: %w", err)
	}
	cpu, gc := fams["process_cpu_seconds_total"], fams["go_gc_duration_seconds"]
	if len(cpu.GetMetric()) == 0 || len(gc.GetMetric()) == 0 {
		return 0, 0, fmt.Errorf("the server's /metrics lacks process_cpu_seconds_total or go_gc_duration_seconds")
	}
	return cpu.GetMetric()[0].GetCounter().GetValue(), float64(gc.GetMetric()[0].GetSummary().GetSampleCount()), nil
}

// Stop ends the server with SIGTERM (a graceful stop), or kills it after 15s.
func (s *server) Stop() {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}
