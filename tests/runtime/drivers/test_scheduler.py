"""The driver's priority scheduler (runtime.drivers.ipc.service.scheduler) on real prepared models of
the sample driver, in this process: order by priority within a client, clients in turn,
preemption at an operation boundary with a rerun from the start, and correct outputs after it."""
from __future__ import annotations

import contextlib
import threading
import time

import numpy as np
import pytest

from nnscope.runtime.builtin_models import mobilenet, sample_input
from nnscope.runtime.drivers.ipc.service.scheduler import Job, Scheduler
from nnscope.runtime.drivers.sample import SAMPLES, SampleDriver
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.types import ErrorStatus, Priority
from nnscope.runtime.manager import cpu_device
from nnscope.runtime.ops import preempt

LOW, MEDIUM, HIGH = Priority.LOW, Priority.MEDIUM, Priority.HIGH


@pytest.fixture(scope="module")
def net():
    """MobileNet (64x64) prepared twice on a sample driver, its input and reference output."""
    model = mobilenet(size=64)
    hal = model.to_hal()
    driver = SampleDriver(SAMPLES["sample-all"])
    inputs = sample_input(model)
    reference = cpu_device().prepare_model(hal)
    expected = _run(reference, inputs)[1]
    return driver.prepare_model(hal), driver.prepare_model(hal), inputs, expected


def _run(prepared, inputs):
    data = np.ascontiguousarray(inputs[0])
    out = bytearray(4 * 1000)
    request = Request((RequestArgument(False, 0, 0, data.nbytes),), (RequestArgument(False, 1, 0, len(out)),),
                      (bytearray(data.tobytes()), out))
    result = prepared.execute(request)
    return result.status, np.frombuffer(out, np.float32).copy()


class _Recorder:
    """Jobs that run a prepared model and record the order they finish in."""

    def __init__(self):
        self.finished: list[str] = []
        self.outputs: dict[str, np.ndarray] = {}
        self.all_done = threading.Event()
        self.expected = 0

    def job(self, name: str, client, priority, prepared, inputs):
        self.expected += 1

        def run():
            return _run(prepared, inputs)

        def done(payload):
            status, output = payload
            assert status == ErrorStatus.NONE
            self.finished.append(name)
            self.outputs[name] = output
            if len(self.finished) >= self.expected:  # runs outside the queue may finish first
                self.all_done.set()

        return Job(client, priority, run, done, name)


def _blocked(scheduler: Scheduler):
    """Hold the execution lock so that submitted jobs queue up; release() lets them run."""
    scheduler.exec_lock.acquire()
    gate = Job("gate", LOW, lambda: None, lambda payload: None, "gate")
    scheduler.submit(gate)
    return scheduler.exec_lock.release


def test_a_clients_queue_runs_by_priority_then_arrival(net):
    low_model, high_model, inputs, expected = net
    scheduler, recorder = Scheduler(threading.Lock()), _Recorder()
    release = _blocked(scheduler)
    for name, priority in (("low1", LOW), ("medium", MEDIUM), ("low2", LOW), ("high", HIGH)):
        scheduler.submit(recorder.job(name, "client", priority, low_model, inputs))
    release()
    assert recorder.all_done.wait(60)
    assert recorder.finished == ["high", "medium", "low1", "low2"]
    for output in recorder.outputs.values():
        np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)


def test_waiting_clients_take_turns(net):
    model, _, inputs, _ = net
    scheduler, recorder = Scheduler(threading.Lock()), _Recorder()
    release = _blocked(scheduler)
    scheduler.submit(recorder.job("a-low", "a", LOW, model, inputs))
    scheduler.submit(recorder.job("b-high", "b", HIGH, model, inputs))
    scheduler.submit(recorder.job("a-high", "a", HIGH, model, inputs))
    release()
    assert recorder.all_done.wait(60)
    # a waited first and its best is a-high; then b's turn: b's priority does not outrank a's
    assert recorder.finished == ["a-high", "b-high", "a-low"]


@contextlib.contextmanager
def _held_after_operation_1(model):
    """Inside: ``model``'s first run waits after operation 1 (``running`` is set) until ``go``
    is set (at the latest on leaving)."""
    running, go = threading.Event(), threading.Event()

    def hold(step: int, values) -> None:
        if step == 1 and not go.is_set():
            running.set()
            go.wait(30)

    model.executor.forTest_step_hook = hold
    try:
        yield running, go
    finally:
        go.set()
        model.executor.forTest_step_hook = None


@pytest.mark.parametrize("high_client, order", [("a", ["high", "low"]), ("b", ["low", "high"])])
def test_a_running_low_priority_execution_yields_to_its_own_clients_high_priority(net, high_client, order):
    """Client a's running LOW execution yields to a's HIGH one (and reruns from the start with
    the right outputs), not to client b's: priorities rank one client's models only."""
    low_model, high_model, inputs, expected = net
    scheduler, recorder = Scheduler(threading.Lock()), _Recorder()
    low = recorder.job("low", "a", LOW, low_model, inputs)
    high = recorder.job("high", high_client, HIGH, high_model, inputs)
    with _held_after_operation_1(low_model) as (running, submitted):  # until HIGH is queued
        scheduler.submit(low)
        assert running.wait(30)
        scheduler.submit(high)
        submitted.set()
        assert recorder.all_done.wait(60)
    assert recorder.finished == order
    assert (low.preemptions == 1) == (high_client == "a") and scheduler.preemptions == low.preemptions
    for output in recorder.outputs.values():
        np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)


