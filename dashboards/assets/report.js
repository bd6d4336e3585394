/* nnscope dashboard: lays out the view model embedded in #nnscope-view (no libraries).
 * Python formats every number; this script builds the tables, draws the stacked bar
 * charts as inline SVG, wires the self/total toggle (also "#total" in the URL), then
 * sets body[data-rendered]. */
(function () {
  "use strict";
  var el = window.nnscopeCharts.el, svg = window.nnscopeCharts.svg;  // charts.js, loaded first
  var view = JSON.parse(document.getElementById("nnscope-view").textContent);
  var layerName = {};
  view.layers.forEach(function (pair) { layerName[pair[0]] = pair[1]; });

  function fmt(ms) {
    return ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);
  }

  function swatch(layer) { return el("span", {"class": "swatch " + layer}); }

  function legend() {
    return el("div", {"class": "legend"}, view.layers.map(function (pair) {
      return el("span", {}, [swatch(pair[0]), pair[1]]);
    }));
  }

  function headRows(table) {
    var rows = [];
    var groups = table.groups || (table.group ? [table.group] : []);
    if (groups.length) {
      var group = el("tr", {"class": "group"}, [el("th")]);
      var at = 0;
      groups.forEach(function (g) {
        if (g[1] > at) { group.appendChild(el("th", {colspan: g[1] - at})); }
        group.appendChild(el("th", {colspan: g[2]}, [g[0]]));
        at = g[1] + g[2];
      });
      if (at < table.columns.length) {
        group.appendChild(el("th", {colspan: table.columns.length - at}));
      }
      rows.push(group);
    }
    rows.push(el("tr", {}, [el("th", {"class": "layer"}, ["Layer"])].concat(
      table.columns.map(function (c) { return el("th", {scope: "col"}, [c]); }))));
    return rows;
  }

  function bodyCell(c, column) {
    var td = el("td", {"class": c.k + " col-" + column.replace(/[^A-Za-z]/g, "")}, [c.t]);
    if (c.s) { td.appendChild(el("span", {"class": "star", title: "ignores n/a values"}, ["*"])); }
    if (/%$/.test(c.t) && c.t !== "100%") {
      td.className += " pct";
      td.style.setProperty("--pct", Math.max(0, Math.min(100, parseFloat(c.t))) + "%");
    }
    return td;
  }

  function renderTable(table, kind, mode) {
    var body = el("tbody", {}, table.rows.map(function (row) {
      var th = el("th", {"class": "layer", scope: "row"}, [swatch(row.layer), row.label]);
      var tr = el("tr", {"class": row.total ? "total" : "", "data-layer": row.layer}, [th]);
      row.cells.forEach(function (c, i) {
        var td = bodyCell(c, table.columns[i]);
        td.style.setProperty("--bar", "var(--" + row.layer + ")");
        tr.appendChild(td);
      });
      return tr;
    }));
    var label = view.modes.filter(function (m) { return m[0] === mode; })[0][1];
    return el("div", {"class": "table-wrap mode-" + mode}, [
      el("table", {"class": "summary", "data-kind": kind, "data-mode": mode},
         [el("caption", {}, [label + ", ms wall-clock"]), el("thead", {}, headRows(table)), body])]);
  }

  function drawChart(figure) {
    var series = figure._series, kind = figure.getAttribute("data-kind");
    var width = Math.max(figure.clientWidth || 800, 320), row = 30, bar = 18;
    var left = Math.min(150, width * 0.3), right = 80;
    var max = Math.max.apply(null, series.map(function (s) {
      return s.segments.reduce(function (a, g) { return a + g.value; }, 0);
    }).concat([1e-9]));
    var scale = (width - left - right) / max;
    var root = svg("svg", {"class": "chart", "data-kind": kind, role: "img", width: width,
                           height: series.length * row + 8, "aria-label": figure.title});
    series.forEach(function (s, i) {
      var y = i * row + 4, x = left, sum = 0;
      root.appendChild(svg("text", {x: 0, y: y + bar - 4}, s.label));
      root.appendChild(svg("rect", {"class": "track", x: left, y: y, rx: 4,
                                    width: width - left - right, height: bar}));
      s.segments.forEach(function (g) {
        if (g.value <= 0) { return; }
        var w = Math.max(g.value * scale, 1.5);
        var rect = svg("rect", {"class": "seg " + g.layer, x: x, y: y, width: w, height: bar,
                                "data-layer": g.layer, "data-value": g.value});
        var share = s.total > 0 ? " (" + (100 * g.value / s.total).toFixed(1) + "%)" : "";
        rect.appendChild(svg("title", {}, layerName[g.layer] + " · " + s.label + ": " +
                                          fmt(g.value) + " ms" + share));
        root.appendChild(rect);
        x += w; sum += g.value;
      });
      root.appendChild(svg("text", {"class": "value", x: Math.min(x, width - right) + 8,
                                    y: y + bar - 4}, sum > 0 ? fmt(sum) + " ms" : "—"));
    });
    figure.replaceChildren(root);
  }

  function chart(series, kind, caption) {
    var figure = el("figure", {"class": "chart-box", "data-kind": kind, title: caption});
    figure._series = series;
    return figure;
  }

  function card(value, label) {
    return el("div", {"class": "card"}, [el("div", {"class": "value"}, [value]),
                                         el("div", {"class": "label"}, [label])]);
  }

  function cards(run) {
    var counts = run.counts;
    var execs = run.both ? counts.PWU + " + " + counts.PBM : String(counts.PO);
    var total = run.tables.self.rows[run.tables.self.rows.length - 1].cells;
    return el("div", {"class": "cards"}, [
      card(execs, run.both ? "executions (warmup + benchmark)" : "executions"),
      card(run.ms_per_execution + " ms", run.both ? "per benchmark execution (mean of " + counts.PBM + ")"
                                                 : "per execution (mean of " + counts.PO + ")"),
      card(total[2].t + " ms", "compilation (self, all layers)"),
      card(total[total.length - 1].t + " ms", "total wall-clock (the run's Total column)")]);
  }

  function tables(run, key, kind) {
    return view.modes.map(function (m) { return renderTable(run[key][m[0]], kind, m[0]); });
  }

  function renderRun(run, index) {
    var parts = [
      el("div", {"class": "run-head"}, [el("h2", {}, [run.title]),
                                        el("span", {"class": "badge"}, [
                                          "run " + (index + 1) + " of " + view.runs.length]),
                                        el("span", {"class": "mono"}, [run.mark])]),
      cards(run),
      el("div", {"class": "grid2"}, [
        el("div", {}, [el("h3", {}, ["Where did the time go (self-times by phase)"]),
                       el("p", {"class": "sub chart-sum", "data-sum": run.chart_sum}, [
                         "The phases add up to " + run.chart_sum + " ms, time on several threads " +
                         "at once counted on each; the run's wall-clock is " +
                         run.tables.self.rows[run.tables.self.rows.length - 1].cells.slice(-1)[0].t +
                         " ms."]),
                       chart(run.chart, "phases", "self-time per phase and layer")]),
        el("div", {}, [el("h3", {}, ["Execution, ms per execution"]),
                       chart(run.execution_chart, "execution", "execution time per layer")])]),
      el("h3", {}, ["NNAPI timing summary"])]
      .concat(tables(run, "tables", "all"))
      .concat([el("p", {"class": "footnote"}, [
        "* totals ignore missing (n/a) values and are not necessarily consistent with the rest."]),
        el("h3", {}, [(run.both ? "Benchmark" : "Execution") + ", per execution"])])
      .concat(tables(run, "per_execution", "per-execution"));
    if (run.both) {
      parts.push(el("h3", {}, ["Warmup and benchmark"]));
      parts = parts.concat(tables(run, "warmup_benchmark", "warmup-benchmark"));
    }
    return el("section", {"class": "run", id: "run-" + (index + 1)}, parts);
  }

  function setMode(mode) {
    document.body.setAttribute("data-mode", mode);
    if (history.replaceState) { history.replaceState(null, "", "#" + mode); }
    document.querySelectorAll(".toggle button").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-mode") === mode));
    });
  }

  function toggle() {
    var box = document.getElementById("mode-toggle");
    view.modes.forEach(function (m) {
      var button = el("button", {type: "button", "data-mode": m[0]}, [m[1]]);
      button.addEventListener("click", function () { setMode(m[0]); });
      box.appendChild(button);
    });
  }

  var runs = document.getElementById("runs");
  runs.appendChild(legend());
  if (!view.runs.length) {
    runs.appendChild(el("p", {"class": "empty"}, ["No complete run in this trace."]));
  }
  view.runs.forEach(function (run, i) { runs.appendChild(renderRun(run, i)); });
  function drawAll() {
    document.querySelectorAll("figure.chart-box").forEach(drawChart);
  }
  drawAll();
  var pending = null;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(drawAll, 100);
  });
  toggle();
  setMode(location.hash === "#total" ? "total" : "self");
  document.body.setAttribute("data-rendered", "true");
}());
