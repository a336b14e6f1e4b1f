package storetest

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"interlock/runs"
	"interlock/runtype"
)

// Claims, search and saved views (runs/claims.go, runs/search.go, runs/savedviews.go).

func (f *fixture) claimAt(runID, subject string, when time.Time) bool {
	f.t.Helper()
	fresh, err := f.s.Claim(f.ctx, runs.ClaimWrite{RunID: runID, Subject: subject, At: when, ExpiresAt: when.Add(runs.ClaimTTL), InstanceID: "instance-2"})
	if err != nil {
		f.t.Fatalf("Claim %s by %s: %v", runID, subject, err)
	}
	return fresh
}

func (f *fixture) claimsAt(ids []string, now time.Time) map[string][]runtype.RunClaim {
	f.t.Helper()
	m, err := f.s.Claims(f.ctx, ids, now, 0)
	if err != nil {
		f.t.Fatalf("Claims: %v", err)
	}
	return m
}

func claimers(l []runtype.RunClaim) string {
	s := make([]string, len(l))
	for i, c := range l {
		s[i] = c.Subject
	}
	return strings.Join(s, ",")
}

func testClaims(t *testing.T, open Opener) {
	each(t, open, "ClaimRenewLapseAndRelease", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		other := f.suspended(runOpts{})
		before := len(f.changes())
		if !f.claimAt(r.ID, "rita", at(10)) {
			t.Fatal("the first claim is not new")
		}
		ch := f.changes()
		if len(ch) != before+1 || ch[len(ch)-1].Kind != runs.ChangeChanged || ch[len(ch)-1].RunID != r.ID {
			t.Fatalf("changes %+v: want one CHANGED of the claimed run", ch)
		}
		if f.claimAt(r.ID, "rita", at(70)) {
			t.Error("a renewal is reported new")
		}
		if len(f.changes()) != before+1 {
			t.Error("a renewal recorded a change")
		}
		f.claimAt(r.ID, "bob", at(80))
		got := f.claimsAt([]string{r.ID, other.ID}, at(90))
		if claimers(got[r.ID]) != "rita,bob" || len(got[other.ID]) != 0 {
			t.Fatalf("claims %+v, want rita then bob on %s only", got, r.ID)
		}
		wantTime(t, "rita's claim starts", got[r.ID][0].Since, at(10))
		wantTime(t, "rita's claim expires", got[r.ID][0].ExpiresAt, at(70).Add(runs.ClaimTTL))
		all := f.claimsAt(nil, at(90))
		if claimers(all[r.ID]) != "rita,bob" || len(all) != 1 {
			t.Errorf("all claims %+v", all)
		}
		// Past rita's expiry only bob's stands; a claim after a lapse is new and starts anew.
		lapse := at(70).Add(runs.ClaimTTL)
		if got := f.claimsAt([]string{r.ID}, lapse); claimers(got[r.ID]) != "bob" {
			t.Errorf("claims at rita's expiry %+v, want bob's", got)
		}
		if !f.claimAt(r.ID, "rita", lapse.Add(time.Second)) {
			t.Error("a claim after a lapse is not new")
		}
		got = f.claimsAt([]string{r.ID}, lapse.Add(time.Second))
		if claimers(got[r.ID]) != "bob,rita" {
			t.Fatalf("claims %+v", got)
		}
		wantTime(t, "rita's new claim starts", got[r.ID][1].Since, lapse.Add(time.Second))
		// Release: only one's own, and only once.
		n := len(f.changes())
		released, err := f.s.ReleaseClaim(f.ctx, r.ID, "rita", "instance-2", lapse.Add(2*time.Second))
		if err != nil || !released {
			t.Fatalf("ReleaseClaim = %v, %v", released, err)
		}
		if released, err = f.s.ReleaseClaim(f.ctx, r.ID, "rita", "instance-2", lapse.Add(3*time.Second)); err != nil || released {
			t.Errorf("second ReleaseClaim = %v, %v", released, err)
		}
		if ch := f.changes(); len(ch) != n+1 || ch[n].Kind != runs.ChangeChanged {
			t.Errorf("changes after release %+v", ch[n:])
		}
		if got := f.claimsAt([]string{r.ID}, lapse.Add(3*time.Second)); claimers(got[r.ID]) != "bob" {
			t.Errorf("claims after release %+v", got)
		}
	})

	each(t, open, "OnlyASuspendedRun", func(t *testing.T, f *fixture) {
		running := f.insert(runOpts{})
		_, err := f.s.Claim(f.ctx, runs.ClaimWrite{RunID: running.ID, Subject: "rita", At: at(5), ExpiresAt: at(200), InstanceID: "i"})
		wantStale(t, "claim of a running run", err)
		_, err = f.s.Claim(f.ctx, runs.ClaimWrite{RunID: id(999), Subject: "rita", At: at(5), ExpiresAt: at(200), InstanceID: "i"})
		wantStale(t, "claim of no run", err)
		if got := f.claimsAt(nil, at(5)); len(got) != 0 {
			t.Errorf("claims %+v", got)
		}
	})

	each(t, open, "ConcurrentClaimsOfOnePerson", func(t *testing.T, f *fixture) {
		r := f.suspended(runOpts{})
		errs := make(chan error, 4)
		for range 4 {
			go func() {
				_, err := f.s.Claim(f.ctx, runs.ClaimWrite{RunID: r.ID, Subject: "rita", At: at(5), ExpiresAt: at(200), InstanceID: "i"})
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Errorf("Claim: %v", err)
			}
		}
		if got := f.claimsAt([]string{r.ID}, at(6)); claimers(got[r.ID]) != "rita" {
			t.Errorf("claims %+v, want rita's once", got)
		}
	})
}

