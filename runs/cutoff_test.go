package runs_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"interlock/agent"
	"interlock/internal/dbtest"
	"interlock/llm"
	"interlock/runs"
	"interlock/runtype"
)

// cutOffModel is an OpenAI-compatible model whose server cuts its first `cut` answers off after
// "Hel" (no finish_reason, no [DONE]) and then answers "Hello, world" in full.
func cutOffModel(t *testing.T, cut int) (*llm.OpenAI, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if requests.Add(1) <= int64(cut) {
			io.WriteString(w, chunk(`{"role":"assistant","content":"Hel"}`, "null"))
			return
		}
		io.WriteString(w, chunk(`{"role":"assistant","content":"Hello, "}`, "null")+chunk(`{"content":"world"}`, `"stop"`)+"data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	m, err := llm.NewOpenAI(llm.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", Timeout: 20 * time.Second, MaxRetries: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m, &requests
}

// A model answer cut off mid-stream never becomes a run's output: the call is made again (within
// the provider's retries), followers are told to drop the fragment, and when every attempt is
// cut off the run fails with MODEL_ERROR.
func TestCutOffModelAnswerNeverCompletesARun(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		once, _ := cutOffModel(t, 1)
		always, requests := cutOffModel(t, 100)
		f := setupWith(t, db, runs.Config{TextFlushBytes: 1}, setupOpts{agents: []*agent.Agent{
			{ID: "once-agent", Name: "Once", Model: once},
			{ID: "always-agent", Name: "Always", Model: always},
		}})

		r := f.start(t, runs.StartParams{AgentID: "once-agent", Prompt: "hi"})
		got := f.finished(t, r.ID)
		if got.Status != runtype.StatusCompleted || got.Output == nil || *got.Output != "Hello, world" {
			t.Fatalf("run %s, output %v", got.Status, got.Output)
		}
		evs := f.until(t, r.ID, 0, runtype.StatusCompleted)
		var kinds []string
		for _, ev := range evs {
			kinds = append(kinds, string(ev.Type)+" "+ev.Text)
		}
		if got := strings.Join(kinds, "|"); got != "RUN_STARTED |TEXT_DELTA Hel|MODEL_CALL_RETRIED |TEXT_DELTA Hello, |TEXT_DELTA world|RUN_FINISHED " {
			t.Fatalf("events %s", got)
		}
		checkGapless(t, f, r.ID, got.LastSeq)

		r = f.start(t, runs.StartParams{AgentID: "always-agent", Prompt: "hi"})
		got = f.finished(t, r.ID)
		if got.Status != runtype.StatusFailed || got.Output != nil || got.ErrorCode == nil || *got.ErrorCode != runs.FailureModel {
			t.Fatalf("every answer cut off: run %s, output %v, code %v", got.Status, got.Output, got.ErrorCode)
		}
		if requests.Load() != 3 {
			t.Fatalf("%d model requests, want 3 (MaxRetries 2)", requests.Load())
		}
		n := 0
		for _, ev := range f.until(t, r.ID, 0, runtype.StatusFailed) {
			if ev.Type == runtype.EventModelCallRetried {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%d MODEL_CALL_RETRIED events, want 2", n)
		}
	})
}
