package web_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"interlock/gormstore"
	"interlock/internal/apptest"
)

// TestConsoleTeamPage: the Team page shows the figures of the period's decisions — totals, per
// person and per tool, and the median and 90th percentile waits — for decisions seeded through
// the API whose waits are then set to known values; a period without decisions says so.
func TestConsoleTeamPage(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	file := filepath.Join(t.TempDir(), "team.db")
	s := apptest.AuthServer(t, "sqlite:"+file, "")
	root, alice, bob := apptest.TokenOf("root"), apptest.TokenOf("alice"), apptest.TokenOf("bob")
	a := s.SuspendAs(t, root, "refund order 1 for 5", map[string]any{"resourceId": "r1"})
	b := s.SuspendAs(t, root, "refund order 2 for 5", map[string]any{"resourceId": "r1"})
	c := s.SuspendAs(t, root, "refund order 3 for 5", map[string]any{"resourceId": "r2"})
	s.MustAs(t, alice, `mutation($run: ID!) { approveToolCall(runId: $run) { id } }`, map[string]any{"run": a.ID}, nil)
	s.MustAs(t, alice, `mutation($run: ID!) { declineToolCall(runId: $run, reason: "no") { id } }`, map[string]any{"run": b.ID}, nil)
	s.MustAs(t, bob, `mutation($run: ID!) { approveToolCall(runId: $run, args: {orderId: "3", amount: 1}) { id } }`, map[string]any{"run": c.ID}, nil)
	// The waits: 30 s, 90 s and 2 h (each call made to have begun that long before its decision).
	db, err := gormstore.Open(context.Background(), "sqlite:"+file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	}()
	for run, wait := range map[string]time.Duration{a.ID: 30 * time.Second, b.ID: 90 * time.Second, c.ID: 2 * time.Hour} {
		var row gormstore.ToolCall
		if err := db.Where("run_id = ?", run).First(&row).Error; err != nil || row.DecidedAt == nil {
			t.Fatalf("the decided call of %s: %v %+v", run, err, row)
		}
		if err := db.Model(&gormstore.ToolCall{}).Where("id = ?", row.ID).Update("created_at", row.DecidedAt.Add(-wait)).Error; err != nil {
			t.Fatal(err)
		}
	}

	today := time.Now().UTC()
	period := "&from=" + today.AddDate(0, 0, -1).Format(time.DateOnly) + "&to=" + today.Format(time.DateOnly)
	page := tab(t, ctx, false)
	do(t, page, chromedp.Navigate(s.URL+"/?view=team"+period+"#token="+root), until(`!!document.querySelector("#team-people tbody tr")`))
	for sel, want := range map[string]string{
		"#t-decisions": "3", "#t-approved": "2", "#t-declined": "1", "#t-expired": "0",
		"#t-median": "1 min 30 s", "#t-p90": "2 h 0 min",
	} {
		if got := textOf(t, page, sel); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want %q in it", sel, got, want)
		}
	}
	if got := textOf(t, page, "#t-approved"); !strings.Contains(got, "1 edited") {
		t.Errorf("approved = %q, want 1 edited", got)
	}
	rows := get(t, page, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#team-people tbody tr, #team-tools tbody tr")].map((r) => r.innerText.replace(/\s+/g, " ").trim())`))
	want := []string{
		"alice 2 1 0 1 0 0 30 s 1 min 30 s",
		"bob 1 1 1 0 0 0 2 h 0 min 2 h 0 min",
		"issue_refund 3 2 1 1 0 0 1 min 30 s 2 h 0 min",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("table rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if got := get(t, page, chromedp.Evaluate[string](`document.querySelector('[data-nav="team"]').getAttribute("aria-current")`)); got != "page" {
		t.Errorf("the Team link is not the current page: %q", got)
	}

	// A principal bound to r2 sees bob's decision only; a period without decisions says so.
	scoped := tab(t, ctx, true)
	do(t, scoped, chromedp.Navigate(s.URL+"/?view=team"+period+"#token="+apptest.TokenOf("portal")), until(`!!document.querySelector("#t-decisions")`))
	if got := textOf(t, scoped, "#t-decisions"); !strings.Contains(got, "1") || strings.Contains(bodyText(t, scoped), "alice") {
		t.Errorf("portal's page: decisions %q, body %q", got, bodyText(t, scoped))
	}
	do(t, page, chromedp.Navigate(s.URL+"/?view=team&from=2020-01-01&to=2020-01-07"), until(`!!document.querySelector("#team-empty")`))
	if got := textOf(t, page, "#team-empty"); !strings.Contains(got, "No decisions from 2020-01-01 to 2020-01-07") {
		t.Errorf("empty period: %q", got)
	}
}
