package audit

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Summary is what a verified export holds.
type Summary struct {
	Encoding  Encoding
	From, To  string
	Decisions int
	// Hash is the end line's hash: the whole file's fingerprint, worth keeping apart from the
	// file (the chain alone cannot tell a file rewritten whole, hashes included).
	Hash string
}

// LineError is where a file fails verification: the line (1-based, as an editor counts them)
// and why.
type LineError struct {
	Line   int
	Reason string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Verify reads an export (NDJSON or CSV, told by its first byte) and checks it whole: the
// header first, every line's hash against its content and the previous line's hash, the
// decisions' seq without gap or repeat, the end line's count, and nothing after it. It returns
// the summary, or a *LineError naming the first line that fails (an error of r otherwise).
func Verify(r io.Reader) (*Summary, error) {
	br := bufio.NewReader(r)
	first, err := br.Peek(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(first) == 0 {
		return nil, &LineError{Line: 1, Reason: "the file is empty: an export starts with its header line"}
	}
	v := &verifier{}
	if first[0] == '{' {
		v.sum.Encoding = NDJSON
		err = v.ndjson(br)
	} else {
		v.sum.Encoding = CSV
		err = v.csv(br)
	}
	if err != nil {
		return nil, err
	}
	return &v.sum, nil
}

// verifier checks lines one after the other.
type verifier struct {
	sum   Summary
	prev  string // the previous line's hash
	lines int    // lines checked
	ended bool
	// fs are the fields of the file's version of the format: Format's until the header says
	// otherwise (NDJSON), or as the CSV's columns say (then the header must agree).
	fs map[string][]field
	// format is the version the CSV's columns are of ("" in NDJSON).
	format string
}

// fields are the fields of the file's version of the format.
func (v *verifier) fields() map[string][]field {
	if v.fs == nil {
		return fields
	}
	return v.fs
}

// check checks one line's content l, with its hash, found at line n.
func (v *verifier) check(n int, l line, hash string) error {
	fail := func(format string, args ...any) error {
		return &LineError{Line: n, Reason: fmt.Sprintf(format, args...)}
	}
	rec := l.record()
	switch {
	case v.ended:
		return fail("a line after the end line: the file holds more than the export wrote")
	case v.lines == 0 && rec != RecordHeader:
		return fail("the export's header line is missing: the file does not start where the export did (cut at the start?)")
	case v.lines > 0 && rec == RecordHeader:
		return fail("a second header line: two exports joined, or lines moved")
	}
	switch rec {
	case RecordHeader:
		f := l["format"]
		fs, known := fieldsOf[deref(f)]
		if !known {
			return fail("format %s is not %q (or %q)", show(f), Format, FormatV1)
		}
		if v.format != "" && *f != v.format {
			return fail("format %s, but the CSV columns are those of %s", show(f), v.format)
		}
		v.fs = fs
		v.sum.From, v.sum.To = deref(l["from"]), deref(l["to"])
	case RecordDecision:
		want := strconv.Itoa(v.sum.Decisions + 1)
		got := deref(l["seq"])
		if seq, err := strconv.Atoi(got); err != nil {
			return fail("seq %q is not a number", got)
		} else if seq > v.sum.Decisions+1 {
			return fail("decision seq %d where seq %s was due: %d decision line(s) missing before this line", seq, want, seq-v.sum.Decisions-1)
		} else if seq < v.sum.Decisions+1 {
			return fail("decision seq %d where seq %s was due: a line moved or repeated", seq, want)
		}
	case RecordEnd:
		want := strconv.Itoa(v.sum.Decisions)
		if got := deref(l["count"]); got != want {
			return fail("the end line counts %s decisions, the file holds %s", got, want)
		}
		v.ended = true
	default:
		return fail("unknown record %s: want header, decision or end", show(l["record"]))
	}
	computed, err := l.chain(v.prev)
	if err != nil {
		return fail("%v", err)
	}
	if hash != computed {
		if v.lines == 0 {
			return fail("the header's hash does not match its content: the header (its period) was edited")
		}
		return fail("the hash does not match the line's content and the previous line's hash: this line was edited (or the one before it replaced)")
	}
	v.prev, v.sum.Hash = hash, hash
	v.lines++
	if rec == RecordDecision {
		v.sum.Decisions++
	}
	return nil
}

// finish checks that the file ended with its end line; n is the line after the last.
func (v *verifier) finish(n int) error {
	if !v.ended {
		return &LineError{Line: n, Reason: "the end line is missing: the file was cut short, or the export failed before it ended"}
	}
	return nil
}

func (v *verifier) ndjson(r *bufio.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20) // a decision's args may be large
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimRight(sc.Bytes(), "\r")
		if len(bytes.TrimSpace(raw)) == 0 {
			return &LineError{Line: n, Reason: "an empty line: the export writes none"}
		}
		l, hash, err := parseNDJSON(raw, v.fields())
		if err != nil {
			return &LineError{Line: n, Reason: err.Error()}
		}
		if err := v.check(n, l, hash); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	return v.finish(n + 1)
}

// parseNDJSON reads one NDJSON line into its content and hash.
func parseNDJSON(raw []byte, fields map[string][]field) (line, string, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, "", errors.New("not a JSON object")
	}
	if len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0 {
		return nil, "", errors.New("more than one JSON value on the line")
	}
	var rec, hash string
	if err := json.Unmarshal(obj["record"], &rec); err != nil {
		return nil, "", errors.New(`no "record" string`)
	}
	if err := json.Unmarshal(obj["hash"], &hash); err != nil || hash == "" {
		return nil, "", errors.New(`no "hash" string`)
	}
	fs, ok := fields[rec]
	if !ok {
		return nil, "", fmt.Errorf("unknown record %q: want header, decision or end", rec)
	}
	l := line{}
	for _, f := range fs {
		v, present := obj[f.name]
		if !present {
			return nil, "", fmt.Errorf("the %s line has no %q field", rec, f.name)
		}
		if string(v) == "null" {
			l[f.name] = nil
			continue
		}
		switch f.kind {
		case text:
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, "", fmt.Errorf("%q is not a string or null", f.name)
			}
			l[f.name] = &s
		case integer:
			if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
				return nil, "", fmt.Errorf("%q is not an integer", f.name)
			}
			s := string(v)
			l[f.name] = &s
		case jsonValue:
			c, err := compactJSON(v)
			if err != nil {
				return nil, "", fmt.Errorf("%q is not JSON", f.name)
			}
			l[f.name] = &c
		}
	}
	for name := range obj {
		if name != "hash" && !slices.ContainsFunc(fs, func(f field) bool { return f.name == name }) {
			return nil, "", fmt.Errorf("a field %q the %s line does not have", name, rec)
		}
	}
	return l, hash, nil
}