// search lists the suspended runs and the finished runs matching text, as ids.
func (f *fixture) search(p runs.ListSuspendedParams, text string) (suspended, recent []string) {
	f.t.Helper()
	p.Search = text
	list, err := f.s.ListSuspended(f.ctx, p, 100, 0)
	if err != nil {
		f.t.Fatalf("ListSuspended(search %q): %v", text, err)
	}
	n, err := f.s.CountSuspended(f.ctx, p)
	if err != nil || n != int64(len(list)) {
		f.t.Errorf("CountSuspended(search %q) = %d, %v; listed %d", text, n, err, len(list))
	}
	for _, r := range list {
		suspended = append(suspended, r.ID)
	}
	rp := runs.RecentParams{Statuses: []runtype.Status{runtype.StatusSuspended, runtype.StatusCompleted, runtype.StatusRunning}, Resources: p.Resources, Search: text, PerPage: 100}
	rl, total, err := f.s.ListRecent(f.ctx, rp)
	if err != nil || total != int64(len(rl)) {
		f.t.Fatalf("ListRecent(search %q) = %d runs, total %d, %v", text, len(rl), total, err)
	}
	for _, r := range rl {
		recent = append(recent, r.ID)
	}
	sort.Strings(suspended)
	sort.Strings(recent)
	return suspended, recent
}

