"""Scope factories and the per-thread recorder."""
import contextlib
import os
import threading

import pytest

from nnscope import tracing
from nnscope.tracing import Layer, Phase, TraceSession
from nnscope.tracing import _buffer, tracer

FACTORY_CALLS = [
    (lambda: tracing.application(Phase.OVERALL, "mobilenet"), "[NN_LA_PO]mobilenet"),
    (lambda: tracing.runtime(Phase.EXECUTION, "compute"), "[NN_LR_PE]compute"),
    (lambda: tracing.ipc(Phase.COMPILATION, "prepareModel"), "[NN_LI_PC]prepareModel"),
    (lambda: tracing.driver(Phase.EXECUTION, "SampleDriver::execute"),
     "[NN_LD_PE]SampleDriver::execute"),
    (lambda: tracing.cpu(Phase.COMPUTATION, "conv2d"), "[NN_LC_PCO]conv2d"),
    (lambda: tracing.utility(Phase.UNSPECIFIED, "validateModel"), "[NN_LU_PU]validateModel"),
    (lambda: tracing.full(Layer.OTHER, Phase.TERMINATION, "x"), "[NN_LO_PT]x"),
    (lambda: tracing.subtract(Layer.RUNTIME, Phase.COMPILATION, "prep"), "[SUB][NN_LR_PC]prep"),
    (lambda: tracing.hidl("IDevice", "prepareModel", "client"),
     "HIDL::IDevice::prepareModel::client"),
]


def names(trace):
    return [name for track in trace.threads for _, name in track.events]


@pytest.mark.parametrize("make,expected", FACTORY_CALLS)
def test_off_by_default_a_scope_keeps_its_name_and_records_nothing(make, expected):
    assert not tracing.enabled()
    scope = make()
    assert type(scope) is tracer.Scope and not hasattr(scope, "__dict__")
    assert scope.tag + scope.detail == expected
    with scope:
        pass
    with TraceSession() as session:
        pass
    assert session.collect().threads == []


def test_factories_hand_out_kept_scopes_up_to_a_bound():
    assert tracing.runtime(Phase.TERMINATION, "kept") is tracing.runtime(Phase.TERMINATION, "kept")
    assert tracing.hidl("IDevice", "kept", "client") is tracing.hidl("IDevice", "kept", "client")
    many = [tracing.utility(Phase.TERMINATION, f"d{i}") for i in range(tracer._KEPT_PER_PHASE + 5)]
    assert [scope.detail for scope in many] == [f"d{i}" for i in range(len(many))]
    last = f"d{len(many) - 1}"
    assert tracing.utility(Phase.TERMINATION, last) is not many[-1]  # past the bound: made anew
    with TraceSession() as session:
        live = tracing.runtime(Phase.TERMINATION, "kept")
        assert type(live) is not tracer.Scope and live is tracing.runtime(Phase.TERMINATION, "kept")
        with live:
            pass
    assert names(session.collect()) == ["[NN_LR_PT]kept", None]


def test_null_scope_lets_exceptions_through():
    with pytest.raises(KeyError):
        with tracing.runtime(Phase.EXECUTION, "x"):
            raise KeyError("boom")


@pytest.mark.parametrize("make,expected", FACTORY_CALLS)
def test_each_factory_records_its_name(make, expected):
    with TraceSession() as session:
        assert tracing.enabled()
        with make():
            pass
    assert not tracing.enabled()
    [track] = session.collect().threads
    assert [name for _, name in track.events] == [expected, None]


def test_nesting_ids_and_monotonic_times():
    with TraceSession() as session:
        with tracing.application(Phase.OVERALL, "run"):
            with tracing.runtime(Phase.EXECUTION, "compute"):
                pass
    [track] = session.collect().threads
    assert (track.pid, track.tid) == (os.getpid(), threading.get_native_id())
    assert track.name == threading.current_thread().name
    times = [ts for ts, _ in track.events]
    assert times == sorted(times)
    spans = {span.name: span for span in session.collect().spans()}
    outer, inner = spans["[NN_LA_PO]run"], spans["[NN_LR_PE]compute"]
    assert inner.parent == outer.index and inner.depth == 1
    assert outer.start_ns <= inner.start_ns <= inner.end_ns <= outer.end_ns


