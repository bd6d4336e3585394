"""Convert reader rows (e.g. of a systrace fixture) into every other trace format we read.

Test helper for format equivalence: each converter takes the rows of
:func:`parse_systrace.readers.open_rows` and returns file bytes that must read back to
the same summary. Timestamps are carried as exact decimals (``repr`` of the float
seconds), so µs/ns values in the outputs convert back to the very same floats.

Example:
    >>> rows = [(5.000001, 12, 12, "[NN_LA_PO]x", 2), (5.000002, 12, 12, None, 3)]
    >>> json.loads(chrome_json(rows, variant="X"))["traceEvents"]
    [{'ph': 'X', 'name': '[NN_LA_PO]x', 'ts': 5000001, 'dur': 1, 'pid': 12, 'tid': 12}]
"""
from __future__ import annotations

import gzip
import json
from decimal import Decimal
from typing import Iterable, Sequence

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from nnscope.tracing.exporters.perfetto import framed_packet

Row = tuple  # (ts, tid, tgid, name, where)
_PROCESS_UUID, _THREAD_UUID = 1 << 40, 2 << 40
_CPUS = 4


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """Run the parse_systrace CLI in-process: (exit status, stdout, stderr)."""
    import contextlib
    import io

    from nnscope.parse_systrace.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exit_:
            status = exit_.code
    return (status or 0), out.getvalue(), err.getvalue()


def read_rows(path) -> list[Row]:
    """All rows of a trace file, through the parser's own format detection."""
    from nnscope.parse_systrace.readers import open_rows

    return list(open_rows(path).rows())


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _decimal(ts: float, scale: int) -> Decimal:
    return Decimal(repr(ts)).scaleb(scale)


def _number(value: Decimal) -> str:
    return format(value.normalize(), "f")


# --- Chrome JSON ---------------------------------------------------------------------------

def chrome_json(rows: Sequence[Row], variant: str = "BE") -> bytes:
    """``variant``: ``BE`` (B/E events), ``X`` (complete events, written at their end,
    unmatched marks as B/E), ``list`` (B/E as a bare list without the closing bracket),
    or ``system`` (ftrace text in ``systemTraceEvents``)."""
    if variant == "system":
        document = {"traceEvents": _metadata(rows), "systemTraceEvents": ftrace_text(rows)}
        return json.dumps(document).encode()
    events = _complete_events(rows) if variant == "X" else [_be_event(row) for row in rows]
    body = ",\n".join(events)
    if variant == "list":
        return ("[\n" + body + ",\n").encode()
    return ('{"traceEvents": [\n' + body + "\n]}").encode()


def _metadata(rows: Sequence[Row]) -> list[dict]:
    tgids = sorted({row[2] for row in rows})
    return [{"ph": "M", "name": "process_name", "pid": tgid, "tid": tgid,
             "args": {"name": f"p{tgid}"}} for tgid in tgids]


def _event(ph: str, name: str | None, ts: Decimal, tid: int, tgid: int,
           dur: Decimal | None = None) -> str:
    fields = [f'"ph": "{ph}"']
    if name is not None:
        fields.append(f'"name": {json.dumps(name)}')
    fields.append(f'"ts": {_number(ts)}')
    if dur is not None:
        fields.append(f'"dur": {_number(dur)}')
    fields.append(f'"pid": {tgid}, "tid": {tid}')
    return "{" + ", ".join(fields) + "}"


def _be_event(row: Row) -> str:
    ts, tid, tgid, name, _ = row
    return _event("E" if name is None else "B", name, _decimal(ts, 6), tid, tgid)


def _complete_events(rows: Sequence[Row]) -> list[str]:
    """X events in the order they complete; marks that never pair stay B/E."""
    events: list[str] = []
    open_by_thread: dict[tuple, list[tuple[int, Row]]] = {}
    for row in rows:
        stack = open_by_thread.setdefault((row[2], row[1]), [])
        if row[3] is not None:
            stack.append((len(events), row))
            events.append("")  # placeholder: filled when it ends, or stays a B event
        elif stack:
            _, begin = stack.pop()
            start = _decimal(begin[0], 6)
            events.append(_event("X", begin[3], start, begin[1], begin[2],
                                 _decimal(row[0], 6) - start))
        else:
            events.append(_be_event(row))
    for stack in open_by_thread.values():
        for slot, begin in stack:
            events[slot] = _be_event(begin)
    return [event for event in events if event]


