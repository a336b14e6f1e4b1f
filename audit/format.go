// Package audit is the audit export of decisions (GET /audit) and its verification (`interlock
// audit verify`): the decisions a principal may read, taken in a period, one line each, in
// NDJSON or CSV, each line carrying a hash chained to the previous line's, so that a line
// removed, edited, moved or added — and a file cut at either end — is found.
//
// The format, which docs/audit.md specifies for verifiers written elsewhere:
//
//   - an export is a header line (record "header": the format, the period, who exported it and
//     when), one line per decision (record "decision", seq 1, 2, … in the order they were
//     taken), and an end line (record "end": the number of decisions);
//   - each line's content is an object of its record's fields, every value a string or null
//     (JSON values such as args as their compact text, numbers as their decimal text);
//   - its hash is the hex SHA-256 of the previous line's hash (hex; "" for the header) followed
//     by the RFC 8785 (JCS) form of its content. The header holds the period, so the chain's
//     start depends on it: a file cut at the start has no header, or another chain.
//
// In NDJSON each line is an object of its fields and "hash" (JSON values as JSON, numbers as
// numbers); in CSV, the columns are every record's fields and "hash", in the order of Columns,
// a field a record has not left empty, null as an empty cell (the export writes no empty
// string: an empty text is null).
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gowebpki/jcs"
)

// Format names this format in the header's "format" field. Version 2 added the decision's
// grantId, policyRevision and approvals; files of version 1 (FormatV1) still verify.
const Format = "interlock-audit/2"

// FormatV1 is the first version of the format: decisions without grantId, policyRevision and
// approvals. Verify still reads it; the export writes Format.
const FormatV1 = "interlock-audit/1"

// The record types, the value of every line's "record" field.
const (
	RecordHeader   = "header"
	RecordDecision = "decision"
	RecordEnd      = "end"
)

// TimeFormat is how times are written: RFC 3339 in UTC with milliseconds, as the API's DateTime.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// fieldKind says how a field's value is written in NDJSON: a string, a JSON value (its compact
// text in the content and in CSV), or an integer (its decimal text in the content and in CSV).
type fieldKind int

const (
	text fieldKind = iota
	jsonValue
	integer
)

type field struct {
	name string
	kind fieldKind
}

// fieldsV1 are each record's fields in FormatV1, in the order they are written.
var fieldsV1 = map[string][]field{
	RecordHeader: {{"record", text}, {"format", text}, {"from", text}, {"to", text}, {"exportedAt", text}, {"exportedBy", text}},
	RecordDecision: {{"record", text}, {"seq", integer}, {"id", integer}, {"runId", text}, {"agentId", text}, {"resourceId", text},
		{"toolCallId", text}, {"tool", text}, {"kind", text}, {"args", jsonValue}, {"editedArgs", jsonValue}, {"resumeData", jsonValue},
		{"decidedBy", text}, {"decidedAt", text}, {"askedAt", text}, {"reason", text}, {"receiptId", text}},
	RecordEnd: {{"record", text}, {"count", integer}},
}

// fields are each record's fields in Format, in the order they are written: FormatV1's, and on
// a decision the grant that let it through (AUTO_APPROVED), the revision of the policy that
// judged it, and a quorum's approvals (a JSON array of {"subject","at"}, the deciding one
// included, in the order they were given).
var fields = map[string][]field{
	RecordHeader:   fieldsV1[RecordHeader],
	RecordDecision: append(slices.Clone(fieldsV1[RecordDecision]), field{"grantId", text}, field{"policyRevision", text}, field{"approvals", jsonValue}),
	RecordEnd:      fieldsV1[RecordEnd],
}

// fieldsOf are the fields of each version of the format, by its name.
var fieldsOf = map[string]map[string][]field{Format: fields, FormatV1: fieldsV1}

// columnsOf are the CSV columns of a version's fields: every record's fields (each once, the
// decision's first), then hash.
func columnsOf(fs map[string][]field) []string {
	var out []string
	seen := map[string]bool{}
	for _, rec := range []string{RecordDecision, RecordHeader, RecordEnd} {
		for _, f := range fs[rec] {
			if !seen[f.name] {
				seen[f.name] = true
				out = append(out, f.name)
			}
		}
	}
	return append(out, "hash")
}

// Columns are the CSV columns of Format (columnsOf).
var Columns = columnsOf(fields)

// line is one line's content: each field of its record, a string or nil (null).
type line map[string]*string

func (l line) record() string {
	if r := l["record"]; r != nil {
		return *r
	}
	return ""
}

// chain returns the hash of l after the line whose hash is prev: hex SHA-256 of prev and the
// JCS form of l's content.
func (l line) chain(prev string) (string, error) {
	raw, err := json.Marshal(map[string]*string(l))
	if err != nil {
		return "", fmt.Errorf("encode a line: %w", err)
	}
	canonical, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("canonical form of a line: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// compactJSON is the compact text of a JSON value (insignificant whitespace removed).
func compactJSON(raw []byte) (string, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}
