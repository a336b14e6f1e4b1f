package app_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"interlock/audit"
	"interlock/internal/app"
	"interlock/internal/apptest"
	"interlock/runs"
	"interlock/runtype"
)

// getAudit sends GET /audit with the query and headers, as token (none when empty), and
// returns the status, the Content-Type and the body.
func getAudit(t *testing.T, s *apptest.Server, token, query string, header map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", s.URL+"/audit?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// auditLine is a decision line of an NDJSON export.
type auditLine struct {
	Record, RunID, Tool, Kind, DecidedAt, ReceiptID string
	DecidedBy, Reason, ResourceID                   *string
	Seq                                             int
	Args                                            json.RawMessage
}

// decisionLines verifies an NDJSON export and returns its decision lines.
func decisionLines(t *testing.T, body string) []auditLine {
	t.Helper()
	if _, err := audit.Verify(strings.NewReader(body)); err != nil {
		t.Fatalf("the export does not verify: %v\n%s", err, body)
	}
	var out []auditLine
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		var a auditLine
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		if a.Record == "decision" {
			out = append(out, a)
		}
	}
	return out
}

func wantAPIError(t *testing.T, what string, status int, body string, wantStatus int, code, contains string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || status != wantStatus || e.Error.Code != code || !strings.Contains(e.Error.Message, contains) {
		t.Errorf("%s: %d %s; want %d %s …%s…", what, status, body, wantStatus, code, contains)
	}
}

// TestAuditExportOverHTTP: GET /audit exports the decisions of a period in the order they
// were taken, in NDJSON and CSV, chained so that `interlock audit verify` checks the file; it
// needs a token, shows a principal bound to resources only their runs' decisions, bounds the
// period by from (inclusive) and to (exclusive), and answers bad dates 400 with a JSON error.
func TestAuditExportOverHTTP(t *testing.T) {
	t.Parallel()
	eachAuthDB(t, "", func(t *testing.T, s *apptest.Server) {
		root, portal, alice, bob := apptest.TokenOf("root"), apptest.TokenOf("portal"), apptest.TokenOf("alice"), apptest.TokenOf("bob")
		from := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
		a := s.SuspendAs(t, root, "refund order 1 for 5", map[string]any{"resourceId": "r1"})
		b := s.SuspendAs(t, portal, "refund order 2 for 7", map[string]any{"resourceId": "r2"})
		c := s.SuspendAs(t, root, "refund order 3 for 9", map[string]any{"resourceId": "r1"})
		decide := `mutation($run: ID!) { approveToolCall(runId: $run) { id } }`
		s.MustAs(t, alice, decide, map[string]any{"run": a.ID}, nil)
		s.MustAs(t, bob, `mutation($run: ID!) { declineToolCall(runId: $run, reason: "too much, ask \"finance\"") { id } }`, map[string]any{"run": c.ID}, nil)
		s.MustAs(t, alice, decide, map[string]any{"run": b.ID}, nil)
		to := time.Now().UTC().Add(time.Minute).Format(time.RFC3339Nano)
		period := "from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to)

		status, ctype, body := getAudit(t, s, "", period, nil)
		wantAPIError(t, "no token", status, body, 401, "UNAUTHENTICATED", "")
		status, _, body = getAudit(t, s, "not-a-token", period, nil)
		wantAPIError(t, "a bad token", status, body, 401, "UNAUTHENTICATED", "")

		status, ctype, body = getAudit(t, s, root, period, nil)
		if status != 200 || ctype != "application/x-ndjson" {
			t.Fatalf("root's export: %d %s %s", status, ctype, body)
		}
		all := decisionLines(t, body)
		if len(all) != 3 || all[0].RunID != a.ID || all[1].RunID != c.ID || all[2].RunID != b.ID {
			t.Fatalf("root's decisions = %+v, want a, c, b in the order decided", all)
		}
		if d := all[0]; d.Kind != "APPROVED" || d.DecidedBy == nil || *d.DecidedBy != "alice" || d.Tool != "issue_refund" || d.ReceiptID == "" ||
			d.ResourceID == nil || *d.ResourceID != "r1" || !strings.Contains(string(d.Args), `"orderId":"1"`) || d.Seq != 1 {
			t.Errorf("first decision = %+v", d)
		}
		if d := all[1]; d.Kind != "DECLINED" || *d.DecidedBy != "bob" || d.Reason == nil || *d.Reason != `too much, ask "finance"` || d.ReceiptID != "" {
			t.Errorf("second decision = %+v", d)
		}

		// A principal bound to r2 sees the decisions of r2's runs only.
		_, _, body = getAudit(t, s, portal, period, nil)
		if got := decisionLines(t, body); len(got) != 1 || got[0].RunID != b.ID {
			t.Errorf("portal's decisions = %+v, want only b", got)
		}

		// from is inclusive, to exclusive, at the decisions' own times.
		second := url.QueryEscape(all[1].DecidedAt)
		_, _, body = getAudit(t, s, root, "from="+second+"&to="+url.QueryEscape(to), nil)
		if got := decisionLines(t, body); len(got) != 2 || got[0].RunID != c.ID {
			t.Errorf("from the second decision: %+v", got)
		}
		_, _, body = getAudit(t, s, root, "from="+url.QueryEscape(from)+"&to="+second, nil)
		if got := decisionLines(t, body); len(got) != 1 || got[0].RunID != a.ID {
			t.Errorf("to the second decision: %+v", got)
		}
		_, _, body = getAudit(t, s, root, "from=2020-01-01&to=2020-01-02", nil)
		if got := decisionLines(t, body); len(got) != 0 {
			t.Errorf("a period without decisions: %+v", got)
		}

		// CSV, by format= or by Accept: the same decisions, verified.
		for _, ask := range []struct {
			query  string
			header map[string]string
		}{{period + "&format=csv", nil}, {period, map[string]string{"Accept": "text/csv"}}} {
			status, ctype, body = getAudit(t, s, root, ask.query, ask.header)
			sum, err := audit.Verify(strings.NewReader(body))
			if status != 200 || ctype != "text/csv; charset=utf-8" || err != nil || sum.Encoding != audit.CSV || sum.Decisions != 3 {
				t.Errorf("CSV export (%s %v): %d %s %v %+v\n%s", ask.query, ask.header, status, ctype, err, sum, body)
			}
		}

		// Bad requests: a clear JSON error, 400.
		for _, bad := range []struct{ query, contains string }{
			{"from=yesterday&to=" + url.QueryEscape(to), `from "yesterday" is not a time`},
			{"from=" + url.QueryEscape(from), "to is required"},
			{"from=" + url.QueryEscape(to) + "&to=" + url.QueryEscape(from), "is after to"},
			{period + "&format=xml", `format "xml"`},
		} {
			status, _, body = getAudit(t, s, root, bad.query, nil)
			wantAPIError(t, bad.query, status, body, 400, "BAD_USER_INPUT", bad.contains)
		}

		// The documented command verifies the file, and names the line of an edit.
		_, _, body = getAudit(t, s, root, period, nil)
		dir := t.TempDir()
		good, edited := filepath.Join(dir, "audit.ndjson"), filepath.Join(dir, "edited.ndjson")
		os.WriteFile(good, []byte(body), 0o600)
		os.WriteFile(edited, []byte(strings.Replace(body, `"bob"`, `"alice"`, 1)), 0o600)
		if err := app.RunCommand([]string{"audit", "verify", good}, apptest.DiscardLog()); err != nil {
			t.Errorf("audit verify of the export: %v", err)
		}
		err := app.RunCommand([]string{"audit", "verify", edited}, apptest.DiscardLog())
		if err == nil || !strings.Contains(err.Error(), "line 3: ") || !strings.Contains(err.Error(), "edited") {
			t.Errorf("audit verify of an edited export: %v, want line 3 edited", err)
		}
	})
}