func (v *verifier) csv(r io.Reader) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return &LineError{Line: 1, Reason: "not an NDJSON or CSV export: " + csvReason(err)}
	}
	var columns []string
	for format, fs := range fieldsOf {
		if cols := columnsOf(fs); slices.Equal(head, cols) {
			columns, v.fs, v.format = cols, fs, format
		}
	}
	if columns == nil {
		return &LineError{Line: 1, Reason: fmt.Sprintf("the CSV columns are not the export's: want %s", strings.Join(Columns, ","))}
	}
	last := 1
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return v.finish(last + 1)
		}
		n, _ := cr.FieldPos(0)
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				n = pe.StartLine
			}
			return &LineError{Line: n, Reason: csvReason(err)}
		}
		last = n
		l, hash, err := parseCSV(row, columns, v.fs)
		if err != nil {
			return &LineError{Line: n, Reason: err.Error()}
		}
		if err := v.check(n, l, hash); err != nil {
			return err
		}
		// A row spanning lines (a quoted newline) ends further down.
		if end, _ := cr.FieldPos(len(columns) - 1); end > last {
			last = end
		}
	}
}

// parseCSV reads one CSV row into its content and hash: an empty cell is null, and a cell of
// a field its record has not must be empty.
func parseCSV(row []string, columns []string, fields map[string][]field) (line, string, error) {
	cell := map[string]string{}
	for i, c := range columns {
		cell[c] = row[i]
	}
	rec := cell["record"]
	fs, ok := fields[rec]
	if !ok {
		return nil, "", fmt.Errorf("unknown record %q: want header, decision or end", rec)
	}
	l := line{}
	for _, f := range fs {
		if s := cell[f.name]; s != "" {
			l[f.name] = &s
		} else {
			l[f.name] = nil
		}
	}
	for _, c := range columns[:len(columns)-1] {
		if l[c] == nil && cell[c] != "" {
			return nil, "", fmt.Errorf("column %q holds a value, which a %s line does not have", c, rec)
		}
	}
	return l, cell["hash"], nil
}

func csvReason(err error) string {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func show(s *string) string {
	if s == nil {
		return "null"
	}
	return strconv.Quote(*s)
}
