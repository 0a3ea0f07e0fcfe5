/* The staff quality dashboard (staff/quality.html): plots the figures of memory.quality with Chart.js.
 *
 * The figures arrive as JSON in <script id="quality-data" type="application/json"> (Django's
 * json_script), never as inline script: the Content-Security-Policy allows this origin's files only.
 * Each <figure data-figure="NAME"> holds a <canvas>; once drawn, the figure gets
 * data-rendered="true" and data-points="N" (how many non-zero values it plots), which the browser
 * test reads. Chart.js is vendored under static/staff/vendor/chart.js/ (see its README.md).
 */
(function () {
  "use strict";

  // Okabe-Ito colours (distinguishable with the common colour-vision deficiencies), one per series key.
  var COLOURS = {
    memory: "#0072B2", fact: "#009E73", guideline: "#D55E00", preference: "#CC79A7",
    yield: "#0072B2", messages: "#BBBBBB",
    created: "#009E73", duplicates: "#E69F00",
    supersedes: "#0072B2", contradicts: "#D55E00", invalidated: "#000000",
    not_text: "#E69F00", unknown_type: "#56B4E9", no_source: "#CC79A7", repeated: "#009E73", review: "#D55E00"
  };

  // How each figure is drawn: the chart type, stacking, axis titles (counts get whole-number ticks; ratio:
  // the left axis is a ratio), and series drawn differently (kind/axis).
  var STYLES = {
    memories_by_type: { type: "line", yTitle: "memories stored" },
    extraction_yield: {
      type: "bar", ratio: true, yTitle: "memories per message", y1Title: "messages read",
      series: { yield: { type: "line", yAxisID: "y", order: 0 }, messages: { yAxisID: "y1", order: 1 } }
    },
    duplicates_skipped: { type: "bar", stacked: true, yTitle: "candidates" },
    relations: {
      type: "bar", yTitle: "relations / memories",
      series: { invalidated: { type: "line", order: 0 } }
    },
    review_queue_age: { type: "bar", stacked: true, yTitle: "memories awaiting review", xTitle: "waiting for" },
    rejected_reasons: { type: "bar", stacked: true, yTitle: "candidates rejected" }
  };

  function dataset(series, style) {
    var colour = COLOURS[series.key] || "#444444";
    var extra = (style.series && style.series[series.key]) || {};
    var line = (extra.type || style.type) === "line";
    var set = {
      label: series.label,
      data: series.data,
      borderColor: colour,
      backgroundColor: line ? colour : colour + "CC",
      borderWidth: line ? 2 : 1,
      pointRadius: line ? 2 : 0,
      spanGaps: false
    };
    Object.keys(extra).forEach(function (name) { set[name] = extra[name]; });
    return set;
  }

  function scales(style) {
    var out = {
      x: { stacked: !!style.stacked, title: { display: !!style.xTitle, text: style.xTitle || "" } },
      y: { stacked: !!style.stacked, beginAtZero: true, title: { display: true, text: style.yTitle },
           ticks: { precision: style.ratio ? undefined : 0 } }
    };
    if (style.y1Title) {
      out.y1 = { position: "right", beginAtZero: true, grid: { drawOnChartArea: false },
                 title: { display: true, text: style.y1Title }, ticks: { precision: 0 } };
    }
    return out;
  }

  function points(figure) {
    var n = 0;
    figure.series.forEach(function (s) {
      s.data.forEach(function (v) { if (typeof v === "number" && v !== 0) n += 1; });
    });
    return n;
  }

  function draw(box, name, figure) {
    var style = STYLES[name];
    var canvas = box.querySelector("canvas");
    if (!style || !canvas) return;
    new window.Chart(canvas, {
      type: style.type,
      data: { labels: figure.labels, datasets: figure.series.map(function (s) { return dataset(s, style); }) },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        plugins: { legend: { position: "bottom" } },
        scales: scales(style)
      }
    });
    box.setAttribute("data-points", String(points(figure)));
    box.setAttribute("data-rendered", "true");
  }

  function start() {
    var source = document.getElementById("quality-data");
    if (!source || !window.Chart) return;
    var figures = JSON.parse(source.textContent).figures;
    document.querySelectorAll("figure[data-figure]").forEach(function (box) {
      var name = box.getAttribute("data-figure");
      if (figures[name]) draw(box, name, figures[name]);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