def test_the_executor_stops_at_an_operation_boundary_when_asked(net):
    model, _, inputs, _ = net
    request = preempt.YieldRequest()
    request.wanted = True
    with preempt.yielding(request), pytest.raises(preempt.Preempted) as stop:
        _run(model, inputs)
    assert stop.value.step == 0
    assert preempt.current() is None
    assert _run(model, inputs)[0] == ErrorStatus.NONE  # nothing left behind


def _exclusive_thread(scheduler: Scheduler, client, priority, model, inputs, finished: list, name: str):
    """A run outside the queue (as a burst frame): ``model`` under ``scheduler.exclusive``."""
    def run():
        with scheduler.exclusive(client, priority):
            assert _run(model, inputs)[0] == ErrorStatus.NONE
            finished.append(name)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _on_ranked(scheduler: Scheduler) -> threading.Event:
    """Set once a run outside the queue has been ranked (it then waits for the lock)."""
    ranked = threading.Event()
    scheduler.forTest_ranked = lambda client, priority: ranked.set()
    return ranked


@pytest.mark.parametrize("client, order, preempted", [("a", ["exclusive", "low"], 1),
                                                      ("b", ["low", "exclusive"], 0)])
def test_an_exclusive_run_outranks_its_own_clients_running_lower_priority(net, client, order, preempted):
    """A burst frame of client a at HIGH makes a's running LOW execution yield (it reruns, right
    outputs); client b's does not: it waits for the lock like any other client's work."""
    low_model, high_model, inputs, expected = net
    scheduler, recorder = Scheduler(threading.Lock()), _Recorder()
    low = recorder.job("low", "a", LOW, low_model, inputs)
    with _held_after_operation_1(low_model) as (running, registered):  # until the frame is ranked
        scheduler.submit(low)
        assert running.wait(30)
        ranked = _on_ranked(scheduler)
        thread = _exclusive_thread(scheduler, client, HIGH, high_model, inputs, recorder.finished, "exclusive")
        assert ranked.wait(30)  # the frame is ranked, waiting for the lock
        registered.set()
        thread.join(60)
        assert recorder.all_done.wait(60)  # the job's done() (the frame's part is joined)
    assert recorder.finished == order
    assert low.preemptions == preempted
    np.testing.assert_allclose(recorder.outputs["low"], expected, rtol=1e-5, atol=1e-6)


def test_an_exclusive_run_follows_its_own_clients_queued_higher_priority(net):
    model, _, inputs, _ = net
    scheduler, recorder = Scheduler(threading.Lock()), _Recorder()
    release = _blocked(scheduler)  # busy: the gate job holds the worker
    scheduler.submit(recorder.job("high", "a", HIGH, model, inputs))
    ranked = _on_ranked(scheduler)
    thread = _exclusive_thread(scheduler, "a", LOW, model, inputs, recorder.finished, "exclusive-low")
    assert ranked.wait(30)
    release()
    thread.join(60)
    assert recorder.finished == ["high", "exclusive-low"]


def test_exclusive_is_the_bare_lock_while_nothing_runs_or_waits():
    lock = threading.Lock()
    assert Scheduler(lock).exclusive("a", HIGH) is lock


def test_a_deadline_only_the_queue_makes_impossible_is_declined(net):
    """What the driver asks before it queues an execution with a deadline (``ExecuteServer``):
    the model's expected run plus the client's queued work that goes first (``backlog_ns``).
    An idle run fits the deadline three times over; behind four queued runs it cannot make it:
    MISSED_DEADLINE_TRANSIENT. Same client, lower priority queued work does not count."""
    model, _, inputs, _ = net
    scheduler, recorder = Scheduler(threading.Lock()), _Recorder()
    estimate, model.mean_ns = model.mean_ns, 1e9  # expected to run 1 s: the clock's few us do not count
    needed = int(model.mean_ns)
    release = _blocked(scheduler)  # the gate job holds the worker: the queue stays as submitted
    now = time.monotonic_ns()
    assert model.decline_queued(now + 3 * needed, scheduler.backlog_ns("a", MEDIUM, now)) is None
    for number in range(4):
        job = recorder.job(f"queued{number}", "a", MEDIUM, model, inputs)
        job.estimate_ns = needed
        scheduler.submit(job)
    now = time.monotonic_ns()
    declined = model.decline_queued(now + 3 * needed, scheduler.backlog_ns("a", MEDIUM, now))
    assert declined is not None and declined.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
    assert "of running and queued work" in model.last_error
    # a HIGH execution of the same client goes before them: nothing of theirs to wait for
    assert model.decline_queued(now + 3 * needed, scheduler.backlog_ns("a", HIGH, now)) is None
    release()
    assert recorder.all_done.wait(60)
    model.mean_ns = estimate
