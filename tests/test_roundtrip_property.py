"""Property: seeded random scope trees -> every exporter -> parse_systrace -> the summary of the
recorder's own spans.

The oracle summarises the rows derived from :meth:`TraceData.spans` alone
(:func:`tests.support.trace_convert.span_rows`) with parse_systrace's engine, no file format
involved. Each export is read back from a real file through format detection. The systrace
text formats keep microseconds, so their oracle truncates the span times the same way.
Some trees are also replayed through the real recorder, on real threads and, for the driver
processes, in real forked processes that join the session.
"""
from __future__ import annotations

import gzip
import os
import threading

import pytest

from nnscope import parse_systrace
from nnscope.parse_systrace._engine import iter_runs
from nnscope.parse_systrace.errors import TraceFormatError
from tests.support.sample_traces import random_trace
from tests.support.trace_convert import span_rows
from nnscope.tracing.exporters import ExportResult, get_exporter

#: exporter name -> (file suffix, timestamp quantum in ns)
EXPORTERS = {"systrace": (".txt", 1_000), "systrace-html": (".html", 1_000),
             "chrome-json": (".json", 1), "perfetto": (".perfetto-trace", 1)}
SEEDS = range(40)


def summary_of(runs) -> str:
    return parse_systrace.render_json(runs) + "".join(parse_systrace.render_text(r) for r in runs
                                                      if r.complete)


def oracle(trace, quantum_ns: int) -> str:
    """The summary of the recorder's own spans, or the error it gives (``where`` left out)."""
    rows = span_rows(trace, quantum_ns)
    try:
        return summary_of(list(iter_runs(lambda: iter([rows]))))
    except TraceFormatError as error:
        return f"error: {error.reason}"


def read_back(path) -> str:
    try:
        return summary_of(parse_systrace.summarize(str(path)))
    except TraceFormatError as error:
        return f"error: {error.reason}"


def exported(trace, directory, name: str, packed: bool):
    suffix, _ = EXPORTERS[name]
    path = directory / f"trace{suffix}"
    assert get_exporter(name)(path).export(trace) is ExportResult.SUCCESS
    if packed:
        packed_path = directory / f"trace{suffix}.gz"
        packed_path.write_bytes(gzip.compress(path.read_bytes()))
        return packed_path
    return path


def assert_round_trips(trace, directory) -> int:
    """Every exporter and its gzip form; returns how many runs the oracle found."""
    expected = {quantum: oracle(trace, quantum) for quantum in {1, 1_000}}
    for name, (_, quantum) in EXPORTERS.items():
        for packed in (False, True):
            got = read_back(exported(trace, directory, name, packed))
            assert got == expected[quantum], f"{name}{' (gzip)' if packed else ''}"
    return expected[1].count('"starting_mark"')


@pytest.mark.parametrize("seed", SEEDS)
def test_random_trees_read_back_with_the_summary_of_their_spans(seed, tmp_path):
    trace = random_trace(seed)
    assert assert_round_trips(trace, tmp_path) >= 1


def test_the_random_trees_cover_what_the_property_needs():
    """Zero-length spans, equal times, switches, several threads, processes and drivers."""
    traces = [random_trace(seed) for seed in SEEDS]
    spans = [span for trace in traces for span in trace.spans()]
    assert sum(span.duration_ns == 0 for span in spans) > 100
    assert sum(span.name.startswith("[SW]") for span in spans) > 100
    starts = [(span.pid, span.tid, span.start_ns) for span in spans]
    assert len(starts) - len(set(starts)) > 100  # spans of one thread beginning together
    assert any(len(trace.processes) >= 3 for trace in traces)
    assert any(len({t.tid for t in trace.threads if t.pid == min(trace.processes)}) >= 3
               for trace in traces)
    drivers = [t for trace in traces for t in trace.threads if t.name == "hwbinder"]
    assert len(drivers) > 10
    assert all(oracle(trace, 1).startswith("[") for trace in traces)  # summaries, no errors


