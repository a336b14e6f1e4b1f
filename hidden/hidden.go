// Package hidden names the characters that change how text reads without showing themselves:
// bidirectional controls that reorder what follows them (a command that reads `cat README.md #`
// and runs `rm -rf ~`), invisible characters that hide text or make two names look the same
// (zero-width spaces, word joiners, the tag characters used to smuggle instructions to models,
// variation selectors used to carry bytes), line and paragraph separators, and control
// characters other than tab and newline (a carriage return that starts a new line where the
// server wrote one line).
//
// Text that came from an agent or a model is never shown with these applied: each is replaced by
// a visible mark that names it, ⟨U+202E⟩ (Reveal), and what shows it warns that the call holds
// them (In, Describe). The console has the same list in web/static/js/hidden.js; a browser test
// checks that the two agree on every code point.
package hidden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ranges are the hidden characters, inclusive, in order. Keep web/static/js/hidden.js the same.
var ranges = [][2]rune{
	{0x0000, 0x0008}, {0x000B, 0x001F}, {0x007F, 0x009F}, // control characters but tab and newline
	{0x00AD, 0x00AD},   // soft hyphen
	{0x061C, 0x061C},   // Arabic letter mark
	{0x115F, 0x1160},   // Hangul fillers
	{0x180E, 0x180E},   // Mongolian vowel separator
	{0x200B, 0x200B},   // zero width space (not 200C/200D, the joiners scripts and emoji need)
	{0x200E, 0x200F},   // left-to-right and right-to-left marks
	{0x2028, 0x202E},   // line and paragraph separators, embeddings, overrides, pop
	{0x2060, 0x2064},   // word joiner, invisible operators
	{0x2066, 0x206F},   // isolates, deprecated format characters
	{0x3164, 0x3164},   // Hangul filler
	{0xFEFF, 0xFEFF},   // zero width no-break space (byte order mark)
	{0xFFA0, 0xFFA0},   // halfwidth Hangul filler
	{0xFFF9, 0xFFFB},   // interlinear annotation
	{0x1BCA0, 0x1BCA3}, // shorthand format controls
	{0x1D173, 0x1D17A}, // musical format controls
	{0xE0000, 0xE007F}, // tags
	{0xE0100, 0xE01EF}, // variation selectors 17 to 256
}

// Is reports whether r is a hidden character. Tab and newline are not: they show as what they are.
func Is(r rune) bool {
	if r < 0x80 {
		return r < 0x20 && r != '\t' && r != '\n' || r == 0x7F
	}
	for _, rg := range ranges {
		if r < rg[0] {
			return false
		}
		if r <= rg[1] {
			return true
		}
	}
	return false
}

// Mark is how r is shown in place of itself: ⟨U+202E⟩.
func Mark(r rune) string { return fmt.Sprintf("⟨U+%04X⟩", r) }

// names are the names of the hidden characters a person is most likely to meet.
var names = map[rune]string{
	0x00: "NULL", 0x07: "BELL", 0x08: "BACKSPACE", 0x0A: "LINE FEED", 0x0B: "LINE TABULATION",
	0x0C: "FORM FEED", 0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE", 0x7F: "DELETE", 0x85: "NEXT LINE",
	0xAD: "SOFT HYPHEN", 0x061C: "ARABIC LETTER MARK", 0x115F: "HANGUL CHOSEONG FILLER",
	0x1160: "HANGUL JUNGSEONG FILLER", 0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE", 0x200E: "LEFT-TO-RIGHT MARK", 0x200F: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR", 0x2029: "PARAGRAPH SEPARATOR",
	0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING",
	0x202C: "POP DIRECTIONAL FORMATTING", 0x202D: "LEFT-TO-RIGHT OVERRIDE", 0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER", 0x2061: "FUNCTION APPLICATION", 0x2062: "INVISIBLE TIMES",
	0x2063: "INVISIBLE SEPARATOR", 0x2064: "INVISIBLE PLUS",
	0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE", 0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE", 0x3164: "HANGUL FILLER",
	0xFEFF: "ZERO WIDTH NO-BREAK SPACE", 0xFFA0: "HALFWIDTH HANGUL FILLER",
	0xFFF9: "INTERLINEAR ANNOTATION ANCHOR", 0xFFFA: "INTERLINEAR ANNOTATION SEPARATOR",
	0xFFFB: "INTERLINEAR ANNOTATION TERMINATOR", 0xE0001: "LANGUAGE TAG", 0xE007F: "CANCEL TAG",
}

