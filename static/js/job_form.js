// Live preview of the job form: asks the server whether the job fits the quota, where
// it would run and when it would start, a moment after the last change. Works without
// it too (the form posts normally). Strings go through Django's JavaScript catalogue.
(function () {
  "use strict";
  var form = document.getElementById("job-form");
  var box = document.getElementById("preview");
  if (!form || !box || !window.fetch) { return; }
  var gettext = window.gettext || function (s) { return s; };
  var ngettext = window.ngettext || function (s, pl, n) { return n === 1 ? s : pl; };
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

  function when(iso) {
    return iso ? new Date(iso).toLocaleString() : "—";
  }

  function render(data) {
    box.textContent = "";
    var errors = data.errors || {};
    document.querySelectorAll(".field-error").forEach(function (el) {
      var name = el.dataset.field;
      // a field left blank is not reproached until the user has been to it
      var blank = form.elements[name] && !String(form.elements[name].value || "").trim();
      el.textContent = ((touched[name] || !blank) && errors[name]) || serverErrors[name] || "";
    });
    Object.keys(errors).forEach(function (name) {
      if (!document.querySelector('.field-error[data-field="' + name + '"]')) {
        box.appendChild(text("p", errors[name], "error"));
      }
    });
    var p = data.preview;
    if (!p) {
      // errors of fields not yet filled in are not shown: say what the preview waits for
      if (!box.childNodes.length) { box.appendChild(text("p", placeholder, "muted")); }
      return;
    }
    if (p.gpu_kind) { box.appendChild(text("p", p.gpu_kind, "muted")); }
    (p.dimensions || []).forEach(function (d) {
      var after = Math.round((d.in_use + d.wanted) * 1000) / 1000;
      var args = {label: d.label, unit: d.unit, after: after, in_use: d.in_use,
                  wanted: d.wanted, quota: d.quota, ceiling: d.ceiling};
      var line;
      if (d.fits_quota) {
        line = box.appendChild(text("p", interpolate(gettext("%(label)s: %(after)s of %(quota)s %(unit)s with this job"), args, true), "ok"));
      } else if (d.fits_ceiling && d.ceiling === null) {
        line = box.appendChild(text("p", interpolate(gettext("%(label)s: %(after)s of %(quota)s %(unit)s with this job: above your quota, borrowing idle capacity (reclaimed when its owner needs it)"), args, true), "note-warn"));
      } else if (d.fits_ceiling) {
        line = box.appendChild(text("p", interpolate(gettext("%(label)s: %(after)s of %(quota)s %(unit)s with this job: above your quota, borrowing idle capacity up to %(ceiling)s"), args, true), "note-warn"));
      } else {
        line = box.appendChild(text("p", interpolate(gettext("%(label)s: %(in_use)s in use + %(wanted)s > %(ceiling)s %(unit)s: it waits until your pool's jobs free enough"), args, true), "error"));
      }
      // the pool's numbers as the server counted them (the quota page and gauges show them)
      line.setAttribute("data-key", d.key);
      line.setAttribute("data-in-use", d.in_use);
      line.setAttribute("data-quota", d.quota);
    });
    if (p.max_cost) {
      box.appendChild(text("p", interpolate(gettext("Cost if it runs for its maximum run time: %(cost)s %(currency)s"),
        {cost: p.max_cost, currency: p.currency || ""}, true)));
    }
    if (p.starts_now) {
      var sentence;
      if (p.nodes && p.borrowing) {
        sentence = ngettext("Would start now on %(nodes)s node, borrowing idle capacity.",
          "Would start now on %(nodes)s nodes, borrowing idle capacity.", p.nodes);
      } else if (p.nodes) {
        sentence = ngettext("Would start now on %(nodes)s node.", "Would start now on %(nodes)s nodes.", p.nodes);
      } else if (p.borrowing) {
        sentence = gettext("Would start now, borrowing idle capacity.");
      } else {
        sentence = gettext("Would start now.");
      }
      box.appendChild(text("p", interpolate(sentence, {nodes: p.nodes}, true)));
    } else {
      box.appendChild(text("p", interpolate(gettext("Estimated start: %(p50)s (90 percent by %(p90)s)"),
        {p50: when(p.eta_p50), p90: when(p.eta_p90)}, true)));
      if (p.reason) { box.appendChild(text("p", p.reason, "muted")); }
    }
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