func testSearch(t *testing.T, open Opener) {
	each(t, open, "EachFieldCaseFoldedAndEscaped", func(t *testing.T, f *fixture) {
		a := f.insert(runOpts{N: 1, ThreadID: ptr("Thread-Blue"), ResourceID: ptr("acme"), StartedBy: ptr("Rita")})
		f.suspend(a, runtype.ToolCall{ToolCallID: "c1", ToolName: "Deploy_Service", Args: json.RawMessage(`{"service":"Payments-API","pct":"100%"}`), RequiresApproval: true}, at(1), "i")
		b := f.insert(runOpts{N: 2, ThreadID: ptr("thread-red"), ResourceID: ptr("globex"), StartedBy: ptr("bob")})
		f.suspend(b, runtype.ToolCall{ToolCallID: "c2", ToolName: "issue_refund", Args: json.RawMessage(`{"order":"A_1","amount":30}`), RequiresApproval: true}, at(2), "i")
		c := f.insert(runOpts{N: 3, ResourceID: ptr("acme")}) // running, no call
		all := []string{id(1), id(2), id(3)}
		_ = c
		cases := []struct {
			text string
			want []string
		}{
			{"", all},
			{id(2), []string{id(2)}}, // whole id
			{strings.ToUpper(id(1)), []string{id(1)}}, // whole id, any case
			{id(1)[:35], all},                         // id prefix
			{"000000000003", nil},                     // not a prefix of the id
			{"deploy", []string{id(1)}},               // tool name
			{"payments-api", []string{id(1)}},         // argument text
			{`"amount":30`, []string{id(2)}},          // argument JSON
			{"blue", []string{id(1)}},                 // thread
			{"GLOBEX", []string{id(2)}},               // resource
			{"rit", []string{id(1)}},                  // requester
			{"acme", []string{id(1), id(3)}},          // resource, whatever the status
			{"100%", []string{id(1)}},                 // % matches itself
			{"%", []string{id(1)}},
			{"_", []string{id(1), id(2)}}, // _ matches itself (Deploy_Service, A_1)
			{"a_1", []string{id(2)}},
			{"!", nil}, // the escape character matches itself
			{"nothing-like-it", nil},
		}
		for _, tc := range cases {
			sus, rec := f.search(runs.ListSuspendedParams{}, tc.text)
			var wantSus []string
			for _, w := range tc.want {
				if w != id(3) {
					wantSus = append(wantSus, w)
				}
			}
			if strings.Join(sus, " ") != strings.Join(wantSus, " ") {
				t.Errorf("suspended search %q = %v, want %v", tc.text, sus, wantSus)
			}
			if strings.Join(rec, " ") != strings.Join(tc.want, " ") {
				t.Errorf("recent search %q = %v, want %v", tc.text, rec, tc.want)
			}
		}
	})

	each(t, open, "NeverWidensTheScope", func(t *testing.T, f *fixture) {
		a := f.insert(runOpts{N: 1, ResourceID: ptr("acme"), StartedBy: ptr("rita")})
		f.suspend(a, approval("c1"), at(1), "i")
		b := f.insert(runOpts{N: 2, ResourceID: ptr("globex"), StartedBy: ptr("rita")})
		f.suspend(b, approval("c2"), at(2), "i")
		for _, text := range []string{"rita", "globex", "issue_refund", id(2), "order"} {
			sus, rec := f.search(runs.ListSuspendedParams{Resources: []string{"acme"}}, text)
			for _, got := range append(sus, rec...) {
				if got != id(1) {
					t.Errorf("search %q scoped to acme found %s", text, got)
				}
			}
		}
		sus, _ := f.search(runs.ListSuspendedParams{ResourceID: ptr("acme"), Resources: []string{"acme"}}, "refund")
		if len(sus) != 1 || sus[0] != id(1) {
			t.Errorf("search with a resource filter = %v", sus)
		}
	})
}

func testSavedViews(t *testing.T, open Opener) {
	each(t, open, "PerPersonUniqueName", func(t *testing.T, f *fixture) {
		save := func(id, subject, name, query string) error {
			return f.s.SaveView(f.ctx, runtype.SavedView{ID: id, Subject: subject, Name: name, Query: query, CreatedAt: at(1)})
		}
		for _, v := range [][4]string{{"v1", "rita", "deploys", "q=deploy"}, {"v2", "rita", "acme", "q=acme&agentId=ops"}, {"v3", "bob", "deploys", "q=other"}} {
			if err := save(v[0], v[1], v[2], v[3]); err != nil {
				t.Fatalf("SaveView %v: %v", v, err)
			}
		}
		if err := save("v4", "rita", "deploys", "q=x"); !errors.Is(err, runs.ErrDuplicateView) {
			t.Errorf("a second view named deploys = %v, want ErrDuplicateView", err)
		}
		list, err := f.s.SavedViews(f.ctx, "rita")
		if err != nil || len(list) != 2 || list[0].Name != "acme" || list[1].Name != "deploys" || list[1].Query != "q=deploy" || list[0].ID != "v2" {
			t.Fatalf("rita's views %+v, %v", list, err)
		}
		wantTime(t, "created", list[0].CreatedAt, at(1))
		if n, err := f.s.CountSavedViews(f.ctx, "rita"); n != 2 || err != nil {
			t.Errorf("CountSavedViews = %d, %v", n, err)
		}
		if ok, err := f.s.DeleteSavedView(f.ctx, "bob", "v1"); ok || err != nil {
			t.Errorf("bob deleting rita's view = %v, %v", ok, err)
		}
		if ok, err := f.s.DeleteSavedView(f.ctx, "rita", "v1"); !ok || err != nil {
			t.Errorf("DeleteSavedView = %v, %v", ok, err)
		}
		if list, _ := f.s.SavedViews(f.ctx, "rita"); len(list) != 1 || list[0].ID != "v2" {
			t.Errorf("rita's views after delete %+v", list)
		}
		if list, _ := f.s.SavedViews(f.ctx, "bob"); len(list) != 1 || list[0].Query != "q=other" {
			t.Errorf("bob's views %+v", list)
		}
	})
}
