/* nnscope trace page views: per-operation profile, latency distribution and the partition
 * graph, from #nnscope-views. Operation rows and linked graph nodes select their first
 * span in the timeline (window.__nnscopeTest.select). */
(function () {
  "use strict";
  var block = document.getElementById("nnscope-views");
  if (!block) { return; }
  var views = JSON.parse(block.textContent), C = window.nnscopeCharts, el = C.el;

  function selectSpan(index) {
    if (!window.__nnscopeTest || index === null || index === undefined) { return; }
    window.__nnscopeTest.select(index, true);
    document.getElementById("timeline-section").scrollIntoView({block: "start"});
  }

  function pct(share) { return (100 * share).toFixed(1) + "%"; }

  function shareCell(share) {
    var td = el("td", {"class": "pct"}, [pct(share)]);
    td.style.setProperty("--pct", Math.min(100, 100 * share) + "%");
    return td;
  }

  function table(columns, rows, extraClass) {
    var body = el("tbody", {}, rows);
    return el("table", {"class": "mini profile" + (extraClass ? " " + extraClass : "")}, [
      el("thead", {}, [el("tr", {}, columns.map(function (c) { return el("th", {}, [c]); }))]),
      body]);
  }

  function opLabel(row) {
    return row.graph_op !== null && row.graph_op !== undefined ? "#" + row.graph_op : "—";
  }

  function renderProfile() {
    var box = document.getElementById("profile-box"), p = views.profile;
    if (!p.operations) {
      box.appendChild(el("p", {"class": "note", "id": "profile-note"}, [views.profile_note]));
      return;
    }
    if (views.profile_note) {  /* delegate mode: what these kernels are */
      box.appendChild(el("p", {"class": "note", "id": "profile-note"}, [views.profile_note]));
    }
    box.appendChild(el("p", {"class": "sub"}, [p.operations + " operation executions, " +
      C.ms(p.total_ms) + " ms of CPU/driver kernel time in total."]));
    box.appendChild(el("h3", {}, ["Operation types"]));
    box.appendChild(table(["operation", "count", "total ms", "mean ms", "share"],
      p.types.map(function (row) {
        return el("tr", {}, [el("td", {}, [row.name]), el("td", {}, [String(row.count)]),
                             el("td", {}, [C.ms(row.total_ms)]), el("td", {}, [C.ms(row.mean_ms)]),
                             shareCell(row.share)]);
      })));
    var shown = Math.min(p.ops_shown || p.ops.length, p.ops.length);
    box.appendChild(el("h3", {}, ["Individual operations (all " + p.ops.length +
                                  ", the most expensive first; click to show in the timeline)"]));
    var rows = p.ops.map(function (row, i) {
      var tr = el("tr", {"class": "link", "data-span": row.first_span}, [
        el("td", {}, [opLabel(row)]), el("td", {"class": "kernel"}, [row.name]),
        el("td", {"class": "device"}, [row.device || "—"]), el("td", {}, [String(row.step)]),
        el("td", {}, [String(row.position)]), el("td", {}, [String(row.count)]),
        el("td", {}, [C.ms(row.total_ms)]), el("td", {}, [C.ms(row.mean_ms)]), shareCell(row.share)]);
      if (i >= shown) { tr.hidden = true; tr.classList.add("more"); }
      tr.addEventListener("click", function () { selectSpan(row.first_span); });
      return tr;
    });
    box.appendChild(table(["graph op", "kernel", "device", "step", "position", "count", "total ms",
                           "mean ms", "share"], rows, "ops"));
    if (shown < rows.length) {
      var more = el("button", {type: "button", id: "profile-more", "class": "more-rows"});
      var folded = true;
      var label = function () {
        more.textContent = folded ? "show all " + rows.length + " operations (" +
          (rows.length - shown) + " more)" : "show the top " + shown + " only";
      };
      more.addEventListener("click", function () {
        folded = !folded;
        rows.slice(shown).forEach(function (tr) { tr.hidden = folded; });
        label();
      });
      label();
      box.appendChild(more);
    }
  }

  function renderLatency() {
    var box = document.getElementById("latency-box");
    var dists = views.latency.filter(function (d) { return d.n; });
    if (!dists.length) {
      box.appendChild(el("p", {"class": "note"}, ["No executions in this trace."]));
      return;
    }
    var counts = views.latency_counts || {executions: dists[0].n, warmup: 0};
    var which = counts.warmup ?
      "Per benchmark execution (" + counts.executions + "; the " + counts.warmup +
        (counts.warmup === 1 ? " warm-up execution is" : " warm-up executions are") +
        " not counted, as in nnscope run's latency line)" :
      "Per execution (" + counts.executions + ")";
    box.appendChild(el("p", {"class": "sub", id: "latency-counts"}, [
      which + ": the end-to-end time of each execution, and the time each device " +
      "(driver process, or the CPU fallback in the runtime's process) spent on it."]));
    box.appendChild(C.distributionFigure(dists, box.clientWidth || 900));
    box.appendChild(C.statsTable(dists, "series (ms)"));
  }

  function renderGraph() {
    var box = document.getElementById("graph-box"), g = views.graph;
    if (g.note) { box.insertBefore(el("p", {"class": "note", id: "graph-note"}, [g.note]), box.firstChild); }
    if (g.steps && g.steps.length) {
      box.insertBefore(el("p", {"class": "sub"}, [g.steps.map(function (s) {
        return "step " + s.step + ": " + s.device + " (" + s.ops + " ops)";
      }).join(" · ")]), box.firstChild);
    }
    var spanOf = views.profile.graph_links || {};
    var linked = 0;
    box.querySelectorAll("svg g.node").forEach(function (node) {
      var title = node.querySelector("title"), m = title && /^o(\d+)$/.exec(title.textContent);
      if (m && m[1] in spanOf) {
        node.classList.add("linked");
        node.addEventListener("click", function () { selectSpan(spanOf[m[1]]); });
        linked++;
      }
    });
    box.setAttribute("data-linked", String(linked));
  }

  renderProfile();
  renderLatency();
  renderGraph();
}());
