"""Chrome JSON trace exporter (``trace.json``), loadable in Perfetto UI and chrome://tracing.

Writes ``{"traceEvents": [...], "displayTimeUnit": "ns"}``: ``M`` metadata events
naming every process and thread, then a ``B`` (begin) and an ``E`` (end) event per span,
``ts`` in microseconds carrying nanosecond precision (``1034.700747123``). Each thread's
events are :func:`tracing.span.atrace_events` (a switch nested the AOSP way), all threads
merged by time, one thread's events in that order even where they tie on time.

Why not one complete (``X``) event per span: an ``X`` event has no order at equal times,
and readers (Perfetto, chrome://tracing, parse_systrace) nest a zero-length ``X`` inside
a longer one that starts at the same time, though the recorder may have ended it first
(a switch ends a zero-length ``[NN_LC_PTR]`` where its ``[SW][NN_LC_PCO]`` begins).
``B``/``E`` events keep the recorder's order and are read in file order by all of them.

NNTRACE names get ``cat`` = their layer code and ``args`` = layer, phase, detail
(and marker); HIDL marks get ``cat`` ``hidl``, other names ``other``.

Example:
    >>> import os, tempfile
    >>> from nnscope import tracing
    >>> with tracing.TraceSession() as session:
    ...     with tracing.runtime(tracing.Phase.EXECUTION, "ANeuralNetworksExecution_compute"):
    ...         pass
    >>> import json
    >>> with tempfile.TemporaryDirectory() as tmp:  # "trace.json" would write into cwd
    ...     path = os.path.join(tmp, "trace.json")
    ...     print(ChromeJsonExporter(path).export(session.collect()))
    ...     with open(path) as file:
    ...         events = json.load(file)["traceEvents"]
    ExportResult.SUCCESS
    >>> [(event["ph"], event.get("cat"), event["args"]) for event in events if event["ph"] == "B"]
    [('B', 'LR', {'layer': 'LR', 'phase': 'PE', 'detail': 'ANeuralNetworksExecution_compute'})]
"""
from __future__ import annotations

import heapq
import json
import os
from typing import Iterator, TextIO

from nnscope.tracing.exporters import ExportResult, TraceExporter
from nnscope.tracing.exporters._files import write_atomically, write_chunked
from nnscope.tracing.naming import parse_name
from nnscope.tracing.span import ThreadTrack, TraceData, atrace_events


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
    """Yield the JSON text of every event: metadata first, then the begins and ends of
    all threads merged by time (see the module docstring)."""
    yield from _metadata(trace)
    names: dict[str, str] = {}
    tracks = [_track_events(index, track, names) for index, track in enumerate(trace.threads)]
    for _, _, _, event in heapq.merge(*tracks):
        yield event


def _track_events(index: int, track: ThreadTrack,
                  names: dict[str, str]) -> Iterator[tuple[int, int, int, str]]:
    """Yield ``(ts, track index, event index, json)``: tuples that never compare the json."""
    begin = f'{{"ph":"B","pid":{track.pid},"tid":{track.tid},"ts":'
    end = f'{{"ph":"E","pid":{track.pid},"tid":{track.tid},"ts":'
    for seq, (ts, name) in enumerate(atrace_events(track.events)):
        if name is None:
            yield ts, index, seq, f"{end}{ts // 1000}.{ts % 1000:03d}}}"
            continue
        fields = names.get(name)
        if fields is None:
            fields = names[name] = name_fields(name)
        yield ts, index, seq, f"{begin}{ts // 1000}.{ts % 1000:03d},{fields}}}"


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
