// "Edit and approve" as a form: the call's arguments in fields built from the tool's
// inputSchema (strings, numbers and integers, booleans, enums as selects, nested objects as
// groups of fields), the raw JSON one click away, and — before the final Approve — what changed
// against the arguments shown (changed, added, removed fields) with the exact JSON the tool
// will run with.
//
// What the form cannot express falls back to JSON in its own field: an array, an object without
// properties, a value of another type than the schema's (the model's "lots" where a number is
// asked for), a key the schema does not name. Arguments holding characters that change how text
// reads (bidi, invisible) start in the raw JSON, where they are \u escapes: a text field would
// apply them.
//
// The JSON shown for review is the one the server stores and hands to the tool: keys in sorted
// order (the API's JSON scalar decodes the variables into a map and encodes it again), <, > and
// & as \u escapes, numbers as the console wrote them. "Approve" sends exactly that value.
import { el, pretty } from "./dom.js";
import { escapeHidden, hiddenIn } from "./hidden.js";

/** The JSON text of v as the server will store it (see above). */
export function storedJSON(v) {
  return JSON.stringify(sortKeys(v)).replace(/[<>&\u2028\u2029]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]));
  return v;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const same = (a, b) => storedJSON(a) === storedJSON(b);

/**
 * The differences between a and b, arguments objects: [{ path, kind: "changed"|"added"|"removed",
 * from, to }], nested objects walked field by field (a path such as "address.city").
 */
export function diffArgs(a, b, prefix = "") {
  const out = [];
  const keys = [...new Set([...Object.keys(a || {}), ...Object.keys(b || {})])].sort();
  for (const k of keys) {
    const path = prefix ? `${prefix}.${k}` : k;
    const inA = a && Object.hasOwn(a, k), inB = b && Object.hasOwn(b, k);
    if (inA && !inB) out.push({ path, kind: "removed", from: a[k] });
    else if (!inA && inB) out.push({ path, kind: "added", to: b[k] });
    else if (isObject(a[k]) && isObject(b[k])) out.push(...diffArgs(a[k], b[k], path));
    else if (!same(a[k], b[k])) out.push({ path, kind: "changed", from: a[k], to: b[k] });
  }
  return out;
}

/**
 * The editor of arguments initial under schema. Returns { node, read(), focus() }: read() is
 * { args } or { error } (the form's messages are shown on their fields).
 */