def test_a_reordered_tie_changes_the_summary(tmp_path):
    """The oracle sees the order at equal times: reading a switch's zero-length TRANSFORMATION
    span inside its COMPUTATION span (what the X events of old gave) is an error."""
    from nnscope.tracing.span import ThreadTrack, TraceData
    track = ThreadTrack(1, 1, "main", [
        (10, "[NN_LA_PO]m"), (10, "[NN_LR_PE]ANeuralNetworksExecution_compute"),
        (20, "[NN_LC_PE]CpuExecutor::run"), (30, "[NN_LC_PTR]op"), (30, None),
        (30, "[SW][NN_LC_PCO]op"), (90, None), (95, None), (99, None), (99, None)])
    trace = TraceData({1: "app"}, [track])
    assert assert_round_trips(trace, tmp_path) == 1
    swapped = list(track.events)
    swapped[3:6] = [(30, "[SW][NN_LC_PCO]op"), (30, "[NN_LC_PTR]op"), (30, None)]
    wrong = TraceData({1: "app"}, [ThreadTrack(1, 1, "main", swapped)])
    assert oracle(wrong, 1).startswith("error: nesting violation: phase PTR inside phase PCO")


# --- through the real recorder -----------------------------------------------------------

class _Replay:
    """A fake clock for ``tracing.tracer._now`` that gives each thread its recorded times."""

    def __init__(self) -> None:
        self.local = threading.local()

    def __call__(self) -> int:
        return next(self.local.times)

    def run(self, events: list) -> None:
        """Record ``events`` (recorder form) through the scope API: a begin through its
        factory and the scope's enter, an end as the scope's exit, an ``end`` + ``[SW]`` begin pair as one
        :func:`tracing.switch`."""
        from nnscope import tracing
        from nnscope.tracing.naming import parse_name
        times, calls = [], []
        index = 0
        while index < len(events):
            ts, name = events[index]
            following = events[index + 1] if index + 1 < len(events) else (None, None)
            if name is None and following[0] == ts and (following[1] or "").startswith("[SW]"):
                parsed = parse_name(following[1])
                calls.append(("switch", lambda p=parsed: tracing.switch(p.layer, p.phase, p.detail)))
                index += 1
            elif name is None:
                calls.append(("end", None))
            else:
                calls.append(("begin", _begin_call(name)))
            times.append(ts)
            index += 1
        self.local.times = iter(times)
        open_scopes = []
        for kind, call in calls:
            if kind == "end":
                open_scopes.pop().__exit__(None, None, None)
            elif kind == "switch":
                call()
            else:
                scope = call()
                scope.__enter__()
                open_scopes.append(scope)


def _begin_call(name: str):
    from nnscope import tracing
    from nnscope.tracing.naming import parse_name
    parsed = parse_name(name)
    if parsed is None:  # a HIDL mark: its own factory
        interface, method, side = name.split("::")[1:]
        return lambda: tracing.tracer.hidl(interface, method, side)
    factory = tracing.subtract if parsed.marker == "[SUB]" else tracing.full
    return lambda: factory(parsed.layer, parsed.phase, parsed.detail)


@pytest.mark.parametrize("seed", [3, 7, 11, 19])
def test_trees_recorded_by_the_real_recorder_round_trip(seed, tmp_path, monkeypatch):
    """App threads record on real threads of this process; each driver process is a real
    forked process that joins the session and flushes its spans there."""
    from nnscope import tracing
    from nnscope.tracing import tracer
    generated = random_trace(seed)
    replay = _Replay()
    monkeypatch.setattr(tracer, "_now", replay)
    replay.local.times = iter([1])  # the session's start
    own = [t for t in generated.threads if t.pid == min(generated.processes)]
    drivers = [t for t in generated.threads if t.name == "hwbinder"]
    with tracing.TraceSession() as session:
        for track in own:
            worker = threading.Thread(target=replay.run, args=(track.events,), name=track.name)
            worker.start()
            worker.join()
        for track in drivers:
            pid = os.fork()
            if pid == 0:  # the driver process: record, flush into the session, leave at once
                try:
                    tracer.set_process_name("driver")
                    replay.run(track.events)
                    tracing.flush()
                finally:
                    os._exit(0)
            assert os.waitpid(pid, 0)[1] == 0
    recorded = session.collect()
    assert len(recorded.threads) == len(own) + len(drivers)
    assert len({t.pid for t in recorded.threads}) == 1 + len(drivers)
    assert sorted(map(repr, (t.events for t in recorded.threads))) == \
        sorted(map(repr, (t.events for t in own + drivers)))
    assert assert_round_trips(recorded, tmp_path) >= 1
