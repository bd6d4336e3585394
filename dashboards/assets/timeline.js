/* nnscope dashboard timeline: one canvas, one lane per process/thread, spans by layer.
 * Spans come as base64 typed arrays sorted by lane, depth and start (#nnscope-timeline),
 * so each (lane, depth) block is searched with binary search; spans narrower than a
 * pixel are merged into one pixel column (the search skips to the next column), which
 * keeps a frame cheap at any span count. Wheel zooms around the cursor, drag pans,
 * hover shows a span, click selects it and lists its children's self-times. When the
 * start-up before the first execution dwarfs the executions (data.fold), the view opens on
 * the executions with the start-up folded: a hatched edge and the axis say so, and the
 * "show start-up" button (or a click on the fold note) unfolds it.
 * window.__nnscopeTest exposes lanes, visibleRange(), zoom(f), spansDrawn, select(i),
 * selected(), firstSpan(lane, depth), fold, folded(), toggleFold() and namesDrawn (the names
 * of the spans the last frame drew). */
(function () {
  "use strict";
  var block = document.getElementById("nnscope-timeline");
  if (!block) { return; }
  var data = JSON.parse(block.textContent);
  var LEFT = 250, ROW = 16, PAD = 6, AXIS = 4, MAXROWS = 12, AXIS_HEIGHT = 20;
  var COLORS = {LA: "#3b82f6", LR: "#8b5cf6", LI: "#f59e0b", LD: "#10b981", LC: "#ef4444",
                LO: "#94a3b8"};

  function column(text, Type) {
    var bin = atob(text), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
    return new Type(bytes.buffer);
  }
  var start = column(data.columns.start, Float64Array);
  var dur = column(data.columns.dur, Float64Array);
  var laneOf = column(data.columns.lane, Uint16Array);
  var depthOf = column(data.columns.depth, Uint8Array);
  var nameOf = column(data.columns.name, Int32Array);
  var n = data.count, ends = new Float64Array(n);
  for (var k = 0; k < n; k++) { ends[k] = start[k] + dur[k]; }
  var layerCode = data.layers.map(function (pair) { return pair[0]; });
  var nameColor = data.name_layer.map(function (i) { return COLORS[layerCode[i]]; });

  /* blocks[lane][depth] = [first, end) in the sorted columns */
  var blocks = data.lanes.map(function () { return []; });
  for (var a = 0; a < n;) {
    var b = a;
    while (b < n && laneOf[b] === laneOf[a] && depthOf[b] === depthOf[a]) { b++; }
    blocks[laneOf[a]][depthOf[a]] = [a, b];
    a = b;
  }
  var laneTop = [], laneHeight = [], y = AXIS;
  data.lanes.forEach(function (lane) {
    laneTop.push(y);
    laneHeight.push(Math.max(Math.min(lane.depth, MAXROWS) * ROW + PAD * 2, 36));
    y += laneHeight[laneHeight.length - 1];
  });
  var totalHeight = y + 4;

  function lowerBound(arr, lo, hi, value) {
    while (lo < hi) { var mid = (lo + hi) >> 1; if (arr[mid] < value) { lo = mid + 1; } else { hi = mid; } }
    return lo;
  }

  var box = document.getElementById("timeline-box");
  var canvas = document.getElementById("timeline");
  var axisCanvas = document.getElementById("timeline-axis"), axisCtx = axisCanvas.getContext("2d");
  var tip = document.getElementById("timeline-tip");
  var ctx = canvas.getContext("2d");
  var span = Math.max(data.t1, 1);
  var fold = data.fold || null, folded = !!fold;
  var FOLD_EDGE = 8;
  function home() { return folded ? [fold.start, fold.end] : [-span * 0.01, span * 1.01]; }
  var view0 = home()[0], view1 = home()[1], width = 800, selected = -1;
  var state = {spansDrawn: 0, lanesDrawn: 0, frames: 0, axisLabels: [], named: new Uint8Array(data.names.length)};

  function resize() {
    width = Math.max(box.clientWidth || 800, 400);
    var dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(totalHeight * dpr);
    canvas.style.width = width + "px";
    canvas.style.height = totalHeight + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    axisCanvas.width = Math.round(width * dpr);
    axisCanvas.height = Math.round(AXIS_HEIGHT * dpr);
    axisCanvas.style.width = width + "px";
    axisCanvas.style.height = AXIS_HEIGHT + "px";
    axisCtx.setTransform(dpr, 0, 0, dpr, 0, 0);
  }

  function fmtTime(us) {
    var a = Math.abs(us);
    if (a >= 1e6) { return (us / 1e6).toFixed(3) + " s"; }
    if (a >= 1e3) { return (us / 1e3).toFixed(a >= 1e5 ? 1 : 3) + " ms"; }
    return us.toFixed(a >= 100 ? 0 : 2) + " µs";
  }

  /* The visible range in one unit, chosen from its length: "-0.036 s – 3.644 s (3.680 s shown)". */
  function rangeText(t0, t1) {
    var length = t1 - t0;
    var unit = length >= 1e5 ? [1e6, " s"] : length >= 100 ? [1e3, " ms"] : [1, " µs"];
    var digits = Math.min(3, Math.max(0, 3 - Math.floor(Math.log10(length / unit[0]))));
    function text(t) { return (t / unit[0]).toFixed(digits) + unit[1]; }
    return text(t0) + " – " + text(t1) + " (" + text(length) + " shown)";
  }

  /* One unit for every tick, chosen from the step: "0 s  0.5 s  1.0 s", never "0.00 µs". */
  function axisLabel(t, step) {
    var unit = step >= 1e5 ? [1e6, " s"] : step >= 100 ? [1e3, " ms"] : [1, " µs"];
    return window.nnscopeCharts.tickLabel(t / unit[0], step / unit[0]) + unit[1];
  }

  function drawAxis(scale) {
    var step = window.nnscopeCharts.niceStep(view1 - view0, 8);
    state.axisLabels = [];
    state.axisOverlaps = 0;
    var lastRight = -Infinity;
    axisCtx.clearRect(0, 0, width, AXIS_HEIGHT);
    axisCtx.fillStyle = "#667085"; axisCtx.font = "11px system-ui, sans-serif";
    axisCtx.strokeStyle = "rgba(127,127,127,0.5)";
    ctx.strokeStyle = "rgba(127,127,127,0.18)"; ctx.lineWidth = 1;
    for (var k = Math.ceil(view0 / step); k * step <= view1; k++) {
      var t = k * step;
      var x = LEFT + (t - view0) * scale;
      ctx.beginPath(); ctx.moveTo(x + 0.5, 0); ctx.lineTo(x + 0.5, totalHeight); ctx.stroke();
      axisCtx.beginPath(); axisCtx.moveTo(x + 0.5, 10); axisCtx.lineTo(x + 0.5, AXIS_HEIGHT);
      axisCtx.stroke();
      var label = axisLabel(t, step);
      state.axisLabels.push(label);
      if (x + 3 < lastRight + 4) { state.axisOverlaps++; }
      lastRight = x + 3 + axisCtx.measureText(label).width;
      axisCtx.fillText(label, x + 3, 12);
    }
  }

  /* The folded start-up: a hatched edge on the left of the plot and a note in the axis
   * strip, while the view starts after the trace's start. */
  function drawFold() {
    state.foldNote = "";
    if (!folded || view0 <= 0) { return; }
    ctx.save();
    ctx.fillStyle = "rgba(100, 116, 139, 0.35)";
    ctx.fillRect(LEFT, 0, FOLD_EDGE, totalHeight);
    ctx.strokeStyle = "rgba(71, 85, 105, 0.8)";
    for (var yy = -FOLD_EDGE; yy < totalHeight; yy += 6) {
      ctx.beginPath(); ctx.moveTo(LEFT, yy + FOLD_EDGE); ctx.lineTo(LEFT + FOLD_EDGE, yy); ctx.stroke();
    }
    ctx.restore();
    state.foldNote = "◀ " + fmtTime(fold.startup) + " start-up folded";
    axisCtx.save();
    axisCtx.clearRect(0, 0, LEFT, AXIS_HEIGHT);
    axisCtx.fillStyle = "#475569"; axisCtx.font = "600 11px system-ui, sans-serif";
    axisCtx.fillText(state.foldNote, 6, 13);
    axisCtx.restore();
  }

  function drawExecutions(scale) {
    ctx.strokeStyle = "rgba(220, 38, 38, 0.55)"; ctx.setLineDash([4, 3]);
    var last = -2;
    data.executions.forEach(function (ex) {
      [ex[0], ex[1]].forEach(function (t) {
        if (t < view0 || t > view1) { return; }
        var x = Math.round(LEFT + (t - view0) * scale);
        if (x - last < 3) { return; }
        last = x;
        ctx.beginPath(); ctx.moveTo(x + 0.5, 0); ctx.lineTo(x + 0.5, totalHeight); ctx.stroke();
      });
    });
    ctx.setLineDash([]);
  }

  function drawBlock(range, top, scale) {
    var i = lowerBound(ends, range[0], range[1], view0), hi = range[1], last = -1, drawn = 0;
    while (i < hi && start[i] <= view1) {
      var x0 = LEFT + (start[i] - view0) * scale, x1 = LEFT + (ends[i] - view0) * scale;
      ctx.fillStyle = nameColor[nameOf[i]];
      state.named[nameOf[i]] = 1;
      if (x1 - x0 < 1) {
        var px = Math.floor(x0);
        if (px > last) { ctx.fillRect(Math.max(px, LEFT), top, 1, ROW - 2); last = px; drawn++; }
        i = lowerBound(start, i + 1, hi, view0 + (px + 1 - LEFT) / scale);
        continue;
      }
      var left = Math.max(x0, LEFT), right = Math.min(x1, width);
      ctx.fillRect(left, top, Math.max(right - left - 0.5, 1), ROW - 2);
      if (right - left > 40) {
        ctx.save(); ctx.beginPath(); ctx.rect(left, top, right - left - 2, ROW); ctx.clip();
        ctx.fillStyle = "#fff"; ctx.fillText(data.names[nameOf[i]], left + 3, top + ROW - 5);
        ctx.restore();
      }
      last = Math.floor(x1);
      drawn++; i++;
    }
    return drawn;
  }

  function draw() {
    var scale = (width - LEFT) / (view1 - view0);
    ctx.clearRect(0, 0, width, totalHeight);
    drawAxis(scale);
    ctx.font = "11px system-ui, sans-serif";
    state.spansDrawn = 0; state.lanesDrawn = 0; state.named.fill(0);
    var textColor = getComputedStyle(document.body).color || "#1c2330";
    data.lanes.forEach(function (lane, index) {
      var top = laneTop[index], rows = Math.min(lane.depth, MAXROWS);
      ctx.fillStyle = index % 2 ? "rgba(127,127,127,0.06)" : "rgba(127,127,127,0.12)";
      ctx.fillRect(0, top, width, laneHeight[index]);
      for (var d = 0; d < rows; d++) {
        var range = blocks[index][d];
        if (range) { state.spansDrawn += drawBlock(range, top + PAD + d * ROW, scale); }
      }
      ctx.fillStyle = textColor;
      ctx.clearRect(0, top, LEFT - 4, laneHeight[index]);
      ctx.fillText(lane.process + " (" + lane.pid + ")", 6, top + 15);
      ctx.fillStyle = "#667085";
      ctx.fillText(lane.thread + " (" + lane.tid + ") · " + lane.role, 6, top + 28);
      state.lanesDrawn++;
    });
    drawExecutions(scale);
    drawFold();
    if (selected >= 0) {
      var sx = LEFT + (start[selected] - view0) * scale;
      ctx.strokeStyle = "#111"; ctx.lineWidth = 2;
      ctx.strokeRect(Math.max(sx, LEFT), laneTop[laneOf[selected]] + PAD +
                     Math.min(depthOf[selected], MAXROWS - 1) * ROW - 1,
                     Math.max(dur[selected] * scale, 2), ROW);
      ctx.lineWidth = 1;
    }
    state.frames++;
    document.getElementById("timeline-range").textContent = rangeText(view0, view1);
  }

  var pending = false;
  function redraw() {
    if (pending) { return; }
    pending = true;
    requestAnimationFrame(function () { pending = false; draw(); });
  }

  function zoomAt(factor, t) {
    var range = Math.max((view1 - view0) * factor, 0.05);
    range = Math.min(range, span * 1.5);
    var f = (t - view0) / (view1 - view0);
    view0 = t - f * range; view1 = view0 + range;
  }

  function spanAt(x, yPos) {
    var lane = lowerBound(laneTop, 0, laneTop.length, yPos + 1) - 1;
    if (lane < 0 || x < LEFT) { return -1; }
    var d = Math.floor((yPos - laneTop[lane] - PAD) / ROW);
    var range = blocks[lane][d];
    if (!range || d >= MAXROWS) { return -1; }
    var scale = (width - LEFT) / (view1 - view0), t = view0 + (x - LEFT) / scale;
    var i = lowerBound(ends, range[0], range[1], t - 2 / scale);
    return i < range[1] && start[i] <= t + 2 / scale ? i : -1;
  }

  function describe(i) {
    var layer = data.layers[data.name_layer[nameOf[i]]][1];
    var phase = data.name_phase[nameOf[i]] || "—";
    return data.names[nameOf[i]] + "\n" + fmtTime(dur[i]) + " · phase " + phase +
      " · layer " + layer + "\nat " + fmtTime(start[i]) + " · " + data.lanes[laneOf[i]].label;
  }

  function children(i) {
    var range = blocks[laneOf[i]][depthOf[i] + 1], byName = {};
    if (!range) { return []; }
    for (var c = lowerBound(start, range[0], range[1], start[i]);
         c < range[1] && start[c] <= ends[i]; c++) {
      var self = dur[c], inner = blocks[laneOf[c]][depthOf[c] + 1];
      if (inner) {
        for (var g = lowerBound(start, inner[0], inner[1], start[c]);
             g < inner[1] && start[g] <= ends[c]; g++) { self -= dur[g]; }
      }
      var row = byName[nameOf[c]] || (byName[nameOf[c]] = {name: data.names[nameOf[c]], count: 0, self: 0, total: 0});
      row.count++; row.self += self; row.total += dur[c];
    }
    return Object.keys(byName).map(function (key) { return byName[key]; })
      .sort(function (p, q) { return q.self - p.self; });
  }

  function select(i, focus) {
    selected = i;
    var panel = document.getElementById("timeline-selection");
    panel.replaceChildren();
    if (i < 0) { draw(); return []; }
    if (focus || start[i] < view0 || ends[i] > view1) {
      var pad = Math.max(dur[i] * (focus ? 3 : 0.2), 1);
      view0 = start[i] - pad; view1 = ends[i] + pad;
    }
    if (focus) { box.scrollTop = Math.max(laneTop[laneOf[i]] - 20, 0); }
    var head = document.createElement("pre");
    head.textContent = describe(i);
    panel.appendChild(head);
    var rows = children(i), table = document.createElement("table");
    table.className = "mini";
    table.innerHTML = "<thead><tr><th>child</th><th>count</th><th>self</th><th>total</th></tr></thead>";
    var body = document.createElement("tbody");
    rows.forEach(function (row) {
      var tr = document.createElement("tr");
      [row.name, String(row.count), fmtTime(row.self), fmtTime(row.total)].forEach(function (text) {
        var td = document.createElement("td"); td.textContent = text; tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.appendChild(body);
    panel.appendChild(rows.length ? table : document.createTextNode("No child spans."));
    draw();
    return rows.map(function (row) {
      return {name: row.name, count: row.count, self: row.self, total: row.total};
    });
  }

  var drag = null;
  canvas.addEventListener("wheel", function (event) {
    if (event.shiftKey) { return; }
    event.preventDefault();
    var rect = canvas.getBoundingClientRect(), x = event.clientX - rect.left;
    var t = view0 + Math.max(x - LEFT, 0) / (width - LEFT) * (view1 - view0);
    zoomAt(Math.exp(event.deltaY * 0.0015), t);
    redraw();
  }, {passive: false});
  canvas.addEventListener("mousedown", function (event) {
    drag = {x: event.clientX, y: event.clientY, v0: view0, v1: view1, moved: false, top: box.scrollTop};
  });
  window.addEventListener("mouseup", function (event) {
    if (drag && !drag.moved) {
      var rect = canvas.getBoundingClientRect();
      select(spanAt(event.clientX - rect.left, event.clientY - rect.top));
    }
    drag = null;
  });
  window.addEventListener("mousemove", function (event) {
    var rect = canvas.getBoundingClientRect();
    if (drag) {
      var dx = event.clientX - drag.x, per = (drag.v1 - drag.v0) / (width - LEFT);
      if (Math.abs(dx) + Math.abs(event.clientY - drag.y) > 3) { drag.moved = true; }
      view0 = drag.v0 - dx * per; view1 = drag.v1 - dx * per;
      box.scrollTop = drag.top - (event.clientY - drag.y);
      redraw();
      return;
    }
    var x = event.clientX - rect.left, yy = event.clientY - rect.top;
    var i = (x >= 0 && yy >= 0 && x <= width && yy <= totalHeight) ? spanAt(x, yy) : -1;
    tip.hidden = i < 0;
    if (i >= 0) {
      tip.textContent = describe(i);
      tip.style.left = (event.clientX + 14) + "px"; tip.style.top = (event.clientY + 14) + "px";
    }
  });
  var foldButton = document.getElementById("timeline-fold");
  function foldLabel() {
    if (!foldButton) { return; }
    foldButton.hidden = !fold;
    foldButton.textContent = !fold ? "" : folded ? "show start-up (" + fmtTime(fold.startup) + ")"
                                                 : "fold start-up";
    foldButton.setAttribute("aria-pressed", String(!folded));
  }
  function toggleFold() {
    if (!fold) { return false; }
    folded = !folded;
    view0 = home()[0]; view1 = home()[1];
    foldLabel();
    draw();
    return folded;
  }
  if (foldButton) { foldButton.addEventListener("click", toggleFold); }
  axisCanvas.addEventListener("click", function (event) {
    var rect = axisCanvas.getBoundingClientRect();
    if (folded && event.clientX - rect.left < LEFT) { toggleFold(); }
  });
  document.getElementById("timeline-reset").addEventListener("click", function () {
    view0 = home()[0]; view1 = home()[1]; draw();
  });
  window.addEventListener("resize", function () { resize(); draw(); });

  resize();
  foldLabel();
  draw();
  window.__nnscopeTest = {
    page: "trace",
    lanes: data.lanes.length,
    spans: n,
    get spansDrawn() { return state.spansDrawn; },
    get lanesDrawn() { return state.lanesDrawn; },
    get namesDrawn() { return data.names.filter(function (name, i) { return state.named[i]; }); },
    get axisLabels() { return state.axisLabels.slice(); },
    get axisOverlaps() { return state.axisOverlaps; },
    visibleRange: function () { return [view0, view1]; },
    fold: fold,
    folded: function () { return folded; },
    get foldNote() { return state.foldNote; },
    toggleFold: toggleFold,
    zoom: function (factor) { zoomAt(factor, (view0 + view1) / 2); draw(); return [view0, view1]; },
    select: select,
    selected: function () {
      return selected < 0 ? null : {index: selected, name: data.names[nameOf[selected]],
                                    lane: laneOf[selected], depth: depthOf[selected]};
    },
    hitTest: function (i) {  /* the span found under the centre of span i, as hover finds it */
      var scale = (width - LEFT) / (view1 - view0);
      var x = LEFT + (start[i] + dur[i] / 2 - view0) * scale;
      var yy = laneTop[laneOf[i]] + PAD + depthOf[i] * ROW + ROW / 2;
      return spanAt(x, yy);
    },
    firstSpan: function (lane, depth) {
      var range = (blocks[lane] || [])[depth];
      return range ? range[0] : -1;
    },
    draw: draw
  };
}());
