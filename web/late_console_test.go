package web_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/chromedp/chromedp"
	"gorm.io/gorm"

	"interlock/agent"
	"interlock/auth"
	"interlock/gormstore"
	"interlock/graph"
	"interlock/httpguard"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
	"interlock/web"
)

// TestRunViewShowsALateResult: the run view of a run recovered on an interrupted call shows
// what is known of the tool's answer beside the call and beside its TOOL_CALL_INTERRUPTED event:
// the answer its instance recorded late, as text (markup in it stays text), or that none is
// recorded yet — and then the answer once it is recorded, without a reload.
func TestRunViewShowsALateResult(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	db := dbtest.SQLite(t)
	store := gormstore.New(db)
	reg, err := agent.NewRegistry([]*agent.Agent{{ID: "refunds", Model: &llm.Demo{}, Tools: []*agent.Tool{{
		Name: "issue_refund", RequireApproval: true, InputSchema: json.RawMessage(`{"type":"object"}`),
		ExecuteFunc: func(context.Context, *agent.Call) (any, error) { return "refunded", nil },
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := runs.New(store, reg, runs.Config{InstanceID: "b", RecoveryInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sys := runtype.WithSystem(context.Background())

	// Instance a ran tc_1 of two runs and lost the database before it could store the answers.
	deadRun(t, db, "run-recorded")
	deadRun(t, db, "run-later")
	deadRun(t, db, "run-asked")
	markup := `rf_1 <img src=x onerror="window.__pwned = 1"> <b>bold</b>`
	late := func(runID string, result json.RawMessage, errMsg *string) {
		t.Helper()
		now := time.Now().UTC()
		ok, err := store.RecordLateResult(sys, runtype.LateResult{RunID: runID, ToolCallID: "tc_1", ToolName: "issue_refund",
			Result: result, Error: errMsg, InstanceID: "a", FinishedAt: now.Add(-time.Minute), RecordedAt: now})
		if err != nil || !ok {
			t.Fatalf("RecordLateResult %s: %v, %v", runID, ok, err)
		}
	}
	res, _ := json.Marshal(markup) // a text answer, as an MCP tool gives
	late("run-recorded", res, nil)
	now := time.Now().UTC()
	if ok, err := store.RecordLateResult(sys, runtype.LateResult{RunID: "run-asked", ToolCallID: "tc_1", ToolName: "issue_refund",
		SuspendPayload: json.RawMessage(`{"question":"Which card?"}`), InstanceID: "a", FinishedAt: now, RecordedAt: now}); err != nil || !ok {
		t.Fatalf("RecordLateResult run-asked: %v, %v", ok, err)
	}
	if n, err := svc.RecoverExpired(sys); err != nil || n != 3 {
		t.Fatalf("recovered %d runs: %v", n, err)
	}
	for _, id := range []string{"run-recorded", "run-later", "run-asked"} {
		waitSuspended(t, svc, sys, id)
	}
	url := serveService(t, svc)
	page := tab(t, ctx, true)

	do(t, page, chromedp.Navigate(url+"/?run=run-recorded"),
		until(`document.querySelector('.pending[data-call="tc_2"] .late[data-late="tc_1"]') !== null`),
		until(`document.querySelector('li[data-type="TOOL_CALL_INTERRUPTED"] .late-slot .late-result') !== null`))
	var seen struct {
		Card, Event, Reason string
		Images              int
		Pwned               any
	}
	evalJSON(t, page, `JSON.stringify({
		card: document.querySelector('.pending[data-call="tc_2"] .late').innerText,
		event: document.querySelector('li[data-type="TOOL_CALL_INTERRUPTED"] .late-slot').innerText,
		reason: document.querySelector('li[data-type="TOOL_CALL_INTERRUPTED"] .body').innerText,
		images: document.querySelectorAll("img, b").length,
		pwned: window.__pwned ?? null,
	})`, &seen)
	if seen.Images != 0 || seen.Pwned != nil {
		t.Fatalf("markup in a late result was made into elements: %d, pwned %v", seen.Images, seen.Pwned)
	}
	for what, text := range map[string]string{"the call's card": seen.Card, "the interrupted event": seen.Event} {
		for _, want := range []string{"issue_refund (tc_1) ran: its answer, recorded late by instance a", markup} {
			if !contains(text, want) {
				t.Errorf("%s shows %q, without %q", what, text, want)
			}
		}
	}
	if !contains(seen.Card, "Approving runs the tool again") {
		t.Errorf("the card %q does not say approving runs the tool again", seen.Card)
	}
	if !contains(seen.Reason, "it recorded the answer later") {
		t.Errorf("the interrupted event's reason %q does not say the answer was recorded", seen.Reason)
	}

	// A tool that answered by asking for input: the card says so, with its question.
	do(t, page, chromedp.Navigate(url+"/?run=run-asked"),
		until(`document.querySelector('.pending[data-call="tc_2"] .late .late-result') !== null`))
	if got := textOf(t, page, `.pending[data-call="tc_2"] .late`); !contains(got, "It asked for input") || !contains(got, "Which card?") {
		t.Errorf("the card of a late suspension says %q", got)
	}

	do(t, page, chromedp.Navigate(url+"/?run=run-later"),
		until(`document.querySelector('.pending[data-call="tc_2"] .late-none') !== null`))
	if got := textOf(t, page, `.pending[data-call="tc_2"] .late-none`); !contains(got, "No answer of issue_refund (tc_1) is recorded") {
		t.Fatalf("the card says %q", got)
	}
	do(t, page, js(`document.querySelector('#reason-tc_2').value = "typed before the answer came"`))
	late("run-later", nil, ptr("the payment provider refused: card expired"))
	do(t, page, until(`document.querySelector('.pending[data-call="tc_2"] .late') !== null`),
		until(`document.querySelector('li[data-type="TOOL_CALL_INTERRUPTED"] .late-slot .late-result') !== null`))
	if got := textOf(t, page, `.pending[data-call="tc_2"] .late`); !contains(got, "It failed: the payment provider refused: card expired") {
		t.Fatalf("the card says %q once the answer is recorded", got)
	}
	if got := get(t, page, chromedp.Evaluate[string](`document.querySelector('#reason-tc_2').value`)); got != "typed before the answer came" {
		t.Fatalf("the reason typed before the answer came is now %q", got)
	}
}

// deadRun stores a run that instance a was executing, leased until a minute ago, with call tc_1
// of issue_refund started and unanswered.
func deadRun(t *testing.T, db *gorm.DB, id string) {
	t.Helper()
	past := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
	owner := "a/7"
	snap := `{"messages":[{"role":"user","content":"refund order 5"},{"role":"assistant","toolCalls":[{"id":"call_1","name":"issue_refund","args":{"order":5}}]}],` +
		`"pending":[{"id":"call_1","serverId":"tc_1","name":"issue_refund","args":{"order":5},"state":"executing"}],"steps":0,"callIds":1,"seq":2}`
	row := gormstore.Run{ID: id, AgentID: "refunds", Prompt: "refund order 5", Status: string(runtype.StatusRunning),
		Snapshot: &snap, CreatedAt: past, UpdatedAt: past, LastSeq: 2, LeaseOwner: &owner, LeaseUntil: &past}
	if err := db.Create(&row).Error; err != nil {
		t.Fatal(err)
	}
	call, _ := json.Marshal(runtype.Event{ToolCall: &runtype.ToolCall{ToolCallID: "tc_1", ToolName: "issue_refund", Args: json.RawMessage(`{"order":5}`)}})
	for _, ev := range []gormstore.Event{
		{RunID: id, Seq: 1, Type: string(runtype.EventRunStarted), Data: `{"status":"RUNNING"}`, CreatedAt: past},
		{RunID: id, Seq: 2, Type: string(runtype.EventToolCallRequested), Data: string(call), CreatedAt: past},
	} {
		if err := db.Create(&ev).Error; err != nil {
			t.Fatal(err)
		}
	}
}

func waitSuspended(t *testing.T, svc *runs.Service, ctx context.Context, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := svc.Get(ctx, id)
		if err == nil && r.Status == runtype.StatusSuspended {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not suspend: %v, %v", id, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveService serves the console and the GraphQL API over svc, authentication off, and returns the URL.
func serveService(t *testing.T, svc *runs.Service) string {
	t.Helper()
	gql := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: graph.NewResolver(svc)}))
	gql.AddTransport(transport.Websocket{KeepAlivePingInterval: 10 * time.Second})
	gql.AddTransport(transport.POST{})
	gql.SetErrorPresenter(graph.PresentError(slog.New(slog.DiscardHandler)))
	gql.Use(graph.StreamErrors{})
	mux := http.NewServeMux()
	mux.Handle("/graphql", auth.Anonymous(gql))
	mux.Handle("/", httpguard.Console(web.Handler()))
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
