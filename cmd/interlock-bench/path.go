package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"interlock/gormstore"
	"interlock/runtype"
)

// pathResult is one figure of the rest of the path.
type pathResult struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Note  string  `json:"note,omitempty"`
}

// path runs one of the measurements of the rest of the path, each on a server of its own.
func (b *bench) path(ctx context.Context, cmd string) ([]pathResult, error) {
	switch cmd {
	case "create":
		return b.create(ctx)
	case "approve":
		return b.approve(ctx)
	case "subs":
		return b.subscriptions(ctx)
	case "decide":
		return b.decide(ctx)
	case "start":
		return b.startup(ctx)
	case "gateway":
		return b.gateway(ctx)
	}
	return nil, fmt.Errorf("unknown command %q", cmd)
}

const startRunMutation = `mutation($input: StartRunInput!) { startRun(input: $input) { runId } }`

// startInput is a startRun of the i-th run the path measurements make.
func (b *bench) startInput(i int, prompt string) map[string]any {
	return map[string]any{"input": map[string]any{
		"agentId": agentID(i % b.o.Agents), "prompt": prompt,
		"threadId": fmt.Sprintf("bench-thread-%d", i%b.o.Threads), "resourceId": fmt.Sprintf("bench-resource-%d", i%b.o.Resources),
	}}
}

// countStatus counts the runs in a status.
func (b *bench) countStatus(ctx context.Context, st runtype.Status) (int64, error) {
	var n int64
	err := b.db.WithContext(ctx).Model(&gormstore.Run{}).Where("status = ?", st).Count(&n).Error
	return n, err
}

