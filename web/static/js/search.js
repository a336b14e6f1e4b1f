// Search and saved views of the inbox and the history. The search box's text goes to ?q= in the
// URL (so a search survives a reload and can be shared) and to the API's `search` argument: a
// run matches when the text is the start of its id, or is within a tool call's name or
// arguments, its thread, its resource or who requested it, in any case.
//
// A saved view is a name and the URL's query string (the filters and the search, as the address
// bar has them), kept per person on the server (savedViews, saveView, deleteSavedView): the menu
// saves the current view, opens one, and deletes one.
import { request } from "./gql.js";
import { el } from "./dom.js";

const VIEWS = `{ savedViews { id name query } }`;
const SAVE = `mutation($n: String!, $q: String!) { saveView(name: $n, query: $q) { id name query } }`;
const DELETE = `mutation($id: ID!) { deleteSavedView(id: $id) }`;

/** The search field of a filter form (name "q"), labelled, with the URL's value. */
export function searchField(id, value) {
  return el("div", { class: "search-field" }, el("label", { for: id }, "Search"),
    el("input", { id, name: "q", type: "search", value: value || "", autocomplete: "off", spellcheck: "false", maxlength: "200",
      placeholder: "run id, tool, arguments, thread, resource, requester" }));
}

/** The URL's query string without the page (a saved view starts at its first page). */
function currentQuery() {
  const q = new URLSearchParams(location.search);
  q.delete("page");
  q.delete("run");
  return q.toString();
}

/**
 * The saved-views menu: the person's views as links, "Save this view" (a name, then Save) and a
 * delete button per view. navigate(url) opens a view.
 */
export function savedViewsMenu(navigate) {
  const list = el("ul", { class: "saved-views-list", id: "saved-views-list" });
  const note = el("p", { class: "small muted", id: "saved-views-note", role: "status" });
  const name = el("input", { id: "saved-view-name", type: "text", maxlength: "100", autocomplete: "off", placeholder: "Name this view" });
  const form = el("form", { class: "saved-view-save", onsubmit: async (ev) => {
    ev.preventDefault();
    const n = name.value.trim();
    if (!n) { note.textContent = "Give the view a name."; name.focus(); return; }
    try {
      await request(SAVE, { n, q: currentQuery() });
      name.value = "";
      note.textContent = `Saved “${n}”.`;
      load();
    } catch (e) { note.textContent = e.message; }
  } }, el("label", { for: "saved-view-name", class: "visually-hidden" }, "Name of the view"), name, " ",
  el("button", { type: "submit", id: "saved-view-save" }, "Save this view"));
  const menu = el("details", { class: "saved-views", id: "saved-views" },
    el("summary", {}, "Saved views"), el("div", { class: "saved-views-panel card" }, list, form, note));

  async function load() {
    let views;
    try { views = (await request(VIEWS)).savedViews; } catch (e) { note.textContent = e.message; return; }
    list.replaceChildren(...(views.length ? views.map((v) => el("li", { "data-view": v.name },
      el("a", { href: "/?" + v.query, onclick: (ev) => { ev.preventDefault(); menu.open = false; navigate("/?" + v.query); } }, v.name), " ",
      el("button", { type: "button", class: "link delete-view", "aria-label": `Delete the view ${v.name}`, onclick: async () => {
        try { await request(DELETE, { id: v.id }); note.textContent = `Deleted “${v.name}”.`; load(); } catch (e) { note.textContent = e.message; }
      } }, "Delete"))) : [el("li", { class: "muted" }, "No saved views yet.")]));
  }
  load();
  return menu;
}
