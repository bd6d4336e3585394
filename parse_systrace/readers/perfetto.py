"""Perfetto protobuf trace reader: atrace ``print`` ftrace events and TrackEvent slices.

A ``Trace`` is a sequence of ``TracePacket`` messages (field 1, length-delimited); they
are decoded one at a time from the stream, so only the rows, never the whole ``Trace``,
are held in memory. Two sources of rows:

* ftrace ``print`` events whose ``buf`` is ``B|pid|name`` / ``E|pid`` / ``E`` (atrace):
  tid = the event's pid; tgid from the ``ProcessTree`` packets (thread tid -> tgid),
  else the pid in the mark, else the last tgid seen on that thread;
* TrackEvent ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` on tracks described by
  ``TrackDescriptor`` packets (a thread descriptor, or one inherited through
  ``parent_uuid``; a slice on a process track counts as the main thread tid = pid),
  with plain or interned names (``interned_data.event_names``, per packet sequence,
  reset by ``SEQ_INCREMENTAL_STATE_CLEARED``) and the sequence's default track.

Timestamps are nanoseconds in one clock domain (clock snapshots are not used to
convert between domains); rows are sorted by time, file order breaking ties.

Example:
    >>> import io
    >>> from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
    >>> packet = pb.TracePacket(timestamp=1_500_000_000)
    >>> packet.ftrace_events.event.add(timestamp=1_500_000_000, pid=9).print.buf = "B|7|x\\n"
    >>> data = packet.SerializeToString()
    >>> list(read_perfetto(io.BytesIO(b"\\x0a" + bytes([len(data)]) + data)))
    [(1.5, 9, 7, 'x', 'packet 1')]
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, BinaryIO, Iterator

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.readers import register

if TYPE_CHECKING:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

_FIRST_SEQUENCE_SCOPED_CLOCK = 64


@lru_cache(maxsize=None)
def _protos() -> tuple:
    """``(perfetto_trace_pb2, DecodeError)``, imported on first use (~40 ms that the
    other formats do not pay)."""
    try:
        from google.protobuf.message import DecodeError
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ModuleNotFoundError as error:
        raise TraceFormatError("the file", f"reading a Perfetto trace needs the {error.name.split('.')[0]} "
                               "package: pip install 'nnscope[perfetto]'") from None
    return perfetto_trace_pb2, DecodeError


def sniff(head: bytes) -> bool:
    """Whether ``head`` starts with a well-formed ``Trace.packet`` field."""
    return _looks_like_packets(head)


def read_perfetto(binary_file: BinaryIO) -> Iterator[tuple]:
    """Yield ``(ts, tid, tgid, name, where)`` rows of a Perfetto trace in time order."""
    state = _State()
    for number, payload in _packets(binary_file):
        state.add(_decode(payload, number), f"packet {number}")
    return state.rows()


def _decode(payload: bytes, number: int) -> pb.TracePacket:
    protos, decode_error = _protos()
    try:
        return protos.TracePacket.FromString(payload)
    except (decode_error, RecursionError) as error:
        raise TraceFormatError(f"packet {number}", f"corrupt TracePacket ({error})") from None


class _Sequence:
    """Incremental state of one trusted packet sequence."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.default_track: int | None = None


