/* nnscope dashboard charts shared by the trace and bench pages: latency CDF and histogram
 * as inline SVG, a figure-table helper and the DOM/SVG element builders. Series are told
 * apart by colour (a categorical palette whose neighbours differ in hue and lightness) and
 * by dash pattern. The histograms of one figure share their x-range and bins (the CDF's
 * x-range too) and their count axis, so that they compare side by side. Defines
 * window.nnscopeCharts (loaded before the other scripts). */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf"];
  /* Stroke dash of series i: solid, dashed, dotted, in turn (neighbours never share one). */
  var DASHES = ["", "7 4", "2 3"];
  function color(i) { return PALETTE[i % PALETTE.length]; }
  function dash(i) { return DASHES[i % DASHES.length]; }

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

  /* A round tick step (1, 2, 2.5 or 5 times a power of ten) giving about ``count`` steps. */
  function niceStep(span, count) {
    var raw = Math.max(span, 1e-9) / count, power = Math.pow(10, Math.floor(Math.log10(raw)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (steps[i] * power >= raw) { return steps[i] * power; }
    }
    return 10 * power;
  }

  /* Tick label of ``value`` with the decimals its step needs (no 27.50 / 54.99). */
  function tickLabel(value, step) {
    var decimals = 0;
    while (decimals < 6 && Math.abs(Math.round(step * Math.pow(10, decimals)) -
                                    step * Math.pow(10, decimals)) > 1e-6) { decimals++; }
    return (Math.abs(value) < step / 1e6 ? 0 : value).toFixed(decimals);
  }

  /* Axes of a plot from 0 to a round maximum >= xmax; ticks on round steps, the axis title
   * below them, the plot's title (if any) above the plot area. */
  function frame(width, height, xmax, label, title, axisTitle) {
    var root = svg("svg", {"class": "plot", width: width, height: height, role: "img",
                           "aria-label": label});
    var step = niceStep(xmax, 4), top = title ? 22 : 8;
    var xend = Math.max(step, Math.ceil(xmax / step - 1e-9) * step);
    var left = 44, bottom = height - 34, right = width - 18;
    if (title) {
      root.appendChild(svg("text", {x: left, y: 12, "class": "series-label"}, title));
    }
    root.appendChild(svg("line", {x1: left, y1: bottom, x2: right, y2: bottom, "class": "axis"}));
    root.appendChild(svg("line", {x1: left, y1: top, x2: left, y2: bottom, "class": "axis"}));
    for (var i = 0; i * step <= xend + step * 1e-9; i++) {
      var x = left + (right - left) * i * step / xend;
      root.appendChild(svg("line", {x1: x, y1: bottom, x2: x, y2: bottom + 3, "class": "axis"}));
      root.appendChild(svg("text", {x: x, y: bottom + 17, "text-anchor": "middle", "class": "tick"},
                           tickLabel(i * step, step)));
    }
    root.appendChild(svg("text", {x: (left + right) / 2, y: height - 4, "text-anchor": "middle",
                                  "class": "axis-title"}, axisTitle || "latency per execution (ms)"));
    return {root: root, left: left, right: right, top: top, bottom: bottom, xmax: xend};
  }

  /* The largest sample of all distributions (the x-range they share). */
  function largest(dists) {
    return Math.max.apply(null, dists.map(function (d) { return d.n ? d.max : 0; }).concat([1e-9]));
  }

  /* A y-axis title, rotated, left of the plot area. */
  function yTitle(f, text) {
    var middle = (f.top + f.bottom) / 2;
    f.root.appendChild(svg("text", {x: 10, y: middle, "text-anchor": "middle", "class": "axis-title",
                                    transform: "rotate(-90 10 " + middle + ")"}, text));
  }

  /* CDF lines, one per distribution ({label, cdf: [[ms, fraction]...]}), up to xmax. */
  function cdf(dists, width, height, xmax) {
    var f = frame(width, height, xmax || largest(dists), "latency CDF");
    xmax = f.xmax;
    ["0", "0.5", "1"].forEach(function (q) {
      var yq = f.bottom - (f.bottom - f.top) * parseFloat(q);
      f.root.appendChild(svg("text", {x: f.left - 6, y: yq + 3, "text-anchor": "end", "class": "ytick"}, q));
    });
    yTitle(f, "fraction ≤ x");
    dists.forEach(function (d, i) {
      if (!d.n) { return; }
      var points = d.cdf.map(function (p) {
        return (f.left + (f.right - f.left) * p[0] / xmax).toFixed(1) + "," +
               (f.bottom - (f.bottom - f.top) * p[1]).toFixed(1);
      });
      var first = (f.left + (f.right - f.left) * d.cdf[0][0] / xmax).toFixed(1) + "," + f.bottom;
      var line = svg("polyline", {points: [first].concat(points).join(" "), fill: "none",
                                  stroke: color(i), "stroke-width": 2, "stroke-dasharray": dash(i),
                                  "class": "series", "data-label": d.label});
      line.appendChild(svg("title", {}, d.label + ": median " + ms(d.median) + " ms"));
      f.root.appendChild(line);
    });
    return f.root;
  }

  /* The largest bin count of all distributions. */
  function peakCount(dists) {
    return Math.max.apply(null, dists.map(function (d) {
      return Math.max.apply(null, d.hist.counts.concat([1]));
    }));
  }

  /* Histogram bars of one distribution ({hist: {edges, counts}}) with a count axis; xmax
   * and peak (the largest count) default to its own, a figure passes its shared ones. */
  function histogram(d, fill, width, height, xmax, peak) {
    var f = frame(width, height, xmax || (d.n ? d.max : 1), "latency histogram " + d.label, d.label);
    xmax = f.xmax;
    var ystep = Math.max(1, niceStep(peak || peakCount([d]), 3));
    /* At least two steps, so that a peak of one still reads on a scale (0, 1, 2). */
    var ymax = Math.max(2 * ystep, Math.ceil((peak || peakCount([d])) / ystep - 1e-9) * ystep);
    for (var k = 0; k * ystep <= ymax + 1e-9; k++) {
      var yk = f.bottom - (f.bottom - f.top) * k * ystep / ymax;
      f.root.appendChild(svg("line", {x1: f.left - 3, y1: yk, x2: f.left, y2: yk, "class": "axis"}));
      f.root.appendChild(svg("text", {x: f.left - 6, y: yk + 3, "text-anchor": "end", "class": "ytick"},
                             tickLabel(k * ystep, ystep)));
    }
    yTitle(f, "executions");
    d.hist.counts.forEach(function (count, i) {
      var x0 = f.left + (f.right - f.left) * d.hist.edges[i] / xmax;
      var x1 = f.left + (f.right - f.left) * d.hist.edges[i + 1] / xmax;
      var h = (f.bottom - f.top) * count / ymax;
      var bar = svg("rect", {x: x0, y: f.bottom - h, width: Math.max(x1 - x0 - 1, 1), height: h,
                             fill: fill, "class": "bar"});
      bar.appendChild(svg("title", {}, count + " in " + ms(d.hist.edges[i]) + "–" +
                                        ms(d.hist.edges[i + 1]) + " ms"));
      f.root.appendChild(bar);
    });
    return f.root;
  }

  /* One entry per series: its line (colour and dash) and label. */
  function legend(dists) {
    return el("div", {"class": "legend"}, dists.map(function (d, i) {
      var sample = svg("svg", {"class": "line-swatch", width: 26, height: 10});
      sample.appendChild(svg("line", {x1: 1, y1: 5, x2: 25, y2: 5, stroke: color(i), "stroke-width": 2.5,
                                      "stroke-dasharray": dash(i)}));
      return el("span", {"data-label": d.label}, [sample, d.label + " (n=" + d.n + ")"]);
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

  /* A CDF of all distributions, then one histogram each, on one x-range and count axis,
   * in rows of equal plots; returns the figure. */
  function distributionFigure(dists, width) {
    var figure = el("div", {"class": "dist"}), xmax = largest(dists), peak = peakCount(dists);
    figure.appendChild(legend(dists));
    figure.appendChild(el("div", {"class": "plots"}, [cdf(dists, Math.min(width, 1120), 260, xmax)]));
    var shown = dists.filter(function (d) { return d.n; }).length;
    var columns = Math.max(1, Math.min(shown, Math.floor((width + 12) / 352)));
    var each = Math.min(Math.floor((width + 12) / columns) - 12, 560);
    var row = el("div", {"class": "plots hists"});
    dists.forEach(function (d, i) {
      if (d.n) { row.appendChild(histogram(d, color(i), each, 170, xmax, peak)); }
    });
    figure.appendChild(row);
    return figure;
  }

  window.nnscopeCharts = {el: el, svg: svg, ms: ms, niceStep: niceStep, tickLabel: tickLabel, cdf: cdf, histogram: histogram,
                          statsTable: statsTable, distributionFigure: distributionFigure,
                          palette: PALETTE, dashes: DASHES};
}());
