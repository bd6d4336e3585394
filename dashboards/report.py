"""Report data: everything a dashboard shows, gathered from ``parse_systrace`` as plain JSON.

:func:`build_report` reads a trace once through :func:`parse_systrace.summarize` and once
more for its spans (:func:`dashboards._spans.collect_spans`, which also gives the header
counts), and returns a JSON-ready ``dict``:

- ``summary``: the parse_systrace JSON summary (``render_json`` output, parsed), one
  object per complete run with ``times``, ``self_times``, ``execution_counts``,
  ``template_inputs``, ``version`` and ``starting_mark``;
- ``summary_text``: the same summary as the exact text ``render_json`` wrote;
- ``variants``: the ``template_inputs`` of each run for the other table variants
  (``total``, ``per_execution``, ``total_per_execution``), also from ``render_json``;
- ``meta``: file name, detected format, run counts, span/mark/process counts and the
  notes parse_systrace wrote (for instance when several client processes were merged);
- ``views``: the timeline, per-operation profile, latency distributions and partition
  graph (:func:`dashboards._timeline.trace_views`; the graph from ``graph_path``, a
  GraphDump ``.dot`` file, when given);
- ``delegation``: the delegation report of a delegate-mode run (``delegation``, see
  :mod:`dashboards.delegation`), or None.

Example:
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:  # a small trace to look at
    ...     with tracing.application(tracing.Phase.OVERALL, "mobilenet"):
    ...         with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...             pass
    >>> tmp = tempfile.TemporaryDirectory()  # not the current directory
    >>> trace = os.path.join(tmp.name, "trace.html"); _ = session.export(trace)
    >>> report = build_report(trace)
    >>> report["meta"]["format"], report["meta"]["spans"], len(report["summary"])
    ('systrace', 2, 1)
    >>> tmp.cleanup()
"""
from __future__ import annotations

import json
import os

from nnscope import parse_systrace
from nnscope.dashboards._spans import collect_spans
from nnscope.dashboards._timeline import trace_views
from nnscope.dashboards.delegation import check_delegation
from nnscope.parse_systrace.readers import open_rows

#: Report data layout version (bump when keys change).
REPORT_VERSION = 2  # 2: "delegation"
#: ``variant name -> (total_times, per_execution)`` for :func:`parse_systrace.render_json`.
VARIANTS = {
    "self": (False, False),
    "total": (True, False),
    "per_execution": (False, True),
    "total_per_execution": (True, True),
}


def build_report(trace_path, graph_path=None, process_names=None, delegation=None) -> dict:
    """The report data of one trace (and of its partition graph ``graph_path``, optional);
    ``process_names`` (pid -> name) names the processes where the trace format cannot
    (a systrace names a process after its main thread); ``delegation``: the delegation
    report of a delegate-mode run (a dict, as ``nnscope run --json`` gives it).

    Raises:
        parse_systrace.TraceFormatError: the trace cannot be read or summarised.
        DelegationFormatError: ``delegation`` is not a delegation report.
    """
    if delegation is not None:
        check_delegation(delegation)
    notes = []
    runs = parse_systrace.summarize(trace_path, warn=notes.append)
    summary_text = parse_systrace.render_json(runs)
    variants = {}
    for name, (total, per_execution) in VARIANTS.items():
        if name != "self":
            parsed = json.loads(parse_systrace.render_json(runs, total, per_execution))
            variants[name] = [run["template_inputs"] for run in parsed]
    source = open_rows(trace_path)
    spans = collect_spans(source)
    meta = dict(file=os.path.basename(os.fspath(trace_path)), format=source.format,
                size=os.path.getsize(trace_path), **spans.counts)
    complete = [run for run in runs if run.complete]
    meta.update(runs=len(complete), incomplete_runs=len(runs) - len(complete),
                notes=[note.strip() for note in notes if note.strip()],
                warmup_and_benchmark=[run.has_warmup_and_benchmark for run in complete])
    return dict(version=REPORT_VERSION, meta=meta, summary=json.loads(summary_text),
                summary_text=summary_text, variants=variants, delegation=delegation,
                views=trace_views(trace_path, source.format, spans, graph_path, process_names,
                                  delegation))
