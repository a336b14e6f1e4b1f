package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// memSnap is the server's memory right after a garbage collection.
type memSnap struct {
	// GC is the collection's number, LiveMB the live heap it marked (gctrace: whole MB).
	GC, LiveMB int
	// HeapAlloc, HeapInuse and StackInuse are read from /metrics right after the collection
	// (go_memstats_heap_alloc_bytes: the live heap plus what was allocated since, little
	// on an idle server); RSS from /proc.
	HeapAlloc, HeapInuse, StackInuse, RSS int64
	Goroutines                            float64
}

func (m memSnap) heapStacks() int64 { return m.HeapAlloc + m.StackInuse }

// gcTrace reads the collections a server started with GODEBUG=gctrace=1 prints.
type gcTrace struct {
	srv *server
}

// "gc 12 @34.567s 0%: … 61->61->17 MB, 64 MB goal, …": number, start (since the process
// started), heap at start, at end, and live (marked).
var gcLine = regexp.MustCompile(`(?m)^gc (\d+) @([0-9.]+)s .*? (\d+)->(\d+)->(\d+) MB`)

// after waits for the first collection that starts after t (the runtime forces one when none
// ran for two minutes), then reads the server's memory. A reading whose heap is more than
// 2 MiB over the collection's live heap (the server allocated between the collection and the
// reading: the machine was busy) is dropped for the next collection's, five times at most.
func (g gcTrace) after(ctx context.Context, t time.Time) (memSnap, error) {
	since := t.Sub(g.srv.Started).Seconds()
	deadline := time.Now().Add(3 * time.Minute)
	var s memSnap
	for tries := 0; ; {
		for _, m := range gcLine.FindAllStringSubmatch(g.srv.out.String(), -1) {
			at, _ := strconv.ParseFloat(m[2], 64)
			// The process's clock starts after Started: a collection at @at started at
			// Started+at or later, so at > since means after t.
			if at <= since {
				continue
			}
			s = memSnap{}
			s.GC, _ = strconv.Atoi(m[1])
			s.LiveMB, _ = strconv.Atoi(m[5])
			if err := g.read(ctx, &s); err != nil {
				return s, err
			}
			if tries++; s.HeapAlloc <= int64(s.LiveMB+2)<<20 || tries == 5 {
				return s, nil
			}
			since, deadline = at, time.Now().Add(3*time.Minute)
			break
		}
		if time.Now().After(deadline) {
			return memSnap{}, fmt.Errorf("the server collected no garbage within 3 minutes of %s", t.Format(time.TimeOnly))
		}
		select {
		case <-ctx.Done():
			return memSnap{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// read fills s from the server's /metrics and /proc.
func (g gcTrace) read(ctx context.Context, s *memSnap) error {
	m, err := scrape(ctx, g.srv.URL)
	if err != nil {
		return err
	}
	for name, dst := range map[string]*int64{"go_memstats_heap_alloc_bytes": &s.HeapAlloc, "go_memstats_heap_inuse_bytes": &s.HeapInuse, "go_memstats_stack_inuse_bytes": &s.StackInuse} {
		v, ok := m[name]
		if !ok {
			return fmt.Errorf("the server's /metrics lacks %s", name)
		}
		*dst = int64(v)
	}
	s.Goroutines = m["go_goroutines"]
	s.RSS, err = g.srv.RSS()
	return err
}

// scrape reads the single-series metrics of a server's /metrics.
func scrape(ctx context.Context, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the server's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the server's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse the server's metrics: %w", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		if len(f.GetMetric()) != 1 {
			continue
		}
		switch m := f.GetMetric()[0]; f.GetType() {
		case dto.MetricType_GAUGE:
			out[name] = m.GetGauge().GetValue()
		case dto.MetricType_COUNTER:
			out[name] = m.GetCounter().GetValue()
		case dto.MetricType_UNTYPED:
			out[name] = m.GetUntyped().GetValue()
		}
	}
	return out, nil
}

// procCPU is a process's CPU time so far (user and system), in seconds, from /proc.
func procCPU(pid int) (float64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad CPU times", pid)
	}
	const clockTicks = 100 // USER_HZ on Linux
	return (utime + stime) / clockTicks, nil
}

// databasePid is the process id of a MariaDB or MySQL server on this machine (0: none seen).
func databasePid() int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		switch strings.TrimSpace(string(b)) {
		case "mariadbd", "mysqld":
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			return pid
		}
	}
	return 0
}
