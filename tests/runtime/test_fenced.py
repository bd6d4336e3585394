"""Fenced execution: ``start_compute_with_dependencies`` and Events on real eventfd sync fences."""
import os
import select
import threading
import time

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, Duration, Execution, NnError, ResultCode
from nnscope.runtime.event import Event
from tests.runtime.helpers import add_execution, add_model, code_of

#: In-process on the reference device (a HAL executeFenced over IPC is not part of this).
pytestmark = pytest.mark.usefixtures("cpu_only")


def _compiled(devices=None, model=None):
    model = model or add_model()
    compilation = Compilation(model) if devices is None else Compilation.for_devices(model, devices)
    compilation.finish()
    return compilation


def _ones():
    return np.ones((1, 4), np.float32)


def _zeros():
    return np.zeros((1, 4), np.float32)


class Gate:
    """A sync fence the test signals: an eventfd wrapped as an Event (the Event owns a dup)."""

    def __init__(self):
        self.fd = os.eventfd(0, os.EFD_CLOEXEC)
        self.event = Event.from_sync_fence_fd(self.fd)

    def open(self, after: float = 0.0) -> None:
        if after:
            threading.Timer(after, os.eventfd_write, (self.fd, 1)).start()
        else:
            os.eventfd_write(self.fd, 1)

    def close(self) -> None:
        self.event.free()
        os.close(self.fd)


@pytest.fixture
def gate():
    gate = Gate()
    yield gate
    gate.open()  # never leave a worker blocked
    gate.close()


def _readable(fd: int, timeout_ms: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_ms))


def test_chain_of_three_runs_in_order_without_the_caller_waiting(gate):
    compilation = _compiled()
    out1, out2, out3 = _zeros(), _zeros(), _zeros()
    first = add_execution(compilation, _ones(), _ones(), out1)          # 1 + 1
    second = add_execution(compilation, out1, out1, out2)               # 2 + 2
    third = add_execution(compilation, out2, out1, out3)                # 4 + 2
    e1 = first.start_compute_with_dependencies([gate.event])
    e2 = second.start_compute_with_dependencies([e1])
    e3 = third.start_compute_with_dependencies([e2])
    time.sleep(0.05)
    assert not (e1.done or e2.done or e3.done) and not out1.any()  # all scheduled, none ran
    gate.open()
    e3.wait(timeout=10)
    assert e1.done and e2.done
    assert out1.tolist() == [[2.0] * 4] and out2.tolist() == [[4.0] * 4] and out3.tolist() == [[6.0] * 4]
    for event in (e1, e2, e3):
        event.free()


def test_sync_fence_fd_is_pollable_and_signals_exactly_when_done(gate):
    out = _zeros()
    event = add_execution(_compiled(), _ones(), _ones(), out).start_compute_with_dependencies([gate.event])
    fd = event.get_sync_fence_fd()
    try:
        assert fd != event._fence  # a duplicate the caller owns
        assert not _readable(fd, 50) and not event.done
        gate.open()
        assert _readable(fd, 10_000)
        assert event.done and out.tolist() == [[2.0] * 4]
        assert _readable(fd, 0)  # stays signalled
    finally:
        os.close(fd)
    event.wait()
    event.free()


def test_event_from_an_eventfd_signalled_later():
    fd = os.eventfd(0, os.EFD_CLOEXEC)
    event = Event.from_sync_fence_fd(fd)
    os.close(fd)  # the Event owns its own duplicate
    assert not event.done
    assert code_of(lambda: event.wait(timeout=0.02)) == ResultCode.MISSED_DEADLINE_TRANSIENT
    writer = event._fence
    threading.Timer(0.05, os.eventfd_write, (writer, 1)).start()
    event.wait(timeout=10)
    assert event.done
    event.free()


def test_fence_of_a_finished_execution_wraps_as_a_finished_event():
    event = add_execution(_compiled(), _ones(), _ones(), _zeros()).start_compute_with_dependencies([])
    event.wait()
    fd = event.get_sync_fence_fd()
    wrapped = Event.from_sync_fence_fd(fd)
    os.close(fd)
    assert wrapped.done
    wrapped.wait(timeout=0)
    wrapped.free()
    event.free()


def _failing_execution(compilation) -> Execution:
    """An add whose input 1 is omitted: the reference device fails it with OP_FAILED."""
    execution = Execution(compilation)
    execution.set_input(0, _ones())
    execution.set_input(1, None)
    execution.set_output(0, _zeros())
    return execution


