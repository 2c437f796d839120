// Switchboard operator board: confirm dialogs, copy buttons, auto-submitting filters
// and live updates. Plain JavaScript, no build step, no inline handlers (the CSP
// allows only this file).
"use strict";

(function () {
  // A live swap replaces the nodes under the pointer: a click whose mousedown and
  // mouseup land on different nodes is no click at all. So swaps are held while a
  // pointer is down, a confirm dialog is open or a form is on its way, and applied
  // after. A pointer held longer than holdLimit (one that never came up) holds
  // nothing.
  var pressed = 0, confirming = false, submitting = 0;
  var holdLimit = 10000;
  var heldSwaps = new Map(); // element → fragment HTML, waiting for the hold to end
  function held() {
    var now = Date.now();
    return confirming || (pressed && now - pressed < holdLimit) || (submitting && now - submitting < 5000);
  }
  function release() {
    if (held() || !heldSwaps.size) return;
    // After the click this release belongs to has been dispatched.
    setTimeout(function () {
      if (held()) return;
      var swaps = Array.from(heldSwaps);
      heldSwaps.clear();
      swaps.forEach(function (s) { swap(s[0], s[1]); });
    }, 0);
  }
  document.addEventListener("pointerdown", function () { pressed = Date.now(); }, true);
  ["pointerup", "pointercancel"].forEach(function (type) {
    document.addEventListener(type, function () { pressed = 0; release(); }, true);
  });
  window.addEventListener("blur", function () { pressed = 0; release(); });
  // A submission that stays on the page (a download, a failed navigation)
  // lets swaps through again after a while.
  setInterval(release, 1000);

  // Forms with data-confirm ask before they submit. Live updates wait while the
  // dialog is open and while the submission leaves (see held below).
  document.addEventListener("submit", function (e) {
    var form = e.target;
    var msg = form.getAttribute && form.getAttribute("data-confirm");
    submitting = Date.now();
    if (msg) {
      confirming = true;
      try {
        if (!window.confirm(msg)) { e.preventDefault(); }
      } finally {
        confirming = false;
      }
    }
    if (e.defaultPrevented) { submitting = 0; release(); }
  });

  // A form that mints a secret submits once: a double click would act twice.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (e.defaultPrevented || !form.querySelector || !form.querySelector('input[name="once"]')) {
      return;
    }
    window.setTimeout(function () {
      form.querySelectorAll('button[type="submit"]').forEach(function (b) { b.disabled = true; });
    }, 0);
  });

  // <select data-autosubmit> submits its form on change.
  document.addEventListener("change", function (e) {
    var el = e.target;
    if (el.matches && el.matches("select[data-autosubmit]") && el.form) {
      el.form.requestSubmit ? el.form.requestSubmit() : el.form.submit();
    }
  });

  // <button data-copy="#id"> copies that element's text.
  document.addEventListener("click", function (e) {
    var btn = e.target.closest && e.target.closest("[data-copy]");
    if (!btn) return;
    var src = document.querySelector(btn.getAttribute("data-copy"));
    if (!src) return;
    var text = src.textContent;
    var done = function () {
      var label = btn.textContent;
      btn.textContent = "Copied";
      btn.classList.add("copied");
      setTimeout(function () { btn.textContent = label; btn.classList.remove("copied"); }, 1600);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { selectText(src); });
    } else {
      // Plain-HTTP boards (a Pi on the LAN) have no clipboard API: select the text
      // so one Ctrl-C copies it.
      selectText(src);
    }
  });

  function selectText(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }

  // A row that scrolls sideways (the nav and the queue chips on a phone) fades out
  // at the edge where more of it is hidden, so that it reads as scrollable.
  function scrollHints() {
    document.querySelectorAll(".nav, .glance-list").forEach(function (el) {
      var more = el.scrollWidth - el.clientWidth;
      el.classList.toggle("more-right", more > 1 && el.scrollLeft < more - 1);
      el.classList.toggle("more-left", more > 1 && el.scrollLeft > 1);
    });
  }
  document.addEventListener("scroll", function (e) {
    if (e.target.matches && e.target.matches(".nav, .glance-list")) scrollHints();
  }, true);
  window.addEventListener("resize", scrollHints);
  // On a narrow screen the tab of the page shown is scrolled into view.
  var current = document.querySelector(".nav a[aria-current=\"page\"]");
  if (current && current.scrollIntoView) current.scrollIntoView({ block: "nearest", inline: "nearest" });
  scrollHints();

  // Live updates. The server sends a "todo" event on every todo change, naming the
  // todo, its queue, its new state and the state it left; every element with
  // data-live-src that the change can move is then refetched (at most a few times a
  // second) and swapped in. Elements with data-live-todo refresh only for their own
  // todo; data-live-rows, only for changes on their data-live-queue and
  // data-live-state (empty: any); data-live-timed, never (only on the timer below);
  // the rest (counts) for any change of state.
  var streamURL = document.body.getAttribute("data-live");
  if (!streamURL || !window.EventSource) return;

  var status = document.getElementById("live-status");
  var pending = new Set();
  var timer = null;
  var inflight = new Map();
  var focusHeld = new Set();

  function setStatus(state) {
    if (!status) return;
    status.classList.toggle("on", state === "on");
    status.classList.toggle("off", state === "off");
    status.textContent = { on: "live", off: "reconnecting", paused: "paused" }[state];
    status.title = {
      on: "Live: updates appear as they happen",
      off: "Lost the live connection; reconnecting",
      paused: "Live updates pause while this tab is in the background"
    }[state];
  }

  // A hidden tab fetches nothing: it catches up when it is shown again.
  function schedule(els) {
    if (document.hidden) return;
    els.forEach(function (el) { pending.add(el); });
    if (timer) return;
    timer = setTimeout(flush, 250);
  }

  function flush() {
    timer = null;
    var els = Array.from(pending);
    pending.clear();
    els.forEach(refresh);
  }

  function refresh(el) {
    if (!el.isConnected) return;
    var url = el.getAttribute("data-live-src");
    if (inflight.has(el)) { inflight.get(el).abort(); }
    var ctl = new AbortController();
    inflight.set(el, ctl);
    fetch(url, { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin", signal: ctl.signal })
      .then(function (res) {
        if (res.status === 401) { window.location.reload(); return null; }
        return res.ok ? res.text() : null;
      })
      .then(function (html) {
        inflight.delete(el);
        if (html === null || html === undefined) return;
        if (held()) { heldSwaps.set(el, html); return; }
        swap(el, html);
      })
      .catch(function () { inflight.delete(el); });
  }

  function swap(el, html) {
    if (!el.isConnected) return;
    // Keep a focused control as the user left it: refresh once it loses focus.
    if (el.contains(document.activeElement) && document.activeElement.matches("input, textarea, select")) {
      focusHeld.add(el);
      return;
    }
    var before = new Set(Array.from(el.querySelectorAll("[data-todo-id]")).map(function (r) { return r.getAttribute("data-todo-id"); }));
    el.innerHTML = html;
    scrollHints();
    if (before.size || el.querySelector("[data-todo-id]")) {
      el.querySelectorAll("[data-todo-id]").forEach(function (r) {
        if (!before.has(r.getAttribute("data-todo-id"))) r.classList.add("flash-new");
      });
    }
  }
  document.addEventListener("focusout", function () {
    if (!focusHeld.size) return;
    var els = Array.from(focusHeld);
    focusHeld.clear();
    schedule(els);
  });

  function all() { return Array.from(document.querySelectorAll("[data-live-src]")); }

  // affects says whether change c can move what el shows.
  function affects(el, c) {
    if (c.id === undefined) return true; // unreadable: refresh everything
    // data-live-timed: refreshed on the 30-second timer alone (the charts).
    if (el.hasAttribute("data-live-timed")) return false;
    var only = el.getAttribute("data-live-todo");
    if (only !== null) return String(c.id) === only;
    var known = c.from !== undefined;
    if (el.hasAttribute("data-live-rows")) {
      var queue = el.getAttribute("data-live-queue"), state = el.getAttribute("data-live-state");
      if (queue && c.queue !== queue) return false;
      return !state || c.state === state || c.from === state || !known;
    }
    return !known || c.from !== c.state;
  }

  function onTodo(ev) {
    var change = {};
    try { change = JSON.parse(ev.data); } catch (e) { /* refresh everything */ }
    schedule(all().filter(function (el) { return affects(el, change); }));
  }

  // One event stream per visible tab. A browser opens at most 6 HTTP/1.1
  // connections to a host, and each stream holds one for good: with every tab
  // holding its stream, the seventh tab would never load. So a hidden tab (a tab in
  // the background, a minimised window) closes its stream, and when it is shown
  // again reopens it and refreshes what it shows once.
  var es = null;
  var stale = document.hidden; // rendered while hidden: refresh when the stream is up
  var retryTimer = null;
  function connect() {
    if (es || document.hidden) return;
    es = new EventSource(streamURL);
    es.addEventListener("ready", function () {
      setStatus("on");
      // After a reconnect, changes may have been missed: refresh everything.
      if (stale) schedule(all());
      stale = true;
    });
    es.addEventListener("todo", onTodo);
    es.onerror = function () {
      if (!es) return;
      setStatus("off");
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up (e.g. the session ended, 401): check and retry.
        es = null;
        clearTimeout(retryTimer);
        retryTimer = setTimeout(function () {
          if (document.hidden) return; // shown again, it reconnects
          fetch("/glance", { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin" })
            .then(function (res) { if (res.status === 401) window.location.reload(); else connect(); })
            .catch(function () { retryTimer = setTimeout(connect, 5000); });
        }, 3000);
      }
    };
  }
  function disconnect() {
    clearTimeout(retryTimer);
    if (es) { es.close(); es = null; }
  }
  if (document.hidden) setStatus("paused"); else connect();

  // Relative times ("ends in 4m") drift: refresh visible live parts every 30 s.
  setInterval(function () { schedule(all()); }, 30000);
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      disconnect();
      clearTimeout(timer);
      timer = null;
      pending.clear();
      setStatus("paused");
    } else {
      connect();
    }
  });
  window.addEventListener("pagehide", disconnect);
  window.addEventListener("pageshow", function (e) { if (e.persisted) connect(); });

})();
