/* Live extraction progress on the staff thread page.
 *
 * Opens the thread's WebSocket (/ws/threads/<id>/extraction/, authenticated
 * by the staff session cookie) and writes each event into
 * #extraction-progress: data-state (queued, running, finished, failed; a job
 * retrying after an unreachable LLM, or a failed range re-run, shows as queued), a
 * one-line status and a short event log. When a job finishes, the
 * conversation, the memories and the stored extraction state are reloaded
 * with htmx. Without this script the page still shows the stored state.
 * A refusal (close code 4401, 4403 or 4404) is shown and not retried
 * (data-socket="refused"); any other close reconnects with backoff.
 */
(function () {
  "use strict";
  var section = document.getElementById("extraction-progress");
  if (!section || !("WebSocket" in window)) return;
  var job = { created: 0, linked: 0, step: 0, steps: 0 };
  var delay = 1000;
  // Close codes of threads/consumers.py for a browser it refuses (session, not API key).
  var REFUSALS = { 4401: "not authorised: signed out, reload the page to log in", 4403: "not authorised: staff only",
                   4404: "no such thread" };

  function region() { return document.getElementById("extraction-progress"); }
  function part(role) { return region().querySelector('[data-role="' + role + '"]'); }

  function show(state, text) {
    var box = region();
    if (state) box.dataset.state = state;
    part("status").textContent = text;
    var log = part("log");
    var item = document.createElement("li");
    item.textContent = new Date().toLocaleTimeString() + " " + text;
    log.appendChild(item);
    while (log.children.length > 30) log.removeChild(log.firstChild);
  }

  function reload(url, selector) {
    // Each request has its region as source: htmx keeps one queued request per source element,
    // so requests sharing one (the body, by default) would drop each other.
    htmx.ajax("GET", url, { source: selector, target: selector, swap: "outerHTML" });
  }

  function refresh() {
    if (!window.htmx) return;
    reload(section.dataset.memoriesUrl, "#memories");
    reload(section.dataset.stateUrl, "#extraction-state");
    var timeline = document.getElementById("timeline");  // the messages that were extracted may be new here
    if (timeline && timeline.dataset.url) reload(timeline.dataset.url, "#timeline");
  }

  function running() {
    var text = "Running: job " + job.id;
    if (job.steps) text += ", step " + job.step + " of " + job.steps;
    return text + ", " + job.created + " memor" + (job.created === 1 ? "y" : "ies") + " created, " + job.linked + " linked";
  }

  function handle(event) {
    switch (event.event) {
      case "state":
        part("status").textContent = "Listening for extraction events (" + event.pending_messages + " pending message" +
          (event.pending_messages === 1 ? "" : "s") + ").";
        break;
      case "queued":
        job = { id: event.job_id, created: 0, linked: 0, step: 0, steps: 0 };
        show("queued", "Queued: job " + event.job_id + ", messages #" + event.from_seq + "–#" + event.to_seq);
        break;
      case "started":
        job = { id: event.job_id, created: 0, linked: 0, step: 0, steps: 0 };
        show("running", "Running: job " + event.job_id + ", messages #" + event.from_seq + "–#" + event.to_seq);
        break;
      case "progress":
        job.id = event.job_id; job.step = event.step; job.steps = event.steps;
        show("running", running());
        break;
      case "memory_created":
        job.created += 1;
        show("running", running());
        break;
      case "memory_linked":
        job.linked += 1;
        show("running", running());
        break;
      case "finished":
        show("finished", "Finished: job " + event.job_id + ", " + event.memories_created + " memor" +
          (event.memories_created === 1 ? "y" : "ies") + " created in " + Number(event.seconds).toFixed(1) + " s");
        refresh();
        break;
      case "failed":
        show("failed", "Failed (" + (event.failure || "permanent") + "): job " + event.job_id + ": " + event.reason);
        refresh();
        break;
      case "retrying":  // the LLM was unreachable: the range stays pending, the job retries after a backoff
        show("queued", "Waiting for the LLM: job " + event.job_id + ", messages #" + event.from_seq + "–#" +
          event.to_seq + ", retry in " + Math.round(Number(event.retry_in)) + " s (" + event.reason + ")");
        if (window.htmx) reload(section.dataset.stateUrl, "#extraction-state");
        break;
      case "rerun":
        show("queued", "Re-run queued: job " + event.job_id + ", messages #" + event.from_seq + "–#" + event.to_seq);
        break;
    }
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + section.dataset.socketPath);
    socket.onopen = function () { delay = 1000; region().dataset.socket = "open"; };
    socket.onmessage = function (message) { handle(JSON.parse(message.data)); };
    socket.onclose = function (close) {
      var refused = REFUSALS[close.code];
      region().dataset.socket = refused ? "refused" : "closed";
      if (refused) {  // the server accepted, then closed with its reason: retrying would not help
        part("status").textContent = "Live progress unavailable (" + refused + ").";
        return;
      }
      part("status").textContent = "Connection lost; reconnecting…";
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }

  connect();
})();
