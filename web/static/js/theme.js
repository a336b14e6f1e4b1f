// The console's theme, applied before the first paint: a classic (not module) script in <head>,
// so it runs before <body> is parsed; the Content-Security-Policy forbids inline scripts. It sets
// <html data-theme="light|dark"> from the person's choice (data-theme-pref, kept in localStorage
// under interlock.theme: "light", "dark" or "system"), following the system's
// prefers-color-scheme when the choice is "system". The header's Theme select (app.js) changes
// data-theme-pref and dispatches "interlock:theme" on the document; another tab's choice comes
// through the storage event.
(function () {
  "use strict";
  var KEY = "interlock.theme";
  var root = document.documentElement;
  var dark = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  var stored = null;
  try { stored = localStorage.getItem(KEY); } catch (e) { /* storage blocked: follow the system */ }
  root.dataset.themePref = stored === "light" || stored === "dark" ? stored : "system";
  function apply() {
    var pref = root.dataset.themePref;
    root.dataset.theme = pref === "light" || pref === "dark" ? pref : dark && dark.matches ? "dark" : "light";
  }
  apply();
  if (dark) {
    if (dark.addEventListener) dark.addEventListener("change", apply);
    else if (dark.addListener) dark.addListener(apply);
  }
  document.addEventListener("interlock:theme", apply);
  window.addEventListener("storage", function (ev) {
    if (ev.key !== KEY) return;
    root.dataset.themePref = ev.newValue === "light" || ev.newValue === "dark" ? ev.newValue : "system";
    apply();
    document.dispatchEvent(new Event("interlock:theme-pref"));
  });
})();
