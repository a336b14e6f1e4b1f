// The characters that change how text reads without showing themselves — bidi controls that
// reorder what follows them, invisible characters that hide text (zero width, word joiners,
// tags, variation selectors), line and paragraph separators, and control characters other than
// tab and newline — and how the console shows them: never applied, each as a visible mark that
// names it (⟨U+202E⟩, its name in the title), so that what a person reads is what runs.
//
// This is the server's list (package hidden, hidden/hidden.go), names included; a browser test
// (web/console_hidden_test.go) checks that the two agree on every code point. el() (dom.js)
// shows every text it is given through reveal(), so every part of the console does.

// Inclusive ranges of code points, in order.
const RANGES = [
  [0x0000, 0x0008], [0x000B, 0x001F], [0x007F, 0x009F], // control characters but tab and newline
  [0x00AD, 0x00AD], // soft hyphen
  [0x061C, 0x061C], // Arabic letter mark
  [0x115F, 0x1160], // Hangul fillers
  [0x180E, 0x180E], // Mongolian vowel separator
  [0x200B, 0x200B], // zero width space (not 200C/200D, the joiners scripts and emoji need)
  [0x200E, 0x200F], // left-to-right and right-to-left marks
  [0x2028, 0x202E], // line and paragraph separators, embeddings, overrides, pop
  [0x2060, 0x2064], // word joiner, invisible operators
  [0x2066, 0x206F], // isolates, deprecated format characters
  [0x3164, 0x3164], // Hangul filler
  [0xFEFF, 0xFEFF], // zero width no-break space (byte order mark)
  [0xFFA0, 0xFFA0], // halfwidth Hangul filler
  [0xFFF9, 0xFFFB], // interlinear annotation
  [0x1BCA0, 0x1BCA3], // shorthand format controls
  [0x1D173, 0x1D17A], // musical format controls
  [0xE0000, 0xE007F], // tags
  [0xE0100, 0xE01EF], // variation selectors 17 to 256
];

const cls = RANGES.map(([a, b]) => (a === b ? `\\u{${a.toString(16)}}` : `\\u{${a.toString(16)}}-\\u{${b.toString(16)}}`)).join("");
/** Matches one hidden character (global: use with matchAll/replace, or test() on a fresh copy). */
export const HIDDEN = new RegExp(`[${cls}]`, "gu");
const EXACT = new RegExp(`[${cls}]`, "u");
// A first look over UTF-16 code units, without the u flag (several times faster on the text that
// holds none, which is nearly all): the BMP ranges, and the lead surrogates of the others.
const u16 = (n) => `\\u${n.toString(16).padStart(4, "0")}`;
const lead = (cp) => 0xD800 + ((cp - 0x10000) >> 10);
const QUICK = new RegExp(`[${RANGES.map(([a, b]) => (b < 0x10000 ? `${u16(a)}-${u16(b)}` : `${u16(lead(a))}-${u16(lead(b))}`)).join("")}]`);
/** Whether text holds a hidden character. */
export function hasHidden(text) { return QUICK.test(text) && EXACT.test(text); }
const ANY = { test: hasHidden };

/** Whether code point cp is hidden. */
export function isHidden(cp) {
  return RANGES.some(([a, b]) => cp >= a && cp <= b);
}

const NAMES = {
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
};

/** What code point cp is called (a tag names the ASCII character it stands for). */
export function hiddenName(cp) {
  if (NAMES[cp]) return NAMES[cp];
  if (cp >= 0xE0020 && cp <= 0xE007E) return `TAG ${JSON.stringify(String.fromCodePoint(cp - 0xE0000))}`;
  if (cp >= 0xE0100 && cp <= 0xE01EF) return `VARIATION SELECTOR-${cp - 0xE0100 + 17}`;
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return "CONTROL CHARACTER";
  return "FORMAT CHARACTER";
}

const hex = (cp) => cp.toString(16).toUpperCase().padStart(4, "0");

/** The mark shown in place of code point cp: ⟨U+202E⟩. */
export function mark(cp) { return `⟨U+${hex(cp)}⟩`; }

/** "U+202E RIGHT-TO-LEFT OVERRIDE": a hidden character as a warning names it. */
export function label(cp) { return `U+${hex(cp)} ${hiddenName(cp)}`; }

/** text as a node: a Text node, or, when it holds hidden characters, a fragment in which each
 * is a <span class="hidden-char"> holding its mark, titled with its name. */
export function reveal(text) {
  text = String(text);
  if (!ANY.test(text)) return document.createTextNode(text);
  const out = document.createDocumentFragment();
  let at = 0;
  for (const m of text.matchAll(HIDDEN)) {
    if (m.index > at) out.append(text.slice(at, m.index));
    const cp = m[0].codePointAt(0);
    const span = document.createElement("span");
    span.className = "hidden-char";
    span.title = `${label(cp)}: a character that changes how text reads, shown here, not applied`;
    span.textContent = mark(cp);
    out.append(span);
    at = m.index + m[0].length;
  }
  if (at < text.length) out.append(text.slice(at));
  return out;
}

/** text with its hidden characters as marks, as text (for an attribute, a notification). */
export function markText(text) {
  text = String(text ?? "");
  return ANY.test(text) ? text.replace(HIDDEN, (c) => mark(c.codePointAt(0))) : text;
}

/** The distinct hidden code points in the strings of values (strings, or JSON values: their keys
 * and string values), in order of first appearance. */
export function hiddenIn(...values) {
  const found = [];
  const stack = values.slice().reverse();
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (!ANY.test(v)) continue;
      for (const m of v.matchAll(HIDDEN)) {
        const cp = m[0].codePointAt(0);
        if (!found.includes(cp)) found.push(cp);
      }
    } else if (v && typeof v === "object") {
      const keys = Object.keys(v);
      for (let i = keys.length - 1; i >= 0; i--) stack.push(v[keys[i]], keys[i]);
    }
  }
  return found;
}

/** The hidden code points whose marks (⟨U+000D⟩) text holds as text, in order of first appearance:
 * the server writes an agent's values into its own text so (a coding agent's hook's context). */
export function markedIn(text) {
  const found = [];
  for (const m of String(text ?? "").matchAll(/⟨U\+([0-9A-F]{4,6})⟩/g)) {
    const cp = parseInt(m[1], 16);
    if (isHidden(cp) && !found.includes(cp)) found.push(cp);
  }
  return found;
}

/** JSON text with each hidden character as its \u escape (a pair for one beyond U+FFFF): the same
 * JSON value, which a text field can show as it is. Only valid for JSON text, where such a
 * character can only be inside a string. */
export function escapeHidden(jsonText) {
  const esc = (u) => `\\u${u.toString(16).padStart(4, "0")}`;
  return ANY.test(jsonText) ? jsonText.replace(HIDDEN, (c) => [...Array(c.length).keys()].map((i) => esc(c.charCodeAt(i))).join("")) : jsonText;
}

/** "U+202E RIGHT-TO-LEFT OVERRIDE, U+202C POP DIRECTIONAL FORMATTING" (the first 8, then how many more). */
export function describeHidden(cps) {
  const parts = cps.slice(0, 8).map(label);
  if (cps.length > 8) parts.push(`and ${cps.length - 8} more`);
  return parts.join(", ");
}
