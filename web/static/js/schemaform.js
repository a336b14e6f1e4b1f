// Builds a form from a JSON Schema (an object with properties of type string, number, integer or
// boolean, enums, required marks, descriptions), and reads the value back. Anything else falls
// back to a JSON text area. The server validates; the form does not, so its message can be shown.
import { el } from "./dom.js";

/** Returns { node, value() } for the schema. */
export function schemaForm(schema, idPrefix) {
  const props = schema && schema.type === "object" && schema.properties;
  if (!props || !Object.keys(props).length) return jsonField(idPrefix);
  const required = new Set(schema.required || []);
  const fields = [];
  const node = el("div", { class: "schema-form" });
  for (const [name, prop] of Object.entries(props)) {
    const id = `${idPrefix}-${name}`;
    const label = el("label", { for: id }, prop.title || name, required.has(name) ? el("span", { "aria-hidden": "true" }, " *") : null,
      required.has(name) ? el("span", { class: "hint" }, "required" + (prop.description ? " · " + prop.description : "")) :
        prop.description ? el("span", { class: "hint" }, prop.description) : null);
    let input;
    if (Array.isArray(prop.enum)) {
      input = el("select", { id, name },
        required.has(name) ? null : el("option", { value: "" }, "—"),
        ...prop.enum.map((v, i) => el("option", { value: String(i) }, String(v))));
    } else if (prop.type === "boolean") {
      input = el("input", { id, name, type: "checkbox" });
    } else if (prop.type === "number" || prop.type === "integer") {
      input = el("input", { id, name, type: "number", step: prop.type === "integer" ? "1" : "any" });
    } else {
      input = el("input", { id, name, type: "text", autocomplete: "off" });
    }
    if (required.has(name)) input.setAttribute("aria-required", "true");
    node.append(el("div", { class: "field" }, label, input));
    fields.push({ name, prop, input });
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
  };
}

function jsonField(idPrefix) {
  const id = `${idPrefix}-json`;
  const area = el("textarea", { id, spellcheck: "false" }, "{}");
  return {
    node: el("div", {}, el("label", { for: id }, "Resume data (JSON)"), area),
    value() {
      try { return JSON.parse(area.value); } catch { throw new Error("The resume data is not valid JSON."); }
    },
  };
}