export function argsEditor(schema, initial, idPrefix) {
  const rawId = `${idPrefix}`; // the raw JSON keeps the id "args-<call>" the console always gave it
  const rawErrId = `${rawId}-error`;
  const raw = el("textarea", { id: rawId, rows: 6, spellcheck: "false", "aria-describedby": rawErrId });
  raw.value = escapeHidden(pretty(initial));
  const rawError = el("p", { class: "field-error", id: rawErrId });
  const rawBox = el("div", { class: "args-raw" }, el("label", { for: rawId }, "Arguments to run the tool with (JSON)"), raw, rawError);
  const formable = isObject(schema) && schema.type === "object" && isObject(schema.properties) && isObject(initial);
  let form = null;
  const formBox = el("div", { class: "args-form" });
  const build = (value) => {
    form = objectFields(schema, value, `${idPrefix}-f`, true);
    formBox.replaceChildren(form.node);
  };
  let mode = "raw";
  const toggle = el("button", { type: "button", class: "link args-toggle" });
  const note = el("p", { class: "muted args-note" });
  const setMode = (m) => {
    mode = m;
    formBox.hidden = m !== "form";
    rawBox.hidden = m !== "raw";
    toggle.textContent = m === "form" ? "Edit as raw JSON" : "Edit as a form";
    toggle.hidden = !formable;
  };
  toggle.addEventListener("click", () => {
    if (mode === "form") {
      const r = form.read();
      if (r.error) return;
      raw.value = escapeHidden(pretty(r.value));
      setMode("raw");
      raw.focus();
      return;
    }
    let v;
    try { v = JSON.parse(raw.value); } catch (e) { markRaw(`Not valid JSON: ${e.message}`); return; }
    if (!isObject(v)) { markRaw("The arguments must be a JSON object, like the model's."); return; }
    if (hiddenIn(v).length) { markRaw("These arguments hold hidden characters: edit them here, where they show as \\u escapes."); return; }
    markRaw("");
    build(v);
    setMode("form");
    focusFirst();
  });
  const markRaw = (msg) => {
    rawError.textContent = msg;
    if (msg) raw.setAttribute("aria-invalid", "true");
    else raw.removeAttribute("aria-invalid");
  };
  const focusFirst = () => (mode === "form" ? formBox.querySelector("input, select, textarea") : raw)?.focus();
  if (formable && !hiddenIn(initial).length) {
    build(initial);
    setMode("form");
  } else {
    setMode("raw");
    if (formable) note.textContent = "These arguments hold hidden characters: they are edited as JSON, where they show as \\u escapes.";
  }
  return {
    node: el("div", { class: "args-editor" }, el("div", { class: "args-mode" }, toggle), note, formBox, rawBox),
    read() {
      if (mode === "form") {
        const r = form.read();
        return r.error ? { error: r.error } : { args: r.value };
      }
      let v;
      try { v = JSON.parse(raw.value); } catch (e) { markRaw(`The arguments are not valid JSON: ${e.message}`); raw.focus(); return { error: "invalid" }; }
      if (!isObject(v)) { markRaw("The arguments must be a JSON object, like the model's."); raw.focus(); return { error: "invalid" }; }
      markRaw("");
      return { args: v };
    },
    focus: focusFirst,
    /** Marks the editor refused by the server (its message is shown by the caller). */
    refused() {
      if (mode === "raw") raw.setAttribute("aria-invalid", "true");
    },
  };
}

/** The fields of an object schema for value: { node, read() → { value } | { error } }. */
function objectFields(schema, value, idPrefix, top) {
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  const keys = [...new Set([...Object.keys(value || {}), ...Object.keys(props)])];
  const fields = keys.map((k) => fieldFor(props[k], value ? value[k] : undefined, value ? Object.hasOwn(value, k) : false, k, `${idPrefix}-${k}`, required.has(k)));
  const node = top ? el("div", { class: "schema-form" }, fields.map((f) => f.node)) : el("div", {}, fields.map((f) => f.node));
  return {
    node,
    read() {
      const out = {};
      let error = null;
      for (const f of fields) {
        const r = f.read();
        if (r.error) { error = error || r; continue; }
        if (r.present) out[f.name] = r.value;
      }
      if (error) { error.input?.focus(); return { error: error.error }; }
      return { value: sortKeys(out) };
    },
  };
}

