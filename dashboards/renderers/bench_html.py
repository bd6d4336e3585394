"""Bench page renderer: one self-contained page for a ``nnscope bench`` JSON report.

The page holds the checked report's view (:func:`dashboards.bench.bench_view`) in
``<script type="application/json" id="nnscope-bench">`` and the static assets
``report.css``, ``views.css``, ``charts.js`` and ``bench.js``; nothing is fetched.

Example:
    >>> from nnscope.dashboards.bench import load_bench
    >>> import json, os, tempfile
    >>> report = {"schema": "nnscope-bench", "version": 1, "settings": {}, "host": {}, "stress": [],
    ...           "results": [{"model": "tiny_add", "device": "nnapi-reference", "status": "ok",
    ...                        "latency_ms": {"samples": [0.07, 0.08, 0.07, 0.09, 0.07]}}]}
    >>> tmp = tempfile.TemporaryDirectory()  # a small report, as nnscope bench --json writes it
    >>> path = os.path.join(tmp.name, "bench.json")
    >>> with open(path, "w") as file:
    ...     json.dump(report, file)
    >>> page = BenchHTMLRenderer().render(load_bench(path))
    >>> page.startswith("<!DOCTYPE html>"), 'id="nnscope-bench"' in page
    (True, True)
    >>> tmp.cleanup()
"""
from __future__ import annotations

import html
import json

from nnscope.dashboards.bench import bench_view
from nnscope.dashboards.renderers.base import Renderer
from nnscope.dashboards.renderers.html import asset, page_head, script_json

PAGE = """{head}<body data-rendered="false">
<div class="page">
<header class="report"><div><h1>nnscope bench report</h1>
<p class="sub mono" id="bench-file">{title}</p><ul class="facts" id="bench-facts"></ul></div></header>
<noscript><p class="note">This report draws its tables and charts with JavaScript;
the data is in the JSON block at the end of the file.</p></noscript>
<section class="bench" id="results-section"><h2 class="view-title">Latency, accuracy and
operations per model × device</h2><div id="results-box"></div></section>
<section class="bench" id="dist-section"><h2 class="view-title">Latency distributions</h2>
<div id="dist-box"></div></section>
<section class="bench" id="stress-section"><h2 class="view-title">Stress outcomes</h2>
<div id="stress-box"></div></section>
<footer>nnscope · bench report</footer>
</div>
<script type="application/json" id="nnscope-bench">
{data}
</script>
<script>
{js}</script>
</body>
</html>
"""


class BenchHTMLRenderer(Renderer):
    """The bench page (input: a checked bench report dict)."""

    output_file_extension = "html"

    def __init__(self, file_name: str = "") -> None:
        self.file_name = file_name

    def render(self, report: dict) -> str:
        view = bench_view(report, self.file_name)
        data = json.dumps(view, separators=(",", ":"), allow_nan=False)
        js = "\n".join(asset(name) for name in ("charts.js", "bench.js", "selftest.js"))
        title = view["file"] or "bench"
        return PAGE.format(head=page_head(f"nnscope bench · {title}"), title=html.escape(title),
                           data=script_json(data), js=js)
