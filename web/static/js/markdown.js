// A small, safe Markdown renderer for model text: it builds DOM nodes with el() and text nodes,
// never HTML strings, so whatever the model writes (<img onerror=…>, <script>) stays text.
// The subset: paragraphs (a single newline is a line break), # headings, **bold**, *em* and
// _em_, `code`, fenced code blocks (``` or ~~~), - / * / + and 1. lists (nested by indentation),
// > quotes, --- rules, and links — [text](url), <url> and bare URLs — only for http(s), opened
// in a new tab with rel="noopener noreferrer" and the address in the title. Any other link
// ([x](javascript:…), data:, relative) is left as the text it was written as. Every text is
// shown through reveal() (hidden.js): a bidi control or an invisible character is a mark.
import { el } from "./dom.js";
import { reveal } from "./hidden.js";

/** Renders text as Markdown into a new <div class="md">. */
export function markdown(text) {
  const root = el("div", { class: "md" });
  // CRLF is a line end; a lone CR is not one (it is shown as a mark, as are U+2028 and U+2029):
  // a value that reads as one line where it came from stays one line here.
  blocks(String(text ?? "").replace(/\r\n/g, "\n").split("\n"), root);
  return root;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
const RULE = /^ {0,3}([-*_])(?:\s*\1){2,}\s*$/;
const ITEM = /^( *)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^ {0,3}> ?(.*)$/;

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || ITEM.test(line) || QUOTE.test(line);
}

function blocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    let m;
    if ((m = FENCE.exec(line))) {
      const close = new RegExp(`^ {0,3}${m[1][0] === "`" ? "`" : "~"}{${m[1].length},}\\s*$`);
      const body = [];
      i++;
      while (i < lines.length && !close.test(lines[i])) body.push(lines[i++]);
      i++; // the closing fence (an unclosed block runs to the end)
      parent.append(el("pre", {}, el("code", m[2] ? { "data-lang": m[2] } : {}, body.join("\n"))));
      continue;
    }
    if ((m = HEADING.exec(line))) {
      // Headings stay below the page's own (h1 the run, h2 its sections).
      parent.append(inline(el(`h${Math.min(6, m[1].length + 2)}`, {}), m[2]));
      i++;
      continue;
    }
    if (RULE.test(line)) { parent.append(el("hr")); i++; continue; }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i++; }
      const q = el("blockquote");
      blocks(body, q);
      parent.append(q);
      continue;
    }
    if (ITEM.test(line)) { i = list(lines, i, parent); continue; }
    const para = [];
    while (i < lines.length && lines[i].trim() && !(para.length && startsBlock(lines[i]))) para.push(lines[i++].trim());
    parent.append(inline(el("p"), para.join("\n")));
  }
}

/** Reads the list starting at lines[i] (and the lists nested in it); returns the next line. */
function list(lines, i, parent) {
  const first = ITEM.exec(lines[i]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = el(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) node.setAttribute("start", String(parseInt(first[2], 10)));
  let item = null;
  while (i < lines.length) {
    const line = lines[i];
    const m = ITEM.exec(line);
    if (m && m[1].length > indent && item) { i = list(lines, i, item); continue; }
    if (m && m[1].length === indent && /\d/.test(m[2]) === ordered) {
      item = el("li");
      node.append(item);
      const text = [m[3]];
      i++;
      // Continuation lines: indented, not blank, not an item.
      while (i < lines.length && lines[i].trim() && !ITEM.test(lines[i]) && /^\s/.test(lines[i])) text.push(lines[i++].trim());
      inline(item, text.join("\n"));
      continue;
    }
    if (!line.trim() && i + 1 < lines.length && ITEM.test(lines[i + 1]) && ITEM.exec(lines[i + 1])[1].length >= indent) { i++; continue; }
    break;
  }
  parent.append(node);
  return i;
}

// One pass over inline text: the earliest of code, bold, em, a link or a bare URL; the text
// before it stays text. Groups: 1-2 code, 3 bold, 4 em (*), 5-6 em (_), 7-8 link, 9 <url>, 10 URL.
const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*(?=\S)([\s\S]*?\S)\*\*|\*(?=[^\s*])([\s\S]*?[^\s*])\*(?!\*)|(^|[^\p{L}\p{N}_])_(?=\S)([\s\S]*?\S)_(?![\p{L}\p{N}_])|\[([^\]\n]+)\]\(\s*<?([^)\s>]*)>?\s*\)|<(https?:\/\/[^\s<>]+)>|(https?:\/\/[^\s<>]*[^\s<>.,;:!?'")\]*])/gu;

/** Appends the inline Markdown of text to node, and returns node (links: false inside a link). */
export function inline(node, text, links = true) {
  let at = 0;
  const re = new RegExp(INLINE.source, INLINE.flags); // its own lastIndex: inline() recurses
  let m;
  while ((m = re.exec(text))) {
    plain(node, text.slice(at, m.index));
    if (m[2] !== undefined) node.append(el("code", {}, m[2].length > 2 && m[2][0] === " " && m[2].at(-1) === " " ? m[2].slice(1, -1) : m[2]));
    else if (m[3] !== undefined) node.append(inline(el("strong"), m[3], links));
    else if (m[4] !== undefined) node.append(inline(el("em"), m[4], links));
    else if (m[6] !== undefined) { plain(node, m[5]); node.append(inline(el("em"), m[6], links)); }
    else if (!links) plain(node, m[0]);
    else if (m[7] !== undefined) node.append(link(m[8], m[7]) || reveal(m[0]));
    else if (m[9] !== undefined) node.append(link(m[9], m[9]) || reveal(m[0]));
    else node.append(link(m[10], m[10]) || reveal(m[0]));
    at = m.index + m[0].length;
  }
  plain(node, text.slice(at));
  return node;
}

/** Text with its newlines as line breaks. */
function plain(node, text) {
  text.split("\n").forEach((part, i) => {
    if (i) node.append(el("br"));
    if (part) node.append(reveal(part));
  });
}

/** A link to href when it is an absolute http(s) URL; otherwise null (the caller keeps the text). */
export function safeURL(href) {
  let url;
  try { url = new URL(href); } catch { return null; }
  return url.protocol === "http:" || url.protocol === "https:" ? url : null;
}

function link(href, label) {
  const url = safeURL(href);
  if (!url) return null;
  const a = el("a", { href: url.href, rel: "noopener noreferrer", target: "_blank", title: url.href });
  inline(a, label, false);
  // Where a link whose text is not its address really goes: the approver sees the host.
  if (label !== href) return el("span", { class: "md-link" }, a, el("span", { class: "md-host" }, ` (${url.host})`));
  return a;
}
