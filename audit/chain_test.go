package audit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"interlock/audit"
	"interlock/runs"
	"interlock/runtype"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func ptr(s string) *string { return &s }

// decisions are four decisions of every kind, with what makes a format hard: a reason with a
// newline, a comma and quotes, args with HTML characters and a number beyond float64's
// precision, edited args, no resource, a receipt.
func decisions() []runs.DecisionRecord {
	mk := func(id int64, kind runtype.DecisionKind, by *string, minutes int) runs.DecisionRecord {
		return runs.DecisionRecord{
			Decision: runtype.Decision{ID: id, RunID: "run-" + string(rune('a'+id)), ToolCallID: "tc_1", ToolName: "issue_refund", Kind: kind,
				DecidedBy: by, DecidedAt: t0.Add(time.Duration(minutes) * time.Minute), Args: json.RawMessage(`{"order": 42, "note": "<b>&</b>", "big": 12345678901234567890}`)},
			AgentID: "support", ResourceID: ptr("acme"), AskedAt: t0,
		}
	}
	a := mk(1, runtype.DecisionApproved, ptr("alice"), 1)
	a.EditedArgs = json.RawMessage(`{"order":42,"amount":10}`)
	a.Receipt = ptr("eyJhbGciOiJFZERTQSJ9.eyJqdGkiOiJhYmMifQ.c2ln")
	d := mk(2, runtype.DecisionDeclined, ptr("bob"), 2)
	d.Reason = ptr("line one\nline \"two\", with a comma")
	d.ResourceID = nil
	e := mk(3, runtype.DecisionExpired, nil, 3)
	r := mk(4, runtype.DecisionResumed, ptr("carol"), 4)
	r.ResumeData = json.RawMessage(`{"answer":"M"}`)
	return []runs.DecisionRecord{a, d, e, r}
}

// export writes decisions in enc.
func export(t *testing.T, enc audit.Encoding, list []runs.DecisionRecord) string {
	t.Helper()
	var b bytes.Buffer
	w := audit.NewWriter(&b, enc)
	if err := w.Begin(audit.Header{From: t0, To: t0.Add(time.Hour), ExportedAt: t0.Add(2 * time.Hour), ExportedBy: ptr("auditor")}); err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if err := w.Decision(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// lines splits an export into its records, one string each (a CSV record may span lines), and
// the CSV's column names (empty for NDJSON).
func lines(enc audit.Encoding, file string) (head string, recs []string) {
	if enc == audit.NDJSON {
		return "", strings.SplitAfter(strings.TrimSuffix(file, "\n")+"\n", "\n")[:strings.Count(file, "\n")]
	}
	// Every record ends with its hash: a comma, 64 hex digits and a newline.
	head, rest, _ := strings.Cut(file, "\n")
	start := 0
	for _, end := range recordEnd.FindAllStringIndex(rest, -1) {
		recs = append(recs, rest[start:end[1]])
		start = end[1]
	}
	return head + "\n", recs
}

var recordEnd = regexp.MustCompile(`,[0-9a-f]{64}\n`)

func join(head string, recs []string) string { return head + strings.Join(recs, "") }

// lineOf is the line number (1-based) record i of an export starts on.
func lineOf(enc audit.Encoding, recs []string, i int) int {
	n := 1
	if enc == audit.CSV {
		n = 2
	}
	for _, r := range recs[:i] {
		n += strings.Count(r, "\n")
	}
	return n
}

func wantLineError(t *testing.T, what, file string, line int, reason string) {
	t.Helper()
	_, err := audit.Verify(strings.NewReader(file))
	var le *audit.LineError
	if !errors.As(err, &le) {
		t.Fatalf("%s: Verify = %v, want an error at line %d", what, err, line)
	}
	if le.Line != line || !strings.Contains(le.Reason, reason) {
		t.Fatalf("%s: %v; want line %d: …%s…", what, le, line, reason)
	}
}

// TestChainDetectsEveryChange: an export verifies; a decision line removed, a field edited,
// two lines swapped, a line repeated, the header or the end cut off, a line added after the
// end, the period edited — each is found, at the line it happened.
func TestChainDetectsEveryChange(t *testing.T) {
	t.Parallel()
	for _, enc := range []audit.Encoding{audit.NDJSON, audit.CSV} {
		name := map[audit.Encoding]string{audit.NDJSON: "ndjson", audit.CSV: "csv"}[enc]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			file := export(t, enc, decisions())
			sum, err := audit.Verify(strings.NewReader(file))
			if err != nil {
				t.Fatalf("the export does not verify: %v\n%s", err, file)
			}
			if sum.Decisions != 4 || sum.Encoding != enc || sum.From != "2026-12-01T09:00:00.000Z" || sum.To != "2026-12-01T10:00:00.000Z" || len(sum.Hash) != 64 {
				t.Fatalf("summary = %+v", sum)
			}
			head, recs := lines(enc, file)
			if len(recs) != 6 {
				t.Fatalf("%d records, want 6:\n%s", len(recs), file)
			}
			edit := func(i int, from, to string) string {
				c := append([]string(nil), recs...)
				if !strings.Contains(c[i], from) {
					t.Fatalf("record %d has no %q: %s", i, from, c[i])
				}
				c[i] = strings.Replace(c[i], from, to, 1)
				return join(head, c)
			}
			without := func(i int) string {
				c := append([]string(nil), recs...)
				return join(head, append(c[:i], c[i+1:]...))
			}
			// Record 0 is the header, 1–4 the decisions, 5 the end.
			wantLineError(t, "decision 2 removed", without(2), lineOf(enc, recs, 2), "1 decision line(s) missing")
			wantLineError(t, "who edited", edit(4, "carol", "carl"), lineOf(enc, recs, 4), "edited") // record 4 is carol's
			wantLineError(t, "reason edited", edit(2, "comma", "coma"), lineOf(enc, recs, 2), "edited")
			wantLineError(t, "args edited", edit(1, "42", "43"), lineOf(enc, recs, 1), "edited")
			wantLineError(t, "a big number edited", edit(1, "12345678901234567890", "12345678901234567891"), lineOf(enc, recs, 1), "edited")
			swapped := append([]string(nil), recs...)
			swapped[2], swapped[3] = swapped[3], swapped[2]
			wantLineError(t, "two decisions swapped", join(head, swapped), lineOf(enc, recs, 2), "missing")
			repeated := append(append(append([]string(nil), recs[:3]...), recs[2]), recs[3:]...)
			wantLineError(t, "a decision repeated", join(head, repeated), lineOf(enc, recs, 3), "moved or repeated")
			wantLineError(t, "header cut", without(0), lineOf(enc, recs, 0), "header line is missing")
			wantLineError(t, "end cut", without(5), lineOf(enc, recs, 5), "end line is missing")
			wantLineError(t, "last decision and end cut", join(head, recs[:4]), lineOf(enc, recs, 4), "end line is missing")
			wantLineError(t, "a line after the end", join(head, append(append([]string(nil), recs...), recs[4])), lineOf(enc, recs, 6), "after the end")
			wantLineError(t, "the period edited", edit(0, "T10:00", "T11:00"), lineOf(enc, recs, 0), "header")
			wantLineError(t, "the count edited", edit(5, "4", "5"), lineOf(enc, recs, 5), "counts 5")
		})
	}
}