def test_a_failed_dependency_fails_the_execution(gate):
    compilation = _compiled()
    failing = _failing_execution(compilation).start_compute_with_dependencies([gate.event])
    out = _zeros()
    dependent = add_execution(compilation, _ones(), _ones(), out).start_compute_with_dependencies([failing])
    gate.open()
    with pytest.raises(NnError, match=r"dependencies\[0\] failed: OP_FAILED") as info:
        dependent.wait(timeout=10)
    assert info.value.code == ResultCode.OP_FAILED and not out.any()
    assert code_of(failing.wait) == ResultCode.OP_FAILED
    fd = failing.get_sync_fence_fd()  # the fence carries the failure to an fd-only waiter
    through_fd = Event.from_sync_fence_fd(fd)
    os.close(fd)
    assert through_fd.done and code_of(through_fd.wait) == ResultCode.OP_FAILED
    through_fd.free()
    # a dependency that has already failed is refused at the call ("already in a bad state")
    late = add_execution(compilation, _ones(), _ones(), _zeros())
    assert code_of(lambda: late.start_compute_with_dependencies([failing])) == ResultCode.OP_FAILED
    late.start_compute_with_dependencies([]).wait()  # not started by the refused call
    for event in (failing, dependent):
        event.free()


def test_a_fence_in_error_state_fails_the_execution():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the write end of a pipe without reader polls POLLERR
    broken = Event.from_sync_fence_fd(write_end)
    os.close(write_end)
    assert code_of(broken.wait) == ResultCode.OP_FAILED
    out = _zeros()
    release = threading.Event()
    pending = _pending_then(broken, release)
    event = add_execution(_compiled(), _ones(), _ones(), out).start_compute_with_dependencies([pending])
    release.set()  # only now does the dependency end, in the fence's error state
    assert code_of(lambda: event.wait(timeout=10)) == ResultCode.OP_FAILED and not out.any()
    event.free()
    broken.free()


def _pending_then(event: Event, release: threading.Event) -> Event:
    """An Event pending until ``release`` is set, that then ends as ``event`` does."""
    def later():
        release.wait(60)
        event.wait()
    return Event.start(later)


def test_duration_after_the_fences_expires(cpu_only, gate):
    compilation = _compiled([cpu_only])
    out = _zeros()
    event = add_execution(compilation, _ones(), _ones(), out).start_compute_with_dependencies([gate.event], duration_ns=1)
    gate.open(after=0.05)
    assert code_of(lambda: event.wait(timeout=10)) == ResultCode.MISSED_DEADLINE_TRANSIENT
    assert not out.any()
    event.free()


def test_duration_counts_from_the_fences_but_set_timeout_from_the_call(cpu_only, gate):
    compilation = _compiled([cpu_only])
    out = _zeros()
    relaxed = add_execution(compilation, _ones(), _ones(), out).start_compute_with_dependencies(
        [gate.event], duration_ns=10_000_000_000)
    timed = add_execution(compilation, _ones(), _ones(), _zeros())
    timed.set_timeout(20_000_000)  # 20 ms from the call; the gate opens after 100 ms
    late = timed.start_compute_with_dependencies([gate.event])
    gate.open(after=0.1)
    relaxed.wait(timeout=10)
    assert out.tolist() == [[2.0] * 4]
    assert code_of(lambda: late.wait(timeout=10)) == ResultCode.MISSED_DEADLINE_TRANSIENT
    relaxed.free()
    late.free()


def test_fenced_durations_exclude_the_wait_for_the_fences(cpu_only, gate):
    execution = add_execution(_compiled([cpu_only]), _ones(), _ones(), _zeros())
    execution.set_measure_timing(True)
    event = execution.start_compute_with_dependencies([gate.event])
    gate.open(after=0.05)
    event.wait(timeout=10)
    durations = {code: execution.get_duration(code) for code in Duration}
    assert all(isinstance(value, int) for value in durations.values()), durations
    assert durations[Duration.ON_HARDWARE] == durations[Duration.FENCED_ON_HARDWARE]
    assert durations[Duration.FENCED_IN_DRIVER] <= durations[Duration.IN_DRIVER]
    waited = durations[Duration.IN_DRIVER] - durations[Duration.FENCED_IN_DRIVER]
    assert waited >= 40_000_000  # the ~50 ms wait for the gate, in nanoseconds
    event.free()