// waitNone waits until no run is in status st (the server has finished what it was given).
func (b *bench) waitNone(ctx context.Context, st runtype.Status, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		n, err := b.countStatus(ctx, st)
		if err != nil || n == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d runs still %s after %s", n, st, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// driven is what drive measured.
type driven struct {
	ok, failed int64
	firstErr   error
	// accepted is the time from the first call until the last answered; completed, until no
	// run was RUNNING any more.
	accepted, completed time.Duration
}

// drive makes calls from --concurrency clients at once, the i-th being call(i); each client
// stops at the first call that reports there is nothing more to do (more false, its error
// ignored), so call must keep saying so once it has. Then drive waits until the server has
// finished the runs the calls started or continued.
func (b *bench) drive(ctx context.Context, call func(i int) (more bool, err error)) (driven, error) {
	var d driven
	var ok, failed, next atomic.Int64
	var once sync.Once
	begin := time.Now()
	var wg sync.WaitGroup
	for range b.o.Concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				more, err := call(int(next.Add(1) - 1))
				switch {
				case !more:
					return
				case err != nil:
					failed.Add(1)
					once.Do(func() { d.firstErr = err })
				default:
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	d.accepted = time.Since(begin)
	d.ok, d.failed = ok.Load(), failed.Load()
	if err := b.waitNone(ctx, runtype.StatusRunning, 5*time.Minute); err != nil {
		return d, err
	}
	d.completed = time.Since(begin)
	return d, ctx.Err()
}

// create starts runs the demo model completes in one step, from --concurrency clients for
// --duration, and reports how many a second the server accepted and how many it finished
// (from the first start until the last run completed).
func (b *bench) create(ctx context.Context) ([]pathResult, error) {
	srv, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	client := newGQLClient(srv.URL)
	stop := time.Now().Add(b.o.Duration)
	d, err := b.drive(ctx, func(i int) (bool, error) {
		if time.Now().After(stop) {
			return false, nil
		}
		return true, client.do(ctx, startRunMutation, b.startInput(i, fmt.Sprintf("hello, bench %d", i)), nil)
	})
	if err != nil {
		return nil, err
	}
	if d.firstErr != nil {
		fmt.Fprintf(b.log, "create: %d startRun calls failed, the first with: %v\n", d.failed, d.firstErr)
	}
	n := float64(d.ok)
	note := fmt.Sprintf("%d runs, %d clients, %s", d.ok, b.o.Concurrency, b.db.Dialector.Name())
	return []pathResult{
		{"runs started per second (startRun accepted)", n / d.accepted.Seconds(), "runs/s", note},
		{"runs completed per second (first start to last completion)", n / d.completed.Seconds(), "runs/s", note},
	}, nil
}

// suspendRuns starts n refund runs and waits until all of them wait for approval; it returns
// their ids.
func (b *bench) suspendRuns(ctx context.Context, client *gqlClient, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		var out struct{ StartRun struct{ RunID string } }
		if err := client.do(ctx, startRunMutation, b.startInput(i, fmt.Sprintf("refund order %d for 5", i)), &out); err != nil {
			return nil, err
		}
		ids[i] = out.StartRun.RunID
	}
	return ids, b.waitNone(ctx, runtype.StatusRunning, 5*time.Minute)
}

const approveMutation = `mutation($runId: ID!) { approveToolCall(runId: $runId) { runId status } }`

const followSubscription = `subscription($runId: ID!, $after: Int) { runEvents(runId: $runId, after: $after) { seq type } }`

// approve times, for --samples runs one after another, from sending approveToolCall to the
// first event of the continued run arriving on a WebSocket subscription to the same instance.
func (b *bench) approve(ctx context.Context) ([]pathResult, error) {
	srv, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	client := newGQLClient(srv.URL)
	ids, err := b.suspendRuns(ctx, client, b.o.Samples)
	if err != nil {
		return nil, err
	}
	ws, err := dialWS(ctx, srv.URL)
	if err != nil {
		return nil, err
	}
	defer ws.Close()
	var times []time.Duration
	for _, id := range ids {
		var run struct{ Run struct{ LastEventSeq int64 } }
		if err := client.do(ctx, `query($id: ID!) { run(runId: $id) { lastEventSeq } }`, map[string]any{"id": id}, &run); err != nil {
			return nil, err
		}
		evs, err := ws.subscribe(ctx, followSubscription, map[string]any{"runId": id, "after": run.Run.LastEventSeq})
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := client.do(ctx, approveMutation, map[string]any{"runId": id}, nil); err != nil {
			return nil, err
		}
		select {
		case m, ok := <-evs:
			if !ok || m.Type != "next" {
				return nil, fmt.Errorf("run %s: the subscription ended without an event (%s)", id, m.Payload)
			}
			times = append(times, time.Since(t0))
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("run %s: no event within 30s of its approval", id)
		}
		for range evs { // the rest of the run, to its end
		}
	}
	note := fmt.Sprintf("%d runs, one at a time, %s", len(times), b.db.Dialector.Name())
	return []pathResult{
		{"approve → first event, p50", pct(times, 50), "ms", note},
		{"approve → first event, p99", pct(times, 99), "ms", note},
	}, nil
}

// suspendedIDs returns up to n ids of suspended runs, newest first.
func (b *bench) suspendedIDs(ctx context.Context, n int) ([]string, error) {
	var ids []string
	err := b.db.WithContext(ctx).Model(&gormstore.Run{}).Where("status = ?", runtype.StatusSuspended).
		Order("created_at DESC, id DESC").Limit(n).Pluck("id", &ids).Error
	return ids, err
}

// subscriptions opens --subs runEvents subscriptions on suspended runs (seeded ones, or runs
// it suspends first), --subs-per-socket to a WebSocket, waits until each has received the
// run's stored events, and reads the server's RSS before and after.
func (b *bench) subscriptions(ctx context.Context) ([]pathResult, error) {
	srv, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	ids, err := b.suspendedIDs(ctx, b.o.Subs)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		if ids, err = b.suspendRuns(ctx, newGQLClient(srv.URL), min(b.o.Subs, 1000)); err != nil {
			return nil, err
		}
	}
	time.Sleep(time.Second)
	before, err := srv.RSS()
	if err != nil {
		return nil, err
	}
	var sockets []*wsConn
	defer func() {
		for _, s := range sockets {
			s.Close()
		}
	}()
	var chans []<-chan wsMessage
	for i := 0; i < b.o.Subs; i++ {
		if i%b.o.PerWS == 0 {
			s, err := dialWS(ctx, srv.URL)
			if err != nil {
				return nil, fmt.Errorf("after %d sockets: %w", len(sockets), err)
			}
			sockets = append(sockets, s)
		}
		ch, err := sockets[len(sockets)-1].subscribe(ctx, followSubscription, map[string]any{"runId": ids[i%len(ids)], "after": 0})
		if err != nil {
			return nil, err
		}
		chans = append(chans, ch)
	}
	for i, ch := range chans {
		select {
		case m, ok := <-ch:
			if !ok || m.Type != "next" {
				return nil, fmt.Errorf("subscription %d ended before its first event (%s)", i, m.Payload)
			}
		case <-time.After(time.Minute):
			return nil, fmt.Errorf("subscription %d: no event within a minute", i)
		}
	}
	time.Sleep(2 * time.Second)
	after, err := srv.RSS()
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("%d subscriptions on %d sockets, %s", len(chans), len(sockets), b.db.Dialector.Name())
	return []pathResult{
		{"server RSS before the subscriptions", mib(before), "MiB", note},
		{"server RSS with the subscriptions open", mib(after), "MiB", note},
		{"RSS per subscription", float64(after-before) / float64(len(chans)) / 1024, "KiB", note},
	}, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// decide approves --decisions suspended runs (seeded ones, or runs it suspends first) from
// --concurrency clients, and reports decisions a second: accepted, and until every approved
// run completed.
func (b *bench) decide(ctx context.Context) ([]pathResult, error) {
	srv, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	client := newGQLClient(srv.URL)
	ids, err := b.suspendedIDs(ctx, b.o.Decisions)
	if err != nil {
		return nil, err
	}
	if len(ids) < b.o.Decisions {
		more, err := b.suspendRuns(ctx, client, b.o.Decisions-len(ids))
		if err != nil {
			return nil, err
		}
		ids = append(ids, more...)
	}
	d, err := b.drive(ctx, func(i int) (bool, error) {
		if i >= len(ids) {
			return false, nil
		}
		return true, client.do(ctx, approveMutation, map[string]any{"runId": ids[i]}, nil)
	})
	if err != nil {
		return nil, err
	}
	if d.firstErr != nil {
		return nil, fmt.Errorf("%d of %d approvals failed, the first with: %w", d.failed, len(ids), d.firstErr)
	}
	n := float64(len(ids))
	note := fmt.Sprintf("%d approvals, %d clients, %s", len(ids), b.o.Concurrency, b.db.Dialector.Name())
	return []pathResult{
		{"decisions accepted per second", n / d.accepted.Seconds(), "decisions/s", note},
		{"decided runs completed per second", n / d.completed.Seconds(), "runs/s", note},
	}, nil
}

// startup starts the server --samples times on --db, timing exec → first answer of /healthz,
// and reads the RSS of the last one after it has been idle for 5s.
func (b *bench) startup(ctx context.Context) ([]pathResult, error) {
	var times []time.Duration
	var rss int64
	for i := 0; i < b.o.Samples; i++ {
		srv, err := b.start(ctx)
		if err != nil {
			return nil, err
		}
		times = append(times, srv.Ready)
		if i == b.o.Samples-1 {
			time.Sleep(5 * time.Second)
			rss, err = srv.RSS()
		}
		srv.Stop()
		if err != nil {
			return nil, err
		}
	}
	if len(times) == 0 {
		return nil, errors.New("no start measured")
	}
	note := fmt.Sprintf("%d starts, %s", len(times), b.db.Dialector.Name())
	return []pathResult{
		{"start to ready (exec → /healthz answers), p50", pct(times, 50), "ms", note},
		{"start to ready, max", pct(times, 100), "ms", note},
		{"idle RSS (5s after start)", mib(rss), "MiB", note},
	}, nil
}

func printPath(w io.Writer, rs []pathResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tvalue\tunit\tnote")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%s\n", r.Name, r.Value, r.Unit, r.Note)
	}
	tw.Flush()
}
