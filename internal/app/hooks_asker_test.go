package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"interlock/internal/apptest"
	"interlock/internal/dbtest"
)

// A hook's request ends when its asker stops waiting: when the hook is answered without a
// decision (its wait ended) or the agent gives up on it (closes the connection), the request is
// decided EXPIRED by nobody, saying so, in the decision's compare-and-set — a person can then no
// longer approve a call the agent was told was not approved.

// requestOf is agent's stored request runID (recentRuns), which must exist.
func requestOf(s *apptest.Server, t testing.TB, agent, runID string) apptest.HookRun {
	t.Helper()
	for _, r := range s.HookRequests(t, agent) {
		if r.RunID == runID {
			return r
		}
	}
	t.Fatalf("no request %s of %s", runID, agent)
	return apptest.HookRun{}
}

// wantEnded checks that request r ended EXPIRED by nobody, its reason saying that asker stopped
// waiting, and how.
func wantEnded(t testing.TB, r apptest.HookRun, asker, how string) {
	t.Helper()
	if r.Status != "COMPLETED" || len(r.Decisions) != 1 || r.Decisions[0].Kind != "EXPIRED" || r.Decisions[0].DecidedBy != nil || r.Decisions[0].Reason == nil {
		t.Fatalf("request %s: %s %+v, want COMPLETED with one EXPIRED decision by nobody", r.RunID, r.Status, r.Decisions)
	}
	if why := *r.Decisions[0].Reason; !strings.HasPrefix(why, asker+" stopped waiting at ") || !strings.HasSuffix(why, ": "+how) {
		t.Fatalf("request %s: reason %q, want %q stopped waiting at …: %s", r.RunID, why, asker, how)
	}
}

// wantNoLateDecision checks that deciding request runID now is CONFLICT saying the asker stopped
// waiting, for an approval and a decline alike, and that it stays as it ended.
func wantNoLateDecision(t testing.TB, s *apptest.Server, agent, runID, asker string) {
	t.Helper()
	before := requestOf(s, t, agent, runID)
	for _, c := range []struct {
		m    string
		vars map[string]any
	}{{approveMutation, map[string]any{"id": runID}}, {declineMutation, map[string]any{"id": runID, "reason": "too late"}}} {
		res := s.PostAs(t, apptest.TokenOf("alice"), c.m, c.vars)
		if res.Code != "CONFLICT" || !strings.Contains(res.Msg, "expired at") || !strings.Contains(res.Msg, asker+" stopped waiting at ") {
			t.Fatalf("%s after the hook stopped waiting: %s %q, want CONFLICT saying %s stopped waiting", strings.Fields(c.m)[2], res.Code, res.Msg, asker)
		}
	}
	if after := requestOf(s, t, agent, runID); len(after.Decisions) != 1 || after.Decisions[0].Kind != before.Decisions[0].Kind {
		t.Fatalf("the request changed: %+v", after.Decisions)
	}
}

// nextChange is the next suspendedRunsChanged event of subscription id: its kind and run.
func nextChange(t testing.TB, ws *apptest.WSClient, id string) (kind, runID string) {
	t.Helper()
	data, done, _ := ws.Next(id)
	if done {
		t.Fatal("suspendedRunsChanged completed")
	}
	var ev struct {
		SuspendedRunsChanged struct {
			Kind string
			Run  *struct{ RunID string }
		}
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	c := ev.SuspendedRunsChanged
	if c.Run != nil {
		runID = c.Run.RunID
	}
	return c.Kind, runID
}

// TestHooksUndecidedAnswerEndsTheRequest: a hook whose wait ends without a decision is denied
// saying nobody decided, and its request has ended before the answer: EXPIRED by nobody, the
// reason naming the agent that stopped waiting, when, and that its wait ended; the inbox drops it
// live (suspendedRunsChanged: LEFT), and approving or declining it afterwards is CONFLICT saying
// why. Through the whole server, both agents, SQLite and MariaDB.
func TestHooksUndecidedAnswerEndsTheRequest(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		ws := apptest.DialAs(t, s.URL, "graphql-transport-ws", apptest.TokenOf("vera"))
		sub := ws.Subscribe(`subscription { suspendedRunsChanged(external: true) { kind run { runId } } }`, nil)
		s.WaitWatchers(t, 1)
		for _, c := range []struct{ agent, asker string }{{"claude-code", "Claude Code"}, {"codex", "Codex"}} {
			body := apptest.HookFixture(t, c.agent+"/permission-request.json")
			a := postHook(s, t, "/hooks/"+c.agent+"/ends?wait=1s", "Bearer "+apptest.TokenOf("cc"), body)
			apptest.WantAnswer(t, c.agent, a, denyWith(t, c.agent, "Not approved: nobody decided in Interlock within 1s."))
			kind, runID := nextChange(t, ws, sub)
			if kind != "SUSPENDED" {
				t.Fatalf("%s: first change %s %s, want SUSPENDED", c.agent, kind, runID)
			}
			if kind, left := nextChange(t, ws, sub); kind != "LEFT" || left != runID {
				t.Fatalf("%s: then %s %s, want LEFT %s", c.agent, kind, left, runID)
			}
			wantEnded(t, requestOf(s, t, "ends", runID), c.asker, "its hook's wait of 1s ended before anyone decided")
			wantNoLateDecision(t, s, "ends", runID, c.asker)
			var inbox struct{ SuspendedRuns struct{ Total int } }
			s.MustAs(t, apptest.TokenOf("alice"), `{ suspendedRuns(agentId: "ends") { total } }`, nil, &inbox)
			if inbox.SuspendedRuns.Total != 0 {
				t.Fatalf("%s: %d requests still wait", c.agent, inbox.SuspendedRuns.Total)
			}
		}
	})
}

