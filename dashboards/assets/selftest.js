/* nnscope dashboard self-test, run only when the URL fragment held "selftest" at load
 * (browser tests and benchmarks; the head script records it): reads window.__nnscopeTest,
 * times a full redraw, zooms in by 4 and writes what it saw as JSON into a pre element
 * (id nnscope-selftest) for a --dump-dom reader. Errors caught since the page started
 * (window.__nnscopeErrors, set in the page head) are included. */
(function () {
  "use strict";
  if (!window.__nnscopeSelftest) { return; }
  var hook = window.__nnscopeTest || {}, out = {page: hook.page || null};
  function clickGraphNode(h) {
    var node = document.querySelector("#graph-box g.node.linked");
    if (!node) { return null; }
    node.dispatchEvent(new MouseEvent("click", {bubbles: true}));
    return {node: node.querySelector("title").textContent, selected: h.selected()};
  }
  function box(node) {
    var r = node.getBoundingClientRect();
    return {l: r.left, t: r.top, r: r.right, b: r.bottom, h: r.height};
  }
  function overlap(a, b) {
    return a.l < b.r - 0.5 && b.l < a.r - 0.5 && a.t < b.b - 0.5 && b.t < a.b - 0.5;
  }
  function all(root, selector) { return [].slice.call(root.querySelectorAll(selector)); }
  /* Per plot: its tick labels, axis titles, and every text that is clipped by the plot's
   * edge, overlaps another text or overlaps a bar. */
  function plots() {
    return all(document, "svg.plot").map(function (plot) {
      var edge = box(plot), texts = all(plot, "text"), bars = all(plot, "rect.bar").map(box);
      var found = {label: plot.getAttribute("aria-label"), clipped: [], overlaps: [], overBars: [],
                   figure: all(document, ".dist").indexOf(plot.closest(".dist")),
                   ticks: all(plot, "text.tick").map(function (t) { return t.textContent; }),
                   yticks: all(plot, "text.ytick").map(function (t) { return t.textContent; }),
                   series: all(plot, ".series").map(function (line) {
                     return {label: line.getAttribute("data-label"), stroke: line.getAttribute("stroke"),
                             dash: line.getAttribute("stroke-dasharray") || ""};
                   }),
                   axisTitles: all(plot, "text.axis-title").map(function (t) { return t.textContent; })};
      texts.forEach(function (t, i) {
        var a = box(t);
        if (a.l < edge.l - 0.5 || a.r > edge.r + 0.5 || a.t < edge.t - 0.5 || a.b > edge.b + 0.5) {
          found.clipped.push(t.textContent);
        }
        texts.slice(i + 1).forEach(function (u) {
          if (overlap(a, box(u))) { found.overlaps.push([t.textContent, u.textContent]); }
        });
        if (bars.some(function (b) { return overlap(a, b); })) { found.overBars.push(t.textContent); }
      });
      return found;
    });
  }
  /* Elements that stick out of their card (or hide behind a sideways scroll), and whether
   * the page itself scrolls sideways. The graph and timeline boxes scroll on purpose. */
  function overflow() {
    var out = [];
    all(document, "section.view, section.bench, section.run, .card").forEach(function (card) {
      var edge = box(card);
      all(card, "*").forEach(function (node) {
        if (node.closest("#graph-box, #timeline-box, svg") && node.tagName.toLowerCase() !== "svg") { return; }
        var r = box(node);
        if (r.r > edge.r + 1 && r.h > 0) {
          out.push({card: card.id || card.className, node: node.tagName + "." + node.className, over: r.r - edge.r});
        }
        if (node.scrollWidth > node.clientWidth + 1 && !node.closest("#graph-box, #timeline-box") &&
            getComputedStyle(node).overflowX !== "visible") {
          out.push({card: card.id || card.className, node: node.tagName + "." + node.className,
                    hidden: node.scrollWidth - node.clientWidth});
        }
      });
    });
    return {cards: out.slice(0, 20), page: document.documentElement.scrollWidth - window.innerWidth};
  }
  /* Height of each table row that has a data-status or data-outcome, by that value. */
  function rowHeights() {
    var out = {};
    all(document, "tr[data-status], tr[data-outcome]").forEach(function (tr) {
      var key = tr.getAttribute("data-status") || tr.getAttribute("data-outcome");
      (out[key] = out[key] || []).push(box(tr).h);
    });
    return out;
  }
  /* The individual-operations table: its rows, how many show, and the same after a click
   * on its "show all" button (clicked back afterwards). */
  function profileRows() {
    var rows = all(document, "table.profile.ops tbody tr"), more = document.getElementById("profile-more");
    function visible() { return rows.filter(function (tr) { return !tr.hidden; }).length; }
    var found = {all: rows.length, visible: visible(), button: more ? more.textContent : null,
                 devices: rows.map(function (tr) { return tr.querySelector("td.device").textContent; })};
    if (more) {
      more.click();
      found.visibleAfter = visible();
      found.buttonAfter = more.textContent;
      more.click();
    }
    return found;
  }
  function frameTime(h) {
    var start = performance.now();
    for (var i = 0; i < 5; i++) { h.draw(); }
    return (performance.now() - start) / 5;
  }
  try {
    out.lanes = hook.lanes;
    out.lanesDrawn = hook.lanesDrawn;
    out.spansDrawn = hook.spansDrawn;
    out.namesDrawn = hook.namesDrawn || [];
    out.plots = hook.plots;
    out.scriptsDoneMs = performance.now();
    if (hook.visibleRange) {
      out.frameMs = frameTime(hook);
      out.axisLabelsStart = hook.axisLabels;
      out.axisOverlapsStart = hook.axisOverlaps;
      out.rangeBefore = hook.visibleRange();
      out.rangeTextStart = document.getElementById("timeline-range").textContent;
      out.fold = hook.fold || null;
      if (out.fold) {  /* the opening view folds the start-up: unfold it, then fold it again */
        var button = document.getElementById("timeline-fold");
        out.foldNote = hook.foldNote;
        out.foldButton = button.hidden ? null : button.textContent;
        button.dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.rangeUnfolded = hook.visibleRange();
        out.foldNoteUnfolded = hook.foldNote;
        out.foldButtonUnfolded = button.textContent;
        button.dispatchEvent(new MouseEvent("click", {bubbles: true}));
        out.rangeRefolded = hook.visibleRange();
      }
      out.rangeAfter = hook.zoom(0.25);
      out.rangeText = document.getElementById("timeline-range").textContent;
      out.spansDrawnZoomed = hook.spansDrawn;
      out.frameMsZoomed = frameTime(hook);
      out.children = hook.select(hook.firstSpan(0, 0));
      out.selectedFirst = hook.selected();
      out.hitFirst = out.selectedFirst ? hook.hitTest(out.selectedFirst.index) : -1;
      out.axisLabels = hook.axisLabels;
      out.axisOverlaps = hook.axisOverlaps;
      out.graphClick = clickGraphNode(hook);
    }
    out.profileRows = profileRows();
    out.delegationRows = all(document, "table.delegation.operators tbody tr").length;
    out.delegationSummary = (document.getElementById("delegation-summary") || {}).textContent || null;
    out.plotChecks = plots();
    out.overflow = overflow();
    out.rowHeights = rowHeights();
    out.viewport = window.innerWidth;
    out.graphLinked = Number((document.getElementById("graph-box") || {getAttribute: function () { return 0; }})
      .getAttribute("data-linked") || 0);
  } catch (error) {
    (window.__nnscopeErrors = window.__nnscopeErrors || []).push(String(error));
  }
  out.errors = window.__nnscopeErrors || [];
  var pre = document.createElement("pre");
  pre.id = "nnscope-selftest";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}());