def test_duration_needs_a_single_device_compilation():
    execution = add_execution(_compiled(), _ones(), _ones(), _zeros())  # Compilation(model): all devices
    with pytest.raises(NnError, match="exactly one device") as info:
        execution.start_compute_with_dependencies([], duration_ns=1_000_000)
    assert info.value.code == ResultCode.BAD_DATA
    execution.start_compute_with_dependencies([]).wait()  # duration 0 is fine anywhere


@pytest.mark.parametrize("events, duration, code", [
    (None, 0, ResultCode.UNEXPECTED_NULL),
    ([None], 0, ResultCode.UNEXPECTED_NULL),
    ("events", 0, ResultCode.BAD_DATA),
    ([3], 0, ResultCode.BAD_DATA),
    ([], -1, ResultCode.BAD_DATA),
    ([], 1.5, ResultCode.BAD_DATA),
])
def test_bad_arguments(cpu_only, events, duration, code):
    execution = add_execution(_compiled([cpu_only]), _ones(), _ones(), _zeros())
    assert code_of(lambda: execution.start_compute_with_dependencies(events, duration)) == code
    execution.start_compute_with_dependencies([]).wait()  # still in preparation


def test_state_rules_as_start_compute():
    compilation = _compiled()
    unset = Execution(compilation)
    unset.set_input(0, _ones())
    assert code_of(lambda: unset.start_compute_with_dependencies([])) == ResultCode.BAD_DATA
    once = add_execution(compilation, _ones(), _ones(), _zeros())
    once.start_compute_with_dependencies([]).wait()
    assert code_of(lambda: once.start_compute_with_dependencies([])) == ResultCode.BAD_STATE
    reusable = add_execution(compilation, _ones(), _ones(), _zeros())
    reusable.set_reusable(True)
    for _ in range(2):
        reusable.start_compute_with_dependencies([]).wait()


def test_unspecified_output_shape_is_bad_data():
    """NeuralNetworks.h: BAD_DATA when the outputs lack fully specified dimensions."""
    execution = Execution(_compiled(model=add_model(out_shape=(1, 0))))
    execution.set_input(0, _ones())
    execution.set_input(1, _ones())
    execution.set_output(0, _zeros())
    with pytest.raises(NnError, match="output 0 has unspecified dimensions") as info:
        execution.start_compute_with_dependencies([])
    assert info.value.code == ResultCode.BAD_DATA
    execution.compute()  # not started by the refused call


def test_sync_fence_fd_errors():
    unfenced = add_execution(_compiled(), _ones(), _ones(), _zeros()).start_compute()
    assert code_of(unfenced.get_sync_fence_fd) == ResultCode.BAD_DATA  # as NNAPI: not a fence
    unfenced.free()
    closed_read, closed_write = os.pipe()
    os.close(closed_read)
    os.close(closed_write)
    for bad in (-1, 0, closed_read, "3", 2.0, True):
        assert code_of(lambda: Event.from_sync_fence_fd(bad)) == ResultCode.BAD_DATA, bad
    assert code_of(lambda: Event.from_sync_fence_fd(None)) == ResultCode.UNEXPECTED_NULL
    fenced = add_execution(_compiled(), _ones(), _ones(), _zeros()).start_compute_with_dependencies([])
    fenced.free()
    assert code_of(fenced.get_sync_fence_fd) == ResultCode.BAD_DATA  # freed


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_no_file_descriptor_is_leaked():
    compilation = _compiled()
    before = _open_fds()
    gate = Gate()
    out = _zeros()
    e1 = add_execution(compilation, _ones(), _ones(), out).start_compute_with_dependencies([gate.event])
    fd = e1.get_sync_fence_fd()
    wrapped = Event.from_sync_fence_fd(fd)
    e2 = add_execution(compilation, out, out, _zeros()).start_compute_with_dependencies([wrapped, e1])
    assert len(_open_fds() - before) >= 5  # gate + its dup, e1's fence + fd + wrapped, e2's fence
    gate.open()
    e2.wait(timeout=10)
    os.close(fd)
    for event in (e2, wrapped, e1):
        event.free()
    gate.close()
    assert _open_fds() == before


def test_start_compute_with_dependencies_is_a_runtime_span():
    with tracing.TraceSession() as session:
        add_execution(_compiled(), _ones(), _ones(), _zeros()).start_compute_with_dependencies([]).wait()
    names = {span.name for span in session.collect().spans()}
    assert "[NN_LR_PE]ANeuralNetworksExecution_startComputeWithDependencies" in names
    assert "[NN_LC_PE]CpuExecutor::run" in names  # the run itself, on the worker thread
