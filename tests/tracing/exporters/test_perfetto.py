"""PerfettoExporter: the file parses back as a Perfetto Trace whose slices match the input."""
from __future__ import annotations

import logging
import os
import stat

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from nnscope.tracing.exporters import ExportResult, exporter_for_path, get_exporter
from nnscope.tracing.exporters.perfetto import SEQUENCE_ID, PerfettoExporter
from nnscope.tracing.span import ThreadTrack, TraceData
from tests.support.sample_traces import APP, DRIVER, app_main_track


def _trace() -> TraceData:
    main = app_main_track()
    worker = ThreadTrack(APP, APP + 1, "binder:1", [
        (1_200, "[NN_LR_PC]ANeuralNetworksCompilation_finish"),
        (1_300, None),
        (1_300, "[SW][NN_LR_PE]switched"),
        (1_400, None),
        (1_500, None),  # end without begin: dropped
        (1_600, "[NN_LR_PT]never_closed"),
        (1_700, "[SUB][NN_LU_PU]helper"),
        (1_800, None),
    ])
    driver = ThreadTrack(DRIVER, DRIVER, "hwbinder", [
        (1_160, "HIDL::IPreparedModel::execute::server"),
        (1_170, "[NN_LD_PE]SampleDriver::execute"),
        (1_180, "[NN_LC_PCO]conv2dFloat32"),
        (1_880, None),
        (1_890, None),
        (1_895, None),
    ])
    return TraceData({APP: "com.example.app", DRIVER: "nn-sample-driver"}, [main, worker, driver])


def _read(path) -> pb.Trace:
    trace = pb.Trace()
    trace.ParseFromString(path.read_bytes())
    return trace


def _slices(trace: pb.Trace) -> list[tuple[str, int, int, int, int]]:
    """Rebuild (name, start, end, track_uuid, depth) from begin/end packets, as trace_processor does."""
    names: dict[int, str] = {}
    stacks: dict[int, list[tuple[str, int]]] = {}
    slices = []
    for packet in trace.packet:
        for entry in packet.interned_data.event_names:
            names[entry.iid] = entry.name
        if not packet.HasField("track_event"):
            continue
        event = packet.track_event
        stack = stacks.setdefault(event.track_uuid, [])
        if event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            stack.append((names[event.name_iid], packet.timestamp))
        else:
            assert event.type == pb.TrackEvent.TYPE_SLICE_END and stack, "unbalanced end"
            name, start = stack.pop()
            slices.append((name, start, packet.timestamp, event.track_uuid, len(stack)))
    assert all(not stack for stack in stacks.values()), "slices left open"
    return slices


@pytest.fixture
def exported(tmp_path):
    path = tmp_path / "run.pftrace"
    data = _trace()
    assert PerfettoExporter(path).export(data) is ExportResult.SUCCESS
    return data, _read(path)


def test_registry_finds_exporter():
    assert get_exporter("perfetto") is PerfettoExporter
    assert exporter_for_path("out.perfetto-trace") is PerfettoExporter


def test_every_packet_on_one_sequence_first_clears_state(exported):
    _, trace = exported
    assert {p.trusted_packet_sequence_id for p in trace.packet} == {SEQUENCE_ID}
    first = trace.packet[0]
    assert first.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    assert first.first_packet_on_sequence


def test_clock_snapshot_makes_monotonic_the_trace_clock(exported):
    _, trace = exported
    snapshot = trace.packet[0].clock_snapshot
    assert snapshot.primary_trace_clock == pb.BUILTIN_CLOCK_MONOTONIC
    assert pb.BUILTIN_CLOCK_MONOTONIC in {c.clock_id for c in snapshot.clocks}
    timed = [p for p in trace.packet if p.HasField("track_event")]
    assert timed and all(p.timestamp_clock_id == pb.BUILTIN_CLOCK_MONOTONIC for p in timed)


def test_process_and_thread_tracks(exported):
    data, trace = exported
    descriptors = [p.track_descriptor for p in trace.packet if p.HasField("track_descriptor")]
    processes = {d.uuid: (d.process.pid, d.process.process_name)
                 for d in descriptors if d.HasField("process")}
    threads = [d for d in descriptors if d.HasField("thread")]
    assert sorted(processes.values()) == sorted(data.processes.items())
    assert [(t.thread.pid, t.thread.tid, t.thread.thread_name) for t in threads] == \
        [(t.pid, t.tid, t.name) for t in data.threads]
    for thread in threads:
        assert processes[thread.parent_uuid][0] == thread.thread.pid
    assert len({d.uuid for d in descriptors}) == len(descriptors)


