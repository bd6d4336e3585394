"""HTML renderer: one self-contained page from ``dashboards/assets/`` plus embedded JSON.

As pyinstrument's HTML renderer does, the page is static files (``report.css``,
``report.js``) inlined into a small skeleton, with the data in
``<script type="application/json">`` blocks: ``#nnscope-summary`` holds parse_systrace's
JSON summary exactly as ``render_json`` wrote it, ``#nnscope-view`` the view model the
script lays out (:mod:`dashboards._view`). Nothing is fetched at view time. A delegate-mode
run's page opens with its Delegation section, written here as HTML
(:func:`dashboards.delegation.delegation_section`).

Example:
    >>> from nnscope.dashboards.report import build_report
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:  # a small trace to look at
    ...     with tracing.application(tracing.Phase.OVERALL, "mobilenet"):
    ...         with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...             pass
    >>> tmp = tempfile.TemporaryDirectory()  # not the current directory
    >>> trace = os.path.join(tmp.name, "trace.html"); _ = session.export(trace)
    >>> page = HTMLRenderer().render(build_report(trace))
    >>> page.startswith("<!DOCTYPE html>")
    True
    >>> tmp.cleanup()
"""
from __future__ import annotations

import html
import json
from importlib import resources

from nnscope.dashboards._view import build_view
from nnscope.dashboards.delegation import delegation_section
from nnscope.dashboards.renderers.base import Renderer

