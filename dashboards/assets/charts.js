/* nnscope dashboard charts shared by the trace and bench pages: latency CDF and histogram
 * as inline SVG, a figure-table helper and the DOM/SVG element builders. Defines
 * window.nnscopeCharts (loaded before the other scripts). */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var PALETTE = ["#3559e0", "#10b981", "#ef4444", "#f59e0b", "#8b5cf6", "#0ea5e9", "#db2777",
                 "#65a30d", "#64748b", "#b45309"];

  function svg(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function ms(value) {
    if (value === null || value === undefined) { return "n/a"; }
    return value >= 100 ? value.toFixed(1) : value >= 1 ? value.toFixed(2) : value.toFixed(3);
  }

  function frame(width, height, xmax, label) {
    var root = svg("svg", {"class": "plot", width: width, height: height, role: "img",
                           "aria-label": label});
    var left = 44, bottom = height - 24, right = width - 10;
    root.appendChild(svg("line", {x1: left, y1: bottom, x2: right, y2: bottom, "class": "axis"}));
    root.appendChild(svg("line", {x1: left, y1: 8, x2: left, y2: bottom, "class": "axis"}));
    for (var i = 0; i <= 4; i++) {
      var x = left + (right - left) * i / 4;
      root.appendChild(svg("text", {x: x, y: height - 8, "text-anchor": "middle"}, ms(xmax * i / 4)));
    }
    root.appendChild(svg("text", {x: right, y: height - 8 - 12, "text-anchor": "end",
                                  "class": "unit"}, "ms"));
    return {root: root, left: left, right: right, top: 8, bottom: bottom};
  }

  /* CDF lines, one per distribution ({label, cdf: [[ms, fraction]...]}). */
  function cdf(dists, width, height) {
    var xmax = Math.max.apply(null, dists.map(function (d) { return d.n ? d.max : 0; }).concat([1e-9]));
    var f = frame(width, height, xmax, "latency CDF");
    ["0", "0.5", "1"].forEach(function (q) {
      var yq = f.bottom - (f.bottom - f.top) * parseFloat(q);
      f.root.appendChild(svg("text", {x: f.left - 6, y: yq + 4, "text-anchor": "end"}, q));
    });
    dists.forEach(function (d, i) {
      if (!d.n) { return; }
      var points = d.cdf.map(function (p) {
        return (f.left + (f.right - f.left) * p[0] / xmax).toFixed(1) + "," +
               (f.bottom - (f.bottom - f.top) * p[1]).toFixed(1);
      });
      var first = (f.left + (f.right - f.left) * d.cdf[0][0] / xmax).toFixed(1) + "," + f.bottom;
      var line = svg("polyline", {points: [first].concat(points).join(" "), fill: "none",
                                  stroke: PALETTE[i % PALETTE.length], "stroke-width": 2,
                                  "class": "series", "data-label": d.label});
      line.appendChild(svg("title", {}, d.label + ": median " + ms(d.median) + " ms"));
      f.root.appendChild(line);
    });
    return f.root;
  }

  /* Histogram bars of one distribution ({hist: {edges, counts}}). */
  function histogram(d, color, width, height) {
    var xmax = d.n ? d.max : 1, f = frame(width, height, xmax, "latency histogram " + d.label);
    var peak = Math.max.apply(null, d.hist.counts.concat([1]));
    f.root.appendChild(svg("text", {x: f.left + 4, y: f.top + 8, "class": "series-label"}, d.label));
    d.hist.counts.forEach(function (count, i) {
      var x0 = f.left + (f.right - f.left) * d.hist.edges[i] / xmax;
      var x1 = f.left + (f.right - f.left) * d.hist.edges[i + 1] / xmax;
      var h = (f.bottom - f.top) * count / peak;
      var bar = svg("rect", {x: x0, y: f.bottom - h, width: Math.max(x1 - x0 - 1, 1), height: h,
                             fill: color, "class": "bar"});
      bar.appendChild(svg("title", {}, count + " in " + ms(d.hist.edges[i]) + "–" +
                                        ms(d.hist.edges[i + 1]) + " ms"));
      f.root.appendChild(bar);
    });
    return f.root;
  }

  function legend(dists) {
    return el("div", {"class": "legend"}, dists.map(function (d, i) {
      var sw = el("span", {"class": "swatch"});
      sw.style.background = PALETTE[i % PALETTE.length];
      return el("span", {}, [sw, d.label + " (n=" + d.n + ")"]);
    }));
  }

  function statsTable(dists, firstColumn) {
    var head = [firstColumn, "n", "median", "p90", "p99", "mean", "std", "min", "max"];
    var table = el("table", {"class": "mini stats"}, [el("thead", {}, [el("tr", {},
      head.map(function (h) { return el("th", {}, [h]); }))])]);
    var body = el("tbody");
    dists.forEach(function (d) {
      body.appendChild(el("tr", {}, [d.label, String(d.n)].concat(
        ["median", "p90", "p99", "mean", "std", "min", "max"].map(function (k) {
          return d.n ? ms(d[k]) : "n/a";
        })).map(function (t) { return el("td", {}, [t]); })));
    });
    table.appendChild(body);
    return table;
  }

  /* A CDF of all distributions plus one histogram each; returns the figure. */
  function distributionFigure(dists, width) {
    var figure = el("div", {"class": "dist"});
    figure.appendChild(legend(dists));
    var row = el("div", {"class": "plots"});
    row.appendChild(cdf(dists, Math.min(width, 560), 240));
    dists.forEach(function (d, i) {
      if (d.n) { row.appendChild(histogram(d, PALETTE[i % PALETTE.length], 280, 160)); }
    });
    figure.appendChild(row);
    return figure;
  }

  window.nnscopeCharts = {el: el, svg: svg, ms: ms, cdf: cdf, histogram: histogram,
                          statsTable: statsTable, distributionFigure: distributionFigure,
                          palette: PALETTE};
}());
