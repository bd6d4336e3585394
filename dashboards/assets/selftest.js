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
  function frameTime(h) {
    var start = performance.now();
    for (var i = 0; i < 5; i++) { h.draw(); }
    return (performance.now() - start) / 5;
  }
  try {
    out.lanes = hook.lanes;
    out.lanesDrawn = hook.lanesDrawn;
    out.spansDrawn = hook.spansDrawn;
    out.plots = hook.plots;
    out.scriptsDoneMs = performance.now();
    if (hook.visibleRange) {
      out.frameMs = frameTime(hook);
      out.rangeBefore = hook.visibleRange();
      out.rangeAfter = hook.zoom(0.25);
      out.spansDrawnZoomed = hook.spansDrawn;
      out.frameMsZoomed = frameTime(hook);
      out.children = hook.select(hook.firstSpan(0, 0));
      out.selectedFirst = hook.selected();
      out.hitFirst = out.selectedFirst ? hook.hitTest(out.selectedFirst.index) : -1;
      out.graphClick = clickGraphNode(hook);
    }
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