class _State:
    """What the packets told so far; rows are resolved and sorted at the end."""

    def __init__(self) -> None:
        self.tgid_of: dict[int, int] = {}
        self.tracks: dict[int, pb.TrackDescriptor] = {}
        self.sequences: dict[int, _Sequence] = {}
        self.prints: list = []  # (ts_ns, order, tid, mark_tgid, name, where)
        self.slices: list = []  # (ts_ns, order, track_uuid, name, where)
        #: ``order`` numbers prints and slices together: file order breaks ties on time.
        self.events = 0

    def add(self, packet: pb.TracePacket, where: str) -> None:
        sequence = self._sequence(packet)
        if packet.HasField("process_tree"):
            self._add_process_tree(packet.process_tree)
        if packet.HasField("track_descriptor") and packet.track_descriptor.HasField("uuid"):
            self.tracks[packet.track_descriptor.uuid] = packet.track_descriptor
        if packet.HasField("ftrace_events"):
            for event in packet.ftrace_events.event:
                self._add_print(event, where)
        if packet.HasField("track_event"):
            self._add_slice(packet, sequence, where)

    def _sequence(self, packet: pb.TracePacket) -> _Sequence:
        key = packet.trusted_packet_sequence_id
        cleared = packet.sequence_flags & packet.SEQ_INCREMENTAL_STATE_CLEARED
        if packet.incremental_state_cleared or cleared:
            self.sequences[key] = _Sequence()
        sequence = self.sequences.setdefault(key, _Sequence())
        defaults = packet.trace_packet_defaults
        if packet.HasField("trace_packet_defaults") and defaults.HasField("track_event_defaults"):
            sequence.default_track = defaults.track_event_defaults.track_uuid
        for entry in packet.interned_data.event_names:
            sequence.names[entry.iid] = _text(entry.name)
        return sequence

    def _add_process_tree(self, tree: pb.ProcessTree) -> None:
        for process in tree.processes:
            self.tgid_of[process.pid] = process.pid
        for thread in tree.threads:
            if thread.HasField("tgid"):
                self.tgid_of[thread.tid] = thread.tgid

    def _add_print(self, event: pb.FtraceEvent, where: str) -> None:
        if not event.HasField("print"):
            return
        mark = _parse_mark(_text(event.print.buf))
        if mark is not None:
            self.prints.append((event.timestamp, self.events, event.pid, *mark, where))
            self.events += 1

    def _add_slice(self, packet: pb.TracePacket, sequence: _Sequence, where: str) -> None:
        event = packet.track_event
        if event.type not in (event.TYPE_SLICE_BEGIN, event.TYPE_SLICE_END):
            return
        if packet.timestamp_clock_id >= _FIRST_SEQUENCE_SCOPED_CLOCK:
            raise TraceFormatError(where, "sequence-scoped (incremental) clocks are not supported")
        track = event.track_uuid if event.HasField("track_uuid") else sequence.default_track
        if track is None:
            raise TraceFormatError(where, "track event without a track")
        begin = event.type == event.TYPE_SLICE_BEGIN
        name = _slice_name(event, sequence, where) if begin else None
        self.slices.append((packet.timestamp, self.events, track, name, where))
        self.events += 1

    def rows(self) -> Iterator[tuple]:
        keyed = list(self._print_rows()) + list(self._slice_rows())
        keyed.sort(key=lambda item: item[0])
        return (row for _, row in keyed)

    def _print_rows(self) -> Iterator[tuple]:
        last_tgid: dict[int, int] = {}
        for ts, order, tid, mark_tgid, name, where in self.prints:
            tgid = self.tgid_of.get(tid, mark_tgid)
            tgid = last_tgid.get(tid, tid) if tgid is None else tgid
            last_tgid[tid] = tgid
            yield (ts, order), (ts / 10**9, tid, tgid, name, where)

    def _slice_rows(self) -> Iterator[tuple]:
        for ts, order, track, name, where in self.slices:
            thread = self._thread_of(track, where)
            if thread is not None:
                yield (ts, order), (ts / 10**9, thread[0], thread[1], name, where)

    def _thread_of(self, uuid: int, where: str) -> tuple[int, int] | None:
        """``(tid, tgid)`` of a track, or None for a global track (not tied to a thread)."""
        seen = set()
        while uuid not in seen:
            seen.add(uuid)
            descriptor = self.tracks.get(uuid)
            if descriptor is None:
                raise TraceFormatError(where, f"track event on undescribed track {uuid}")
            if descriptor.HasField("thread"):
                return descriptor.thread.tid, descriptor.thread.pid
            if descriptor.HasField("process"):
                return descriptor.process.pid, descriptor.process.pid
            if not descriptor.HasField("parent_uuid"):
                return None
            uuid = descriptor.parent_uuid
        raise TraceFormatError(where, f"track {uuid} is its own ancestor")