// TestHooksAgentGoneEndsTheRequest: an agent that gives up on a held hook (Claude Code and Codex
// cancel it at their timeout) ends its request as a wait that ended does, though nobody is there
// to be answered: EXPIRED, saying the agent closed the hook's connection; a late approval is
// CONFLICT. Both agents, SQLite and MariaDB.
func TestHooksAgentGoneEndsTheRequest(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		for _, c := range []struct{ agent, asker string }{{"claude-code", "Claude Code"}, {"codex", "Codex"}} {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/hooks/"+c.agent+"/gone?wait=30s", bytes.NewReader(apptest.HookFixture(t, c.agent+"/permission-request.json")))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+apptest.TokenOf("cc"))
			done := make(chan error, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					err = fmt.Errorf("answered %d", resp.StatusCode)
				}
				done <- err
			}()
			r := waitingRequest(s, t, "gone")
			apptest.Until(t, "the hook waits", func() bool { return s.App.Service.Followers(r.RunID) == 1 })
			cancel()
			if err := <-done; !strings.Contains(fmt.Sprint(err), "context canceled") {
				t.Fatalf("%s: the hook ended with %v, want the client's cancellation", c.agent, err)
			}
			apptest.Until(t, c.agent+"'s request ends", func() bool { return requestOf(s, t, "gone", r.RunID).Status == "COMPLETED" })
			wantEnded(t, requestOf(s, t, "gone", r.RunID), c.asker, "it closed the hook's connection before anyone decided")
			wantNoLateDecision(t, s, "gone", r.RunID, c.asker)
		}
	})
}

// TestHooksUndecidedRacesAnApproval: an approval sent as the hook's wait ends, many times, the
// approval landing a little before or after the end: each time there is one outcome, and the
// hook's answer is the stored decision — the approval stored (by alice) and the hook told allow,
// or the request ended (EXPIRED, the approval CONFLICT) and the hook told nobody decided.
func TestHooksUndecidedRacesAnApproval(t *testing.T) {
	eachHooksDB(t, func(t *testing.T, s *apptest.Server) {
		const rounds, wait = 30, 500 * time.Millisecond
		body := apptest.HookFixture(t, "claude-code/permission-request.json")
		allow, undecided := apptest.HookFixture(t, "claude-code/answer-allow.json"), denyWith(t, "claude-code", "Not approved: nobody decided in Interlock within 1s.")
		won := map[string]int{}
		for round := range rounds {
			sent := time.Now()
			held := s.PostHookAsync(t, "/hooks/claude-code/race?wait=500ms", "Bearer "+apptest.TokenOf("cc"), body)
			r := waitingRequest(s, t, "race")
			// From 60 ms before the wait ends (as the client sees it) to 56 ms after.
			time.Sleep(time.Until(sent.Add(wait - 60*time.Millisecond + time.Duration(round)*4*time.Millisecond)))
			res := s.PostAs(t, apptest.TokenOf("alice"), approveMutation, map[string]any{"id": r.RunID})
			a := apptest.Answered(t, held)
			stored := requestOf(s, t, "race", r.RunID)
			if len(stored.Decisions) != 1 || stored.Status != "COMPLETED" {
				t.Fatalf("round %d: stored %s %+v, want one decision", round, stored.Status, stored.Decisions)
			}
			switch res.Code {
			case "":
				won["approval"]++
				if d := stored.Decisions[0]; d.Kind != "APPROVED" || d.DecidedBy == nil || *d.DecidedBy != "alice" {
					t.Fatalf("round %d: the approval succeeded, stored %+v", round, d)
				}
				apptest.WantAnswer(t, fmt.Sprintf("round %d: approved", round), a, allow)
			case "CONFLICT":
				won["end"]++
				wantEnded(t, stored, "Claude Code", "its hook's wait of 500ms ended before anyone decided")
				apptest.WantAnswer(t, fmt.Sprintf("round %d: ended", round), a, undecided)
			default:
				t.Fatalf("round %d: approve: %s %s", round, res.Code, res.Msg)
			}
		}
		t.Logf("of %d rounds, the approval won %d, the end of the wait %d", rounds, won["approval"], won["end"])
	})
}