#: The head both pages share (the trace report and the bench report).
HEAD = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="generator" content="nnscope dashboards">
<title>{title}</title>
<style>
{css}</style>
<script>{capture}</script>
</head>
"""

PAGE = """{head}<body data-rendered="false" data-mode="self">
<div class="page">
{header}
<noscript><p class="note">This report draws its tables and charts with JavaScript;
the data is in the JSON blocks at the end of the file.</p></noscript>
{sections}
<h2 class="view-title">Timing summary</h2>
<main id="runs"></main>
<footer>nnscope · NNAPI timing summary computed by parse_systrace</footer>
</div>
<script type="application/json" id="nnscope-summary">
{summary}</script>
<script type="application/json" id="nnscope-view">
{view}
</script>
<script type="application/json" id="nnscope-timeline">
{timeline}
</script>
<script type="application/json" id="nnscope-views">
{views}
</script>
<script>
{js}</script>
</body>
</html>
"""


#: Inline script in the head: records script errors for the page's self-test.
CAPTURE = ("window.__nnscopeSelftest=/selftest/.test(location.hash);window.__nnscopeErrors=[];window.addEventListener('error',function(e){"
           "window.__nnscopeErrors.push(String(e.message));});(function(){var c=console.error;"
           "console.error=function(){window.__nnscopeErrors.push(Array.prototype.join.call("
           "arguments,' '));c.apply(console,arguments);};}());")
#: The page's scripts, in order (charts before the views that use them).
SCRIPTS = ("charts.js", "report.js", "timeline.js", "views.js", "selftest.js")
SECTIONS = """<section class="view" id="timeline-section">
<h2 class="view-title">Timeline</h2>
<div class="timeline-bar"><div class="legend">{legend}</div>
<span class="sub mono" id="timeline-range"></span>
<button type="button" id="timeline-fold" hidden></button>
<button type="button" id="timeline-reset">reset zoom</button></div>
<p class="sub hint">Wheel: zoom · drag: pan · hover: span · click: select and list its
children's self-times · dashed red lines: execution boundaries</p>
<canvas id="timeline-axis"></canvas>
<div id="timeline-box"><canvas id="timeline"></canvas></div>
<div id="timeline-tip" hidden></div>
<div id="timeline-selection"></div>
</section>
<section class="view" id="profile-section">
<h2 class="view-title">Per-operation profile</h2><div id="profile-box"></div></section>
<section class="view" id="latency-section">
<h2 class="view-title">Latency distribution</h2><div id="latency-box"></div></section>
<section class="view" id="graph-section">
<h2 class="view-title">Partition graph</h2><div id="graph-box">{graph}</div></section>
"""


def sections(views: dict, delegation: dict | None = None) -> str:
    """The HTML of the timeline, profile, latency and graph sections, after the Delegation
    section of a delegate-mode run (``delegation``: its delegation report)."""
    legend = "".join(f'<span><span class="swatch {code}"></span>{html.escape(label)}</span>'
                     for code, label in views["timeline"]["layers"])
    svg = views["graph"].get("svg") or ""
    svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "")
    first = delegation_section(delegation) if delegation else ""
    return first + SECTIONS.format(legend=legend, graph=svg)


def views_json(views: dict) -> str:
    """The profile, latency and graph facts (the SVG itself is in the page body)."""
    graph = {key: value for key, value in views["graph"].items() if key != "svg"}
    data = dict(profile=views["profile"], profile_note=views.get("profile_note", ""),
                latency=views["latency"], latency_counts=views.get("latency_counts"), graph=graph)
    return script_json(json.dumps(data, separators=(",", ":"), allow_nan=False))


def page_head(title: str) -> str:
    """:data:`HEAD` with ``title`` (escaped here), the stylesheets and the error capture."""
    return HEAD.format(title=html.escape(title), css=asset("report.css") + asset("views.css"),
                       capture=CAPTURE)


def asset(name: str) -> str:
    """The text of ``dashboards/assets/<name>``."""
    return resources.files("nnscope.dashboards").joinpath("assets", name).read_text(encoding="utf-8")


def script_json(text: str) -> str:
    """JSON text made safe inside ``<script>``: ``<`` only occurs in strings, escape it."""
    return text.replace("<", "\\u003c")


def _plural(count: int, word: str, plural: str = "") -> str:
    return f"{count:,} {word if count == 1 else plural or word + 's'}"


def partial_banner(meta: dict) -> str:
    """Above everything, when runs were cut off: the page is of a partial trace, and what its
    figures cover ('' for a complete trace)."""
    cut = meta["incomplete_runs"]
    if not cut:
        return ""
    covers = (f"every timing figure covers the {_plural(meta['runs'], 'complete run')} only"
              if meta["runs"] else "no run is complete, so the page has no timing tables")
    return (f'<p class="partial" data-partial role="alert"><b>Partial trace:</b> '
            f'{_plural(cut, "run")} of {cut + meta["runs"]} {"was" if cut == 1 else "were"} cut off '
            f'(a thread was still inside an NNAPI scope when the trace ended) and left out of the '
            f'timing tables; {covers}.</p>')


def header(meta: dict) -> str:
    """The page header: file name, format, runs, span counts and parse_systrace's notes."""
    runs = _plural(meta["runs"], "run")
    if meta["incomplete_runs"]:
        runs += f" (+{meta['incomplete_runs']} incomplete, not shown)"
    facts = [("format", meta["format"]), ("", runs),
             ("", f"{_plural(meta['spans'], 'span')} ({meta['nn_spans']:,} NNAPI)"),
             ("", _plural(meta["marks"], "mark")),
             ("", f"{_plural(meta['processes'], 'process', 'processes')}, "
                  f"{_plural(meta['threads'], 'thread')}")]
    items = "".join(f"<li>{f'<b>{html.escape(k)}</b> ' if k else ''}{html.escape(v)}</li>"
                    for k, v in facts)
    notes = partial_banner(meta) + "".join(f'<p class="note" data-note>{html.escape(note)}</p>'
                                           for note in meta["notes"])
    return (f'<header class="report"><div><h1>NNAPI timing report</h1>'
            f'<p class="sub mono" id="trace-file">{html.escape(meta["file"])}</p>'
            f'<ul class="facts">{items}</ul></div>'
            f'<div class="toggle" id="mode-toggle" role="group" '
            f'aria-label="self-times or total times"></div></header>\n{notes}')


class HTMLRenderer(Renderer):
    """The dashboard page."""

    output_file_extension = "html"

    def render(self, report: dict) -> str:
        view = json.dumps(build_view(report), separators=(",", ":"), allow_nan=False)
        views = report["views"]
        timeline = json.dumps(views["timeline"], separators=(",", ":"), allow_nan=False)
        return PAGE.format(head=page_head(f"NNAPI timing · {report['meta']['file']}"),
                           header=header(report["meta"]),
                           sections=sections(views, report.get("delegation")),
                           summary=script_json(report["summary_text"]),
                           view=script_json(view), timeline=script_json(timeline),
                           views=views_json(views),
                           js="\n".join(asset(name) for name in SCRIPTS))
