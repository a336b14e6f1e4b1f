package runs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/gormstore"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
	"interlock/tools"
)

// outageRuns is how many runs each instance starts before the database goes away: tools of all
// of them are in flight when it does.
const outageRuns = 20

// outageLength is how long the database is away: well within the default lease (30 s) less its
// margin, so no instance may give a run up, and far beyond what a write is retried within.
const outageLength = 15 * time.Second

// TestDatabaseFaultsAtScale: two instances over one MariaDB database, both through a TCP proxy
// the test controls, with the default 30 s lease, run 40 refunds whose tool is a real HTTP
// endpoint that counts the executions of each call. While every tool is in flight the database
// goes away for 15 s — refused (an outage), silent (a freeze: nothing answers, nothing fails), or
// with every connection killed again and again — and half of the tools finish during it, half
// after. Afterwards no call was reported interrupted, no late result was needed, every call was
// executed exactly once, and every run completed.
func TestDatabaseFaultsAtScale(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name       string
		start, end func(p *dbtest.Proxy)
	}{
		{"outage", func(p *dbtest.Proxy) { p.Cut(true) }, func(p *dbtest.Proxy) { p.Restore() }},
		{"freeze", func(p *dbtest.Proxy) { p.Freeze() }, func(p *dbtest.Proxy) { p.Restore() }},
		{"killed-connections", nil, nil}, // set below: a loop that kills every connection
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) {
			t.Parallel()
			start, end := fault.start, fault.end
			if start == nil {
				var stop chan struct{}
				var done sync.WaitGroup
				start = func(p *dbtest.Proxy) {
					stop = make(chan struct{})
					done.Go(func() {
						tick := time.NewTicker(300 * time.Millisecond)
						defer tick.Stop()
						for {
							p.Cut(false)
							select {
							case <-stop:
								return
							case <-tick.C:
							}
						}
					})
				}
				end = func(*dbtest.Proxy) { close(stop); done.Wait() }
			}
			faultAtScale(t, start, end)
		})
	}
}

