"""dashboards: self-contained HTML reports of the NNAPI timing of a trace or a bench run.

Reads any trace ``parse_systrace`` reads (systrace HTML, ftrace text, Chrome JSON,
Perfetto, gzip) through its public API and writes one offline HTML page per trace: a
header (file, format, runs, spans, notes); a canvas **timeline** (one named lane per
process and thread, spans coloured by layer and nested by depth, zoom/pan/hover/select,
execution boundaries); the **per-operation profile** (kernel types and individual
operations ranked by time); the **latency distribution** per device (CDF, histograms);
the **partition graph** (a GraphDump ``.dot``, drawn by Graphviz, operations linked to
their spans); for a delegate-mode run of a .tflite, first a **Delegation** section (where
each operator ran, see :mod:`dashboards.delegation`); then per run a stacked bar chart of where the time went by layer and
phase, the timing table (self-times / total times toggle), per-execution figures and,
when the trace has both, warmup next to benchmark.

Example:
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:  # a small trace to look at
    ...     with tracing.application(tracing.Phase.OVERALL, "mobilenet"):
    ...         with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...             pass
    >>> tmp = tempfile.TemporaryDirectory()  # not the current directory
    >>> trace = os.path.join(tmp.name, "trace.html"); _ = session.export(trace)
    >>> from nnscope import dashboards
    >>> page = dashboards.render_report(trace)
    >>> page.startswith("<!DOCTYPE html>")
    True
    >>> dashboards.write_report(trace, os.path.join(tmp.name, "trace.report.html"))
    '...trace.report.html'
    >>> tmp.cleanup()

or from the shell: ``python -m nnscope.dashboards trace.html -o report.html``. A ``nnscope bench``
JSON report gets its own page (:func:`render_bench`, :func:`write_bench_report`).
"""
from __future__ import annotations

import os

from nnscope.dashboards.bench import BenchFormatError, check_bench
from nnscope.dashboards.delegation import DelegationFormatError
from nnscope.dashboards.renderers import get_renderer
from nnscope.dashboards.renderers.bench_html import BenchHTMLRenderer
from nnscope.dashboards.report import build_report

__all__ = ["render_report", "write_report", "build_report", "render_bench",
           "write_bench_report", "BenchFormatError", "DelegationFormatError"]


def render_report(trace_path, renderer: str = "html", graph_path=None, delegation=None) -> str:
    """The report of ``trace_path`` as text (``renderer``: ``html`` or ``json``);
    ``graph_path``: the partition graph (``nnscope run --dot`` output) to show;
    ``delegation``: a delegate-mode run's delegation report (a dict, the ``"delegation"`` of
    ``nnscope run --json``), shown in a Delegation section (:mod:`dashboards.delegation`).

    Raises:
        parse_systrace.TraceFormatError: the trace cannot be read or summarised.
        DelegationFormatError: ``delegation`` is not a delegation report.
    """
    report = build_report(trace_path, graph_path, delegation=delegation)
    return get_renderer(renderer)().render(report)


def render_bench(report: dict, file_name: str = "") -> str:
    """The HTML page of a bench report (the dict ``nnscope bench --json`` writes).

    Raises:
        BenchFormatError: ``report`` does not follow the bench schema.
    """
    check_bench(report)
    return BenchHTMLRenderer(file_name).render(report)


def write_bench_report(report: dict, out_path) -> str:
    """Write the bench page of ``report`` to ``out_path`` and return ``out_path``."""
    text = render_bench(report, os.fspath(out_path))
    with open(out_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return os.fspath(out_path)


def write_report(trace_path, out_path, renderer: str = "html", graph_path=None,
                 delegation=None) -> str:
    """Write the report of ``trace_path`` to ``out_path`` and return ``out_path``."""
    text = render_report(trace_path, renderer, graph_path, delegation)
    with open(out_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return os.fspath(out_path)
