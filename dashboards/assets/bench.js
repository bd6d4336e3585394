/* nnscope bench page: lays out #nnscope-bench (per model x device latency, accuracy and
 * operation share; one CDF + histograms per model; stress outcomes). Sets
 * window.__nnscopeTest = {page: "bench", lanes: 0, results, plots, stress}. */
(function () {
  "use strict";
  var view = JSON.parse(document.getElementById("nnscope-bench").textContent);
  var C = window.nnscopeCharts, el = C.el, ms = C.ms;

  function fact(label, value) {
    return el("li", {}, [el("b", {}, [label]), " " + value]);
  }

  function facts() {
    var box = document.getElementById("bench-facts"), s = view.settings || {};
    if (view.created) { box.appendChild(fact("created", view.created)); }
    box.appendChild(fact("executions", String(s.executions) + " (+" + s.warmup + " warmup)"));
    if (s.duration_s !== null && s.duration_s !== undefined) {
      box.appendChild(fact("duration", s.duration_s + " s"));
    }
    box.appendChild(fact("burst", s.burst ? "yes" : "no"));
    Object.keys(view.host || {}).forEach(function (key) {
      var value = view.host[key];
      box.appendChild(fact(key, typeof value === "object" ? JSON.stringify(value) : String(value)));
    });
  }

  function badge(text) { return el("span", {"class": "outcome " + text}, [text]); }

  function cell(content, cls) {
    return el("td", cls ? {"class": cls} : {}, [content]);
  }

  function sci(value) {
    if (value === null || value === undefined) { return "n/a"; }
    return value === 0 ? "0" : Math.abs(value) < 1e-3 ? value.toExponential(2) : value.toPrecision(3);
  }

  var RESULT_HEAD = ["device", "status", "compile ms", "median", "p90", "p99", "mean", "std",
                     "n", "reference", "max |err|", "rel err", "accurate", "ops on device"];

  /* A .tflite benchmarked as the NNAPI delegate runs it (nnscope bench's default for one). */
  var DELEGATE_NOTE = " (delegate mode: each device as the NNAPI delegate's accelerator; " +
    "operators it does not take run on LiteRT's CPU)";

  function opsText(r) {
    return r.ops_total === null || r.ops_total === undefined ? "n/a" :
      r.ops_on_device + " / " + r.ops_total + (r.mode === "delegate" ? " delegated" : "") +
        (r.ops_share === null ? "" :
        " (" + (100 * r.ops_share).toFixed(0) + "%)");
  }

  /* The model-level verdict, as the CLI prints it: "yes (≤ 0.0001)" (MLTS: the error relative
   * to the output range, held to its output type's threshold). */
  function verdict(r) {
    var word = r.within_tolerance === true ? "yes" : r.within_tolerance === false ? "NO" : "n/a";
    if (word === "n/a" || r.threshold === null || r.threshold === undefined) { return word; }
    return word + " (" + (word === "yes" ? "≤ " : "> ") + Number(r.threshold.toPrecision(2)) + ")";
  }

  /* A measured row: every figure in its column. */
  function measuredRow(r) {
    var status = el("td", {}, [badge(r.status)]);
    var row = el("tr", {"data-status": r.status}, [
      cell(r.device), status, cell(ms(r.compile_ms)),
      cell(ms(r.latency.median)), cell(ms(r.latency.p90)), cell(ms(r.latency.p99)),
      cell(ms(r.latency.mean)), cell(ms(r.latency.std)), cell(String(r.samples)),
      cell(r.reference || "n/a"), cell(sci(r.max_abs_error)), cell(sci(r.relative_error)),
      cell(verdict(r), r.within_tolerance === false ? "bad" : ""), cell(opsText(r))]);
    if (r.error) { status.setAttribute("title", r.error); }
    if (r.mse !== null && r.mse !== undefined) { row.children[10].setAttribute("title", "MSE " + sci(r.mse)); }
    return row;
  }

  /* A row without figures (unsupported, error): one line, the reason across the figure
   * columns, cut with an ellipsis (the whole text in its tooltip). */
  function compactRow(r) {
    var reason = el("td", {"class": "reason", colspan: String(RESULT_HEAD.length - 3),
                           title: r.error || ""}, [r.error || "no latency measured"]);
    return el("tr", {"data-status": r.status, "class": "compact"}, [
      cell(r.device), el("td", {}, [badge(r.status)]), reason, cell(opsText(r))]);
  }

  function results() {
    var body = el("tbody"), model = null;
    view.results.forEach(function (r) {
      if (r.model !== model) {
        model = r.model;
        body.appendChild(el("tr", {"class": "group"}, [
          el("th", {colspan: String(RESULT_HEAD.length), scope: "rowgroup"},
             [model + (r.mode === "delegate" ? DELEGATE_NOTE : "")])]));
      }
      body.appendChild(r.samples || !r.error ? measuredRow(r) : compactRow(r));
    });
    var table = el("table", {"class": "mini bench-results"}, [
      el("thead", {}, [el("tr", {}, RESULT_HEAD.map(function (h) { return el("th", {}, [h]); }))]),
      body]);
    var box = document.getElementById("results-box");
    box.appendChild(el("p", {"class": "sub"}, ["Per model, each device: latency in ms per " +
      "execution; accuracy of the whole model against the reference outputs (rel err: the " +
      "largest error relative to the reference output's range, held to its output type's " +
      "threshold, as MLTS judges a model); the device's share of the model's operations. " +
      "Hover a cut reason for all of it."]));
    box.appendChild(el("div", {"class": "table-wrap"}, [table]));
  }

  function distributions() {
    var box = document.getElementById("dist-box");
    var any = false;
    view.models.forEach(function (m) {
      if (!m.distributions.length) { return; }
      any = true;
      box.appendChild(el("h3", {}, [m.model]));
      box.appendChild(C.distributionFigure(m.distributions, box.clientWidth || 900));
      box.appendChild(C.statsTable(m.distributions, "device (ms)"));
    });
    if (!any) { box.appendChild(el("p", {"class": "note"}, ["No latency samples in this report."])); }
  }

  function stress() {
    var box = document.getElementById("stress-box");
    if (!view.stress.length) {
      box.appendChild(el("p", {"class": "note"}, ["No stress cases in this report (run with --stress)."]));
      return;
    }
    box.appendChild(el("p", {}, Object.keys(view.stress_counts).map(function (k) {
      return el("span", {"class": "count"}, [badge(k), " " + view.stress_counts[k] + "  "]);
    })));
    var body = el("tbody");
    view.stress.forEach(function (c) {
      body.appendChild(el("tr", {"data-outcome": c.outcome}, [
        cell(c.case), cell(c.model), cell(c.device), el("td", {}, [badge(c.outcome)]),
        cell(c.seconds === null ? "n/a" : c.seconds.toFixed(2) + " s"), cell(c.detail, "detail")]));
    });
    box.appendChild(el("table", {"class": "mini stress"}, [el("thead", {}, [el("tr", {},
      ["case", "model", "device", "outcome", "time", "detail"].map(function (h) {
        return el("th", {}, [h]);
      }))]), body]));
  }

  facts();
  results();
  distributions();
  stress();
  window.__nnscopeTest = {page: "bench", lanes: 0, results: view.results.length,
                          plots: document.querySelectorAll("svg.plot").length,
                          stress: view.stress.length};
  document.body.setAttribute("data-rendered", "true");
}());
