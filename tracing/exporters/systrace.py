"""Systrace exporters: ftrace text and systrace HTML, as read by parse_systrace and Perfetto.

Rows follow the atrace grammar (``docs/parse-systrace-semantics.md`` section 1),
all threads merged in timestamp order::

    #           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION
          MainThread-4242  ( 4242) [000] ...1  1034.700747: tracing_mark_write: B|4242|[NN_LR_PE]x
          MainThread-4242  ( 4242) [000] ...1  1034.700801: tracing_mark_write: E|4242

Each thread's rows are :func:`tracing.span.atrace_events`: balanced, and a switch
written the AOSP way (a nested ``[SW]`` begin, and two ends when the scope closes). Timestamps are monotonic seconds truncated to the microsecond. Truncation never
decreases a later time, and rows keep their nanosecond order, so an end never
precedes its begin and a child never starts before its parent.

Example:
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:
    ...     with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...         pass
    >>> with tempfile.TemporaryDirectory() as tmp:  # "trace.html" would write into cwd
    ...     print(SystraceHtmlExporter(os.path.join(tmp, "trace.html")).export(session.collect()))
    ...     print(SystraceTextExporter(os.path.join(tmp, "trace.txt")).export(session.collect()))
    ...     with open(os.path.join(tmp, "trace.txt")) as file:
    ...         rows = [line.split(": ")[-1].strip() for line in file if "tracing_mark_write" in line]
    ExportResult.SUCCESS
    ExportResult.SUCCESS
    >>> rows
    ['B|...|[NN_LR_PE]ANeuralNetworksExecution_compute', 'E|...']
"""
from __future__ import annotations

import heapq
import os
from operator import itemgetter
from typing import Iterator, TextIO

from nnscope.tracing.exporters import ExportResult, TraceExporter
from nnscope.tracing.exporters._files import write_atomically, write_chunked
from nnscope.tracing.span import ThreadTrack, TraceData, atrace_events

atrace_order = atrace_events  # the name this module gave it first

COLUMN_HEADER = "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION"
_HEADER = """# tracer: nop
#
# entries-in-buffer/entries-written: {n}/{n}   #P:{cpus}
#
#                                      _-----=> irqs-off
#                                     / _----=> need-resched
#                                    | / _---=> hardirq/softirq
#                                    || / _--=> preempt-depth
#                                    ||| /     delay
""" + COLUMN_HEADER + """
#              | |        |      |   ||||       |         |
"""
_HTML_HEAD = ("<!DOCTYPE html>\n<html>\n<head i18n-values=\"dir:textdirection;\">\n"
              "<meta charset=\"utf-8\"/>\n<title>Android System Trace</title>\n</head>\n<body>\n"
              "  <script class=\"trace-data\" type=\"application/text\">\n")
_HTML_TAIL = "  </script>\n<!-- END TRACE -->\n</body>\n</html>\n"
TASK_CHARS = 15  # the kernel keeps 15 characters of a thread name


_NO_PADDING = 10_000 * 1_000_000  # from 10000 s on, SECONDS fills its 5 columns


def timestamp(ts_ns: int) -> str:
    """Monotonic nanoseconds as ftrace's ``SECONDS.MICROS`` (truncated, width 12)."""
    seconds, micros = divmod(ts_ns // 1000, 1_000_000)
    return f"{seconds:5d}.{micros:06d}"


def _clean(text: str, html: bool) -> str:
    text = text.replace("\n", " ").replace("\r", " ")
    return text.replace("</", "<\\/") if html else text


def ftrace_rows(trace: TraceData, html: bool = False) -> Iterator[str]:
    """Yield the ``tracing_mark_write`` rows of ``trace`` in timestamp order.

    Like :meth:`TraceData.merged_events`, the merge is stable: one thread's rows keep
    their recording order (an ``E`` and the ``[SW]`` ``B`` at the same time stay in order).
    """
    names: dict[str, str] = {}
    tracks = [_track_rows(index, track, html, names) for index, track in enumerate(trace.threads)]
    return map(itemgetter(3), heapq.merge(*tracks))


def _track_rows(index: int, track: ThreadTrack, html: bool,
                names: dict[str, str]) -> Iterator[tuple[int, int, int, str]]:
    """Yield ``(ts, track index, event index, row)``: tuples that never compare rows."""
    task = _clean(track.name or str(track.tid), html)[:TASK_CHARS] or "<...>"
    head = f"{task}-{track.tid}"
    row = f"{head:>22} ({track.pid:5d}) [000] ...1 "
    begin = f": tracing_mark_write: B|{track.pid}|"
    end = f": tracing_mark_write: E|{track.pid}"
    for seq, (ts, name) in enumerate(atrace_events(track.events)):
        micros = ts // 1000
        if micros >= _NO_PADDING:
            digits = str(micros)
            stamp = f"{digits[:-6]}.{digits[-6:]}"
        else:
            stamp = f"{micros // 1_000_000:5d}.{micros % 1_000_000:06d}"
        if name is None:
            yield ts, index, seq, row + stamp + end
            continue
        clean = names.get(name)
        if clean is None:
            clean = names[name] = _clean(name, html)
        yield ts, index, seq, f"{row}{stamp}{begin}{clean}"


def write_ftrace(trace: TraceData, out: TextIO, html: bool = False) -> None:
    """Write the ftrace text (header and rows) of ``trace`` to ``out``."""
    count = sum(len(track.events) for track in trace.threads)
    out.write(_HEADER.format(n=count, cpus=os.cpu_count() or 1))
    write_chunked(out, ftrace_rows(trace, html))


def write_html(trace: TraceData, out: TextIO) -> None:
    """Write a systrace HTML page whose ``trace-data`` block holds the ftrace text."""
    out.write(_HTML_HEAD)
    write_ftrace(trace, out, html=True)
    out.write(_HTML_TAIL)


class SystraceTextExporter(TraceExporter):
    """Writes ftrace text (``.txt``, ``.ftrace``)."""

    name = "systrace"
    extensions = (".txt", ".ftrace")

    def __init__(self, path: str | os.PathLike) -> None:
        """Args: path: the output file, replaced when the export succeeds."""
        self.path = os.fspath(path)

    def export(self, trace: TraceData) -> ExportResult:
        """Write ``trace``; log and return FAILURE on an I/O error."""
        return write_atomically(self.path, lambda out: write_ftrace(trace, out), self.name)


class SystraceHtmlExporter(SystraceTextExporter):
    """Writes systrace HTML (``.html``) with one ``<script class="trace-data">`` block."""

    name = "systrace-html"
    extensions = (".html",)

    def export(self, trace: TraceData) -> ExportResult:
        """Write ``trace``; log and return FAILURE on an I/O error."""
        return write_atomically(self.path, lambda out: write_html(trace, out), self.name)