function typeOf(v) {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** Whether value (present) fits prop's type as a form field can hold it. */
function fits(prop, value) {
  const t = typeOf(value);
  switch (prop.type) {
    case "string": return t === "string";
    case "number": return t === "number" || t === "integer";
    case "integer": return t === "integer";
    case "boolean": return t === "boolean";
    case "object": return t === "object";
    default: return false;
  }
}

/** One field: { name, node, read() → { present, value } | { error, input } }. */
function fieldFor(prop, value, present, name, id, required) {
  const errId = `${id}-error`;
  const error = el("p", { class: "field-error", id: errId });
  const title = prop?.title || name;
  const hint = [required ? "required" : "", prop?.description || ""].filter(Boolean).join(" · ");
  const label = el("label", { for: id }, title, required ? el("span", { "aria-hidden": "true" }, " *") : null, hint ? el("span", { class: "hint" }, hint) : null);
  const mark = (input, msg) => {
    error.textContent = msg || "";
    if (msg) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
    return msg ? { error: `${title}: ${msg}`, input } : null;
  };
  // A string with a carriage return goes to the JSON field: a text field drops line breaks
  // and a textarea turns CR LF into LF, so either would change what the person never touched.
  const simple = prop && (Array.isArray(prop.enum) || ["string", "number", "integer", "boolean"].includes(prop.type)) &&
    !(typeof value === "string" && value.includes("\r"));
  const nested = prop && prop.type === "object" && prop.properties && !Array.isArray(prop.enum);
  if (nested && (!present || fits(prop, value))) {
    const inner = objectFields(prop, present ? value : {}, id, false);
    return {
      name,
      node: el("fieldset", { class: "args-group", id }, el("legend", {}, title, hint ? el("span", { class: "hint" }, ` ${hint}`) : null), inner.node),
      read() {
        const r = inner.read();
        if (r.error) return { error: r.error };
        // An optional group left empty that was not there stays out.
        if (!present && !required && !Object.keys(r.value).length) return { present: false };
        return { present: true, value: r.value };
      },
    };
  }
  if (simple && (Array.isArray(prop.enum) ? enumHolds(prop, value, present) : !present || fits(prop, value))) {
    let input;
    if (Array.isArray(prop.enum)) {
      input = el("select", { id, "aria-describedby": errId },
        el("option", { value: "" }, required ? "Choose…" : "—"),
        ...prop.enum.map((v, i) => el("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
      const i = present ? prop.enum.findIndex((v) => same(v, value)) : -1;
      input.value = i >= 0 ? String(i) : "";
    } else if (prop.type === "boolean") {
      input = el("input", { id, type: "checkbox", "aria-describedby": errId });
      input.checked = present && value === true;
    } else if (prop.type === "number" || prop.type === "integer") {
      input = el("input", { id, type: "number", step: prop.type === "integer" ? "1" : "any", "aria-describedby": errId });
      if (present) input.value = String(value);
    } else if (present && typeof value === "string" && value.includes("\n")) {
      // Lines kept: a text field would join them.
      input = el("textarea", { id, rows: Math.min(8, value.split("\n").length), spellcheck: "false", "aria-describedby": errId });
      input.value = value;
    } else {
      input = el("input", { id, type: "text", autocomplete: "off", spellcheck: "false", "aria-describedby": errId });
      if (present) input.value = value;
    }
    if (required) input.setAttribute("aria-required", "true");
    const read = () => {
      if (Array.isArray(prop.enum)) {
        if (input.value === "") return required ? mark(input, `Choose one of: ${prop.enum.map((v) => JSON.stringify(v)).join(", ")}`) : (mark(input, ""), { present: false });
        mark(input, "");
        return { present: true, value: prop.enum[Number(input.value)] };
      }
      if (prop.type === "boolean") {
        mark(input, "");
        return !present && !required && !input.checked ? { present: false } : { present: true, value: input.checked };
      }
      if (prop.type === "number" || prop.type === "integer") {
        if (input.validity.badInput) return mark(input, prop.type === "integer" ? "Enter a whole number" : "Enter a number");
        if (input.value === "") return required ? mark(input, "Enter a number") : (mark(input, ""), { present: false });
        const n = Number(input.value);
        if (!Number.isFinite(n)) return mark(input, "Enter a number");
        if (prop.type === "integer" && !Number.isInteger(n)) return mark(input, "Enter a whole number");
        if (typeof prop.minimum === "number" && n < prop.minimum) return mark(input, `Must be at least ${prop.minimum}`);
        if (typeof prop.maximum === "number" && n > prop.maximum) return mark(input, `Must be at most ${prop.maximum}`);
        if (typeof prop.exclusiveMinimum === "number" && n <= prop.exclusiveMinimum) return mark(input, `Must be more than ${prop.exclusiveMinimum}`);
        if (typeof prop.exclusiveMaximum === "number" && n >= prop.exclusiveMaximum) return mark(input, `Must be less than ${prop.exclusiveMaximum}`);
        mark(input, "");
        return { present: true, value: n };
      }
      const v = input.value;
      if (v === "" && !present && !required) { mark(input, ""); return { present: false }; }
      if (v.trim() === "" && required) return mark(input, "Enter a value");
      const len = [...v].length;
      if (typeof prop.minLength === "number" && len < prop.minLength) return mark(input, `Must be at least ${prop.minLength} characters`);
      if (typeof prop.maxLength === "number" && len > prop.maxLength) return mark(input, `Must be at most ${prop.maxLength} characters`);
      if (typeof prop.pattern === "string") {
        try { if (!new RegExp(prop.pattern, "u").test(v)) return mark(input, `Must match the pattern ${prop.pattern}`); } catch { /* the server judges */ }
      }
      mark(input, "");
      return { present: true, value: v };
    };
    input.addEventListener("change", () => { if (input.getAttribute("aria-invalid") === "true") read(); });
    return { name, node: el("div", { class: "field" }, label, input, error), read };
  }
  // What the form cannot hold: this field as JSON.
  const area = el("textarea", { id, rows: 3, spellcheck: "false", class: "json-field", "aria-describedby": errId });
  area.value = present ? pretty(value) : "";
  if (required) area.setAttribute("aria-required", "true");
  const why = !prop ? "not in the tool's schema" : present && prop.type && !fits(prop, value) ? `not a ${prop.type} as the schema asks` : "as JSON";
  label.append(el("span", { class: "hint" }, ` (JSON: ${why})`));
  return {
    name,
    node: el("div", { class: "field" }, label, area, error),
    read() {
      if (area.value.trim() === "") return required ? mark(area, "Enter a JSON value") : (mark(area, ""), { present: false });
      try {
        const v = JSON.parse(area.value);
        mark(area, "");
        return { present: true, value: v };
      } catch (e) {
        return mark(area, `Not valid JSON: ${e.message}`);
      }
    },
  };
}

/** Whether v holds an integer past 2^53, which the browser read rounded (the server keeps the
 * model's digits): arguments holding one are approved or declined as they are, never edited. */
export function holdsInexactNumber(v) {
  if (typeof v === "number") return Number.isInteger(v) && !Number.isSafeInteger(v);
  if (v && typeof v === "object") return Object.values(v).some(holdsInexactNumber);
  return false;
}

/** Whether an enum's select can hold value: absent, or one of the enum's values. */
function enumHolds(prop, value, present) {
  return !present || prop.enum.some((v) => same(v, value));
}

/** The review of args against before: the changes as a list, and the exact JSON that runs. */
export function reviewOf(before, args) {
  const changes = diffArgs(before, args);
  const show = (v) => escapeHidden(JSON.stringify(v));
  const list = changes.length
    ? el("ul", { class: "args-diff" }, changes.map((c) => el("li", { class: `diff-${c.kind}`, "data-path": c.path, "data-kind": c.kind },
      el("span", { class: "diff-kind" }, { changed: "changed", added: "added", removed: "removed" }[c.kind]), " ", el("code", {}, c.path), ": ",
      c.kind === "added" ? el("ins", {}, show(c.to)) : c.kind === "removed" ? el("del", {}, show(c.from)) : [el("del", {}, show(c.from)), " → ", el("ins", {}, show(c.to))])))
    : el("p", { class: "muted args-diff-none" }, "No changes: the arguments as shown.");
  // Unchanged, the approval sends no arguments: the tool runs with the bytes it was asked with,
  // which the browser's reading of them (numbers past 2^53 rounded) must not stand in for.
  const runs = changes.length
    ? [el("p", { class: "muted label" }, "The tool runs with exactly:"), el("pre", { class: "args-final" }, escapeHidden(storedJSON(args)))]
    : [el("p", { class: "muted label args-as-asked" }, "The tool runs with its arguments as they were asked, unchanged.")];
  return { changes, node: el("div", { class: "args-review" }, el("h4", {}, "Changes before you approve"), list, ...runs) };
}