def test_switch_ends_the_open_scope_and_the_with_ends_the_switch():
    with TraceSession() as session:
        with tracing.cpu(Phase.TRANSFORMATION, "conv2dFloat32"):
            tracing.switch(Layer.CPU, Phase.COMPUTATION, "conv2dFloat32")
    [track] = session.collect().threads
    assert [name for _, name in track.events] == [
        "[NN_LC_PTR]conv2dFloat32", None, "[SW][NN_LC_PCO]conv2dFloat32", None]
    assert track.events[1][0] == track.events[2][0]


def test_switch_is_a_no_op_when_off():
    tracing.switch(Layer.CPU, Phase.COMPUTATION, "x")
    with TraceSession() as session:
        pass
    assert session.collect().threads == []


@pytest.mark.parametrize("on", [False, True])
def test_invalid_names_raise(on):
    with TraceSession() if on else contextlib.nullcontext():
        with pytest.raises(ValueError, match="layer LA only"):
            tracing.runtime(Phase.OVERALL, "x")
        with pytest.raises(ValueError, match="unknown layer"):
            tracing.full("LR?", Phase.EXECUTION, "x")
        with pytest.raises(ValueError):
            tracing.cpu("P?", "x")
        with pytest.raises(ValueError, match="HIDL side"):
            tracing.hidl("IDevice", "x", "middle")


def test_exception_in_scope_still_ends_it():
    with TraceSession() as session:
        with pytest.raises(RuntimeError):
            with tracing.runtime(Phase.EXECUTION, "x"):
                raise RuntimeError
    assert names(session.collect()) == ["[NN_LR_PE]x", None]


@tracing.runtime(Phase.COMPILATION, "ANeuralNetworksCompilation_finish")
def _decorated_while_off(value):
    return value + 1


class _Driver:
    @tracing.full(Layer.DRIVER,
                  Phase.EXECUTION, detail="SampleDriver::execute")
    def execute(self):
        raise ValueError("bad request")


def test_decorator_applied_while_off_traces_when_on():
    assert _decorated_while_off(1) == 2
    with TraceSession() as session:
        assert _decorated_while_off(2) == 3
        with pytest.raises(ValueError):
            _Driver().execute()
    assert names(session.collect()) == ["[NN_LR_PC]ANeuralNetworksCompilation_finish", None,
                                        "[NN_LD_PE]SampleDriver::execute", None]
    assert _decorated_while_off.__name__ == "_decorated_while_off"


class _Counter:
    calls = 0

    @tracing.runtime(Phase.EXECUTION, "count")
    def count(self):
        self.calls += 1
        return self.calls

    @tracing.runtime(Phase.EXECUTION, "add")
    def add(self, step=1):
        self.calls += step
        return self.calls


def test_decorated_methods_of_self_alone_and_with_arguments_are_spans():
    counter = _Counter()
    assert counter.count() == 1 and _Counter.count(self=counter) == 2
    with TraceSession() as session:
        assert counter.count() == 3 and counter.add(step=2) == 5 and counter.add() == 6
    assert names(session.collect()) == ["[NN_LR_PE]count", None, "[NN_LR_PE]add", None,
                                        "[NN_LR_PE]add", None]
    assert _Counter.count.__wrapped__.__name__ == "count"


def test_decorator_applied_while_on_records_no_stray_begin():
    with TraceSession() as session:
        @tracing.hidl("IPreparedModel", "execute", "server")
        def serve():
            return "done"
        assert serve() == "done"
    assert names(session.collect()) == ["HIDL::IPreparedModel::execute::server", None]
    with TraceSession() as later:
        serve()
    assert names(later.collect()) == ["HIDL::IPreparedModel::execute::server", None]


def test_decorator_needs_no_source():
    namespace = {"tracing": tracing, "Phase": Phase}
    exec(compile("@tracing.runtime(Phase.EXECUTION, 'x')\ndef f():\n    return 7\n",
                 "<no source>", "exec"), namespace)
    with TraceSession() as session:
        assert namespace["f"]() == 7
    assert names(session.collect()) == ["[NN_LR_PE]x", None]


