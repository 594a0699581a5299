// Dashboards (tenant dashboard, cluster page): draws the Plotly figures the server
// computed (JSON in #dashboard-figures) and keeps the live parts current by polling a
// small JSON endpoint (data-live-url) with an adaptive interval: every 15 s while the
// tab is visible and data changes, backing off to 2 min while nothing changes, and
// 5 min while the tab is hidden (document.visibilityState); a poll runs at once when
// the tab becomes visible again; the trend charts are re-read every 5 minutes
// (data-trends-url). Every number is also in the HTML, so the page reads
// without JavaScript. plotly.js is served locally (/static/vendor/plotly/, a partial bundle
// with only the trace types portal/charts.py draws: scripts/build-plotly-bundle.sh).
(function () {
  "use strict";
  var root = document.getElementById("dashboard");
  var figuresEl = document.getElementById("dashboard-figures");
  if (!root || !figuresEl) { return; }
  var gettext = window.gettext || function (s) { return s; };
  var figures = JSON.parse(figuresEl.textContent || "{}");
  var CONFIG = { displaylogo: false, responsive: true, displayModeBar: false };

  function draw(el, fig) {
    if (!window.Plotly || !el || !fig) { return; }
    window.Plotly.react(el, fig.data, fig.layout, CONFIG);
  }

  function figureFor(el) {
    var group = figures[el.getAttribute("data-figure")];
    if (!group) { return null; }
    var days = el.getAttribute("data-days");
    if (days) { group = group[days]; }
    var index = el.getAttribute("data-index");
    return index === null ? group : (group || [])[Number(index)];
  }

  function drawAll(scope) {
    (scope || document).querySelectorAll("[data-figure]").forEach(function (el) {
      if (el.offsetParent === null) { return; }  // hidden panel: drawn when shown
      draw(el, figureFor(el));
    });
  }

  // 7 / 30 day switch
  root.querySelectorAll("[data-trend-days]").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var days = btn.getAttribute("data-trend-days");
      root.querySelectorAll("[data-trend-days]").forEach(function (b) {
        b.setAttribute("aria-pressed", String(b === btn));
      });
      root.querySelectorAll("[data-trend-panel]").forEach(function (panel) {
        panel.hidden = panel.getAttribute("data-trend-panel") !== days;
        if (!panel.hidden) { drawAll(panel); }
      });
    });
  });

  function text(tag, content, cls) {
    var el = document.createElement(tag);
    el.textContent = content === null || content === undefined ? "—" : String(content);
    if (cls) { el.className = cls; }
    return el;
  }

  function when(iso) { return iso ? new Date(iso).toLocaleString() : "—"; }

  function applyGauges(gauges) {
    var boxes = root.querySelectorAll("figure.gauge");
    figures.gauges = gauges.map(function (g) { return g.figure; });
    if (boxes.length !== gauges.length) { return false; }  // the set changed: reload
    gauges.forEach(function (g, i) {
      var box = boxes[i];
      if (box.getAttribute("data-key") !== g.key) { return; }
      box.querySelector("[data-field=used]").textContent = g.used;
      var quota = box.querySelector("[data-field=quota]");
      if (quota) quota.textContent = g.quota;
      var meter = box.querySelector("meter");
      if (meter && g.meter) {  // the server's scale: use above the quota is never green
        meter.max = g.meter.max; meter.low = g.meter.low; meter.high = g.meter.high;
        meter.optimum = g.meter.optimum; meter.value = g.meter.value;
      }
      box.setAttribute("data-state", g.state || "");
      draw(box.querySelector("[data-figure]"), g.figure);
    });
    return true;
  }

  function applyWaiting(rows) {
    var body = root.querySelector("[data-live=waiting] tbody");
    if (!body) { return; }
    var base = window.location.pathname.replace(/dashboard\/?$/, "jobs/");
    body.textContent = "";
    if (!rows.length) {
      var tr = document.createElement("tr");
      var td = text("td", gettext("None of your jobs is waiting."), "muted");
      td.colSpan = 5; tr.appendChild(td); body.appendChild(tr); return;
    }
    rows.forEach(function (w) {
      var tr = document.createElement("tr");
      var name = document.createElement("td");
      var a = text("a", w.name); a.href = base + w.id + "/"; name.appendChild(a);
      tr.appendChild(name);
      tr.appendChild(text("td", w.gpus + " " + (w.resource || "")));
      tr.appendChild(text("td", (w.position_in_pool || "—") + " / " + (w.position_in_model || "—")));
      // the server's words for an ETA (its day and the reader's time zone), as on the page
      tr.appendChild(text("td", w.eta_p50_text ? w.eta_p50_text + (w.eta_p90_text
        ? " (" + interpolate(gettext("90%: %s"), [w.eta_p90_text]) + ")" : "") : when(w.eta_p50)));
      tr.appendChild(text("td", w.wait_reason || "—"));
      body.appendChild(tr);
    });
  }

  function applyBusyness(items) {
    var banner = root.querySelector("[data-live=busyness]");
    if (banner) {
      banner.textContent = "";
      banner.appendChild(text("strong", gettext("Cluster now:") + " "));
      banner.appendChild(document.createTextNode(items.map(function (b) {
        return b.sentence;
      }).join(" · ")));
    }
    var table = root.querySelector("[data-live=busyness-table]");
    if (table) {
      items.forEach(function (b) {
        var row = table.querySelector('tr[data-model="' + (window.CSS && CSS.escape ? CSS.escape(b.model) : b.model) + '"]');
        if (!row) { return; }
        // the server's words: the figure with its unit (cards or shares), as on the page
        row.querySelector("[data-field=alloc]").textContent = b.alloc_text;
        var meter = row.querySelector("meter");
        if (meter) { meter.max = b.allocatable; meter.value = b.allocated; }
      });
    }
  }

  function applyTenants(rows, totals) {
    var table = root.querySelector("[data-live=tenants]");
    var body = table && table.querySelector("tbody");
    if (!body || !rows.length) { return; }
    var base = window.location.pathname.replace(/cluster\/?$/, "t/");
    var none = "\u2014";
    body.textContent = "";
    rows.forEach(function (r) {
      var tr = document.createElement("tr");
      var td = document.createElement("td");
      var a = text("a", r.tenant); a.href = base + r.tenant + "/dashboard/"; td.appendChild(a);
      tr.appendChild(td);
      // the cells as the server writes them (each figure with its unit)
      [r.cells.gpu, r.cells.mig, r.cells.shared,
       r.busy === null ? none : r.busy, r.idle === null ? none : r.idle,
       r.cpu, r.memory + " " + gettext("GiB")].forEach(function (v) {
        tr.appendChild(text("td", v));
      });
      body.appendChild(tr);
    });
    ["other", "total"].forEach(function (name) {
      var row = totals && table.querySelector('tr[data-row="' + name + '"]');
      if (!row) { return; }
      ["gpu", "mig", "shared"].forEach(function (kind) {
        row.querySelector('[data-field="' + kind + '"]').textContent = totals[name][kind];
      });
    });
  }

  // --- adaptive polling -------------------------------------------------------------
  var url = root.getAttribute("data-live-url");
  var FAST = 15000, SLOW = 120000, HIDDEN = 300000;
  var interval = FAST, timer = null, etag = null, inflight = false;

  function schedule() {
    clearTimeout(timer);
    var wait = document.visibilityState === "hidden" ? HIDDEN : interval;
    timer = setTimeout(poll, wait);
  }

  function poll() {
    if (!url || !window.fetch || inflight) { schedule(); return; }
    inflight = true;
    var headers = { "Accept": "application/json" };
    if (etag) { headers["If-None-Match"] = etag; }
    fetch(url, { headers: headers, credentials: "same-origin" }).then(function (resp) {
      if (resp.status === 304) { interval = Math.min(SLOW, interval * 2); return null; }
      if (!resp.ok) { interval = Math.min(SLOW, interval * 2); return null; }
      etag = resp.headers.get("ETag");
      interval = FAST;
      return resp.json();
    }).then(function (data) {
      if (!data) { return; }
      if (data.gauges && !applyGauges(data.gauges)) { window.location.reload(); return; }
      if (data.waiting) { applyWaiting(data.waiting); }
      if (data.busyness) { applyBusyness(data.busyness); }
      if (data.tenants) { applyTenants(data.tenants, data.tenant_totals); }
      if (document.visibilityState !== "hidden") { refreshTrends(); }
    }).catch(function () {
      interval = Math.min(SLOW, interval * 2);
    }).then(function () { inflight = false; schedule(); });
  }

  // trends: hourly/daily rows change slowly; refresh the shown period every 5 minutes
  var trendsUrl = root.getAttribute("data-trends-url");
  var lastTrends = Date.now();
  function refreshTrends() {
    if (!trendsUrl || !window.fetch || Date.now() - lastTrends < 300000) { return; }
    lastTrends = Date.now();
    var pressed = root.querySelector("[data-trend-days][aria-pressed=true]");
    var days = pressed ? pressed.getAttribute("data-trend-days") : "7";
    fetch(trendsUrl + "?days=" + days, { credentials: "same-origin" }).then(function (resp) {
      return resp.ok ? resp.json() : null;
    }).then(function (data) {
      if (!data || !figures.trends) { return; }
      var panel = root.querySelector('[data-trend-panel="' + days + '"]');
      if (!panel || panel.querySelectorAll("[data-figure]").length !== data.trends.length) { return; }
      figures.trends[days] = data.trends.map(function (tr) { return tr.figure; });
      drawAll(panel);
    }).catch(function () {});
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") { interval = FAST; poll(); } else { schedule(); }
  });

  function start() { drawAll(); schedule(); }
  if (window.Plotly) { start(); } else { window.addEventListener("load", start); }
})();