# --- ftrace text ---------------------------------------------------------------------------

_FTRACE_HEADER = ("# tracer: nop\n#\n"
                  "#           TASK-PID    TGID   CPU#  ||||    TIMESTAMP  FUNCTION\n"
                  "#              | |        |      |   ||||       |         |\n")


def ftrace_text(rows: Iterable[Row]) -> str:
    """The rows as current-format ftrace text (with a TGID column)."""
    lines = [_FTRACE_HEADER]
    for ts, tid, tgid, name, _ in rows:
        mark = f"E|{tgid}" if name is None else f"B|{tgid}|{name}"
        stamp = format(Decimal(repr(ts)), "f")
        lines.append(f"          task-{tid} ({tgid:5d}) [000] ...1 {stamp}: "
                     f"tracing_mark_write: {mark}\n")
    return "".join(lines)


# --- Perfetto ------------------------------------------------------------------------------

def _ns(ts: float) -> int:
    value = _decimal(ts, 9)
    assert value == value.to_integral_value(), f"{ts!r} has sub-nanosecond digits"
    return int(value)


def _stream(packets: Iterable[pb.TracePacket]) -> bytes:
    return b"".join(framed_packet(packet) for packet in packets)


def perfetto_ftrace(rows: Sequence[Row], bundle_size: int = 500) -> bytes:
    """Process tree + per-CPU ``print`` event bundles (CPU = tid % 4, so bundles interleave).

    Ends are written as a bare ``E`` so their tgid must come from the process tree."""
    tree = pb.TracePacket()
    threads = {row[1]: row[2] for row in rows}
    for tgid in sorted(set(threads.values())):
        tree.process_tree.processes.add(pid=tgid)
    for tid, tgid in threads.items():
        tree.process_tree.threads.add(tid=tid, tgid=tgid)
    per_cpu: dict[int, list[Row]] = {}
    for row in rows:
        per_cpu.setdefault(row[1] % _CPUS, []).append(row)
    chunks = [(cpu, cpu_rows[i:i + bundle_size]) for cpu, cpu_rows in per_cpu.items()
              for i in range(0, len(cpu_rows), bundle_size)]
    chunks.sort(key=lambda chunk: _ns(chunk[1][0][0]))
    return _stream([tree] + [_bundle(cpu, chunk) for cpu, chunk in chunks])


def _bundle(cpu: int, rows: Sequence[Row]) -> pb.TracePacket:
    packet = pb.TracePacket()
    packet.ftrace_events.cpu = cpu
    for ts, tid, tgid, name, _ in rows:
        event = packet.ftrace_events.event.add(timestamp=_ns(ts), pid=tid)
        event.print.ip = 0xFFFF0000
        event.print.buf = "E\n" if name is None else f"B|{tgid}|{name}\n"
    return packet


def perfetto_track_events(rows: Sequence[Row], reset_every: int = 1000) -> bytes:
    """Process/thread track descriptors and SLICE_BEGIN/END events with interned names on
    one sequence (as ``tracing.exporters.perfetto`` writes them), clearing the incremental
    state every ``reset_every`` events."""
    threads = {row[1]: row[2] for row in rows}
    packets = []
    for tgid in sorted(set(threads.values())):
        packet = _sequence_packet()
        packet.track_descriptor.uuid = _PROCESS_UUID + tgid
        packet.track_descriptor.process.pid = tgid
        packets.append(packet)
    for tid, tgid in threads.items():
        packet = _sequence_packet()
        packet.track_descriptor.uuid = _THREAD_UUID + tid
        packet.track_descriptor.parent_uuid = _PROCESS_UUID + tgid
        packet.track_descriptor.thread.pid = tgid
        packet.track_descriptor.thread.tid = tid
        packets.append(packet)
    interned: dict[str, int] = {}
    for index, (ts, tid, _, name, _) in enumerate(rows):
        packet = _sequence_packet()
        if index % reset_every == 0:
            packet.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            interned.clear()
        packet.timestamp = _ns(ts)
        packet.track_event.track_uuid = _THREAD_UUID + tid
        packet.track_event.type = pb.TrackEvent.TYPE_SLICE_END
        if name is not None:
            packet.track_event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
            packet.track_event.name_iid = _intern(interned, name, packet)
        packets.append(packet)
    return _stream(packets)


