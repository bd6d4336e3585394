"""dashboards: self-contained HTML reports of the NNAPI timing summary of a trace.

Reads any trace ``parse_systrace`` reads (systrace HTML, ftrace text, Chrome JSON,
Perfetto, gzip) through its public API and writes one offline HTML page per trace: a
header (file, format, runs, spans, notes), then per run a stacked bar chart of where the
time went by layer and phase, the timing table (self-times / total times toggle),
per-execution figures and, when the trace has both, warmup next to benchmark.

Example:
    >>> import dashboards
    >>> page = dashboards.render_report("trace.html")              # doctest: +SKIP
    >>> dashboards.write_report("trace.html", "trace.report.html")  # doctest: +SKIP

or from the shell: ``python -m dashboards trace.html -o report.html``.
"""
from __future__ import annotations

import os

from dashboards.renderers import get_renderer
from dashboards.report import build_report

__all__ = ["render_report", "write_report", "build_report"]


def render_report(trace_path, renderer: str = "html") -> str:
    """The report of ``trace_path`` as text (``renderer``: ``html`` or ``json``).

    Raises:
        parse_systrace.TraceFormatError: the trace cannot be read or summarised.
    """
    return get_renderer(renderer)().render(build_report(trace_path))


def write_report(trace_path, out_path, renderer: str = "html") -> str:
    """Write the report of ``trace_path`` to ``out_path`` and return ``out_path``."""
    text = render_report(trace_path, renderer)
    with open(out_path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return os.fspath(out_path)
