package app_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// The fake Slack's workspace, channel and secrets.
const (
	slackTeam     = "T0001"
	slackChannel  = "C0001"
	slackSecret   = "8f742231b10e8888abcd99yyyzzz85a5"
	slackBot      = "xoxb-test-token"
	slackAppToken = "xapp-test-token"
)

// slackCall is one Web API call the fake Slack got: its method and form.
type slackCall struct {
	method string
	form   url.Values
}

// fakeSlack is a local server speaking Slack's Web API wire format (form-encoded requests with
// the bot token, {"ok": true, …} answers) for the methods the slack-app uses: chat.postMessage,
// chat.update, chat.postEphemeral, views.open and users.info. It records every call.
type fakeSlack struct {
	*httptest.Server
	mu    sync.Mutex
	calls []slackCall
	next  int
	// envelopes are sent to the Socket Mode connection; acks get the envelope ids it acks.
	envelopes chan []byte
	acks      chan string
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{envelopes: make(chan []byte), acks: make(chan string, 16)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/apps.connections.open":
			w.Header().Set("Content-Type", "application/json")
			if r.Header.Get("Authorization") != "Bearer "+slackAppToken {
				io.WriteString(w, `{"ok":false,"error":"invalid_auth"}`)
				return
			}
			fmt.Fprintf(w, `{"ok":true,"url":"ws://%s/socket"}`, r.Host)
			return
		case r.URL.Path == "/socket":
			f.serveSocket(t, w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") { // views.open
			var body map[string]json.RawMessage
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				io.WriteString(w, `{"ok":false,"error":"invalid_json"}`)
				return
			}
			r.PostForm = url.Values{}
			for k, v := range body {
				var s string
				if json.Unmarshal(v, &s) != nil {
					s = string(v)
				}
				r.PostForm.Set(k, s)
			}
			r.Form = r.PostForm
		} else if err := r.ParseForm(); err != nil {
			io.WriteString(w, `{"ok":false,"error":"invalid_form_data"}`)
			return
		}
		token := r.Form.Get("token")
		if token == "" {
			token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if token != slackBot {
			io.WriteString(w, `{"ok":false,"error":"invalid_auth"}`)
			return
		}
		method := strings.TrimPrefix(r.URL.Path, "/api/")
		f.mu.Lock()
		f.calls = append(f.calls, slackCall{method: method, form: r.PostForm})
		f.next++
		ts := fmt.Sprintf("1700000000.%06d", f.next)
		f.mu.Unlock()
		switch method {
		case "chat.postMessage":
			fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q,"message":{"text":"x"}}`, r.PostForm.Get("channel"), ts)
		case "chat.update":
			fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q,"text":"x"}`, r.PostForm.Get("channel"), r.PostForm.Get("ts"))
		case "chat.postEphemeral":
			fmt.Fprintf(w, `{"ok":true,"message_ts":%q}`, ts)
		case "views.open":
			io.WriteString(w, `{"ok":true,"view":{"id":"V0001","type":"modal"}}`)
		case "users.info":
			switch r.PostForm.Get("user") {
			case "U_ERIN":
				io.WriteString(w, `{"ok":true,"user":{"id":"U_ERIN","team_id":"`+slackTeam+`","name":"erin","profile":{"email":"Erin@Example.com"}}}`)
			case "U_STRANGER": // a Slack Connect member of another organisation, with erin's email
				io.WriteString(w, `{"ok":true,"user":{"id":"U_STRANGER","team_id":"T_OTHER","is_stranger":true,"name":"mallory","profile":{"email":"erin@example.com"}}}`)
			default:
				io.WriteString(w, `{"ok":true,"user":{"id":"`+r.PostForm.Get("user")+`","team_id":"`+slackTeam+`","name":"x","profile":{"email":""}}}`)
			}
		default:
			io.WriteString(w, `{"ok":false,"error":"unknown_method"}`)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// serveSocket is Slack's end of a Socket Mode connection: hello, then the envelopes of
// f.envelopes, each ack's envelope id to f.acks.
func (f *fakeSlack) serveSocket(t *testing.T, w http.ResponseWriter, r *http.Request) {
	// slack-go's client sends Origin: api.slack.com, as Slack expects.
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: []string{"api.slack.com"}})
	if err != nil {
		t.Logf("socket mode accept: %v", err)
		return
	}
	defer c.CloseNow()
	ctx := r.Context()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"hello","num_connections":1,"debug_info":{"host":"fake","approximate_connection_time":3600},"connection_info":{"app_id":"A0001"}}`)); err != nil {
		return
	}
	go func() {
		for {
			_, msg, err := c.Read(ctx)
			if err != nil {
				return
			}
			var ack struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if json.Unmarshal(msg, &ack) == nil && ack.EnvelopeID != "" {
				f.acks <- ack.EnvelopeID
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case env := <-f.envelopes:
			if err := c.Write(ctx, websocket.MessageText, env); err != nil {
				return
			}
		}
	}
}

// got returns the calls of method so far.
func (f *fakeSlack) got(method string) []slackCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackCall
	for _, c := range f.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

// button is a button of a posted message.
type button struct {
	ActionID string `json:"action_id"`
	Value    string `json:"value"`
	URL      string `json:"url"`
}

// posted waits for the message posted for run and returns its ts and buttons.
func (f *fakeSlack) posted(t *testing.T, runID string) (ts string, buttons []button) {
	t.Helper()
	var found *slackCall
	apptest.Eventually(t, func() bool {
		for _, c := range f.got("chat.postMessage") {
			if strings.Contains(c.form.Get("blocks"), runID) {
				found = &c
				return true
			}
		}
		return false
	}, func() string { return "no message posted for run " + runID })
	var blocks []struct {
		Type     string   `json:"type"`
		Elements []button `json:"elements"`
	}
	if err := json.Unmarshal([]byte(found.form.Get("blocks")), &blocks); err != nil {
		t.Fatalf("blocks %s: %v", found.form.Get("blocks"), err)
	}
	for _, b := range blocks {
		if b.Type == "actions" {
			buttons = append(buttons, b.Elements...)
		}
	}
	// Its ts is the one the fake answered: find the update by channel and ts later.
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		n++
		if c.method == "chat.postMessage" && c.form.Get("blocks") == found.form.Get("blocks") {
			return fmt.Sprintf("1700000000.%06d", n), buttons
		}
	}
	return "", buttons
}

// updated waits for an update of the message at ts whose text contains want.
func (f *fakeSlack) updated(t *testing.T, ts, want string) {
	t.Helper()
	apptest.Eventually(t, func() bool {
		for _, c := range f.got("chat.update") {
			if c.form.Get("ts") == ts && strings.Contains(c.form.Get("text"), want) {
				return true
			}
		}
		return false
	}, func() string {
		var texts []string
		for _, c := range f.got("chat.update") {
			texts = append(texts, c.form.Get("ts")+": "+c.form.Get("text"))
		}
		return fmt.Sprintf("no update of %s with %q; updates: %q", ts, want, texts)
	})
}

// ephemeral waits for an ephemeral message to user containing want.
func (f *fakeSlack) ephemeral(t *testing.T, user, want string) {
	t.Helper()
	apptest.Eventually(t, func() bool {
		for _, c := range f.got("chat.postEphemeral") {
			if c.form.Get("user") == user && strings.Contains(c.form.Get("text"), want) {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("no ephemeral %q to %s", want, user) })
}

// interaction is a signed request as Slack sends it to the interactivity URL.
type interaction struct {
	payload   map[string]any
	secret    string
	timestamp time.Time
}

// press is the block_actions payload of user pressing the button action with value.
func press(user, team, channel, action, value string) map[string]any {
	return map[string]any{
		"type": "block_actions", "team": map[string]any{"id": team, "domain": "example"},
		"user": map[string]any{"id": user, "username": strings.ToLower(user), "team_id": team}, "api_app_id": "A0001",
		"channel":    map[string]any{"id": channel, "name": "approvals"},
		"container":  map[string]any{"type": "message", "channel_id": channel, "message_ts": "1700000000.000001"},
		"trigger_id": "trigger-" + user, "response_url": "https://hooks.slack.invalid/actions/x",
		"actions": []map[string]any{{"type": "button", "action_id": action, "block_id": "interlock", "value": value, "action_ts": "1700000001.000001"}},
	}
}

// submission is the view_submission payload of user submitting the decline modal.
func submission(user, team, callbackID, metadata, reason string) map[string]any {
	return map[string]any{
		"type": "view_submission", "team": map[string]any{"id": team}, "user": map[string]any{"id": user, "team_id": team},
		"view": map[string]any{"id": "V0001", "type": "modal", "callback_id": callbackID, "private_metadata": metadata,
			"state": map[string]any{"values": map[string]any{"reason": map[string]any{"reason": map[string]any{"type": "plain_text_input", "value": reason}}}}},
	}
}

// send POSTs the interaction signed as Slack signs (v0=HMAC-SHA256 of "v0:<ts>:<body>") and
// returns the status and how long the answer took.
func (s *slackServer) send(t *testing.T, in interaction) (int, time.Duration) {
	t.Helper()
	raw, _ := json.Marshal(in.payload)
	body := "payload=" + url.QueryEscape(string(raw))
	if in.secret == "" {
		in.secret = slackSecret
	}
	if in.timestamp.IsZero() {
		in.timestamp = time.Now()
	}
	ts := strconv.FormatInt(in.timestamp.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(in.secret))
	io.WriteString(mac, "v0:"+ts+":"+body)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, took
}

type slackServer struct {
	*apptest.Server
	slack *fakeSlack
}

// slackConfig is a config with the auth principals below, the billing agent on the fake model
// whose refund tool needs the finance role (approverRoles) and expires after timeout, and a
// slack-app webhook on the fake Slack.
func slackConfig(t *testing.T, slackURL, timeout string) string {
	return slackConfigWith(t, slackURL, timeout, "signingSecretEnv: INTERLOCK_TEST_SLACK_SECRET")
}

// slackConfigWith is slackConfig whose slackApp says how presses come (signingSecretEnv or
// appTokenEnv) in presses.
func slackConfigWith(t *testing.T, slackURL, timeout, presses string) string {
	model, refunds := apptest.FakeModel(t, "refund"), apptest.NewRefundEndpoint(t)
	tok := func(s string) string { return apptest.Sha256Hex(apptest.TokenOf(s)) }
	return apptest.WriteConfig(t, `
