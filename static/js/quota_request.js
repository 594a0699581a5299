// The quota request form: beside each row's new amount, the unit of the resource chosen
// and the pool's current amount of it, as soon as a resource or the pool is chosen. The
// server writes both (quota-request-data: units by key, amounts by pool and key, in the
// page's own number format) and fills the rows it renders; this only re-reads them.
(function () {
  "use strict";
  var form = document.getElementById("quota-request-form");
  var source = document.getElementById("quota-request-data");
  if (!form || !source) { return; }
  var data = JSON.parse(source.textContent);
  var pool = form.querySelector("select[name=pool]");

  function refresh() {
    var amounts = data.current[pool ? pool.value : ""] || {};
    form.querySelectorAll("tr[data-request-row]").forEach(function (row) {
      var select = row.querySelector("select");
      var key = select ? select.value : "";
      var unit = key ? (data.units[key] || "") : "";
      row.querySelector("[data-field=unit]").textContent = unit;
      row.querySelector("[data-field=current]").textContent =
        key ? ((amounts[key] || "0") + " " + unit).trim() : "\u2014";
    });
  }
  form.addEventListener("change", function (event) {
    var el = event.target;
    if (el && el.tagName === "SELECT") { refresh(); }
  });
  refresh();
}());
