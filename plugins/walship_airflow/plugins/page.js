(function () {
  "use strict";
  var live = document.getElementById("live");
  var jsonView = document.getElementById("json-view");
  var note = document.getElementById("refresh-note");

  /* Airflow's UI around this page: the parent window when it is the same origin */
  function uiWindow() {
    if (window.parent === window) return null;
    try {
      return window.parent.location.origin === window.location.origin && window.parent.history ? window.parent : null;
    } catch (e) {
      return null;
    }
  }
  /* a new tab can be opened: not framed, or framed without a sandbox or with allow-popups */
  function canOpenTabs() {
    if (window.top === window) return true;
    var frame = null;
    try { frame = window.frameElement; } catch (e) { frame = null; }
    return !!frame && (!frame.hasAttribute("sandbox") || frame.sandbox.contains("allow-popups"));
  }
  /* navigate the UI's router (React Router listens to popstate) */
  function openInUi(ui, href) {
    var url = new URL(href, window.location.href);
    var previous = ui.history.state || {};
    var state = {usr: null, key: Math.random().toString(36).slice(2, 10),
                 idx: (typeof previous.idx === "number" ? previous.idx : 0) + 1};
    ui.history.pushState(state, "", url.pathname + url.search + url.hash);
    ui.dispatchEvent(new ui.PopStateEvent("popstate", {state: state}));
  }
  function showJson(href) {
    var pre = jsonView.querySelector("pre");
    var save = jsonView.querySelector("a.download");
    jsonView.hidden = false;
    pre.textContent = "loading " + href + " ...";
    fetch(href, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (r) {
        return r.text().then(function (text) { return {ok: r.ok, status: r.status, text: text}; });
      })
      .then(function (r) {
        var shown = r.text;
        try { shown = JSON.stringify(JSON.parse(r.text), null, 2); } catch (e) { /* as it came */ }
        pre.textContent = r.ok ? shown : "HTTP " + r.status + "\\n" + shown;
        jsonView.dataset.loaded = r.ok ? "ok" : "error";
        if (save.dataset.url) URL.revokeObjectURL(save.dataset.url);
        save.dataset.url = URL.createObjectURL(new Blob([r.text], {type: "application/json"}));
        save.href = save.dataset.url;
      })
      .catch(function (e) { pre.textContent = "cannot load " + href + ": " + e; jsonView.dataset.loaded = "error"; });
    jsonView.scrollIntoView({block: "start"});
  }
  function toggleDetails(button, open) {
    var row = document.getElementById(button.getAttribute("aria-controls"));
    if (!row) return;
    row.hidden = !open;
    button.setAttribute("aria-expanded", String(open));
    button.textContent = open ? "hide" : "details";
  }
  document.addEventListener("click", function (ev) {
    var target = ev.target instanceof Element ? ev.target : null;
    if (!target || ev.defaultPrevented) return;
    var button = target.closest("button.more");
    if (button) { toggleDetails(button, button.getAttribute("aria-expanded") !== "true"); return; }
    if (target.closest("#json-close")) { jsonView.hidden = true; return; }
    var a = target.closest("a");
    if (!a || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    if (a.hasAttribute("data-ui-link")) {
      var ui = uiWindow();
      if (!ui) return;  /* on its own: the link's target=_top */
      ev.preventDefault();
      openInUi(ui, a.href);
    } else if (a.hasAttribute("data-json")) {
      if (canOpenTabs()) return;  /* the link's target=_blank */
      ev.preventDefault();
      showJson(a.href);
    }
  });
  var select = document.querySelector("select[data-source-select]");
  if (select) select.addEventListener("change", function () { select.form.submit(); });

  /* the refresh: the live part swapped in place, scroll and open details kept */
  var every = Number(live.dataset.refreshS) || 0;
  var refreshes = 0;
  function clock() { return new Date().toISOString().slice(11, 19) + " UTC"; }
  function refresh() {
    if (document.hidden) return;
    fetch(window.location.href, {credentials: "same-origin", headers: {Accept: "text/html"}})
      .then(function (r) { return r.text().then(function (text) { return {status: r.status, text: text}; }); })
      .then(function (r) {
        var fresh = new DOMParser().parseFromString(r.text, "text/html").getElementById("live");
        if (!fresh) throw new Error("HTTP " + r.status);
        var open = Array.prototype.map.call(
          live.querySelectorAll("button.more[aria-expanded=true]"),
          function (b) { return b.closest("tbody").dataset.key; });
        var x = window.scrollX, y = window.scrollY;
        live.replaceChildren.apply(live, Array.prototype.map.call(
          fresh.childNodes, function (n) { return document.importNode(n, true); }));
        live.querySelectorAll("tbody.queue").forEach(function (tbody) {
          if (open.indexOf(tbody.dataset.key) >= 0) toggleDetails(tbody.querySelector("button.more"), true);
        });
        window.scrollTo(x, y);
        refreshes += 1;
        live.dataset.refreshes = String(refreshes);
        note.textContent = "refreshes every " + every + " s; last at " + clock();
      })
      .catch(function (e) { note.textContent = "refresh failed at " + clock() + " (" + e.message + "); retrying in " + every + " s"; });
  }
  if (every > 0) window.setInterval(refresh, every * 1000);
})();
