package app_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"interlock/gormstore"
	"interlock/internal/apptest"
	"interlock/internal/dbtest"
	"interlock/notify"
)

// verifyInterlockSignature is the receiver's check docs/notifications.md documents, copied from it: a
// receiver needs nothing of Interlock's code.
func verifyInterlockSignature(secret []byte, header string, body []byte, now time.Time) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		if k, v, ok := strings.Cut(part, "="); ok && k == "t" {
			ts = v
		} else if ok && k == "v1" {
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("no timestamp")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return errors.New("timestamp too old or in the future: a replay?")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "." + string(body)))
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		return errors.New("bad signature")
	}
	return nil
}

// hit is one request a receiver got.
type hit struct {
	header http.Header
	body   []byte
	status int
}

// receiver is an in-process webhook receiver: it answers the statuses of fail in turn (then
// 200), and remembers every request.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
	fail []int
	hang chan struct{} // when not nil, requests wait on it (a receiver that never answers)
}

func newReceiver(t *testing.T, fail ...int) *receiver {
	r := &receiver{fail: fail}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := http.StatusOK
		if len(r.fail) > 0 {
			status, r.fail = r.fail[0], r.fail[1:]
		}
		r.hits = append(r.hits, hit{header: req.Header.Clone(), body: body, status: status})
		hang := r.hang
		r.mu.Unlock()
		if hang != nil {
			select {
			case <-hang:
			case <-req.Context().Done():
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// setFail makes the next requests answer the statuses of fail.
func (r *receiver) setFail(fail ...int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = fail
}

// got returns the requests so far.
func (r *receiver) got() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// delivered counts, per event id, the requests answered 2xx, and keeps the last body of each.
func (r *receiver) delivered() (map[string]int, map[string]notify.Event) {
	count, last := map[string]int{}, map[string]notify.Event{}
	for _, h := range r.got() {
		if h.status/100 != 2 {
			continue
		}
		var e notify.Event
		json.Unmarshal(h.body, &e)
		count[h.header.Get(notify.EventIDHeader)]++
		last[h.header.Get(notify.EventIDHeader)] = e
	}
	return count, last
}

// waitSuspended follows a run's stream until it suspends.
func waitSuspended(t *testing.T, url, runID string) {
	t.Helper()
	ws := apptest.DialWS(t, url, "graphql-transport-ws")
	defer ws.Conn.CloseNow()
	apptest.Follow(t, ws, ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": runID}), apptest.IsType("RUN_SUSPENDED"))
}

func approve(t *testing.T, s *apptest.Server, runID string) {
	t.Helper()
	var out map[string]apptest.Run
	s.Must(t, `mutation($id: ID!) { d: approveToolCall(runId: $id) { status } }`, map[string]any{"id": runID}, &out)
}

const notifySecret = "whsec-test-0123456789"

// notifyConfig is a config file with one signed json webhook to url, more keys of the section
// in section and more webhooks in hooks.
func notifyConfig(t *testing.T, url, section, hooks string) string {
	return apptest.WriteConfig(t, notifySection(url, section, hooks))
}

// notifySection is the notifications section of notifyConfig.
func notifySection(url, section, hooks string) string {
	return fmt.Sprintf(`notifications:
%s  consoleURL: https://console.example/interlock/
  retryBackoff: 20ms
  maxBackoff: 100ms
  pollInterval: 20ms
  webhooks:
    - name: ops
      url: %s
      secretEnv: INTERLOCK_TEST_WEBHOOK_SECRET
%s`, section, url, hooks)
}

// TestWebhookRetriedSignedAndSlack: a receiver that fails twice then succeeds gets the
// approval request a third time, with the same event id, signed as documented; a decision
// follows with who decided; a Slack webhook gets {"text"} with a link to the run.
func TestWebhookRetriedSignedAndSlack(t *testing.T) {
	flaky, slack := newReceiver(t, 500, 503), newReceiver(t)
	t.Setenv("INTERLOCK_TEST_SLACK_URL", slack.URL+"/services/T000/B000/XXXX")
	file := notifyConfig(t, flaky.URL, "", `    - name: chat
      urlEnv: INTERLOCK_TEST_SLACK_URL
      format: slack
      events: [approval_requested]
`)
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "n.db"), "--config", file, "--auth=on")
	run := s.SuspendAs(t, s.App.AdminToken, "refund order 3 for 5", nil)
	apptest.Eventually(t, func() bool { return len(flaky.got()) >= 3 }, func() string { return fmt.Sprintf("%d requests to the flaky receiver, want 3", len(flaky.got())) })

	hits := flaky.got()
	want := notify.EventID(run.RunID, 3) // RUN_STARTED, TOOL_CALL, TOOL_CALL_APPROVAL
	for i, h := range hits[:3] {
		if id := h.header.Get(notify.EventIDHeader); id != want {
			t.Errorf("attempt %d: event id %q, want %q (stable across retries)", i+1, id, want)
		}
		if err := verifyInterlockSignature([]byte(notifySecret), h.header.Get(notify.SignatureHeader), h.body, time.Now()); err != nil {
			t.Errorf("attempt %d: %v (header %q)", i+1, err, h.header.Get(notify.SignatureHeader))
		}
	}
	if err := verifyInterlockSignature([]byte("another secret"), hits[2].header.Get(notify.SignatureHeader), hits[2].body, time.Now()); err == nil {
		t.Error("the signature verifies with a wrong secret")
	}
	var e notify.Event
	if err := json.Unmarshal(hits[2].body, &e); err != nil {
		t.Fatal(err)
	}
	if e.ID != want || e.Type != notify.ApprovalRequested || e.WaitsFor != "approval" || e.Run.ID != run.RunID || e.Run.AgentID != "support-agent" ||
		e.ToolCall == nil || e.ToolCall.ToolName != "issue_refund" || e.URL != "https://console.example/interlock/?run="+run.RunID {
		t.Errorf("event = %s", hits[2].body)
	}
	store := gormstore.New(s.App.DB())
	apptest.Eventually(t, func() bool {
		list, _ := store.Deliveries(t.Context(), run.RunID)
		return len(list) == 2 && list[0].State == notify.StateDelivered && list[1].State == notify.StateDelivered
	}, func() string {
		list, _ := store.Deliveries(t.Context(), run.RunID)
		return fmt.Sprintf("deliveries %+v", list)
	})
	list, _ := store.Deliveries(t.Context(), run.RunID)
	if list[0].Target != "ops" || list[0].Attempts != 3 || list[1].Target != "chat" || list[1].Attempts != 1 {
		t.Errorf("deliveries: %s %d attempts, %s %d; want ops 3, chat 1", list[0].Target, list[0].Attempts, list[1].Target, list[1].Attempts)
	}

	// Slack: one key, text, naming the tool and linking to the run; no signature needed there
	// but the header is only sent with a secret.
	sh := slack.got()
	if len(sh) != 1 {
		t.Fatalf("slack got %d requests, want 1", len(sh))
	}
	var msg map[string]any
	if err := json.Unmarshal(sh[0].body, &msg); err != nil || len(msg) != 1 {
		t.Fatalf("slack body %s: want exactly {\"text\": …}", sh[0].body)
	}
	text, _ := msg["text"].(string)
	if !strings.Contains(text, "`issue_refund`") || !strings.Contains(text, "waits for approval") ||
		!strings.Contains(text, "<https://console.example/interlock/?run="+run.RunID+"|Open run "+run.RunID+">") {
		t.Errorf("slack text = %q", text)
	}
	if sh[0].header.Get(notify.SignatureHeader) != "" || sh[0].header.Get("Content-Type") != "application/json" {
		t.Errorf("slack headers = %v", sh[0].header)
	}

	s.MustAs(t, s.App.AdminToken, `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, nil)
	apptest.Eventually(t, func() bool { n, _ := flaky.delivered(); return len(n) == 2 }, func() string { return fmt.Sprintf("%d events delivered, want 2", len(flaky.got())) })
	_, last := flaky.delivered()
	d := last[notify.EventID(run.RunID, 5)] // after RUN_SUSPENDED (4)
	if d.Type != notify.Decided || d.Decision != notify.DecisionApproved || d.DecidedBy == "" {
		t.Errorf("decided event = %+v", d)
	}
	if len(slack.got()) != 1 {
		t.Errorf("slack (approval_requested only) got %d requests after the decision, want 1", len(slack.got()))
	}
}

// TestWebhookDeliveredOnceAcrossARestart: a server stopped while its receiver is down leaves the
// event in the outbox; the next server on the database delivers it, once.
func TestWebhookDeliveredOnceAcrossARestart(t *testing.T) {
	t.Parallel()
	down := make([]int, 1000)
	for i := range down {
		down[i] = http.StatusServiceUnavailable
	}
	r := newReceiver(t, down...)
	file := notifyConfig(t, r.URL, "", "")
	db := "sqlite:" + filepath.Join(t.TempDir(), "restart.db")
	first := apptest.StartProc(t, db, "--config", file)
	run := first.StartRun(t, "refund order 4 for 5", nil)
	waitSuspended(t, first.URL, run.RunID)
	apptest.Eventually(t, func() bool { return len(r.got()) >= 2 }, func() string { return "no retried attempt" })
	first.Terminate()
	if err := first.Wait(); err != nil {
		t.Fatalf("first server: %v\n%s", err, first.Output())
	}
	if n, _ := r.delivered(); len(n) != 0 {
		t.Fatalf("delivered while down: %v", n)
	}
	if strings.Contains(first.Output(), notifySecret) {
		t.Error("the webhook secret is in the log")
	}

	r.setFail()
	second := apptest.StartProc(t, db, "--config", file)
	apptest.Eventually(t, func() bool { n, _ := r.delivered(); return n[notify.EventID(run.RunID, 3)] == 1 }, func() string { return "not delivered after the restart" })
	approve(t, second.Server, run.RunID)
	apptest.Eventually(t, func() bool { n, _ := r.delivered(); return len(n) == 2 }, func() string { return "decision not delivered" })
	if n, _ := r.delivered(); n[notify.EventID(run.RunID, 3)] != 1 {
		t.Errorf("the approval request was delivered %d times, want once", n[notify.EventID(run.RunID, 3)])
	}
}

// TestTwoInstancesDeliverEachEventOnce: two servers over one MySQL share the outbox; every event
// reaches the receiver exactly once.
func TestTwoInstancesDeliverEachEventOnce(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	file := notifyConfig(t, r.URL, "", "")
	a, b := twoInstances(t, "--config", file)
	const n = 8
	var ids []string
	for i := range n {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		run := srv.StartRun(t, fmt.Sprintf("refund order %d for 5", 20+i), nil)
		ids = append(ids, run.RunID)
		waitSuspended(t, srv.URL, run.RunID)
	}
	for i, id := range ids {
		srv := b
		if i%2 == 1 {
			srv = a
		}
		approve(t, srv.Server, id)
	}
	apptest.Eventually(t, func() bool { c, _ := r.delivered(); return len(c) == 2*n }, func() string { c, _ := r.delivered(); return fmt.Sprintf("%d events delivered, want %d", len(c), 2*n) })
	count, _ := r.delivered()
	for _, id := range ids {
		for _, seq := range []int64{3, 5} {
			if c := count[notify.EventID(id, seq)]; c != 1 {
				t.Errorf("event %s delivered %d times, want once", notify.EventID(id, seq), c)
			}
		}
	}
	if len(r.got()) != 2*n {
		t.Errorf("%d requests for %d events", len(r.got()), 2*n)
	}
}

// TestDeadReceiverDoesNotDelayRuns: with a receiver that never answers, a run still suspends,
// is approved and finishes, while its notifications wait in the outbox.
func TestDeadReceiverDoesNotDelayRuns(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	r.hang = make(chan struct{})
	t.Cleanup(func() { close(r.hang) })
	file := apptest.WriteConfig(t, fmt.Sprintf(`notifications:
  timeout: 1h
  pollInterval: 20ms
  webhooks: [{url: %q, secretEnv: INTERLOCK_TEST_WEBHOOK_SECRET}]
`, r.URL))
	for name, db := range map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "dead.db") },
		"mysql":  func(t *testing.T) string { return dbtest.MySQLURL(dbtest.MySQLDSN(t)) },
	} {
		t.Run(name, func(t *testing.T) {
			s := apptest.Start(t, db(t), "--config", file)
			run := s.StartRun(t, "refund order 5 for 5", nil)
			ws := apptest.DialWS(t, s.URL, "graphql-transport-ws")
			op := ws.Subscribe(apptest.EventsQuery, map[string]any{"runId": run.RunID})
			apptest.Follow(t, ws, op, apptest.IsType("RUN_SUSPENDED"))
			apptest.Eventually(t, func() bool { return len(r.got()) >= 1 }, func() string { return "the receiver was never called" })
			approve(t, s, run.RunID)
			evs := apptest.Follow(t, ws, op, nil)
			if last := evs[len(evs)-1]; last.Type != "RUN_FINISHED" {
				t.Fatalf("run ends with %s", last.Type)
			}
			list, err := gormstore.New(s.App.DB()).Deliveries(t.Context(), run.RunID)
			if err != nil || len(list) != 2 || list[0].State != notify.StatePending || list[1].State != notify.StatePending {
				t.Fatalf("deliveries after the run finished = %+v, %v; want both PENDING", list, err)
			}
		})
	}
}

// TestWebhookGivenUpAfterMaxAttempts: a receiver that always fails gets maxAttempts requests,
// then the delivery is FAILED with the last error, and no more requests come.
func TestWebhookGivenUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 500, 500, 500, 500, 500, 500)
	file := notifyConfig(t, r.URL, "  maxAttempts: 3\n", "")
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "giveup.db"), "--config", file)
	run := s.StartRun(t, "refund order 6 for 5", nil)
	waitSuspended(t, s.URL, run.RunID)
	store, list := deliveryGivenUp(t, s, run.RunID)
	if list[0].Attempts != 3 || list[0].LastError != "receiver answered HTTP 500" {
		t.Errorf("given up after %d attempts with %q; want 3, HTTP 500", list[0].Attempts, list[0].LastError)
	}
	// One more claim finds nothing to send: the FAILED row is never claimed again.
	if again, err := store.ClaimDeliveries(t.Context(), "test", time.Hour, 10); err != nil || len(again) != 0 {
		t.Errorf("claim after giving up = %d, %v", len(again), err)
	}
	if n := len(r.got()); n != 3 {
		t.Errorf("receiver got %d requests, want 3", n)
	}
}

// TestWebhookOnExpiry: a call nobody approves within its approvalTimeout is announced to the
// webhook as expired — once, after its approval request, signed like every event — and no
// decision is announced, because nobody decided.
func TestWebhookOnExpiry(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	file, refunds := apptest.ExpiryConfig(t, "1s", notifySection(rcv.URL, "", ""))
	s := apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "n.db"), "--config", file)
	run := s.StartRun(t, "refund order 7", map[string]any{"agentId": "billing"})
	s.WaitStatus(t, run.RunID, "COMPLETED")
	types := func() []notify.Kind {
		var out []notify.Kind
		for _, h := range rcv.got() {
			var e notify.Event
			json.Unmarshal(h.body, &e)
			out = append(out, e.Type)
		}
		return out
	}
	apptest.Eventually(t, func() bool { return slices.Contains(types(), notify.Expired) }, func() string {
		return fmt.Sprintf("events delivered %v, want one expired", types())
	})
	time.Sleep(200 * time.Millisecond) // ten poll intervals: anything more would have come
	if got := types(); !slices.Equal(got, []notify.Kind{notify.ApprovalRequested, notify.Expired}) {
		t.Fatalf("events delivered %v, want approval_requested then expired, once each", got)
	}
	h := rcv.got()[1]
	if err := verifyInterlockSignature([]byte(notifySecret), h.header.Get(notify.SignatureHeader), h.body, time.Now()); err != nil {
		t.Errorf("expired event: %v", err)
	}
	var e notify.Event
	if err := json.Unmarshal(h.body, &e); err != nil {
		t.Fatal(err)
	}
	if e.Run.ID != run.RunID || e.ToolCall == nil || e.ToolCall.ToolName != "refund" || e.DecidedBy != "" ||
		e.URL != "https://console.example/interlock/?run="+run.RunID {
		t.Errorf("expired event = %s", h.body)
	}
	if calls, _ := refunds.Got(); len(calls) != 0 {
		t.Fatalf("the refund endpoint was called %d times", len(calls))
	}
}

// deliveryGivenUp waits until run runID's one delivery is given up (FAILED) and returns the
// store it read and the deliveries.
func deliveryGivenUp(t *testing.T, s *apptest.Server, runID string) (*gormstore.Store, []notify.Delivery) {
	t.Helper()
	store := gormstore.New(s.App.DB())
	apptest.Eventually(t, func() bool {
		list, _ := store.Deliveries(t.Context(), runID)
		return len(list) == 1 && list[0].State == notify.StateFailed
	}, func() string {
		list, _ := store.Deliveries(t.Context(), runID)
		return fmt.Sprintf("deliveries %+v", list)
	})
	list, _ := store.Deliveries(t.Context(), runID)
	return store, list
}