func faultAtScale(t *testing.T, start, end func(*dbtest.Proxy)) {
	direct, proxied, proxy := proxiedInstances(t, 2)
	be := newRefundBackend(t)
	logs := newTimeline()
	var fleet []*fixture
	for i, db := range proxied {
		a := &agent.Agent{ID: "refunds", Name: "Refunds", Model: &llm.Demo{}, Tools: []*agent.Tool{{
			Name: "issue_refund", InputSchema: json.RawMessage(`{"type":"object"}`),
			ExecuteFunc: tools.HTTPExecute(tools.HTTPConfig{URL: be.url, Timeout: 2 * time.Minute}),
		}}}
		name := string(rune('a' + i))
		fleet = append(fleet, setupWith(t, db, runs.Config{InstanceID: name, Logger: slog.New(timelineLog{name: name, tl: logs})},
			setupOpts{agents: []*agent.Agent{a}}))
	}
	t.Cleanup(func() { proxy.Restore(); be.open(0); be.open(1) }) // before the services close

	var ids []string
	for n := range outageRuns * len(fleet) {
		f := fleet[n%len(fleet)]
		ids = append(ids, f.start(t, runs.StartParams{AgentID: "refunds", Prompt: fmt.Sprintf("refund order %d", n+1)}).ID)
	}
	be.waitArrived(t, len(ids), time.Minute)

	began := time.Now()
	start(proxy)
	be.open(0) // the odd orders' refunds finish while the database is away
	time.Sleep(outageLength)
	end(proxy)
	restored := time.Now()
	be.open(1) // the even orders' refunds finish once it is back

	settled, by := waitSettled(t, direct, ids, 3*time.Minute)
	if by[string(runtype.StatusCompleted)] != len(ids) {
		t.Errorf("runs by status: %v; want all %d COMPLETED", by, len(ids))
	}
	t.Logf("%d runs on %d instances; the database away for %s; all runs settled %s after it came back; "+
		"results stored after retrying: %d; leases not renewed in time: %d; runs taken over: %d",
		len(ids), len(fleet), restored.Sub(began).Round(time.Millisecond), settled.Sub(restored).Round(time.Millisecond),
		count(logs, "run: tool result stored after retrying"), count(logs, "run: cannot renew the lease; stopping"), count(logs, "recovering run"))

	var interrupted, late int64
	if err := direct.Model(&gormstore.Event{}).Where("run_id IN ? AND type = ?", ids, runtype.EventToolCallInterrupted).Count(&interrupted).Error; err != nil {
		t.Fatal(err)
	}
	if err := direct.Model(&gormstore.LateToolResult{}).Where("run_id IN ?", ids).Count(&late).Error; err != nil {
		t.Fatal(err)
	}
	if interrupted != 0 || late != 0 {
		t.Errorf("%d calls reported interrupted, %d late results; want none", interrupted, late)
	}
	var results []gormstore.Event
	if err := direct.Where("run_id IN ? AND type = ?", ids, runtype.EventToolResult).Find(&results).Error; err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, r := range results {
		var ev runtype.Event
		if err := json.Unmarshal([]byte(r.Data), &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Error != "" {
			t.Errorf("run %s: the tool's result is an error: %s", r.RunID, ev.Error)
		}
		stored[r.RunID+"/"+ev.ToolCall.ToolCallID]++
	}
	executed := be.executions()
	if len(executed) != len(ids) || len(stored) != len(ids) {
		t.Errorf("%d calls executed and %d results stored, want %d of each", len(executed), len(stored), len(ids))
	}
	for call, n := range executed {
		if n != 1 || stored[call] != 1 {
			t.Errorf("call %s: executed %d times, its result stored %d times; want once each", call, n, stored[call])
		}
	}
}

// proxiedInstances gives n database handles of one new MariaDB database, each reaching it through
// the same proxy (one connection pool per instance), and one handle reaching it directly.
func proxiedInstances(t *testing.T, n int) (direct *gorm.DB, proxied []*gorm.DB, proxy *dbtest.Proxy) {
	t.Helper()
	dsn := dbtest.MySQLDSN(t)
	quiet := gormstore.DriverLog(slog.New(slog.DiscardHandler)) // broken connections are the point
	open := func(dsn string) *gorm.DB {
		db, err := gormstore.OpenMySQL(context.Background(), dsn, quiet)
		if err != nil {
			t.Fatalf("open mysql: %v", err)
		}
		t.Cleanup(func() {
			if sqlDB, err := db.DB(); err == nil {
				sqlDB.Close()
			}
		})
		return db
	}
	direct = open(dsn)
	if err := gormstore.Migrate(context.Background(), direct); err != nil {
		t.Fatal(err)
	}
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy = dbtest.NewProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr()
	for range n {
		proxied = append(proxied, open(cfg.FormatDSN()))
	}
	return direct, proxied, proxy
}

// waitSettled waits until no run of ids is RUNNING or WAITING any more — each completed, failed,
// or waits for a person, where nothing moves it without one — reading the database directly, and
// returns when, with the runs by status. It fails the test after within.
func waitSettled(t *testing.T, db *gorm.DB, ids []string, within time.Duration) (time.Time, map[string]int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var rows []gormstore.Run
		err := db.Select("id", "status").Where("id IN ?", ids).Find(&rows).Error
		by := map[string]int{}
		for _, r := range rows {
			by[r.Status]++
		}
		if err == nil && len(rows) == len(ids) && by[string(runtype.StatusRunning)] == 0 && by[string(runtype.StatusWaiting)] == 0 {
			return time.Now(), by
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, runs by status: %v (%v); want every one of the %d settled", within, by, err, len(ids))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// refundBackend is the endpoint of an HTTP refund tool: it counts each call's executions (by
// run and call id) and holds the answer until the gate of its order (odd: 0, even: 1) opens.
type refundBackend struct {
	url string

	mu      sync.Mutex
	byCall  map[string]int
	arrived chan struct{}
	gates   [2]chan struct{}
	opened  [2]sync.Once
}

func newRefundBackend(t *testing.T) *refundBackend {
	t.Helper()
	be := &refundBackend{byCall: map[string]int{}, arrived: make(chan struct{}, 1024)}
	for i := range be.gates {
		be.gates[i] = make(chan struct{})
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req tools.HTTPRequest
		var args struct {
			OrderID string `json:"orderId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || json.Unmarshal(req.Args, &args) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		be.mu.Lock()
		be.byCall[req.RunID+"/"+req.ToolCallID]++
		be.mu.Unlock()
		be.arrived <- struct{}{}
		order, _ := strconv.Atoi(args.OrderID)
		gate := be.gates[1-order%2]
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, `{"result":{"refunded":true,"order":%q}}`, args.OrderID)
	}))
	t.Cleanup(s.Close)
	be.url = s.URL
	return be
}

// waitArrived waits until n requests have arrived.
func (be *refundBackend) waitArrived(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for range n {
		select {
		case <-be.arrived:
		case <-deadline:
			t.Fatalf("fewer than %d tool calls arrived within %s", n, within)
		}
	}
}

// open lets the calls of gate i answer.
func (be *refundBackend) open(i int) { be.opened[i].Do(func() { close(be.gates[i]) }) }

func (be *refundBackend) executions() map[string]int {
	be.mu.Lock()
	defer be.mu.Unlock()
	out := make(map[string]int, len(be.byCall))
	for k, v := range be.byCall {
		out[k] = v
	}
	return out
}

// count is how many entries of tl contain s.
func count(tl *timeline, s string) int {
	n := 0
	for _, e := range tl.list() {
		if strings.Contains(e, s) {
			n++
		}
	}
	return n
}
