// Pages that keep themselves current (a job's page, the job lists, the platform queue):
// every few seconds (data-interval on this script tag; every minute while the tab is
// hidden) the page's own URL is fetched again and each element marked data-live="<name>"
// is replaced by its new version when it changed. Nothing else on the page is touched, so
// a form outside those elements (filters, a platform admin's hold reason) keeps what the
// user typed; an element holding the focus or an edited field is left alone until the
// user is done with it (an opened <details>, such as a queue row's actions, too). Without JavaScript the page is simply static.
(function () {
  "use strict";
  var script = document.currentScript;
  var interval = Number((script && script.getAttribute("data-interval")) || 10000);
  var HIDDEN = 60000;
  if (!window.fetch || !window.DOMParser) { return; }
  var timer = null, inflight = false;

  function busy(el) {
    var active = document.activeElement;
    if (active && active !== document.body && el.contains(active)) { return true; }
    if (el.querySelector("details[open]")) { return true; }  // a row's actions, opened
    var fields = el.querySelectorAll("input, textarea, select");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "checkbox" || f.type === "radio" ? f.checked !== f.defaultChecked
          : (f.tagName === "SELECT" ? false : f.value !== f.defaultValue)) { return true; }
    }
    return false;
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, document.visibilityState === "hidden" ? HIDDEN : interval);
  }

  function poll() {
    if (inflight || !document.querySelector("[data-live]")) { schedule(); return; }
    inflight = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Live": "1" } })
      .then(function (resp) { return resp.ok ? resp.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var regions = document.querySelectorAll("[data-live]");
        for (var i = 0; i < regions.length; i++) {
          var el = regions[i];
          var next = fresh.querySelector('[data-live="' + el.getAttribute("data-live") + '"]');
          if (!next || busy(el) || next.innerHTML === el.innerHTML) { continue; }
          el.innerHTML = next.innerHTML;
        }
        document.documentElement.setAttribute("data-live-at", String(Date.now()));
      }).catch(function () {})
      .then(function () { inflight = false; schedule(); });
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") { poll(); } else { schedule(); }
  });
  schedule();
})();
