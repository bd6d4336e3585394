"""Fenced execution on real driver processes: ``start_compute_with_dependencies`` of a single-step
plan on a driver goes through the HAL ``executeFenced`` (the driver waits for the sync fences),
checked against the nnapi-reference CPU result."""
import os
import threading
import time

import numpy as np
import pytest

from nnscope import parse_systrace
from nnscope import tracing
from nnscope.runtime import Compilation, Duration, Execution, Memory, NnError, ResultCode, manager
from nnscope.runtime.drivers.ipc import RemoteDevice, RemotePreparedModel
from nnscope.runtime.event import Event
from nnscope.runtime.hal.sync_fence import FAILED, SIGNALED
from tests.runtime.helpers import add_model, code_of
from nnscope.tracing import Phase

SHAPE = (2, 8)
NBYTES = int(np.prod(SHAPE)) * 4


@pytest.fixture(scope="module")
def two_drivers():
    """sample-all and sample-float-fast: two driver processes."""
    made = [RemoteDevice(name, timeout_s=30.0) for name in ("sample-all", "sample-float-fast")]
    yield made
    for device in made:
        device.shutdown()


@pytest.fixture
def launches(monkeypatch):
    """Counts the HAL executeFenced calls the runtime makes."""
    calls = []
    real = RemotePreparedModel.execute_fenced

    def counting(prepared, *args, **kwargs):
        calls.append(prepared.device.name)
        return real(prepared, *args, **kwargs)

    monkeypatch.setattr(RemotePreparedModel, "execute_fenced", counting)
    return calls


class Gate:
    """A sync fence the test signals (an eventfd), wrapped as an Event."""

    def __init__(self):
        self.fd = os.eventfd(0, os.EFD_CLOEXEC)
        self.event = Event.from_sync_fence_fd(self.fd)

    def open(self, after: float = 0.0, ok: bool = True) -> None:
        threading.Timer(after, os.eventfd_write, (self.fd, SIGNALED if ok else FAILED)).start()


@pytest.fixture
def gate():
    gate = Gate()
    yield gate
    if not gate.event.done:
        os.eventfd_write(gate.fd, 1)  # never leave a driver waiting
    gate.event.free()
    os.close(gate.fd)


def _compiled(device):
    compilation = Compilation.for_devices(add_model(SHAPE), [device])
    compilation.finish()
    return compilation


def _shared(values=None) -> Memory:
    memory = Memory.create_shared(NBYTES)
    _array(memory)[:] = 0 if values is None else values
    return memory


def _array(memory: Memory) -> np.ndarray:
    return np.frombuffer(memory.buffer(), np.float32).reshape(SHAPE)