def _slice_name(event: pb.TrackEvent, sequence: _Sequence, where: str) -> str:
    if event.HasField("name"):
        return _text(event.name)
    if event.HasField("name_iid"):
        name = sequence.names.get(event.name_iid)
        if name is None:
            raise TraceFormatError(where, f"unknown interned event name {event.name_iid}")
        return name
    return ""


def _text(value: str | bytes) -> str:
    """protobuf gives proto2 strings holding invalid UTF-8 as bytes."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _parse_mark(buf: str) -> tuple[int | None, str | None] | None:
    """``B|pid|name`` -> (pid, name); ``E|pid`` / ``E`` -> (pid or None, None); else None."""
    text = buf.rstrip("\n")
    if text.startswith("B|"):
        pid, bar, name = text[2:].partition("|")
        return (int(pid), name) if bar and pid.isascii() and pid.isdigit() else None
    if text == "E":
        return None, None
    if text.startswith("E|"):
        pid = text[2:].partition("|")[0]
        return (int(pid), None) if pid.isascii() and pid.isdigit() else None
    return None


# --- Trace wire format: a stream of (tag, length, payload) records --------------------------

_PACKET_TAG = 0x0A  # field 1, wire type 2
_MAX_VARINT_BYTES = 10
_READ_CHUNK = 1 << 20


def _packets(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """Yield ``(packet number, payload)`` for each ``Trace.packet``, skipping other fields."""
    number = 0
    while True:
        tag = _read_varint(stream, f"packet {number + 1}", at_start=True)
        if tag is None:
            return
        number += 1
        where = f"packet {number}"
        wire_type = tag & 7
        if wire_type == 2:
            payload = _read_exactly(stream, _read_varint(stream, where), where)
            if tag == _PACKET_TAG:
                yield number, payload
        elif wire_type == 0:
            _read_varint(stream, where)
        elif wire_type in (1, 5):
            _read_exactly(stream, 8 if wire_type == 1 else 4, where)
        else:
            raise TraceFormatError(where, f"not a protobuf Trace (wire type {wire_type})")


def _read_varint(stream: BinaryIO, where: str, at_start: bool = False) -> int | None:
    value = 0
    for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
        byte = stream.read(1)
        if not byte:
            if at_start and shift == 0:
                return None
            raise TraceFormatError(where, "truncated protobuf (incomplete varint)")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
    raise TraceFormatError(where, "corrupt protobuf (varint too long)")


def _read_exactly(stream: BinaryIO, size: int, where: str) -> bytes:
    """Read ``size`` bytes in bounded chunks, so a corrupt huge length allocates nothing big."""
    parts, missing = [], size
    while missing:
        part = stream.read(min(missing, _READ_CHUNK))
        if not part:
            raise TraceFormatError(where, f"truncated protobuf ({size - missing} of {size} bytes)")
        parts.append(part)
        missing -= len(part)
    return b"".join(parts)


def _looks_like_packets(head: bytes) -> bool:
    """First field is a ``Trace.packet`` whose payload, if wholly in ``head``, decodes."""
    if len(head) < 2 or head[0] != _PACKET_TAG:
        return False
    size, offset = 0, 1
    for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
        if offset >= len(head):
            return False
        size |= (head[offset] & 0x7F) << shift
        offset += 1
        if head[offset - 1] < 0x80:
            break
    else:
        return False
    if offset + size > len(head):
        return True
    protos, decode_error = _protos()
    try:
        protos.TracePacket.FromString(head[offset:offset + size])
    except (decode_error, RecursionError):
        return False
    return True


register("perfetto", read_perfetto, sniff)
