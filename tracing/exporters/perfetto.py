"""Perfetto exporter: writes a :class:`TraceData` as a Perfetto protobuf trace.

The file is a ``perfetto.protos.Trace`` message written packet by packet (each
``TracePacket`` is field 1 of ``Trace``, length-delimited), so no giant ``Trace``
object is built. It holds, on one trusted packet sequence:

* a ``ClockSnapshot`` naming ``CLOCK_MONOTONIC`` the primary trace clock, so
  trace_processor and the Perfetto UI keep our monotonic timestamps unchanged;
* a process track (``ProcessDescriptor``) per pid and a thread track
  (``ThreadDescriptor``) per thread;
* ``TYPE_SLICE_BEGIN`` / ``TYPE_SLICE_END`` track events on the thread tracks, with
  interned names, the NN layer code as category and ``layer``/``phase``/``detail``
  (and ``marker``) debug annotations for NNTRACE names.

Each thread's events are :func:`tracing.span.atrace_events`: ends without a begin
are dropped, begins never closed end at their thread's last timestamp, and a switch
is a nested ``[SW]`` slice, as atrace writes it and parse_systrace reads it.

Example:
    >>> from nnscope.tracing.span import ThreadTrack, TraceData, atrace_events
    >>> track = ThreadTrack(1, 1, "main", [(10, "[NN_LR_PE]compute"), (30, None)])
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:  # "run.pftrace" would write into cwd
    ...     PerfettoExporter(os.path.join(tmp, "run.pftrace")).export(TraceData({1: "app"}, [track]))
    <ExportResult.SUCCESS: 0>
"""
from __future__ import annotations

import heapq
import logging
import os
import time
from typing import BinaryIO, Iterable, Iterator

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from nnscope.tracing.exporters import ExportResult, TraceExporter
from nnscope.tracing.naming import parse_name
from nnscope.tracing.span import ThreadTrack, TraceData, atrace_events

_log = logging.getLogger(__name__)

#: The trusted packet sequence every packet of our traces is written on.
SEQUENCE_ID = 1
_MONOTONIC = pb.BUILTIN_CLOCK_MONOTONIC
_PACKET_TAG = b"\x0a"  # Trace.packet: field 1, wire type 2 (length-delimited)
_PROCESS_UUID_BASE = 0x6E6E_0001 << 32
_THREAD_UUID_BASE = 0x6E6E_0002 << 32


class PerfettoExporter(TraceExporter):
    """Writes a Perfetto protobuf trace file readable by ui.perfetto.dev and trace_processor."""

    name = "perfetto"
    extensions = (".perfetto-trace", ".pftrace", ".pb")
    binary = True

    def __init__(self, path: str | os.PathLike) -> None:
        """Create an exporter.

        Args:
            path: the output file; it is replaced atomically on success.
        """
        self.path = os.fspath(path)

    def export(self, trace: TraceData) -> ExportResult:
        """Write ``trace`` to :attr:`path`; log and return FAILURE on any error."""
        # Beside the file, as _files.write_atomically: open() gives it the mode every file we
        # write has (0666 less the umask), where a tempfile would be 0600.
        tmp_path = f"{self.path}.{os.getpid()}.tmp"
        try:
            with open(tmp_path, "wb") as out:
                write_trace(out, trace)
            os.replace(tmp_path, self.path)
        except Exception:  # exporters never raise into the runtime
            _log.exception("perfetto export to %s failed", self.path)
            if os.path.exists(tmp_path):
                os.unlink(tmp_path)
            return ExportResult.FAILURE
        return ExportResult.SUCCESS


def write_trace(out: BinaryIO, trace: TraceData) -> int:
    """Stream the packets of ``trace`` to ``out`` as a ``Trace`` message; return the packet count."""
    count = 0
    for packet in trace_packets(trace):
        out.write(framed_packet(packet))
        count += 1
    return count


def framed_packet(packet: pb.TracePacket) -> bytes:
    """``packet`` as one ``Trace.packet`` field: tag, varint length, serialized packet. A file
    of such fields, one after another, is a ``Trace`` message."""
    data = packet.SerializeToString()
    return _PACKET_TAG + _varint(len(data)) + data