def _sequence_packet() -> pb.TracePacket:
    packet = pb.TracePacket()
    packet.trusted_packet_sequence_id = 7
    return packet


def _intern(table: dict[str, int], name: str, packet: pb.TracePacket) -> int:
    iid = table.get(name)
    if iid is None:
        iid = table[name] = len(table) + 1
        packet.interned_data.event_names.add(iid=iid, name=name)
    return iid


def perfetto_exporter(rows: Sequence[Row]) -> bytes:
    """The rows written by our own ``tracing.exporters.perfetto`` (which drops ends without
    a begin and closes unfinished begins, so only complete traces keep their summary)."""
    import io

    from nnscope.tracing.exporters.perfetto import write_trace
    from nnscope.tracing.span import ThreadTrack, TraceData

    tracks: dict[int, ThreadTrack] = {}
    for ts, tid, tgid, name, _ in rows:
        tracks.setdefault(tid, ThreadTrack(tgid, tid, f"t{tid}")).events.append((_ns(ts), name))
    out = io.BytesIO()
    write_trace(out, TraceData({}, list(tracks.values())))
    return out.getvalue()


#: name -> (rows -> bytes) for every format variant the equivalence tests cover.
CONVERTERS = {
    "chrome-be": lambda rows: chrome_json(rows, "BE"),
    "chrome-x": lambda rows: chrome_json(rows, "X"),
    "chrome-list": lambda rows: chrome_json(rows, "list"),
    "chrome-system": lambda rows: chrome_json(rows, "system"),
    "perfetto-ftrace": perfetto_ftrace,
    "perfetto-track": perfetto_track_events,
    "gzip-chrome-x": lambda rows: gzipped(chrome_json(rows, "X")),
    "gzip-perfetto-track": lambda rows: gzipped(perfetto_track_events(rows)),
    "gzip-ftrace": lambda rows: gzipped(ftrace_text(rows).encode()),
}


# --- the recorder's own spans as rows (the oracle of the exporter round trips) -------------

def span_rows(trace, quantum_ns: int = 1) -> list[Row]:
    """The rows atrace would write for ``trace``'s spans (:meth:`TraceData.spans`), derived
    from the spans alone: each thread's span tree walked depth first, a ``[SW]`` span that
    starts where its previous sibling ends nested in that sibling (AOSP's switch), all
    threads merged by time (ties: thread order, then walk order), then timestamps truncated
    to ``quantum_ns`` (1000: the microseconds of systrace text)."""
    from nnscope.tracing.naming import SWITCH

    keyed = []
    by_thread: dict[tuple, list] = {}
    for span in trace.spans():
        by_thread.setdefault((span.pid, span.tid), []).append(span)
    for number, track in enumerate(trace.threads):
        spans = sorted(by_thread.get((track.pid, track.tid), []), key=lambda s: s.index)
        children: dict = {}
        for span in spans:
            children.setdefault(span.parent, []).append(span)
        for seq, (ts, name) in enumerate(_walk(children, None, SWITCH)):
            keyed.append(((ts, number, seq), (ts, track.tid, track.pid, name)))
    keyed.sort(key=lambda item: item[0])
    return [(_seconds(ts // quantum_ns * quantum_ns), tid, pid, name, index + 1)
            for index, (_, (ts, tid, pid, name)) in enumerate(keyed)]


def _walk(children: dict, parent, switch: str):
    """``(ts, name)`` begins and ``(ts, None)`` ends of ``parent``'s children, switches nested."""
    siblings = children.get(parent, [])
    index = 0
    while index < len(siblings):
        chain = [siblings[index]]  # a span and the [SW] spans that switched from it
        while (index + 1 < len(siblings) and siblings[index + 1].name.startswith(switch)
               and siblings[index + 1].start_ns == chain[-1].end_ns):
            index += 1
            chain.append(siblings[index])
        for span in chain:
            yield span.start_ns, span.name
            yield from _walk(children, span.index, switch)
        for _ in chain:
            yield chain[-1].end_ns, None
        index += 1


def _seconds(ns: int) -> float:
    return ns / 10**9
