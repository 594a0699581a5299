// Destructive actions ask first: a form with data-confirm="<question>" (written by the
// server in the reader's language) is sent only when the user says yes; so is a form sent
// by a button with its own data-confirm (one form, a harmless and a destructive button).
// Without JavaScript the form posts as it is.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var question = (button && button.dataset && button.dataset.confirm) ||
      (form && form.dataset ? form.dataset.confirm : "");
    if (question && !window.confirm(question)) { event.preventDefault(); }
  }, true);
}());

// A select marked data-autosubmit sends its form when it changes (the language switcher);
// a listener here rather than an inline handler, which the Content-Security-Policy forbids.
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var el = event.target;
    if (el && el.dataset && el.dataset.autosubmit !== undefined && el.form) { el.form.submit(); }
  });
}());

// Times on pages are written in the reader's time zone: the browser's, kept in a cookie
// the server reads (portal.middleware.TimeZoneMiddleware); set on every page, the sign-in
// page included, so the first page after it already speaks the reader's zone.
(function () {
  "use strict";
  var zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { return; }
  if (!zone) { return; }
  var current = (document.cookie.match(/(?:^|;\s*)trainyard_tz=([^;]*)/) || [])[1];
  if (current !== encodeURIComponent(zone)) {
    document.cookie = "trainyard_tz=" + encodeURIComponent(zone) +
      "; path=/; max-age=31536000; SameSite=Lax";
  }
}());
