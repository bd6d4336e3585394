"""Perfetto reader: ftrace print events, track events, packet streaming and bad input."""
import io

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from nnscope.parse_systrace.errors import TraceFormatError
from nnscope.parse_systrace.readers import open_rows
from nnscope.parse_systrace.readers.perfetto import read_perfetto, sniff
from tests.support.trace_convert import _stream
from nnscope.tracing.exporters.perfetto import write_trace
from nnscope.tracing.span import ThreadTrack, TraceData

BEGIN, END = pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END


def read(data: bytes) -> list[tuple]:
    return list(read_perfetto(io.BytesIO(data)))


def prints(*events, cpu=0) -> pb.TracePacket:
    """A bundle of (ts_ns, pid, buf) print events."""
    packet = pb.TracePacket()
    packet.ftrace_events.cpu = cpu
    for ts, pid, buf in events:
        packet.ftrace_events.event.add(timestamp=ts, pid=pid).print.buf = buf
    return packet


def tree(*threads) -> pb.TracePacket:
    packet = pb.TracePacket()
    for tid, tgid in threads:
        packet.process_tree.threads.add(tid=tid, tgid=tgid)
    return packet


def track(uuid, pid=None, tid=None, parent=None, seq=1) -> pb.TracePacket:
    packet = pb.TracePacket(trusted_packet_sequence_id=seq)
    packet.track_descriptor.uuid = uuid
    if parent is not None:
        packet.track_descriptor.parent_uuid = parent
    if tid is not None:
        packet.track_descriptor.thread.pid, packet.track_descriptor.thread.tid = pid, tid
    elif pid is not None:
        packet.track_descriptor.process.pid = pid
    return packet


def slice_event(ts, kind, uuid=None, name=None, iid=None, seq=1, flags=0) -> pb.TracePacket:
    packet = pb.TracePacket(timestamp=ts, trusted_packet_sequence_id=seq, sequence_flags=flags)
    packet.track_event.type = kind
    if uuid is not None:
        packet.track_event.track_uuid = uuid
    if name is not None:
        packet.track_event.name = name
    if iid is not None:
        packet.track_event.name_iid = iid
    return packet


def intern(packet: pb.TracePacket, iid: int, name: str) -> pb.TracePacket:
    packet.interned_data.event_names.add(iid=iid, name=name)
    return packet


def test_print_events_become_rows_sorted_across_bundles_with_exact_seconds():
    data = _stream([
        prints((1_034_700_742_700_000, 5, "E|5\n"), cpu=1),
        prints((1_034_700_742_666_000, 5, "B|5|[NN_LR_PE]f\n"),
               (1_034_700_742_680_000, 6, "C|5|counter|3\n"), cpu=0)])
    assert read(data) == [(float("1034700.742666"), 5, 5, "[NN_LR_PE]f", "packet 2"),
                          (float("1034700.7427"), 5, 5, None, "packet 1")]


def test_print_tgid_comes_from_the_process_tree_then_the_mark_then_the_thread():
    data = _stream([
        prints((1, 10, "B|99|a"), (2, 10, "E"), (3, 11, "B|42|b"), (4, 11, "E"),
               (5, 12, "E")),
        tree((10, 7))])
    assert [(tid, tgid) for _, tid, tgid, _, _ in read(data)] == [
        (10, 7), (10, 7), (11, 42), (11, 42), (12, 12)]


def test_track_events_with_interned_names_thread_and_process_tracks():
    data = _stream([
        track(100, pid=7), track(101, pid=7, tid=8, parent=100), track(102, parent=101),
        intern(slice_event(2000, BEGIN, 101, iid=1,
                           flags=pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED), 1, "[NN_LR_PC]c"),
        slice_event(3000, BEGIN, 102, name="nested on a child track"),
        slice_event(4000, END, 102), slice_event(5000, END, 101),
        slice_event(6000, BEGIN, 100, name="on the process"),
        slice_event(6500, pb.TrackEvent.TYPE_INSTANT, 101, name="instant ignored")])
    assert [row[:4] for row in read(data)] == [
        (2e-06, 8, 7, "[NN_LR_PC]c"), (3e-06, 8, 7, "nested on a child track"),
        (4e-06, 8, 7, None), (5e-06, 8, 7, None), (6e-06, 7, 7, "on the process")]


