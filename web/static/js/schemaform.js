// Builds a form from a JSON Schema (an object with properties of type string, number, integer or
// boolean, enums, required marks, descriptions), and reads the value back. Anything else falls
// back to a JSON text area. check() refuses, in plain words on the field itself (aria-invalid,
// aria-describedby naming the error text), what the schema would refuse: an empty required field,
// an answer of only spaces where a string is asked for (required, or minLength ≥ 1), a number
// out of range, a value not in the enum. The server validates too; its message is shown as well.
import { el } from "./dom.js";

/** Returns { node, value(), check() } for the schema; check() says whether the form may be sent. */
export function schemaForm(schema, idPrefix) {
  const props = schema && schema.type === "object" && schema.properties;
  if (!props || !Object.keys(props).length) return jsonField(idPrefix);
  const required = new Set(schema.required || []);
  const fields = [];
  const node = el("div", { class: "schema-form" });
  for (const [name, prop] of Object.entries(props)) {
    const id = `${idPrefix}-${name}`;
    const errId = `${id}-error`;
    const req = required.has(name);
    const label = el("label", { for: id }, prop.title || name, req ? el("span", { "aria-hidden": "true" }, " *") : null,
      req ? el("span", { class: "hint" }, "required" + (prop.description ? " · " + prop.description : "")) :
        prop.description ? el("span", { class: "hint" }, prop.description) : null);
    let input;
    if (Array.isArray(prop.enum)) {
      // A required choice starts unchosen: a person approving all day must not send the first
      // value by mistake.
      input = el("select", { id, name },
        el("option", { value: "" }, req ? "Choose…" : "—"),
        ...prop.enum.map((v, i) => el("option", { value: String(i) }, String(v))));
    } else if (prop.type === "boolean") {
      input = el("input", { id, name, type: "checkbox" });
    } else if (prop.type === "number" || prop.type === "integer") {
      input = el("input", { id, name, type: "number", step: prop.type === "integer" ? "1" : "any" });
    } else {
      input = el("input", { id, name, type: "text", autocomplete: "off" });
    }
    if (req) input.setAttribute("aria-required", "true");
    input.setAttribute("aria-describedby", errId);
    const error = el("p", { class: "field-error", id: errId });
    const field = { name, prop, input, error, required: req };
    // Once refused, the field is checked again as it is corrected.
    const recheck = () => { if (input.getAttribute("aria-invalid") === "true") mark(field, problem(field)); };
    input.addEventListener("input", recheck);
    input.addEventListener("change", recheck);
    node.append(el("div", { class: "field" }, label, input, error));
    fields.push(field);
  }
  return {
    node,
    value() {
      const out = {};
      for (const { name, prop, input } of fields) {
        if (Array.isArray(prop.enum)) {
          if (input.value !== "") out[name] = prop.enum[Number(input.value)];
        } else if (prop.type === "boolean") {
          out[name] = input.checked;
        } else if (prop.type === "number" || prop.type === "integer") {
          if (input.value !== "") out[name] = Number(input.value);
        } else if (input.value !== "") {
          out[name] = input.value;
        }
      }
      return out;
    },
    check() {
      let first = null;
      for (const f of fields) {
        const msg = problem(f);
        mark(f, msg);
        if (msg && !first) first = f.input;
      }
      first?.focus();
      return !first;
    },
  };
}

function mark({ input, error }, msg) {
  error.textContent = msg || "";
  if (msg) input.setAttribute("aria-invalid", "true");
  else input.removeAttribute("aria-invalid");
}

/** What is wrong with the field's value, in plain words, or "". */
function problem({ name, prop, input, required }) {
  const noun = prop.title ? prop.title.toLowerCase() : words(name);
  const enter = `Enter ${/^[aeiou]/i.test(noun) ? "an" : "a"} ${noun}`;
  if (Array.isArray(prop.enum)) {
    if (input.value === "" && required) return `Must be one of: ${prop.enum.map(String).join(", ")}`;
    return "";
  }
  if (prop.type === "boolean") return "";
  if (prop.type === "number" || prop.type === "integer") {
    if (input.validity.badInput) return prop.type === "integer" ? "Enter a whole number" : "Enter a number";
    if (input.value === "") return required ? enter : "";
    const n = Number(input.value);
    if (prop.type === "integer" && !Number.isInteger(n)) return "Enter a whole number";
    if (typeof prop.minimum === "number" && n < prop.minimum) return `Must be at least ${prop.minimum}`;
    if (typeof prop.maximum === "number" && n > prop.maximum) return `Must be at most ${prop.maximum}`;
    if (typeof prop.exclusiveMinimum === "number" && n <= prop.exclusiveMinimum) return `Must be more than ${prop.exclusiveMinimum}`;
    if (typeof prop.exclusiveMaximum === "number" && n >= prop.exclusiveMaximum) return `Must be less than ${prop.exclusiveMaximum}`;
    return "";
  }
  const v = input.value;
  const min = typeof prop.minLength === "number" ? prop.minLength : 0;
  // Only spaces is no answer where one is asked for.
  if (v.trim() === "" && (required || min >= 1) && (v !== "" || required)) return enter;
  if (v === "") return "";
  const len = [...v].length;
  if (len < min) return `Must be at least ${min} characters`;
  if (typeof prop.maxLength === "number" && len > prop.maxLength) return `Must be at most ${prop.maxLength} characters`;
  if (typeof prop.pattern === "string") {
    try { if (!new RegExp(prop.pattern, "u").test(v)) return `Must match the pattern ${prop.pattern}`; } catch { /* the server judges */ }
  }
  return "";
}

/** "shoeSize" or "shoe_size": "shoe size". */
function words(name) {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[_-]+/g, " ").toLowerCase();
}

function jsonField(idPrefix) {
  const id = `${idPrefix}-json`;
  const errId = `${id}-error`;
  const area = el("textarea", { id, spellcheck: "false", "aria-describedby": errId }, "{}");
  const error = el("p", { class: "field-error", id: errId });
  const parse = () => JSON.parse(area.value);
  return {
    node: el("div", {}, el("label", { for: id }, "Resume data (JSON)"), area, error),
    value() {
      try { return parse(); } catch { throw new Error("The resume data is not valid JSON."); }
    },
    check() {
      try { parse(); } catch (e) {
        mark({ input: area, error }, `Not valid JSON: ${e.message}`);
        area.focus();
        return false;
      }
      mark({ input: area, error }, "");
      return true;
    },
  };
}
