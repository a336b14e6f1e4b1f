package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// MaxJSONDepth bounds how deeply the JSON values people and models hand the server may nest
// (a tool call's arguments, edited arguments, resume data): no tool needs more, and a value
// thousands of levels deep breaks what shows it (the console) and what walks it recursively.
const MaxJSONDepth = 64

// CanonicalJSON is the one form in which a JSON value is stored, shown and handed to a tool:
// the value as written, without insignificant whitespace and with <, >, & (and U+2028, U+2029)
// in strings escaped, as encoding/json writes a json.RawMessage; key order, number literals and
// other escapes are kept. Every later encoding (snapshot, event, row, the tool's request) then
// leaves the bytes as they are. It is refused when it is not valid UTF-8 JSON, nests deeper than MaxJSONDepth,
// or repeats a key in an object: parsers disagree on which of two "amount"s wins (the first, the
// last, an error), so a person could be shown one and the tool given the other.
func CanonicalJSON(raw []byte) (json.RawMessage, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("not valid UTF-8")
	}
	if !json.Valid(raw) {
		return nil, errors.New("not valid JSON")
	}
	if err := checkShape(raw); err != nil {
		return nil, err
	}
	out, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	return out, nil
}

// frame is an object or array being read by checkShape.
type frame struct {
	object bool
	key    bool // in an object: the next string token is a key
	keys   map[string]bool
}

// checkShape walks raw (valid JSON) token by token, without recursion, and reports the first
// object nested deeper than MaxJSONDepth or key repeated within one object.
func checkShape(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not valid JSON: %w", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].key = true
			}
			continue
		}
		if top != nil && top.object && top.key {
			k := tok.(string) // a valid object's keys are strings
			if top.keys[k] {
				return fmt.Errorf("key %q appears twice in one object", k)
			}
			top.keys[k] = true
			top.key = false
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			if len(stack) >= MaxJSONDepth {
				return fmt.Errorf("nested deeper than %d levels", MaxJSONDepth)
			}
			f := &frame{object: d == '{', key: d == '{'}
			if f.object {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
			continue
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}

// ReadableJSON is canonical JSON (CanonicalJSON) as text for a model or a person to read: the
// same value, with the <, > and & that the canonical form escapes as \u003c, \u003e and \u0026
// written as themselves. An escape pasted into prose says something else than the character
// (a model told `\u003e` reads six characters, not `>`). Every other byte, escapes included
// (\n, \", \u2028), is kept, so the text is still valid JSON of the same value.
func ReadableJSON(raw []byte) string {
	if !bytes.Contains(raw, []byte(`\u00`)) {
		return string(raw)
	}
	out := make([]byte, 0, len(raw))
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(raw):
			if raw[i+1] == 'u' && i+5 < len(raw) {
				switch string(bytes.ToLower(raw[i+2 : i+6])) {
				case "003c":
					out, i = append(out, '<'), i+5
					continue
				case "003e":
					out, i = append(out, '>'), i+5
					continue
				case "0026":
					out, i = append(out, '&'), i+5
					continue
				}
			}
			out = append(out, c, raw[i+1]) // the escape's first two bytes: \" does not end the string
			i++
			continue
		}
		out = append(out, c)
	}
	return string(out)
}