// TestHooksRepeatedRequestsAtConstantCost: 150 identical hooks, each answered at once (wait=0,
// so each request ends and the next is a new one under the same key): each takes the same number
// of SQL statements — counted from the server's own spans, each hook sent in a trace of its own —
// where walking the earlier requests one insert each made the 150th cost some 150 times more.
// SQLite and MariaDB.
func TestHooksRepeatedRequestsAtConstantCost(t *testing.T) {
	for _, db := range []string{"sqlite", "mysql"} {
		t.Run(db, func(t *testing.T) {
			c := startCollector(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.url)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
			t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
			url := "sqlite:" + filepath.Join(t.TempDir(), "interlock.db")
			if db == "mysql" {
				url = dbtest.MySQLURL(dbtest.MySQLDSN(t))
			}
			s := apptest.Start(t, url, "--auth=on", "--mutation-rate", "0", "--config", apptest.WriteConfig(t, hooksConfig(t)))
			const n = 150
			body := apptest.HookFixture(t, "codex/permission-request.json")
			undecided := denyWith(t, "codex", "Not approved: nobody decided in Interlock within 0s.")
			traceOf := func(i int) string { return fmt.Sprintf("%032x", 0xa000+i) }
			took := make([]time.Duration, n)
			for i := range n {
				req, _ := http.NewRequest(http.MethodPost, s.URL+"/hooks/codex/many?wait=0", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+apptest.TokenOf("cc"))
				req.Header.Set("traceparent", "00-"+traceOf(i)+"-00f067aa0ba902b7-01")
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				b.ReadFrom(resp.Body)
				resp.Body.Close()
				took[i] = time.Since(start)
				apptest.WantAnswer(t, fmt.Sprint("hook ", i), apptest.HookAnswer{Status: resp.StatusCode, Header: resp.Header, Body: b.Bytes()}, undecided)
				if i%25 == 24 {
					if err := s.App.Tracing().Flush(context.Background()); err != nil { // within the exporter's queue
						t.Fatal(err)
					}
				}
			}
			if got := len(s.HookRequests(t, "many")); got != min(n, 100) { // recentRuns' page holds 100
				t.Fatalf("%d requests listed, want %d", got, min(n, 100))
			}
			statements := make([]int, n)
			texts := make([][]string, n)
			for _, sp := range waitSpans(t, s, c, func(got spanSet) bool { return hasTrace(got, traceOf(n-1)) }) {
				if sp.attr("db.query.text") == "" {
					continue
				}
				for i := range n {
					if sp.traceID() == traceOf(i) {
						statements[i]++
						texts[i] = append(texts[i], sp.attr("db.query.text"))
					}
				}
			}
			for i := 2; i < n; i++ {
				if statements[i] != statements[1] {
					t.Fatalf("hook %d took %d SQL statements, hook 1 %d:\n%s\n--- hook 1:\n%s", i, statements[i], statements[1],
						strings.Join(texts[i], "\n"), strings.Join(texts[1], "\n"))
				}
			}
			if statements[1] == 0 || statements[1] > 40 {
				t.Fatalf("a repeated hook took %d SQL statements", statements[1])
			}
			first, last := median(took[10:20]), median(took[n-10:])
			t.Logf("%d SQL statements per hook (the first: %d); median time of hooks 10-19 %v, of the last 10 %v", statements[1], statements[0], first, last)
		})
	}
}

// hasTrace reports whether a span of that trace was received.
func hasTrace(ss spanSet, trace string) bool {
	for _, s := range ss {
		if s.traceID() == trace {
			return true
		}
	}
	return false
}

// median is the median of ds.
func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}
