package hidden

import (
	"slices"
	"testing"
)

func TestRevealShowsWhatRuns(t *testing.T) {
	cmd := "cat README.md #\u202e; rm -rf ~ \u202c"
	if got, want := Reveal(cmd), "cat README.md #⟨U+202E⟩; rm -rf ~ ⟨U+202C⟩"; got != want {
		t.Errorf("Reveal = %q, want %q", got, want)
	}
	for in, want := range map[string]string{
		"plain text, tab\tand\nnewline": "plain text, tab\tand\nnewline",
		"a\rb":                          "a⟨U+000D⟩b",
		"zero\u200bwidth\ufeff":         "zero⟨U+200B⟩width⟨U+FEFF⟩",
		"line\u2028sep":                 "line⟨U+2028⟩sep",
		"tag\U000E0041\U000E007F":       "tag⟨U+E0041⟩⟨U+E007F⟩",
		"emoji 👨\u200d👩 ok\u200c":       "emoji 👨\u200d👩 ok\u200c", // the joiners scripts and emoji need stay
		"\x1b[31mred":                   "⟨U+001B⟩[31mred",
		"next\u0085line":                "next⟨U+0085⟩line",
	} {
		if got := Reveal(in); got != want {
			t.Errorf("Reveal(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := RevealLine("/repo\r\n# heading"), "/repo⟨U+000D⟩⟨U+000A⟩# heading"; got != want {
		t.Errorf("RevealLine = %q, want %q", got, want)
	}
}

func TestIsMatchesTheIssueList(t *testing.T) {
	for _, r := range []rune{0x202A, 0x202E, 0x2066, 0x2069, 0x200E, 0x200F, 0x061C, 0x200B, 0x2060, 0x2064, 0xFEFF, 0xE0000, 0xE007F, 0x00, 0x0D, 0x1F, 0x7F, 0x9F} {
		if !Is(r) {
			t.Errorf("Is(U+%04X) = false", r)
		}
	}
	for _, r := range []rune{'\t', '\n', ' ', 'a', 0x200C, 0x200D, 0xFE0F, 0xA0, 0xE0080, 0x10FFFF} {
		if Is(r) {
			t.Errorf("Is(U+%04X) = true", r)
		}
	}
}

func TestInJSONReadsDecodedStrings(t *testing.T) {
	got := InJSON([]byte(`{"cmd":"a\rb\u202e","k\u200b":["x\u202e"],"n":1}`))
	if want := []rune{0x0D, 0x202E, 0x200B}; !slices.Equal(got, want) {
		t.Errorf("InJSON = %U, want %U", got, want)
	}
	if got := InJSON([]byte(`{"a":"plain\n"}`)); got != nil {
		t.Errorf("InJSON of plain text = %U", got)
	}
	if got, want := Describe([]rune{0x202E, 0xE0041}), `U+202E RIGHT-TO-LEFT OVERRIDE, U+E0041 TAG "A"`; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}
