// The console's pages: live refresh of the deliveries list, and the DLQ's select / dry run /
// confirm / replay flow with its progress bar. Every value from the server is put in the page
// with textContent (never as HTML), except the deliveries rows, which the server renders and
// escapes itself.
(function () {
  "use strict";

  const token = document.querySelector('meta[name="console-token"]').content;
  const page = document.body.dataset.page;

  function postJson(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Console-Token": token },
      body: JSON.stringify(body),
    }).then((r) => r.json().then((doc) => ({ status: r.status, doc: doc })));
  }

  function cell(row, text, cls) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "-" : String(text);
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  // -- deliveries: the newest page refreshes itself -------------------------------------------
  if (page === "deliveries") {
    const live = document.getElementById("live");
    const rows = document.getElementById("delivery-rows");
    const stamp = document.getElementById("refreshed");
    if (live && rows) {
      window.setInterval(function () {
        if (!live.checked || document.hidden) return;
        const url = new URL(window.location.href);
        url.searchParams.set("partial", "rows");
        fetch(url, { credentials: "same-origin" })
          .then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
          .then(function (html) {
            rows.innerHTML = html; // rendered and escaped by the server's templates
            stamp.textContent = "updated " + new Date().toISOString().replace("T", " ").replace("Z", " UTC");
            stamp.dataset.refreshes = String(Number(stamp.dataset.refreshes || 0) + 1);
          })
          .catch(function () {
            stamp.textContent = "refresh failed (is the stack running?)";
          });
      }, 3000);
    }
  }

  // -- dead-letter queue: select, dry run, confirm, replay, progress ---------------------------
  if (page === "dlq") {
    const picks = Array.from(document.querySelectorAll("input.pick"));
    const selectAll = document.getElementById("select-all");
    const dryButton = document.getElementById("dry-run");
    const replayButton = document.getElementById("replay");
    const confirmBox = document.getElementById("confirm");
    const count = document.getElementById("selection-count");
    const rateInput = document.getElementById("rate");
    const form = document.getElementById("replay-form");
    const job = document.getElementById("job");
    let running = false;
    let dryRunOf = null; // the selection the last finished dry run was made for

    function selection() {
      return picks
        .filter((p) => p.checked)
        .map((p) => [p.dataset.source, p.dataset.deliveryId]);
    }
    function key(sel) {
      return JSON.stringify(sel.map((p) => p.join("\u0000")).sort());
    }
    function rate() {
      const value = rateInput.value.trim();
      return value === "" ? null : Number(value);
    }
    function refresh() {
      const sel = selection();
      count.textContent = sel.length + " selected";
      dryButton.disabled = running || sel.length === 0;
      replayButton.disabled = running || sel.length === 0 || dryRunOf !== key(sel);
      replayButton.title = replayButton.disabled && sel.length
        ? "run a dry run of this selection first"
        : "";
      confirmBox.hidden = true;
    }

    if (form) {
      form.addEventListener("submit", (e) => e.preventDefault());
      picks.forEach((p) => p.addEventListener("change", refresh));
      selectAll.addEventListener("change", function () {
        picks.forEach((p) => (p.checked = selectAll.checked));
        refresh();
      });
      rateInput.addEventListener("input", () => (confirmBox.hidden = true));
      dryButton.addEventListener("click", () => start(true));
      replayButton.addEventListener("click", function () {
        document.getElementById("confirm-count").textContent = String(selection().length);
        document.getElementById("confirm-rate").textContent =
          rate() === null ? "no limit" : String(rate());
        confirmBox.hidden = false;
      });
      document.getElementById("cancel-replay").addEventListener("click", function () {
        confirmBox.hidden = true;
      });
      document.getElementById("confirm-replay").addEventListener("click", () => start(false));
      refresh();
    }

    function start(dryRun) {
      const sel = selection();
      if (!sel.length) return;
      running = true;
      refresh();
      job.hidden = false;
      document.getElementById("job-title").textContent = dryRun ? "Dry run" : "Replay";
      document.getElementById("job-error").hidden = true;
      document.getElementById("job-report").hidden = true;
      postJson("/api/replay", { deliveries: sel, dry_run: dryRun, rate_per_second: rate() })
        .then(function (answer) {
          if (answer.status !== 202) {
            fail(answer.doc.error || "refused (" + answer.status + ")");
            return;
          }
          poll(answer.doc.job.id, key(sel));
        })
        .catch((e) => fail(String(e)));
    }

    function fail(message) {
      running = false;
      const box = document.getElementById("job-error");
      box.textContent = message;
      box.hidden = false;
      refresh();
    }

    function poll(id, selectionKey) {
      fetch("/api/replay/" + encodeURIComponent(id), { credentials: "same-origin" })
        .then((r) => r.json())
        .then(function (doc) {
          const state = doc.job;
          render(state);
          if (state.state === "running") {
            window.setTimeout(() => poll(id, selectionKey), 300);
            return;
          }
          running = false;
          if (state.state === "failed") {
            fail(state.error || "the replay failed");
            return;
          }
          if (state.dry_run) dryRunOf = selectionKey;
          job.dataset.state = state.dry_run ? "dry-run-done" : "replay-done";
          refresh();
        })
        .catch((e) => fail(String(e)));
    }

    function render(state) {
      const bar = document.getElementById("progress");
      bar.max = Math.max(1, state.total);
      bar.value = state.done;
      const verb = state.dry_run ? "would replay" : "replayed";
      document.getElementById("progress-text").textContent =
        verb + " " + state.done + " / " + state.total + " selected · examined " + state.examined +
        " · skipped " + state.skipped + " · failed " + state.failed + " · " +
        state.elapsed_seconds + " s" + (state.state === "running" ? " …" : "");
      const body = document.querySelector("#job-results tbody");
      body.replaceChildren();
      state.results.forEach(function (r) {
        const tr = document.createElement("tr");
        tr.dataset.outcome = r.outcome;
        cell(tr, r.source);
        cell(tr, r.delivery_id, "id");
        cell(tr, r.outcome);
        cell(tr, r.reason);
        body.appendChild(tr);
      });
      state.not_found.forEach(function (r) {
        const tr = document.createElement("tr");
        tr.dataset.outcome = "not_found";
        cell(tr, r.source);
        cell(tr, r.delivery_id, "id");
        cell(tr, "not found");
        cell(tr, "no longer in the DLQ (replayed or deleted since the page was loaded?)");
        body.appendChild(tr);
      });
      if (state.report) {
        const table = document.querySelector("#report tbody");
        table.replaceChildren();
        Object.entries(state.report).forEach(function ([name, value]) {
          if (name === "would_replay") return;
          const tr = document.createElement("tr");
          cell(tr, name);
          cell(tr, typeof value === "object" && value !== null ? JSON.stringify(value) : value);
          table.appendChild(tr);
        });
        document.getElementById("job-report").hidden = false;
      }
    }
  }
})();
