// The Health page: queue counters, metric charts (uPlot, vendored) and alarms, refreshed every
// 10 s from /api/health. Values are put in the page with textContent.
(function () {
  "use strict";

  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
  const charts = {}; // chart key -> {plot, keys}

  function cell(row, text) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "-" : String(text);
    row.appendChild(td);
    return td;
  }

  function aligned(series) {
    // uPlot wants one x array: the union of the series' timestamps, gaps as null.
    const stamps = Array.from(new Set(series.flatMap((s) => s.t))).sort((a, b) => a - b);
    const index = new Map(stamps.map((t, i) => [t, i]));
    const data = [stamps];
    series.forEach(function (s) {
      const ys = new Array(stamps.length).fill(null);
      s.t.forEach((t, i) => (ys[index.get(t)] = s.v[i]));
      data.push(ys);
    });
    return data;
  }

  function chartBox(container, chart) {
    let box = document.getElementById("chart-" + chart.key);
    if (box) return box;
    box = document.createElement("section");
    box.className = "chart";
    box.id = "chart-" + chart.key;
    const title = document.createElement("h3");
    title.textContent = chart.title + " (" + chart.unit + ")";
    box.appendChild(title);
    const empty = document.createElement("p");
    empty.className = "hint no-data";
    empty.textContent = "no data points in this window";
    box.appendChild(empty);
    const plot = document.createElement("div");
    plot.className = "plot";
    box.appendChild(plot);
    container.appendChild(box);
    return box;
  }

  function drawChart(box, chart, series) {
    const points = series.reduce((n, s) => n + s.t.length, 0);
    box.dataset.points = String(points);
    box.querySelector(".no-data").hidden = points > 0;
    const target = box.querySelector(".plot");
    target.hidden = points === 0;
    if (!points) return;
    const keys = series.map((s) => s.key).join(",");
    const data = aligned(series);
    const existing = charts[chart.key];
    if (existing && existing.keys === keys) {
      existing.plot.setData(data);
      return;
    }
    if (existing) existing.plot.destroy();
    const options = {
      width: Math.max(280, box.clientWidth - 24),
      height: 220,
      scales: { x: { time: true } },
      series: [{}].concat(
        series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2 }))
      ),
      axes: [{}, { label: chart.unit }],
    };
    charts[chart.key] = { plot: new window.uPlot(options, data, target), keys: keys };
  }

  window.addEventListener("resize", function () {
    Object.entries(charts).forEach(function ([key, c]) {
      const box = document.getElementById("chart-" + key);
      if (box) c.plot.setSize({ width: Math.max(280, box.clientWidth - 24), height: 220 });
    });
  });

  function render(doc) {
    const queues = document.querySelector("#queues tbody");
    queues.replaceChildren();
    (doc.queues || []).forEach(function (q) {
      const tr = document.createElement("tr");
      tr.dataset.queue = q.queue;
      cell(tr, q.queue === "dlq" ? "dead-letter queue" : "main queue");
      cell(tr, q.depth).dataset.field = "depth";
      cell(tr, q.in_flight);
      cell(tr, q.delayed);
      cell(tr, q.oldest_age);
      cell(tr, q.name);
      queues.appendChild(tr);
    });
    const container = document.getElementById("charts");
    const boxes = (doc.charts || []).map((chart) => chartBox(container, chart)); // layout first
    (doc.charts || []).forEach(function (chart, i) {
      const series = Object.entries(doc.series || {})
        .filter(([, s]) => s.chart === chart.key && !s.hidden)
        .map(([key, s]) => Object.assign({ key: key }, s));
      drawChart(boxes[i], chart, series);
    });
    const alarms = document.querySelector("#alarms tbody");
    alarms.replaceChildren();
    (doc.alarms || []).forEach(function (a) {
      const tr = document.createElement("tr");
      tr.className = "state-" + a.state;
      cell(tr, a.name).title = a.description || "";
      cell(tr, a.state);
      cell(tr, a.since);
      cell(tr, a.reason);
      alarms.appendChild(tr);
    });
    if (!(doc.alarms || []).length) {
      const tr = document.createElement("tr");
      cell(tr, "no alarms found").colSpan = 4;
      alarms.appendChild(tr);
    }
    const notes = document.getElementById("health-notes");
    notes.replaceChildren();
    (doc.notes || []).forEach(function (n) {
      const li = document.createElement("li");
      li.textContent = n;
      notes.appendChild(li);
    });
    const errors = document.getElementById("health-errors");
    errors.textContent = (doc.errors || []).join(" · ");
    errors.hidden = !(doc.errors || []).length;
    const updated = document.getElementById("health-updated");
    updated.textContent = "updated " + new Date().toISOString().replace("T", " ").replace("Z", " UTC");
    updated.dataset.loaded = "1";
  }

  function load() {
    fetch("/api/health", { credentials: "same-origin" })
      .then((r) => r.json())
      .then(render)
      .catch(function (e) {
        const errors = document.getElementById("health-errors");
        errors.textContent = "cannot load: " + e;
        errors.hidden = false;
      });
  }

  load();
  window.setInterval(function () {
    if (!document.hidden) load();
  }, 10000);
})();
