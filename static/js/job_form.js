// Live preview of the job form: a moment after the last change, asks the server for the
// one verdict Submit would give (fits now and where, waits and why and until when, or
// refused and which field to change) and shows it. Works without
// it too (the form posts normally). Strings go through Django's JavaScript catalogue.
(function () {
  "use strict";
  var form = document.getElementById("job-form");
  var box = document.getElementById("preview");
  if (!form || !box || !window.fetch) { return; }
  var gettext = window.gettext || function (s) { return s; };
  var interpolate = window.interpolate || function (fmt, obj) {
    return fmt.replace(/%\(\w+\)s/g, function (m) { return String(obj[m.slice(2, -2)]); });
  };
  var timer = null;
  // Errors the server gave with the page (a refused submit) stay at their fields until
  // that field is edited; the preview says nothing of a blank field the user has not been
  // to yet, so an empty form does not open with "This field is required."
  var serverErrors = {};
  var touched = {};
  document.querySelectorAll(".field-error").forEach(function (el) {
    if (el.textContent.trim()) { serverErrors[el.dataset.field] = el.textContent.trim(); }
  });
  var placeholder = box.textContent.trim();
  var templatesEl = document.getElementById("job-templates");
  var templates = templatesEl ? JSON.parse(templatesEl.textContent) : null;

  function setField(name, value) {
    var el = form.elements[name];
    if (!el || name === "template") { return; }
    if (el.type === "checkbox") { el.checked = value === "on"; } else { el.value = value; }
    touched[name] = true;
    delete serverErrors[name];
  }

  form.elements.template.addEventListener("change", function () {
    var key = form.elements.template.value;
    if (!templates) {  // no values on the page: the server fills the form
      window.location.search = key ? "?template=" + encodeURIComponent(key) : "";
      return;
    }
    // Fill in the template's fields and keep everything else that was typed.
    Object.keys(templates[key] || {}).forEach(function (name) { setField(name, templates[key][name]); });
    refresh();
  });

  function text(tag, content, cls) {
    var el = document.createElement(tag);
    el.textContent = content;
    if (cls) { el.className = cls; }
    return el;
  }

  // What the invoice would charge, part by part, for the maximum and the expected run
  // time: the server computed every amount (billing's invoice arithmetic).
  function costTable(cost) {
    var wrap = document.createElement("div");
    wrap.id = "preview-cost";
    var table = wrap.appendChild(document.createElement("table"));
    table.className = "table";
    table.appendChild(text("caption", interpolate(gettext("What the invoice would charge (%(currency)s)"),
      {currency: cost.currency}, true)));
    var runs = [["max", gettext("Maximum run time")], ["expected", gettext("Expected run time")]];
    var head = table.appendChild(document.createElement("thead")).appendChild(document.createElement("tr"));
    head.appendChild(text("th", ""));
    runs.forEach(function (run) {
      var hours = Math.round(cost[run[0]].seconds / 36) / 100;
      head.appendChild(text("th", interpolate(gettext("%(run)s (%(hours)s h)"), {run: run[1], hours: hours}, true)));
    });
    var parts = [["gpu", gettext("GPU")], ["cpu", gettext("CPU")], ["memory", gettext("Memory")]];
    if (Number(cost.max.storage) || Number(cost.expected.storage)) { parts.push(["storage", gettext("Storage")]); }
    parts.push(["total", gettext("Total")]);
    var body = table.appendChild(document.createElement("tbody"));
    parts.forEach(function (part) {
      var row = body.appendChild(document.createElement("tr"));
      row.setAttribute("data-part", part[0]);
      row.appendChild(text("th", part[1]));
      runs.forEach(function (run) {
        var cell = row.appendChild(text("td", cost[run[0]][part[0]]));
        cell.setAttribute("data-run", run[0]);
      });
    });
    if (cost.unpriced) {
      wrap.appendChild(text("p", gettext("The rate card has no price for this GPU: its part would be billed 0."), "note-warn"));
    }
    return wrap;
  }

  function fieldLabel(name) {
    var label = form.querySelector('label[for="id_' + name + '"]');
    return label ? label.textContent.trim() : "";
  }

  // A blank field the user has not been to yet is not reproached.
  function quiet(name) {
    var el = form.elements[name];
    return !!el && el.type !== "checkbox" && !String(el.value || "").trim() && !touched[name];
  }

  // The one verdict, as the server decided it with the check Submit makes: fits, waits
  // or refused. Its sentence (and every date in it) comes from the server.
  function verdict(kind, head, detail) {
    var el = document.createElement("div");
    el.className = "verdict verdict-" + kind;
    el.setAttribute("data-verdict", kind);
    el.setAttribute("role", "status");
    el.appendChild(text("p", head, "verdict-head"));
    if (detail) { el.appendChild(text("p", detail)); }
    box.appendChild(el);
    return el;
  }

  function render(data) {
    box.textContent = "";
    var errors = data.errors || {};
    document.querySelectorAll(".field-error").forEach(function (el) {
      var name = el.dataset.field;
      el.textContent = (!quiet(name) && errors[name]) || serverErrors[name] || "";
    });
    var p = data.preview;
    if (p && p.verdict === "refused") {
      var shown = Object.keys(errors).filter(function (name) { return !quiet(name); });
      if (!shown.length) {
        // only fields not filled in yet: say what the preview waits for
        box.appendChild(text("p", placeholder, "muted"));
        return;
      }
      var first = shown.indexOf(p.field) >= 0 ? p.field : shown[0];
      var label = fieldLabel(first);
      var el = verdict("refused", gettext("Submit would refuse it."),
        label ? interpolate(gettext("%(field)s: %(message)s"), {field: label, message: errors[first]}, true)
              : errors[first]);
      el.setAttribute("data-field", first);
      shown.forEach(function (name) {  // what has no place at a field of its own
        if (name !== first && !document.querySelector('.field-error[data-field="' + name + '"]')) {
          el.appendChild(text("p", errors[name]));
        }
      });
      return;
    }
    if (!p) {
      box.appendChild(text("p", placeholder, "muted"));
      return;
    }
    var v = verdict(p.verdict, p.summary);
    v.setAttribute("data-reason-code", p.reason_code || "");
    if (p.gpu_kind) { box.appendChild(text("p", p.gpu_kind, "muted")); }
    if (p.worker_text) {
      var worker = box.appendChild(text("p", p.worker_text.cpu, "worker-cpu"));
      worker.setAttribute("data-request", p.worker.cpu_request);
      worker.setAttribute("data-limit", p.worker.cpu_limit);
      var memory = box.appendChild(text("p", p.worker_text.memory, "worker-memory"));
      memory.setAttribute("data-request", p.worker.memory_request_gib);
      memory.setAttribute("data-limit", p.worker.memory_limit_gib);
      box.appendChild(text("p", p.worker_text.counted, "muted"));
    }
    // What the whole job counts against the pool, beside what is in use there now (the
    // quota page's numbers): facts, not a second verdict.
    (p.dimensions || []).forEach(function (d) {
      var ahead = d.ahead || 0;
      var after = Math.round((d.in_use + ahead + d.wanted) * 1000) / 1000;
      var words = interpolate(gettext("%(label)s: %(after)s of %(quota)s %(unit)s with this job"),
        {label: d.label, unit: d.unit, after: after, quota: d.quota}, true);
      if (ahead) {  // the engine counts them in use when it decides this one
        words += " " + interpolate(gettext("(%(ahead)s %(unit)s of it for queued jobs that start before it)"),
          {ahead: ahead, unit: d.unit}, true);
      }
      var line = box.appendChild(text("p", words, "dimension"));
      line.setAttribute("data-key", d.key);
      line.setAttribute("data-wanted", d.wanted);
      line.setAttribute("data-in-use", d.in_use);
      line.setAttribute("data-ahead", ahead);
      line.setAttribute("data-quota", d.quota);
    });
    if (p.max_cost) {
      box.appendChild(text("p", interpolate(gettext("Cost if it runs for its maximum run time: %(cost)s %(currency)s"),
        {cost: p.max_cost, currency: p.currency || ""}, true)));
    }
    if (p.cost) { box.appendChild(costTable(p.cost)); }
    (p.notes || []).forEach(function (note) { box.appendChild(text("p", note, "note-warn")); });
  }

  function refresh() {
    box.setAttribute("aria-busy", "true");
    fetch(form.dataset.previewUrl, {method: "POST", body: new FormData(form), credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(render)
      .catch(function () { box.textContent = gettext("The preview is unavailable right now."); })
      .finally(function () { box.removeAttribute("aria-busy"); });
  }

  function edited(event) {
    var name = event.target && event.target.name;
    if (name) { touched[name] = true; delete serverErrors[name]; }
    clearTimeout(timer);
    timer = setTimeout(refresh, 400);
  }
  form.addEventListener("input", edited);
  form.addEventListener("change", function (event) {
    if (event.target && event.target.name !== "template") { edited(event); }
  });
  refresh();
}());