def test_sequence_default_track_and_interning_per_sequence():
    defaults = pb.TracePacket(trusted_packet_sequence_id=2)
    defaults.trace_packet_defaults.track_event_defaults.track_uuid = 101
    data = _stream([track(101, pid=7, tid=8), defaults,
                    intern(slice_event(10, BEGIN, iid=1, seq=2), 1, "on seq 2"),
                    intern(slice_event(5, BEGIN, 101, iid=1, seq=3), 1, "on seq 3")])
    assert [(ts, name) for ts, _, _, name, _ in read(data)] == [(5e-09, "on seq 3"),
                                                               (1e-08, "on seq 2")]


def test_cleared_incremental_state_forgets_interned_names():
    cleared = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    data = _stream([track(101, pid=7, tid=8),
                    intern(slice_event(1, BEGIN, 101, iid=1), 1, "x"),
                    slice_event(2, BEGIN, 101, iid=1, flags=cleared)])
    with pytest.raises(TraceFormatError, match="packet 3: unknown interned event name 1"):
        read(data)


def test_global_tracks_are_skipped_and_undescribed_tracks_are_errors():
    assert read(_stream([track(5), slice_event(1, BEGIN, 5, name="global")])) == []
    with pytest.raises(TraceFormatError, match="packet 1: track event on undescribed track 9"):
        read(_stream([slice_event(1, BEGIN, 9, name="lost")]))


def test_reads_what_our_perfetto_exporter_writes():
    trace = TraceData({40: "app"}, [
        ThreadTrack(40, 41, "main", [(1_000, "[NN_LA_PO]m"), (2_500, "[NN_LR_PE]e"),
                                     (3_000, None), (4_000, None)]),
        ThreadTrack(40, 42, "worker", [(2_000, "[NN_LC_PE]k"), (2_100, None)])])
    out = io.BytesIO()
    write_trace(out, trace)
    source = open_rows(io.BytesIO(out.getvalue()))
    assert source.format == "perfetto"
    assert [row[:4] for row in source.rows()] == [
        (1e-06, 41, 40, "[NN_LA_PO]m"), (2e-06, 42, 40, "[NN_LC_PE]k"),
        (2.1e-06, 42, 40, None), (2.5e-06, 41, 40, "[NN_LR_PE]e"),
        (3e-06, 41, 40, None), (4e-06, 41, 40, None)]


def test_invalid_utf8_in_strings_is_replaced_not_fatal():
    buf = b"\x12" + bytes([len(b"B|3|\xff")]) + b"B|3|\xff"  # PrintFtraceEvent.buf, not UTF-8
    event = b"\x08\x01\x10\x03\x1a" + bytes([len(buf)]) + buf
    bundle = b"\x12" + bytes([len(event)]) + event
    packet = b"\x0a" + bytes([len(bundle)]) + bundle
    assert read(b"\x0a" + bytes([len(packet)]) + packet) == [(1e-09, 3, 3, "\ufffd", "packet 1")]


def test_other_top_level_fields_are_skipped():
    packet = prints((1, 3, "B|3|a")).SerializeToString()
    data = (b"\x10\x05" + b"\x19" + bytes(8) + b"\x25" + bytes(4) + b"\x12\x01z"
            + b"\x0a" + bytes([len(packet)]) + packet)
    assert [row[3] for row in read(data)] == ["a"]


@pytest.mark.parametrize("data, message", [
    (b"\x0a\x05abc", "packet 1: truncated protobuf (3 of 5 bytes)"),
    (b"\x0a", "packet 1: truncated protobuf (incomplete varint)"),
    (b"\x0a" + b"\xff" * 11, "packet 1: corrupt protobuf (varint too long)"),
    (b"\x0b\x00", "packet 1: not a protobuf Trace (wire type 3)"),
    (b"\x0a\x02\x08\xff", "packet 1: corrupt TracePacket"),
    (b"\x0a\x03\x0a\x05\x00", "packet 1: corrupt TracePacket"),
])
def test_corrupt_or_truncated_streams_raise_trace_format_error(data, message):
    with pytest.raises(TraceFormatError) as caught:
        read(data)
    assert str(caught.value).startswith(message)


def test_sequence_scoped_clocks_are_rejected_rather_than_misread():
    packet = slice_event(1, BEGIN, 101, name="a")
    packet.timestamp_clock_id = 64
    with pytest.raises(TraceFormatError, match="sequence-scoped"):
        read(_stream([track(101, pid=1, tid=1), packet]))


def test_sniff_accepts_packets_and_rejects_text_and_garbage():
    data = _stream([prints((1, 3, "B|3|a"))])
    assert sniff(data) and sniff(data[:3])
    assert not sniff(b"# tracer: nop\n")
    assert not sniff(b"\x0a\x02\x08\xff")
    assert not sniff(b"\x0a")
