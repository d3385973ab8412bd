// hg serve: live node states on a run's page, by server-sent events.
// Without script the page is whole; it only does not change by itself.
// Every value from the server is set as text or as one of the known
// state classes, never as markup.
(function () {
  "use strict";
  var known = ["pending", "ready", "active", "concluded", "done", "blocked", "failed",
    "deleted", "rewritten", "unknown", "running", "halted", "cancelled", "interrupted"];
  function stateClass(s) { return known.indexOf(s) >= 0 ? "s-" + s : "s-other"; }
  function setState(el, state) {
    var cls = el.getAttribute("class") || "";
    cls = cls.split(/\s+/).filter(function (c) { return c.indexOf("s-") !== 0; });
    cls.push(stateClass(state));
    el.setAttribute("class", cls.join(" "));
  }
  function start() {
    var run = document.getElementById("run");
    if (!run || !run.dataset.live || !window.EventSource) { return; }
    var byNode = Object.create(null); // a node may be named "constructor"
    document.querySelectorAll("[data-node]").forEach(function (el) {
      var n = el.getAttribute("data-node");
      (byNode[n] = byNode[n] || []).push(el);
    });
    var stateCells = Object.create(null);
    document.querySelectorAll("[data-state-of]").forEach(function (el) {
      stateCells[el.getAttribute("data-state-of")] = el;
    });
    var status = document.getElementById("run-status");
    var live = document.getElementById("live");
    var es = new EventSource(run.dataset.live);
    es.addEventListener("state", function (ev) {
      var msg = JSON.parse(ev.data);
      Object.keys(msg.nodes || {}).forEach(function (n) {
        var st = msg.nodes[n];
        (byNode[n] || []).forEach(function (el) {
          if (el.tagName.toLowerCase() !== "tr") { setState(el, st); }
          var t = el.querySelector("title");
          if (t) { t.textContent = n + ": " + st; }
        });
        var cell = stateCells[n];
        if (cell) { cell.textContent = st; setState(cell, st); }
      });
      if (status && msg.status) { status.textContent = msg.status; setState(status, msg.status); }
    });
    es.addEventListener("end", function () {
      es.close();
      if (live) { live.textContent = "ended: reload for verdicts"; live.className = "live ended"; }
    });
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED && live) { live.textContent = "disconnected"; }
    };
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else { start(); }
})();
