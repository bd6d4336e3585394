"""Chrome JSON trace exporter (``trace.json``), loadable in Perfetto UI and chrome://tracing.

Writes ``{"traceEvents": [...], "displayTimeUnit": "ns"}``: ``M`` metadata events
naming every process and thread, then one complete (``X``) event per span with
``ts``/``dur`` in microseconds carrying nanosecond precision (``1034.700747123``).
NNTRACE names get ``cat`` = their layer code and ``args`` = layer, phase, detail
(and marker); HIDL marks get ``cat`` ``hidl``, other names ``other``.

Example:
    >>> ChromeJsonExporter("trace.json").export(session.collect())   # doctest: +SKIP
    <ExportResult.SUCCESS: 0>
"""
from __future__ import annotations

import json
import os
from typing import Iterator, TextIO

from tracing.exporters import ExportResult, TraceExporter
from tracing.exporters._files import write_atomically, write_chunked
from tracing.naming import parse_name
from tracing.span import ThreadTrack, TraceData


def microseconds(ns: int) -> str:
    """Nanoseconds as a JSON number of microseconds, exact (``1500`` -> ``1.500``)."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def name_fields(name: str) -> str:
    """The ``"name"``, ``"cat"`` and ``"args"`` members of a span event, as JSON text."""
    parsed = parse_name(name)
    fields = {"name": name}
    if parsed is not None:
        args = {"layer": parsed.layer.value, "phase": parsed.phase.value, "detail": parsed.detail}
        if parsed.marker:
            args["marker"] = parsed.marker
        fields.update(cat=parsed.layer.value, args=args)
    else:
        fields["cat"] = "hidl" if name.startswith("HIDL::") else "other"
    return json.dumps(fields, ensure_ascii=False)[1:-1]


def _metadata(trace: TraceData) -> Iterator[str]:
    for pid, name in trace.processes.items():
        yield json.dumps({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                          "args": {"name": name}}, ensure_ascii=False)
    seen = set()
    for track in trace.threads:
        if (track.pid, track.tid) in seen:
            continue
        seen.add((track.pid, track.tid))
        yield json.dumps({"ph": "M", "name": "thread_name", "pid": track.pid, "tid": track.tid,
                          "args": {"name": track.name}}, ensure_ascii=False)


def trace_events(trace: TraceData) -> Iterator[str]:
    """Yield the JSON text of every event: metadata first, then the spans of each thread.

    Spans are paired as in :meth:`TraceData.spans`: a begin never ended closes at its
    thread's last timestamp, an end without a begin is dropped.
    """
    yield from _metadata(trace)
    names: dict[str, str] = {}
    for track in trace.threads:
        yield from _track_spans(track, names)


def _track_spans(track: ThreadTrack, names: dict[str, str]) -> Iterator[str]:
    prefix = f'{{"ph":"X","pid":{track.pid},"tid":{track.tid},"ts":'
    stack: list[tuple[int, str]] = []
    last = 0
    for ts, name in track.events:
        last = ts
        if name is not None:
            stack.append((ts, name))
        elif stack:
            yield _complete(prefix, *stack.pop(), ts, names)
    while stack:
        yield _complete(prefix, *stack.pop(), last, names)


def _complete(prefix: str, start: int, name: str, end: int, names: dict[str, str]) -> str:
    fields = names.get(name)
    if fields is None:
        fields = names[name] = name_fields(name)
    duration = end - start
    return (f'{prefix}{start // 1000}.{start % 1000:03d},'
            f'"dur":{duration // 1000}.{duration % 1000:03d},{fields}}}')


def write_json(trace: TraceData, out: TextIO) -> None:
    """Stream the Chrome JSON document of ``trace`` to ``out``."""
    out.write('{"traceEvents":[\n')
    events = trace_events(trace)
    first = next(events, None)
    if first is not None:
        out.write(first)
        write_chunked(out, (",\n" + event for event in events), separator="")
    out.write('\n],"displayTimeUnit":"ns"}\n')


class ChromeJsonExporter(TraceExporter):
    """Writes the Chrome JSON trace format (``.json``)."""

    name = "chrome-json"
    extensions = (".json",)

    def __init__(self, path: str | os.PathLike) -> None:
        """Args: path: the output file, replaced when the export succeeds."""
        self.path = os.fspath(path)

    def export(self, trace: TraceData) -> ExportResult:
        """Write ``trace``; log and return FAILURE on an I/O error."""
        return write_atomically(self.path, lambda out: write_json(trace, out), self.name)