def trace_packets(trace: TraceData) -> Iterator[pb.TracePacket]:
    """Yield the packets of ``trace`` in file order: clocks, tracks, then events by time."""
    first = _clock_snapshot_packet()
    first.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    first.first_packet_on_sequence = True
    yield first
    pids = dict(trace.processes)
    for track in trace.threads:
        pids.setdefault(track.pid, "")
    for pid, name in pids.items():
        yield _process_packet(pid, name)
    for number, track in enumerate(trace.threads):
        yield _thread_packet(number, track)
    interner = _Interner()
    for ts, number, name in _balanced_events(trace.threads):
        yield _event_packet(ts, _THREAD_UUID_BASE + number, name, interner)


def _clock_snapshot_packet() -> pb.TracePacket:
    # Read the clocks back to back; MONOTONIC is the trace clock, the others let
    # tools line the trace up with BOOTTIME/REALTIME data.
    readings = [(_MONOTONIC, time.monotonic_ns())]
    if hasattr(time, "CLOCK_BOOTTIME"):
        readings.append((pb.BUILTIN_CLOCK_BOOTTIME, time.clock_gettime_ns(time.CLOCK_BOOTTIME)))
    readings.append((pb.BUILTIN_CLOCK_REALTIME, time.time_ns()))
    packet = _packet()
    snapshot = packet.clock_snapshot
    snapshot.primary_trace_clock = _MONOTONIC
    for clock_id, ts in readings:
        snapshot.clocks.add(clock_id=clock_id, timestamp=ts)
    return packet


def _process_packet(pid: int, name: str) -> pb.TracePacket:
    packet = _packet()
    descriptor = packet.track_descriptor
    descriptor.uuid = _PROCESS_UUID_BASE + pid
    descriptor.process.pid = pid
    if name:
        descriptor.process.process_name = name
    return packet


def _thread_packet(number: int, track: ThreadTrack) -> pb.TracePacket:
    packet = _packet()
    descriptor = packet.track_descriptor
    descriptor.uuid = _THREAD_UUID_BASE + number
    descriptor.parent_uuid = _PROCESS_UUID_BASE + track.pid
    descriptor.thread.pid = track.pid
    descriptor.thread.tid = track.tid
    if track.name:
        descriptor.thread.thread_name = track.name
    return packet


def _event_packet(ts: int, track_uuid: int, name: str | None,
                  interner: _Interner) -> pb.TracePacket:
    packet = _packet()
    packet.timestamp = ts
    packet.timestamp_clock_id = _MONOTONIC
    event = packet.track_event
    event.track_uuid = track_uuid
    if name is None:
        event.type = pb.TrackEvent.TYPE_SLICE_END
        return packet
    event.type = pb.TrackEvent.TYPE_SLICE_BEGIN
    packet.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    event.name_iid = interner.event_name(name, packet)
    parsed = parse_name(name)
    if parsed is not None:
        event.category_iids.append(interner.category(parsed.layer.value, packet))
        annotations = [("layer", parsed.layer.value), ("phase", parsed.phase.value),
                       ("detail", parsed.detail)]
        if parsed.marker:
            annotations.append(("marker", parsed.marker))
        for key, value in annotations:
            event.debug_annotations.add(name=key, string_value=value)
    return packet


class _Interner:
    """Assigns iids to event names and categories, adding new ones to the packet's interned_data."""

    def __init__(self) -> None:
        self._names: dict[str, int] = {}
        self._categories: dict[str, int] = {}

    def event_name(self, name: str, packet: pb.TracePacket) -> int:
        return self._intern(self._names, name, packet.interned_data.event_names)

    def category(self, name: str, packet: pb.TracePacket) -> int:
        return self._intern(self._categories, name, packet.interned_data.event_categories)

    @staticmethod
    def _intern(table: dict[str, int], name: str, entries) -> int:
        iid = table.get(name)
        if iid is None:
            iid = table[name] = len(table) + 1  # iid 0 means "not interned"
            entries.add(iid=iid, name=name)
        return iid


def _balanced_events(tracks: Iterable[ThreadTrack]) -> Iterator[tuple[int, int, str | None]]:
    """Yield ``(ts, track number, name)`` for all threads merged by time: each thread's
    :func:`tracing.span.atrace_events`, in that order also where they tie on time."""
    return heapq.merge(*(_atrace(number, track) for number, track in enumerate(tracks)),
                       key=lambda event: event[0])


def _atrace(number: int, track: ThreadTrack) -> Iterator[tuple[int, int, str | None]]:
    for ts, name in atrace_events(track.events):
        yield ts, number, name


def _packet() -> pb.TracePacket:
    packet = pb.TracePacket()
    packet.trusted_packet_sequence_id = SEQUENCE_ID
    return packet


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
