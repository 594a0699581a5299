// The job page's log panel: reads one pod's log as JSON from data-logs-url (the server
// asks the cluster's pods/log for it) and, with Follow ticked, polls every 3 s for the
// lines after the last one shown (?after=<its timestamp>), so it works the same behind
// the development server and gunicorn (no long-lived request). "Previous container"
// reads the container before the last restart; Download saves the whole log as a file.
// At most MAX_LINES lines stay on the page. Each line shows the time the cluster stamped it
// with, as the server wrote it (the one format of times: the reader's language and time
// zone, with its day) in a <time> element; when the reader's day changes ("today" becomes
// "yesterday") the panel reads the log again. Strings come from the server (in the
// reader's language) or through gettext().
(function () {
  "use strict";
  var root = document.getElementById("logs");
  if (!root || !window.fetch) { return; }
  var url = root.getAttribute("data-logs-url");
  var pod = root.querySelector("[data-log-pod]");
  var follow = root.querySelector("[data-log-follow]");
  var previous = root.querySelector("[data-log-previous]");
  var download = root.querySelector("[data-log-download]");
  var box = root.querySelector("[data-log-text]");
  var status = root.querySelector("[data-log-status]");
  if (!pod || !box) { return; }
  var gettext = window.gettext || function (s) { return s; };
  var MAX_LINES = 5000, POLL = 3000;
  var last = "", timer = null, inflight = false, generation = 0, day = "";

  function query(extra) {
    var q = "?pod=" + encodeURIComponent(pod.value);
    if (previous && previous.checked) { q += "&previous=1"; }
    return url + q + (extra || "");
  }

  function atBottom() { return box.scrollHeight - box.scrollTop - box.clientHeight < 40; }

  function append(lines) {
    if (!lines.length) { return; }
    var stick = atBottom();
    var chunk = document.createDocumentFragment();
    lines.forEach(function (line) {
      var row = document.createElement("span");
      row.className = "log-line";
      if (line.when) {
        var time = document.createElement("time");
        time.setAttribute("datetime", line.at);
        time.className = "muted";
        time.textContent = line.when;
        row.appendChild(time);
        row.appendChild(document.createTextNode(" "));
      }
      row.appendChild(document.createTextNode(line.text + "\n"));
      chunk.appendChild(row);
    });
    box.appendChild(chunk);
    while (box.childNodes.length > MAX_LINES) { box.removeChild(box.firstChild); }  // the oldest
    if (stick) { box.scrollTop = box.scrollHeight; }
  }

  function say(data) {
    var words = data.message || "";
    if (data.detail) { words += (words ? " " : "") + "(" + data.detail + ")"; }
    if (!words && data.truncated) { words = gettext("Only the end of the log is shown; download it for the rest."); }
    if (!words && !box.textContent) { words = gettext("The log is empty so far."); }
    status.textContent = words;
  }

  function schedule() {
    clearTimeout(timer);
    if (follow && follow.checked && document.visibilityState !== "hidden") {
      timer = setTimeout(read, POLL);
    }
  }

  function read() {
    if (inflight) { schedule(); return; }
    inflight = true;
    var mine = generation;
    fetch(query(last ? "&after=" + encodeURIComponent(last) : ""),
          { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (resp) {
        if (!resp.ok) { throw new Error(String(resp.status)); }
        return resp.json();
      }).then(function (data) {
        if (mine !== generation) { return; }  // the pod or container changed meanwhile
        if (day && data.today && data.today !== day) {  // a new day: read it all again
          day = ""; generation += 1; setTimeout(restart, 0); return;
        }
        day = data.today || day;
        append(data.lines || []);
        if (data.last) { last = data.last; }
        say(data);
        root.setAttribute("data-log-loaded", "1");
      }).catch(function () {
        if (mine === generation) { status.textContent = gettext("The log could not be read; trying again."); }
      }).then(function () { inflight = false; schedule(); });
  }

  function restart() {
    clearTimeout(timer);
    generation += 1;
    last = "";
    box.textContent = "";
    status.textContent = gettext("Loading…");
    if (download) { download.href = query("&download=1"); }
    inflight = false;
    read();
  }

  pod.addEventListener("change", restart);
  if (previous) { previous.addEventListener("change", restart); }
  if (follow) { follow.addEventListener("change", function () { if (follow.checked) { read(); } else { clearTimeout(timer); } }); }
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") { schedule(); }
  });
  restart();
})();