// Name is what r is called: its Unicode name for the common ones, a description for the rest
// (a tag names the ASCII character it stands for, which is what a model reads in it).
func Name(r rune) string {
	if n, ok := names[r]; ok {
		return n
	}
	switch {
	case r >= 0xE0020 && r <= 0xE007E:
		return fmt.Sprintf("TAG %q", string(r-0xE0000))
	case r >= 0xE0100 && r <= 0xE01EF:
		return fmt.Sprintf("VARIATION SELECTOR-%d", r-0xE0100+17)
	case r < 0x20 || r >= 0x7F && r <= 0x9F:
		return "CONTROL CHARACTER"
	}
	return "FORMAT CHARACTER"
}

// Reveal is s with every hidden character replaced by its Mark; tabs and newlines stay.
func Reveal(s string) string { return reveal(s, false) }

// RevealLine is Reveal that marks newlines too: for an agent's value the server places inside a
// line of its own text (a code span, a heading, a Slack message's sentence), which must not
// end that line.
func RevealLine(s string) string { return reveal(s, true) }

func reveal(s string, newline bool) string {
	i := strings.IndexFunc(s, func(r rune) bool { return Is(r) || newline && r == '\n' })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if Is(r) || newline && r == '\n' {
			b.WriteString(Mark(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// In lists the distinct hidden characters of s, in order of first appearance (nil when none).
func In(s string) []rune {
	var out []rune
	for _, r := range s {
		if Is(r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// InJSON lists the distinct hidden characters of the strings of a JSON value — its keys and
// string values as they read once decoded (a "\r" escape is a carriage return) — in order of
// first appearance. A value that is not valid JSON is read as text.
func InJSON(raw []byte) []rune {
	var out []rune
	add := func(s string) { out = Merge(out, In(s)) }
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			if !utf8.Valid(raw) {
				return out
			}
			add(string(raw))
			return out
		}
		if s, ok := tok.(string); ok {
			add(s)
		}
	}
}

// Merge is the distinct runes of lists, in order of first appearance.
func Merge(lists ...[]rune) []rune {
	var out []rune
	for _, l := range lists {
		for _, r := range l {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// Codes writes runes as code points: "U+202E".
func Codes(rs []rune) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("U+%04X", r)
	}
	return out
}

// Describe names characters for a warning: "U+202E RIGHT-TO-LEFT OVERRIDE, U+202C POP
// DIRECTIONAL FORMATTING" (the first 8, then how many more).
func Describe(rs []rune) string {
	const most = 8
	parts := make([]string, 0, min(len(rs), most)+1)
	for i, r := range rs {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(rs)-most))
			break
		}
		parts = append(parts, fmt.Sprintf("U+%04X %s", r, Name(r)))
	}
	return strings.Join(parts, ", ")
}

// InName returns the first character of a tool's name that no name may hold — a control or
// format character, a line or paragraph separator, or a hidden one (Is), tab and newline
// included — and its position (1-based, in characters); ok is false when the name is clean. A
// name is shown in one line, as it is, everywhere (the inbox, Slack, a model's prompt), so a
// name holding one is refused wherever it comes from: an API request, the config file, an MCP
// server's list.
func InName(name string) (r rune, at int, ok bool) {
	for i, c := range []rune(name) {
		if unicode.In(c, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) || Is(c) {
			return c, i + 1, true
		}
	}
	return 0, 0, false
}
