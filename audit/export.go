package audit

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"interlock/receipt"
	"interlock/runs"
)

// Encoding is how an export is written.
type Encoding int

const (
	NDJSON Encoding = iota
	CSV
)

// Header is what an export's header line says.
type Header struct {
	// From and To are the period: From <= decidedAt < To.
	From, To time.Time
	// ExportedAt is when the export was made; ExportedBy the subject that made it (nil:
	// nobody, a server whose authentication is off).
	ExportedAt time.Time
	ExportedBy *string
}

// Writer writes an export: Begin with the header, Decision for each decision in the order they
// were taken, End. Each line carries its hash, chained to the previous one's. It is not safe
// for concurrent use.
type Writer struct {
	w     io.Writer
	enc   Encoding
	csv   *csv.Writer
	prev  string
	count int
}

// NewWriter returns a writer of an export in enc to w.
func NewWriter(w io.Writer, enc Encoding) *Writer {
	out := &Writer{w: w, enc: enc}
	if enc == CSV {
		out.csv = csv.NewWriter(w)
	}
	return out
}

// Begin writes the header line (and in CSV the row of column names before it).
func (w *Writer) Begin(h Header) error {
	if w.enc == CSV {
		if err := w.csv.Write(Columns); err != nil {
			return err
		}
	}
	return w.write(line{
		"record": str(RecordHeader), "format": str(Format), "from": str(h.From.UTC().Format(TimeFormat)),
		"to": str(h.To.UTC().Format(TimeFormat)), "exportedAt": str(h.ExportedAt.UTC().Format(TimeFormat)), "exportedBy": nonEmpty(h.ExportedBy),
	})
}

// Decision writes the line of d, the next decision.
func (w *Writer) Decision(d runs.DecisionRecord) error {
	l := line{
		"record": str(RecordDecision), "seq": str(strconv.Itoa(w.count + 1)), "id": str(strconv.FormatInt(d.ID, 10)),
		"runId": str(d.RunID), "agentId": str(d.AgentID), "resourceId": nonEmpty(d.ResourceID), "toolCallId": str(d.ToolCallID),
		"tool": str(d.ToolName), "kind": str(string(d.Kind)), "decidedBy": nonEmpty(d.DecidedBy),
		"decidedAt": str(d.DecidedAt.UTC().Format(TimeFormat)), "askedAt": str(d.AskedAt.UTC().Format(TimeFormat)),
		"reason": nonEmpty(d.Reason), "receiptId": nil,
	}
	for name, raw := range map[string][]byte{"args": d.Args, "editedArgs": d.EditedArgs, "resumeData": d.ResumeData} {
		if raw == nil {
			l[name] = nil
			continue
		}
		c, err := compactJSON(raw)
		if err != nil {
			return fmt.Errorf("decision %d: %s is not JSON: %w", d.ID, name, err)
		}
		l[name] = &c
	}
	if d.Receipt != nil && *d.Receipt != "" {
		l["receiptId"] = str(receipt.ID(*d.Receipt))
	}
	l["grantId"], l["policyRevision"], l["approvals"] = nonEmpty(d.GrantID), nonEmpty(d.PolicyRevision), nil
	if a := d.Approvals; a != nil && len(a.By) > 0 {
		type approver struct {
			Subject string `json:"subject"`
			At      string `json:"at"`
		}
		by := make([]approver, len(a.By))
		for i, x := range a.By {
			by[i] = approver{Subject: x.Subject, At: x.At.UTC().Format(TimeFormat)}
		}
		raw, err := json.Marshal(by)
		if err != nil {
			return fmt.Errorf("decision %d: approvals: %w", d.ID, err)
		}
		l["approvals"] = str(string(raw))
	}
	if err := w.write(l); err != nil {
		return err
	}
	w.count++
	return nil
}

// End writes the end line, with the number of decisions written, and flushes.
func (w *Writer) End() error {
	return w.write(line{"record": str(RecordEnd), "count": str(strconv.Itoa(w.count))})
}

// Flush writes what the writer buffers (CSV) to the underlying writer.
func (w *Writer) Flush() error {
	if w.csv != nil {
		w.csv.Flush()
		return w.csv.Error()
	}
	return nil
}

// write chains l after the previous line and writes it with its hash.
func (w *Writer) write(l line) error {
	for k, v := range l {
		l[k] = nonEmpty(v) // no empty text: CSV's empty cell is null
	}
	hash, err := l.chain(w.prev)
	if err != nil {
		return err
	}
	w.prev = hash
	if w.enc == CSV {
		row := make([]string, len(Columns))
		for i, c := range Columns {
			if v := l[c]; v != nil {
				row[i] = *v
			}
		}
		row[len(row)-1] = hash
		if err := w.csv.Write(row); err != nil {
			return err
		}
		if l.record() == RecordEnd {
			return w.Flush()
		}
		return nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields[l.record()] {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, f.name)
		b.WriteByte(':')
		switch v := l[f.name]; {
		case v == nil:
			b.WriteString("null")
		case f.kind == text:
			writeJSON(&b, *v)
		default: // a JSON value or an integer: its text is JSON
			b.WriteString(*v)
		}
	}
	b.WriteString(`,"hash":`)
	writeJSON(&b, hash)
	b.WriteString("}\n")
	_, err = w.w.Write(b.Bytes())
	return err
}

// writeJSON writes s as a JSON string, without HTML escaping (the export is no HTML).
func writeJSON(b *bytes.Buffer, s string) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Truncate(b.Len() - 1) // Encode ends with a newline
}

func str(s string) *string { return &s }

// nonEmpty is s, or nil for nil or "": the export writes no empty text, so that CSV's empty
// cell is null without doubt.
func nonEmpty(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}
