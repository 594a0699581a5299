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