def _add(compilation, a: Memory, b: Memory, out) -> Execution:
    execution = Execution(compilation)
    execution.set_input_from_memory(0, a, 0, NBYTES)
    execution.set_input_from_memory(1, b, 0, NBYTES)
    if isinstance(out, Memory):
        execution.set_output_from_memory(0, out, 0, NBYTES)
    else:
        execution.set_output(0, out)
    return execution


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` on the nnapi-reference CPU device."""
    compilation = Compilation.for_devices(add_model(SHAPE), [manager.cpu_device()])
    compilation.finish()
    out = np.zeros(SHAPE, np.float32)
    execution = Execution(compilation)
    execution.set_input(0, a)
    execution.set_input(1, b)
    execution.set_output(0, out)
    execution.compute()
    return out


def test_chain_of_three_across_two_drivers_without_the_caller_waiting(two_drivers, gate, launches):
    first_driver, second_driver = two_drivers
    on_first, on_second = _compiled(first_driver), _compiled(second_driver)
    assert first_driver.pid != second_driver.pid
    rng = np.random.default_rng(11)
    x, y = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    mx, my, m1, m2 = _shared(x), _shared(y), _shared(), _shared()
    out3 = np.zeros(SHAPE, np.float32)
    e1 = _add(on_first, mx, my, m1).start_compute_with_dependencies([gate.event])   # x + y
    e2 = _add(on_second, m1, mx, m2).start_compute_with_dependencies([e1])          # (x + y) + x
    e3 = _add(on_first, m2, m1, out3).start_compute_with_dependencies([e2])         # ... + (x + y)
    assert launches == ["sample-all", "sample-float-fast", "sample-all"]  # all three in drivers
    time.sleep(0.1)
    assert not (e1.done or e2.done or e3.done) and not _array(m1).any() and not out3.any()
    gate.open()
    e3.wait(timeout=30)
    assert e1.done and e2.done
    r1 = _reference(x, y)
    r2 = _reference(r1, x)
    np.testing.assert_allclose(_array(m1), r1, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(_array(m2), r2, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out3, _reference(r2, r1), rtol=1e-3, atol=1e-3)
    for item in (e3, e2, e1, mx, my, m1, m2):
        item.free()


def test_sync_fence_of_a_driver_run_is_a_pollable_eventfd(two_drivers, gate, launches):
    mx, out = _shared(np.ones(SHAPE, np.float32)), np.zeros(SHAPE, np.float32)
    event = _add(_compiled(two_drivers[0]), mx, mx, out).start_compute_with_dependencies([gate.event])
    fd = event.get_sync_fence_fd()
    wrapped = Event.from_sync_fence_fd(fd)
    os.close(fd)
    assert not wrapped.done
    gate.open()
    wrapped.wait(timeout=30)  # signalled after the outputs were copied back
    np.testing.assert_array_equal(out, _reference(np.ones(SHAPE, np.float32), np.ones(SHAPE, np.float32)))
    assert launches == ["sample-all"]
    for item in (wrapped, event, mx):
        item.free()


def test_a_failed_dependency_fails_the_chain_with_op_failed(two_drivers, gate, launches):
    mx, m1, out = _shared(np.ones(SHAPE, np.float32)), _shared(), np.zeros(SHAPE, np.float32)
    e1 = _add(_compiled(two_drivers[0]), mx, mx, m1).start_compute_with_dependencies([gate.event])
    e2 = _add(_compiled(two_drivers[1]), m1, mx, out).start_compute_with_dependencies([e1])
    gate.open(ok=False)  # the fence signals an error
    with pytest.raises(NnError, match=r"wait_for\[0\] signalled an error") as info:
        e2.wait(timeout=30)
    assert info.value.code == ResultCode.OP_FAILED
    assert code_of(e1.wait) == ResultCode.OP_FAILED
    assert not _array(m1).any() and not out.any()
    assert launches == ["sample-all", "sample-float-fast"]
    for item in (e2, e1, mx, m1):
        item.free()


def test_duration_after_the_fences_expires_in_the_driver(two_drivers, gate, launches):
    compilation = _compiled(two_drivers[0])
    mx, out, relaxed_out = _shared(np.ones(SHAPE, np.float32)), _shared(), _shared()
    late = _add(compilation, mx, mx, out).start_compute_with_dependencies([gate.event], duration_ns=1)
    relaxed = _add(compilation, mx, mx, relaxed_out).start_compute_with_dependencies(
        [gate.event], duration_ns=10_000_000_000)
    gate.open(after=0.05)
    with pytest.raises(NnError, match="MISSED_DEADLINE_TRANSIENT") as info:
        late.wait(timeout=30)
    assert info.value.code == ResultCode.MISSED_DEADLINE_TRANSIENT and not _array(out).any()
    relaxed.wait(timeout=30)
    assert (_array(relaxed_out) == 2.0).all()
    assert launches == ["sample-all", "sample-all"]
    for item in (late, relaxed, mx, out, relaxed_out):
        item.free()


def test_all_four_durations_come_from_the_driver(two_drivers, gate, launches):
    mx, out = _shared(np.ones(SHAPE, np.float32)), np.zeros(SHAPE, np.float32)
    execution = _add(_compiled(two_drivers[1]), mx, mx, out)
    execution.set_measure_timing(True)
    event = execution.start_compute_with_dependencies([gate.event])
    gate.open(after=0.05)
    event.wait(timeout=30)
    durations = {code: execution.get_duration(code) for code in Duration}
    assert all(isinstance(value, int) and value >= 0 for value in durations.values()), durations
    assert durations[Duration.ON_HARDWARE] == durations[Duration.FENCED_ON_HARDWARE]
    assert durations[Duration.ON_HARDWARE] <= durations[Duration.IN_DRIVER]
    assert durations[Duration.FENCED_ON_HARDWARE] <= durations[Duration.FENCED_IN_DRIVER]
    waited = durations[Duration.IN_DRIVER] - durations[Duration.FENCED_IN_DRIVER]
    assert waited >= 40_000_000  # launched timing counts the driver's ~50 ms wait for the gate
    assert execution.get_output_operand_dimensions(0) == SHAPE
    assert launches == ["sample-float-fast"]
    event.free()
    mx.free()


def test_a_driver_killed_before_it_reported_leaves_the_run_to_the_cpu(fresh_device, gate, launches):
    device = fresh_device("sample-float-fast", timeout_s=30.0)
    manager.forTest_set_devices([device])  # Compilation(model): the driver, the CPU as fallback
    try:
        compilation = Compilation(add_model(SHAPE))
        compilation.finish()
        x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
        mx, out = _shared(x), np.zeros(SHAPE, np.float32)
        event = _add(compilation, mx, mx, out).start_compute_with_dependencies([gate.event])
        assert launches == ["sample-float-fast"]
        device.process.kill()
        gate.open()
        event.wait(timeout=30)
        np.testing.assert_allclose(out, _reference(x, x), rtol=1e-6)
        event.free()
        mx.free()
    finally:
        manager.forTest_reset()


def test_plain_inputs_behind_a_pending_fence_run_in_process_and_stay_right(two_drivers, gate, launches):
    """Plain buffers would be read at the call by a driver: the in-process path reads them after
    the fences, so a chain through numpy arrays still computes on fresh values."""
    compilation = _compiled(two_drivers[0])
    ones = np.ones(SHAPE, np.float32)
    out1, out2 = np.zeros(SHAPE, np.float32), np.zeros(SHAPE, np.float32)
    first = Execution(compilation)
    first.set_input(0, ones)
    first.set_input(1, ones)
    first.set_output(0, out1)
    second = Execution(compilation)
    second.set_input(0, out1)
    second.set_input(1, out1)
    second.set_output(0, out2)
    e1 = first.start_compute_with_dependencies([gate.event])
    e2 = second.start_compute_with_dependencies([e1])
    gate.open()
    e2.wait(timeout=30)
    np.testing.assert_array_equal(out2, _reference(out1, out1))
    assert (out2 == 4.0).all() and launches == []
    third = Execution(compilation)  # no pending dependency: plain buffers go to the driver
    third.set_input(0, out2)
    third.set_input(1, ones)
    out3 = np.zeros(SHAPE, np.float32)
    third.set_output(0, out3)
    third.start_compute_with_dependencies([]).wait(timeout=30)
    assert (out3 == 5.0).all() and launches == ["sample-all"]
    for event in (e2, e1):
        event.free()


def test_fenced_run_spans_read_in_parse_systrace(two_drivers, tmp_path):
    device = two_drivers[0]
    mx = _shared(np.ones(SHAPE, np.float32))
    with tracing.TraceSession() as session:
        with tracing.application(Phase.OVERALL, "fenced"):
            compilation = _compiled(device)  # the running driver joins the session here
            events = []
            for _ in range(2):
                out = np.zeros(SHAPE, np.float32)
                events.append(_add(compilation, mx, mx, out).start_compute_with_dependencies(events[-1:]))
            events[-1].wait(timeout=30)
            for event in events:
                event.free()
        device.capabilities()  # a request after the runs: the driver has flushed their spans
        data = session.collect()
        session.export(tmp_path / "fenced.html")
    mx.free()
    spans = list(data.spans())
    parents = {(s.pid, s.tid, s.index): s for s in spans}
    names = {}
    for span in spans:
        parent = parents.get((span.pid, span.tid, span.parent))
        names.setdefault(span.name, set()).add((span.pid == device.pid, parent.name if parent else None))
    assert (False, "[NN_LI_PE]executeFenced") in names["HIDL::IPreparedModel::executeFenced::client"]
    run = names["[NN_LD_PE]SampleDriver::executeFenced"]
    assert (True, "HIDL::IPreparedModel::executeFenced::server") in run  # the launch
    assert (True, None) in run  # the worker thread's run
    assert (True, "[NN_LD_PE]SampleDriver::executeFenced") in names["[NN_LC_PE]CpuExecutor::run"]
    assert (False, "[NN_LI_PE]getExecutionInfo") in names[
        "HIDL::IFencedExecutionCallback::getExecutionInfo::client"]
    assert any(pid for pid, _ in names["HIDL::IFencedExecutionCallback::getExecutionInfo::server"])
    [summary] = parse_systrace.summarize(str(tmp_path / "fenced.html"))
    assert summary.complete
    assert summary.times["PE"]["LI"] > 0 and summary.times["PE"]["LD"] > 0
    assert summary.execution_counts["PO"] == 2  # one per executeFenced::server