auth:
  separationOfDuties: true
  tokens:
    - {subject: root, role: admin, sha256: `+tok("root")+`}
    - {subject: alice, role: [approver, finance], sha256: `+tok("alice")+`}
    - {subject: bob, role: approver, sha256: `+tok("bob")+`}
    - {subject: otto, role: [operator, finance], sha256: `+tok("otto")+`}
agents:
  - id: billing
    model: {provider: openai, baseURL: `+model.URL+`/v1, name: test-model}
    tools: [refund]
tools:
  - name: refund
    inputSchema: {type: object, properties: {orderId: {type: string}, amount: {type: number}}, required: [orderId, amount]}
    requireApproval: true
    approverRoles: [finance]
    approvalTimeout: `+timeout+`
    http: {url: `+refunds.URL+`/refund, timeout: 5s}
notifications:
  consoleURL: https://console.example/interlock/
  pollInterval: 20ms
  retryBackoff: 20ms
  maxBackoff: 100ms
  webhooks:
    - name: slack
      format: slack-app
      slackApp:
        botTokenEnv: INTERLOCK_TEST_SLACK_BOT
        `+presses+`
        teamID: `+slackTeam+`
        channel: `+slackChannel+`
        apiURL: `+slackURL+`/api/
        matchEmail: true
        users: {U_RITA: rita, U_ALICE: alice, U_BOB: bob, U_ROOT: root, U_OTTO: otto}
        principals:
          rita: {roles: [approver, finance]}
          erin@example.com: {roles: [approver, finance]}