// TestExportWritesTheFields: the NDJSON line of a decision holds its fields as JSON (args as
// written, compact, HTML characters as themselves); the CSV the same values in its columns.
func TestExportWritesTheFields(t *testing.T) {
	t.Parallel()
	nd := export(t, audit.NDJSON, decisions()[:2])
	_, recs := lines(audit.NDJSON, nd)
	var d struct {
		Record, RunID, AgentID, Tool, Kind, DecidedBy, DecidedAt, AskedAt, ReceiptID, Hash string
		Seq, ID                                                                            int
		ResourceID, Reason                                                                 *string
		Args, EditedArgs, ResumeData                                                       json.RawMessage
	}
	if err := json.Unmarshal([]byte(recs[1]), &d); err != nil {
		t.Fatal(err)
	}
	if d.Record != "decision" || d.Seq != 1 || d.ID != 1 || d.RunID != "run-b" || d.AgentID != "support" || d.Tool != "issue_refund" ||
		d.Kind != "APPROVED" || d.DecidedBy != "alice" || d.DecidedAt != "2026-12-01T09:01:00.000Z" || d.AskedAt != "2026-12-01T09:00:00.000Z" ||
		d.ReceiptID != "abc" || d.ResourceID == nil || *d.ResourceID != "acme" || d.Reason != nil || string(d.ResumeData) != "null" ||
		string(d.Args) != `{"order":42,"note":"<b>&</b>","big":12345678901234567890}` || string(d.EditedArgs) != `{"order":42,"amount":10}` {
		t.Fatalf("decision line = %s", recs[1])
	}
	if !strings.Contains(recs[2], `"resourceId":null`) || !strings.Contains(recs[2], `"reason":"line one\nline \"two\", with a comma"`) {
		t.Fatalf("second decision line = %s", recs[2])
	}
	csvFile := export(t, audit.CSV, decisions()[:2])
	head, rows := lines(audit.CSV, csvFile)
	if head != strings.Join(audit.Columns, ",")+"\n" || !strings.HasPrefix(rows[1], "decision,1,1,run-b,support,acme,tc_1,issue_refund,APPROVED,") {
		t.Fatalf("csv = %s", csvFile)
	}
}