def test_slices_match_trace_spans(exported):
    """Every span, except that a switch is nested the AOSP way: the switched-away span ends
    with the ``[SW]`` span it encloses (as atrace writes it and parse_systrace reads it)."""
    data, trace = exported
    thread_uuid = {(d.track_descriptor.thread.pid, d.track_descriptor.thread.tid):
                   d.track_descriptor.uuid
                   for d in trace.packet if d.track_descriptor.HasField("thread")}
    expected = sorted((s.name, s.start_ns, s.end_ns, thread_uuid[s.pid, s.tid], s.depth)
                      for s in data.spans() if "switched" not in s.name and "finish" not in s.name)
    worker = thread_uuid[APP, APP + 1]
    expected += [("[NN_LR_PC]ANeuralNetworksCompilation_finish", 1_200, 1_400, worker, 0),
                 ("[SW][NN_LR_PE]switched", 1_300, 1_400, worker, 1)]
    assert sorted(_slices(trace)) == sorted(expected)
    assert len(expected) == 10  # the stray end is dropped, the unclosed begin closed


def test_events_are_written_in_time_order(exported):
    _, trace = exported
    stamps = [p.timestamp for p in trace.packet if p.HasField("track_event")]
    assert stamps == sorted(stamps)


def test_switch_begins_inside_the_span_it_switches_from(exported):
    _, trace = exported
    at_1300 = [p.track_event.type for p in trace.packet
               if p.HasField("track_event") and p.timestamp in (1_300, 1_400)]
    assert at_1300 == [pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END,
                       pb.TrackEvent.TYPE_SLICE_END]


def test_names_interned_once_and_flagged(exported):
    _, trace = exported
    interned = [e.name for p in trace.packet for e in p.interned_data.event_names]
    assert len(interned) == len(set(interned))
    for packet in trace.packet:
        if packet.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            assert packet.sequence_flags & pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
            assert packet.track_event.name_iid > 0


def test_nn_names_carry_category_and_annotations(exported):
    _, trace = exported
    categories = {e.iid: e.name for p in trace.packet for e in p.interned_data.event_categories}
    names = {e.iid: e.name for p in trace.packet for e in p.interned_data.event_names}
    begins = {names[p.track_event.name_iid]: p.track_event for p in trace.packet
              if p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN}
    conv = begins["[NN_LC_PCO]conv2dFloat32"]
    assert [categories[i] for i in conv.category_iids] == ["LC"]
    assert {a.name: a.string_value for a in conv.debug_annotations} == \
        {"layer": "LC", "phase": "PCO", "detail": "conv2dFloat32"}
    helper = begins["[SUB][NN_LU_PU]helper"]
    assert {a.name: a.string_value for a in helper.debug_annotations}["marker"] == "[SUB]"
    hidl = begins["HIDL::IPreparedModel::execute::server"]
    assert not hidl.category_iids and not hidl.debug_annotations


def test_process_without_name_still_gets_a_track(tmp_path):
    path = tmp_path / "t.pb"
    data = TraceData({}, [ThreadTrack(7, 8, "", [(5, "x"), (9, None)])])
    assert PerfettoExporter(path).export(data) is ExportResult.SUCCESS
    trace = _read(path)
    processes = [p.track_descriptor.process for p in trace.packet
                 if p.track_descriptor.HasField("process")]
    assert [(p.pid, p.process_name) for p in processes] == [(7, "")]
    assert [(s[0], s[1], s[2]) for s in _slices(trace)] == [("x", 5, 9)]


def test_empty_trace_is_valid(tmp_path):
    path = tmp_path / "empty.pftrace"
    assert PerfettoExporter(path).export(TraceData()) is ExportResult.SUCCESS
    assert len(_read(path).packet) == 1  # the clock snapshot


def test_unwritable_path_fails_without_raising(tmp_path, caplog):
    target = tmp_path / "missing-dir" / "run.pftrace"
    with caplog.at_level(logging.ERROR, logger="nnscope.tracing.exporters.perfetto"):
        assert PerfettoExporter(target).export(_trace()) is ExportResult.FAILURE
    assert "perfetto export" in caplog.text
    assert not target.exists()


def test_failed_export_keeps_previous_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "run.pftrace"
    path.write_bytes(b"old")

    def boom(*_args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("nnscope.tracing.exporters.perfetto.write_trace", boom)
    assert PerfettoExporter(path).export(_trace()) is ExportResult.FAILURE
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["run.pftrace"]


def test_the_file_has_the_mode_of_the_other_trace_files(tmp_path):
    """Issue 37: ``trace.perfetto-trace`` was 0600 (a tempfile's mode) beside 0644 files."""
    json_path, path = tmp_path / "run.json", tmp_path / "run.perfetto-trace"
    assert exporter_for_path(str(json_path))(json_path).export(_trace()) is ExportResult.SUCCESS
    assert PerfettoExporter(path).export(_trace()) is ExportResult.SUCCESS
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(json_path.stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "run.perfetto-trace"]