// TestCLIAuditVerify: the built binary's `audit verify` exits 0 with OK on an export, 1 naming
// the line of a removed decision, and 2 on a wrong command line.
func TestCLIAuditVerify(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	w := audit.NewWriter(&b, audit.CSV)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := w.Begin(audit.Header{From: t0, To: t0.Add(24 * time.Hour), ExportedAt: t0}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d := runs.DecisionRecord{Decision: runtype.Decision{ID: int64(i + 1), RunID: "run", ToolCallID: "tc_1", ToolName: "deploy",
			Kind: runtype.DecisionApproved, DecidedAt: t0.Add(time.Duration(i) * time.Hour)}, AgentID: "bot", AskedAt: t0}
		if err := w.Decision(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good, cut := filepath.Join(dir, "good.csv"), filepath.Join(dir, "cut.csv")
	lines := strings.SplitAfter(b.String(), "\n")
	os.WriteFile(good, []byte(b.String()), 0o600)
	os.WriteFile(cut, []byte(strings.Join(append(lines[:3:3], lines[4:]...), "")), 0o600) // the second decision removed
	if r := runCLI(t, nil, "audit", "verify", good); r.code != 0 || !strings.HasPrefix(r.stdout, "OK: CSV, 3 decisions from 2026-12-01T00:00:00.000Z to 2026-12-02T00:00:00.000Z") {
		t.Errorf("verify of the export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, nil, "audit", "verify", cut); r.code != 1 || !strings.Contains(r.stderr, "line 4: decision seq 3 where seq 2 was due") {
		t.Errorf("verify of a file without its second decision: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, nil, "audit", "verify"); r.code != 2 || !strings.Contains(r.stderr, "audit verify takes one argument") {
		t.Errorf("verify without a file: exit %d\n%s", r.code, r.stderr)
	}
}