def test_threads_get_their_own_tracks():
    barrier = threading.Barrier(3)
    tids = {}

    def work(index):
        with tracing.runtime(Phase.EXECUTION, f"worker{index}"):
            tids[index] = threading.get_native_id()
            barrier.wait()

    with TraceSession() as session:
        threads = [threading.Thread(target=work, args=(i,), name=f"nn-{i}") for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    tracks = {track.name: track for track in session.collect().threads}
    assert set(tracks) == {"nn-0", "nn-1", "nn-2"}
    for i in range(3):
        assert tracks[f"nn-{i}"].tid == tids[i]
        assert [name for _, name in tracks[f"nn-{i}"].events] == [f"[NN_LR_PE]worker{i}", None]


def test_process_name_is_exported():
    original = tracer.process_name()
    tracing.set_process_name("nn-app")
    try:
        with TraceSession() as session:
            with tracing.runtime(Phase.EXECUTION, "x"):
                pass
        assert session.collect().processes == {os.getpid(): "nn-app"}
    finally:
        tracing.set_process_name(original)


def test_scope_made_before_the_session_still_decorates():
    scope = tracing.driver(Phase.EXECUTION, "made early")  # tracing off: it keeps its name
    with TraceSession() as session:
        @tracing.driver(Phase.EXECUTION, "applied while on")
        def on():
            pass
        late = scope(lambda: None)
        on()
        late()
    assert names(session.collect()) == ["[NN_LD_PE]applied while on", None,
                                        "[NN_LD_PE]made early", None]


def test_invalid_decorator_is_rejected_even_when_off():
    with pytest.raises(ValueError, match="layer LA only"):
        @tracing.ipc(Phase.WARMUP, "x")
        def never():
            pass


def test_buffer_is_flat_with_no_tuple_per_event():
    with TraceSession():
        with tracing.runtime(Phase.EXECUTION, "compute"):
            tracing.switch(Layer.CPU, Phase.COMPUTATION, "add")
        events = list(tracer._tls.buffer.events)
    assert [type(e) for e in events[-8:]] == [str, str, int, int, str, str, int, int]
    assert events[-8:-6] == ["[NN_LR_PE]", "compute"] and events[-4:-2] == ["[SW][NN_LC_PCO]", "add"]


def test_hot_recorder_events_read_like_the_factories():
    with TraceSession() as session:
        append, extend, now = tracer.hot_recorder()
        extend(("[NN_LC_PTR]", "addFloat32", now()))
        t = now()
        extend((t, "[SW][NN_LC_PCO]", "addFloat32", t))
        append(now())
    trace = session.collect()
    assert names(trace) == ["[NN_LC_PTR]addFloat32", None, "[SW][NN_LC_PCO]addFloat32", None]
    assert tracer.hot_recorder() is None


def test_drain_while_a_thread_writes_loses_and_garbles_nothing():
    spans, stop = 20000, threading.Event()
    drained = []

    def writer():
        append, extend, now = tracer.hot_recorder()
        for index in range(spans):
            extend(("[NN_LC_PTR]", "op", now()))
            t = now()
            extend((t, "[SW][NN_LC_PCO]", "op", t))
            append(now())
        stop.set()

    with TraceSession():
        thread = threading.Thread(target=writer, name="writer")
        thread.start()
        while not stop.is_set():  # drain at arbitrary points of the writer's loop
            drained += [e for t in _buffer.snapshot(drain=True) if t.name == "writer" for e in t.events]
        thread.join()
        drained += [e for t in _buffer.snapshot(drain=True) if t.name == "writer" for e in t.events]
    assert [name for _, name in drained] == ["[NN_LC_PTR]op", None, "[SW][NN_LC_PCO]op", None] * spans
    times = [ts for ts, _ in drained]
    assert times == sorted(times) and all(type(ts) is int for ts in times)


def test_name_events_stops_before_a_partly_written_begin():
    cache = {}
    assert _buffer.name_events(["[NN_LR_PE]", "x", 5, 6, "[NN_LR_PE]", "y"], cache) == \
        ([(5, "[NN_LR_PE]x"), (6, None)], 4)
    assert _buffer.name_events(["[NN_LR_PE]"], cache) == ([], 0)