`)
}

// startSlack starts a server on db with slackConfig.
func startSlack(t *testing.T, db, timeout string) *slackServer {
	t.Setenv("INTERLOCK_TEST_SLACK_BOT", slackBot)
	t.Setenv("INTERLOCK_TEST_SLACK_SECRET", slackSecret)
	f := newFakeSlack(t)
	s := apptest.Start(t, db, "--auth=on", "--config", slackConfig(t, f.URL, timeout))
	return &slackServer{Server: s, slack: f}
}

// suspendBilling starts a billing run as root and waits for it to suspend on its refund call.
func (s *slackServer) suspendBilling(t *testing.T) apptest.Run {
	t.Helper()
	var out struct{ StartRun apptest.Run }
	s.MustAs(t, apptest.TokenOf("root"), `mutation($input: StartRunInput!) { startRun(input: $input) { `+apptest.RunFields+` } }`,
		map[string]any{"input": map[string]any{"agentId": "billing", "prompt": "refund order 7"}}, &out)
	var run apptest.Run
	apptest.Eventually(t, func() bool {
		run = s.runStatus(t, out.StartRun.ID).Run
		return run.Status == "SUSPENDED"
	}, func() string { return "run " + out.StartRun.ID + " did not suspend: " + run.Status })
	return run
}

type slackRun struct {
	apptest.Run
	Decisions []struct {
		ToolCallID string  `json:"toolCallId"`
		Kind       string  `json:"kind"`
		DecidedBy  *string `json:"decidedBy"`
		Reason     *string `json:"reason"`
	} `json:"decisions"`
}

func (s *slackServer) runStatus(t *testing.T, id string) slackRun {
	t.Helper()
	var got struct{ Run slackRun }
	s.MustAs(t, apptest.TokenOf("root"), `query($id: ID!) { run(runId: $id) { `+apptest.RunFields+` decisions { toolCallId kind decidedBy reason } } }`, map[string]any{"id": id}, &got)
	return got.Run
}

// undecided checks that nothing decided the run: still SUSPENDED, no decision.
func (s *slackServer) undecided(t *testing.T, id, what string) {
	t.Helper()
	r := s.runStatus(t, id)
	for _, d := range r.Decisions {
		if d.Kind != "AUTO_APPROVED" {
			t.Errorf("%s: run %s has decision %+v", what, id, d)
		}
	}
	if r.Status != "SUSPENDED" {
		t.Errorf("%s: run %s is %s, want SUSPENDED", what, id, r.Status)
	}
}

// eachSlackDB runs fn on a slack-app server on SQLite and one on MariaDB.
func eachSlackDB(t *testing.T, timeout string, fn func(t *testing.T, s *slackServer)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, startSlack(t, "sqlite:"+filepath.Join(t.TempDir(), "slack.db"), timeout)) })
	t.Run("mysql", func(t *testing.T) { fn(t, startSlack(t, dbtest.MySQLURL(dbtest.MySQLDSN(t)), timeout)) })
}

// TestSlackAppApproveAndRefusals: a waiting call's message carries Approve, Decline and Open,
// each with the call's id alone; presses with a wrong signature, an old timestamp, from another
// workspace or channel are refused (401/403) and decide nothing; an unmapped user, a user
// without the tool's approverRoles and the run's starter (separation of duties) are told
// ephemerally they are not allowed, and nothing is decided; rita's press approves as rita and
// the message says so. Every press is answered well within Slack's 3 s.
func TestSlackAppApproveAndRefusals(t *testing.T) {
	eachSlackDB(t, "1h", func(t *testing.T, s *slackServer) {
		run := s.suspendBilling(t)
		call := run.ToolCalls[0].ToolCallID
		ts, buttons := s.slack.posted(t, run.RunID)
		key := run.RunID + "|" + call
		if len(buttons) != 3 || buttons[0].ActionID != "interlock_approve" || buttons[1].ActionID != "interlock_decline" || buttons[2].ActionID != "interlock_open" {
			t.Fatalf("buttons = %+v", buttons)
		}
		for _, b := range buttons {
			if b.Value != key {
				t.Errorf("button %s value %q, want the call's id %q alone", b.ActionID, b.Value, key)
			}
		}
		if buttons[2].URL != "https://console.example/interlock/?run="+run.RunID {
			t.Errorf("Open's url = %q", buttons[2].URL)
		}
		if post := s.slack.got("chat.postMessage")[0].form; strings.Contains(post.Encode(), "orderId") || post.Get("channel") != slackChannel {
			t.Errorf("posted %v: want the channel, and no arguments", post)
		}

		var slowest time.Duration
		check := func(what string, in interaction, want int) {
			t.Helper()
			status, took := s.send(t, in)
			slowest = max(slowest, took)
			if status != want {
				t.Errorf("%s: HTTP %d, want %d", what, status, want)
			}
		}
		approve := func(user string) map[string]any {
			return press(user, slackTeam, slackChannel, "interlock_approve", key)
		}
		check("wrong signature", interaction{payload: approve("U_RITA"), secret: "not-the-secret"}, http.StatusUnauthorized)
		check("old timestamp", interaction{payload: approve("U_RITA"), timestamp: time.Now().Add(-6 * time.Minute)}, http.StatusUnauthorized)
		check("another workspace", interaction{payload: press("U_RITA", "T9999", slackChannel, "interlock_approve", key)}, http.StatusForbidden)
		check("another channel", interaction{payload: press("U_RITA", slackTeam, "C9999", "interlock_approve", key)}, http.StatusForbidden)
		// In a Slack Connect channel the payload's team is ours; the presser's own is not.
		connect := approve("U_RITA")
		connect["user"].(map[string]any)["team_id"] = "T_OTHER"
		check("a member of another organisation in a shared channel", interaction{payload: connect}, http.StatusForbidden)
		// unmapped; no finance role; the starter; another organisation's member whose profile
		// carries an email of ours (refused even though users.info says the email)
		for _, u := range []string{"U_NOBODY", "U_BOB", "U_ROOT", "U_STRANGER"} {
			check("press by "+u, interaction{payload: approve(u)}, http.StatusOK)
			s.slack.ephemeral(t, u, "not allowed")
		}
		s.App.WaitSlack()
		s.undecided(t, run.RunID, "refused presses")

		check("rita", interaction{payload: approve("U_RITA")}, http.StatusOK)
		s.slack.updated(t, ts, "Approved by rita")
		r := s.runStatus(t, run.RunID)
		if len(r.Decisions) != 1 || r.Decisions[0].Kind != "APPROVED" || r.Decisions[0].DecidedBy == nil || *r.Decisions[0].DecidedBy != "rita" {
			t.Errorf("decisions = %+v, want one APPROVED by rita", r.Decisions)
		}
		t.Logf("slowest acknowledgement of %d presses: %v", 8, slowest)
		if slowest > 3*time.Second {
			t.Errorf("a press took %v to be acknowledged, over Slack's 3 s", slowest)
		}
	})
}

// TestSlackAppDeclineWithReason: Decline opens a modal (views.open with the press's trigger and
// the call's id); its submission declines with the reason, as the user mapped by email, and the
// message says who and why.
func TestSlackAppDeclineWithReason(t *testing.T) {
	eachSlackDB(t, "1h", func(t *testing.T, s *slackServer) {
		run := s.suspendBilling(t)
		key := run.RunID + "|" + run.ToolCalls[0].ToolCallID
		ts, _ := s.slack.posted(t, run.RunID)
		if status, _ := s.send(t, interaction{payload: press("U_ERIN", slackTeam, slackChannel, "interlock_decline", key)}); status != http.StatusOK {
			t.Fatalf("decline press: HTTP %d", status)
		}
		var view struct {
			CallbackID      string `json:"callback_id"`
			PrivateMetadata string `json:"private_metadata"`
		}
		apptest.Eventually(t, func() bool { return len(s.slack.got("views.open")) == 1 }, func() string { return "no views.open" })
		open := s.slack.got("views.open")[0].form
		if open.Get("trigger_id") != "trigger-U_ERIN" {
			t.Errorf("views.open trigger_id = %q", open.Get("trigger_id"))
		}
		if err := json.Unmarshal([]byte(open.Get("view")), &view); err != nil || view.PrivateMetadata != key {
			t.Fatalf("views.open view = %s (%v): want private_metadata %q", open.Get("view"), err, key)
		}
		s.App.WaitSlack()
		s.undecided(t, run.RunID, "modal open")
		if status, _ := s.send(t, interaction{payload: submission("U_ERIN", slackTeam, view.CallbackID, view.PrivateMetadata, "order 7 was refunded already")}); status != http.StatusOK {
			t.Fatalf("submission: HTTP %d", status)
		}
		s.slack.updated(t, ts, "Declined by erin@example.com: order 7 was refunded already")
		r := s.runStatus(t, run.RunID)
		if len(r.Decisions) != 1 || r.Decisions[0].Kind != "DECLINED" || *r.Decisions[0].DecidedBy != "erin@example.com" ||
			r.Decisions[0].Reason == nil || *r.Decisions[0].Reason != "order 7 was refunded already" {
			t.Errorf("decisions = %+v", r.Decisions)
		}
		// A submission without its state (no reason block) is taken, not a crash.
		bare := submission("U_ERIN", slackTeam, view.CallbackID, view.PrivateMetadata, "")
		delete(bare["view"].(map[string]any), "state")
		if status, _ := s.send(t, interaction{payload: bare}); status != http.StatusOK {
			t.Errorf("a submission without state: HTTP %d, want 200", status)
		}
		// A submission from another workspace is refused before anything is decided.
		if status, _ := s.send(t, interaction{payload: submission("U_ERIN", "T9999", view.CallbackID, view.PrivateMetadata, "x")}); status != http.StatusForbidden {
			t.Errorf("another workspace's submission: HTTP %d, want 403", status)
		}
	})
}

// TestSlackAppDecidedElsewhere: a call approved in the console updates the message ("Approved
// by alice"), and a late press answers "Already approved by alice" without deciding again.
func TestSlackAppDecidedElsewhere(t *testing.T) {
	eachSlackDB(t, "1h", func(t *testing.T, s *slackServer) {
		run := s.suspendBilling(t)
		key := run.RunID + "|" + run.ToolCalls[0].ToolCallID
		ts, _ := s.slack.posted(t, run.RunID)
		s.MustAs(t, apptest.TokenOf("alice"), `mutation($id: ID!) { approveToolCall(runId: $id) { status } }`, map[string]any{"id": run.RunID}, nil)
		s.slack.updated(t, ts, "Approved by alice")
		if status, _ := s.send(t, interaction{payload: press("U_RITA", slackTeam, slackChannel, "interlock_approve", key)}); status != http.StatusOK {
			t.Fatalf("press: HTTP %d", status)
		}
		s.slack.updated(t, ts, "Already approved by alice")
		if r := s.runStatus(t, run.RunID); len(r.Decisions) != 1 || *r.Decisions[0].DecidedBy != "alice" {
			t.Errorf("decisions = %+v, want alice's alone", r.Decisions)
		}
	})
}

// TestSlackAppExpired: a call nobody decides in time is updated to "Expired"; a press after
// that says Expired too and decides nothing.
func TestSlackAppExpired(t *testing.T) {
	s := startSlack(t, "sqlite:"+filepath.Join(t.TempDir(), "slack.db"), "1s")
	run := s.suspendBilling(t)
	key := run.RunID + "|" + run.ToolCalls[0].ToolCallID
	ts, _ := s.slack.posted(t, run.RunID)
	s.slack.updated(t, ts, "Expired")
	n := len(s.slack.got("chat.update"))
	if status, _ := s.send(t, interaction{payload: press("U_RITA", slackTeam, slackChannel, "interlock_approve", key)}); status != http.StatusOK {
		t.Fatalf("press: HTTP %d", status)
	}
	apptest.Eventually(t, func() bool { return len(s.slack.got("chat.update")) > n }, func() string { return "the late press updated nothing" })
	if last := s.slack.got("chat.update")[n].form.Get("text"); !strings.Contains(last, "Expired") {
		t.Errorf("late press: message %q, want Expired", last)
	}
	for _, d := range s.runStatus(t, run.RunID).Decisions {
		if d.Kind != "EXPIRED" {
			t.Errorf("decision %+v after expiry", d)
		}
	}
}

// TestSlackAppPostsOncePerCallAcrossInstances: two instances on one MariaDB database, each
// dispatching, post exactly one message per waiting call.
func TestSlackAppPostsOncePerCallAcrossInstances(t *testing.T) {
	dsn := dbtest.MySQLURL(dbtest.MySQLDSN(t))
	t.Setenv("INTERLOCK_TEST_SLACK_BOT", slackBot)
	t.Setenv("INTERLOCK_TEST_SLACK_SECRET", slackSecret)
	f := newFakeSlack(t)
	file := slackConfig(t, f.URL, "1h")
	first := &slackServer{Server: apptest.Start(t, dsn, "--auth=on", "--config", file), slack: f}
	second := &slackServer{Server: apptest.Start(t, dsn, "--auth=on", "--config", file), slack: f}
	var ids []string
	for i := range 6 {
		s := first
		if i%2 == 1 {
			s = second
		}
		ids = append(ids, s.suspendBilling(t).RunID)
	}
	for _, id := range ids {
		f.posted(t, id)
	}
	time.Sleep(300 * time.Millisecond) // 15 poll intervals: a second post would have come
	count := map[string]int{}
	for _, c := range f.got("chat.postMessage") {
		for _, id := range ids {
			if strings.Contains(c.form.Get("blocks"), id) {
				count[id]++
			}
		}
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("run %s: %d messages, want 1", id, count[id])
		}
	}
}

// TestSlackAppSocketMode: with an app token, presses come over a Socket Mode connection the
// server opens (apps.connections.open, then the WebSocket): each envelope is acked at once; one
// from another workspace decides nothing; rita's approves; POST /slack/interactions is off.
func TestSlackAppSocketMode(t *testing.T) {
	t.Setenv("INTERLOCK_TEST_SLACK_BOT", slackBot)
	t.Setenv("INTERLOCK_TEST_SLACK_APP", slackAppToken)
	f := newFakeSlack(t)
	file := slackConfigWith(t, f.URL, "1h", "appTokenEnv: INTERLOCK_TEST_SLACK_APP")
	s := &slackServer{Server: apptest.Start(t, "sqlite:"+filepath.Join(t.TempDir(), "slack.db"), "--auth=on", "--config", file), slack: f}
	run := s.suspendBilling(t)
	key := run.RunID + "|" + run.ToolCalls[0].ToolCallID
	ts, _ := f.posted(t, run.RunID)
	if status, _ := s.send(t, interaction{payload: press("U_RITA", slackTeam, slackChannel, "interlock_approve", key)}); status != http.StatusNotFound {
		t.Errorf("POST /slack/interactions with Socket Mode alone: HTTP %d, want 404", status)
	}
	envelope := func(id string, payload map[string]any) time.Duration {
		t.Helper()
		raw, _ := json.Marshal(map[string]any{"envelope_id": id, "type": "interactive", "accepts_response_payload": false, "payload": payload})
		start := time.Now()
		select {
		case f.envelopes <- raw:
		case <-time.After(20 * time.Second):
			t.Fatal("the server never opened its Socket Mode connection")
		}
		select {
		case got := <-f.acks:
			if got != id {
				t.Fatalf("acked %q, want %q", got, id)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("envelope %s never acked", id)
		}
		return time.Since(start)
	}
	took := envelope("env-1", press("U_RITA", "T9999", slackChannel, "interlock_approve", key))
	s.App.WaitSlack()
	s.undecided(t, run.RunID, "another workspace over Socket Mode")
	took = max(took, envelope("env-2", press("U_RITA", slackTeam, slackChannel, "interlock_approve", key)))
	f.updated(t, ts, "Approved by rita")
	t.Logf("slowest Socket Mode ack: %v", took)
}
