// Live preview of the job form: asks the server whether the job fits the quota, where
// it would run and when it would start, a moment after the last change. Works without
// it too (the form posts normally). Strings go through Django's JavaScript catalogue.
(function () {
  "use strict";
  var form = document.getElementById("job-form");
  var box = document.getElementById("preview");
  if (!form || !box || !window.fetch) { return; }
  var t = window.gettext || function (s) { return s; };
  var timer = null;

  form.elements.template.addEventListener("change", function () {
    var key = form.elements.template.value;
    window.location.search = key ? "?template=" + encodeURIComponent(key) : "";
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
    document.querySelectorAll(".field-error").forEach(function (el) { el.textContent = ""; });
    var errors = data.errors || {};
    Object.keys(errors).forEach(function (name) {
      var el = document.querySelector('.field-error[data-field="' + name + '"]');
      if (el) { el.textContent = errors[name]; }
      else { box.appendChild(text("p", errors[name], "error")); }
    });
    var p = data.preview;
    if (!p) { return; }
    if (p.resource) {
      box.appendChild(text("p", p.fits_quota
        ? t("Fits your quota") + ": " + (p.in_use + p.gpus) + " / " + p.quota + " " + p.resource
        : t("Above your quota") + ": " + p.in_use + " " + t("in use") + " + " + p.gpus + " > " + p.quota + " " + p.resource,
        p.fits_quota ? "ok" : "error"));
    }
    if (p.starts_now) {
      box.appendChild(text("p", t("Would start now") + (p.nodes ? " " + t("on") + " " + p.nodes + " " + t("node(s)") : "") +
        (p.borrowing ? " (" + t("borrowing idle capacity") + ")" : "") + "."));
    } else {
      box.appendChild(text("p", t("Estimated start") + ": " + when(p.eta_p50) + " (" + t("90% by") + " " + when(p.eta_p90) + ")"));
      if (p.reason) { box.appendChild(text("p", p.reason, "muted")); }
    }
  }

  function refresh() {
    box.setAttribute("aria-busy", "true");
    fetch(form.dataset.previewUrl, {method: "POST", body: new FormData(form), credentials: "same-origin"})
      .then(function (r) { return r.json(); })
      .then(render)
      .catch(function () { box.textContent = t("The preview is unavailable right now."); })
      .finally(function () { box.removeAttribute("aria-busy"); });
  }

  form.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(refresh, 400);
  });
  refresh();
}());
