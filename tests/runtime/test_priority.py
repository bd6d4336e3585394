"""Priorities end to end: ``Compilation.set_priority`` reaches a real driver process through
prepareModel_1_3, and the driver serves a high-priority execution (or burst frame) of a client
before the low-priority ones it queued earlier (QoS, issue 12).

Order is set up with explicit synchronisation, not timing: the driver process is stopped
(SIGSTOP) while the test sends its requests one after the other (a hook on the client's send
says when each one is on the socket), then continued (SIGCONT). The driver reads them in
arrival order, so what it has queued when the high-priority request arrives is known. How fast
a high-priority execution gets through a flood is a speed figure:
``benchmarks/priority_latency.py`` measures it. (The driver reads the waiting requests in no set
order, so what the high-priority one overtakes is checked, not the order among the others; a
deadline the queue makes impossible is checked on the scheduler in-process, where the queue can
be held: ``tests/runtime/drivers/test_scheduler.py``.)
"""
from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

from nnscope.runtime import Burst, Compilation, Execution, NnError
from nnscope.runtime.builtin_models import mobilenet, sample_input
from nnscope.runtime.drivers.ipc.wire.protocol import MsgType
from nnscope.runtime.hal.types import Priority
from nnscope.runtime.manager import cpu_device
from tests.support.sent import SentHook
from tests.support.stopped import stop_process

LOWS = 4


@pytest.fixture(scope="module")
def setup(sample_all):
    driver = sample_all
    model = mobilenet()
    inputs = sample_input(model)
    compilations = {}
    for priority in (Priority.LOW, Priority.HIGH):
        compilation = Compilation.for_devices(model, [driver])
        compilation.set_priority(priority)
        compilation.finish()
        compilations[priority] = compilation
    reference = Compilation.for_devices(model, [cpu_device()])
    reference.finish()
    for _ in range(3):  # the driver's estimate (over 2 ms) sends these models to its scheduler
        _run(compilations[Priority.LOW], inputs), _run(compilations[Priority.HIGH], inputs)
    _open_lanes(driver, LOWS + 1)
    return compilations, inputs, _run(reference, inputs), driver


def _open_lanes(driver, count: int) -> None:
    """Connections for ``count`` executions in flight, each accepted by the driver (a PING
    answered on it): while the driver is stopped the test's requests go to sockets it polls
    already, none waits in its listen queue."""
    lanes = [driver.lanes.borrow() for _ in range(count)]
    for lane in lanes:
        lane.transact(MsgType.PING, b"", (), None)
    for lane in lanes:
        driver.lanes.give_back(lane)


def _execution(compilation, inputs) -> tuple[Execution, np.ndarray]:
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    out = np.zeros((1, 1000), np.float32)
    execution.set_output(0, out)
    return execution, out


def _run(compilation, inputs, burst=None) -> np.ndarray:
    execution, out = _execution(compilation, inputs)
    execution.compute() if burst is None else execution.burst_compute(burst)
    return out


class _Stopped:
    """The driver process stopped; ``send(name, call)`` runs ``call`` on a thread and returns once
    its request is on the socket (or the burst ring); leaving continues the driver and joins."""

    def __init__(self, driver, monkeypatch):
        self.pid, self.finished, self.errors, self.outputs = driver.pid, [], {}, {}
        self._hook, self._threads, self._lock = SentHook(monkeypatch), [], threading.Lock()

    def __enter__(self):
        stop_process(self.pid)
        return self

    def send(self, name: str, call) -> None:
        def body():
            try:
                self.outputs[name] = call()
            except NnError as error:
                self.errors[name] = error
            finally:
                with self._lock:
                    self.finished.append(name)

        thread, sent = self._hook.start(body, name)
        self._threads.append(thread)
        assert sent.wait(30), f"{name} was not sent"

    def __exit__(self, *exc):
        os.kill(self.pid, signal.SIGCONT)
        for thread in self._threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in self._threads)


def test_high_priority_overtakes_the_low_priority_executions_queued_before_it(setup, monkeypatch):
    compilations, inputs, expected, driver = setup
    low, high = compilations[Priority.LOW], compilations[Priority.HIGH]
    with _Stopped(driver, monkeypatch) as stopped:
        for number in range(LOWS):
            stopped.send(f"low{number}", lambda: _run(low, inputs))
        stopped.send("high", lambda: _run(high, inputs))
    assert not stopped.errors
    # low0 ran first and yielded at an operation boundary when "high" arrived; the others waited
    # in the queue. Each low reply leaves the driver a whole run after the high one.
    assert stopped.finished[0] == "high", stopped.finished
    for output in stopped.outputs.values():
        np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)


def test_high_priority_burst_frames_overtake_low_priority_executions(setup, monkeypatch):
    """A burst runs its frames outside the driver's queue, on its listener thread; ranked by its
    model's priority (``Scheduler.exclusive``), a HIGH frame makes the client's running LOW
    execution yield (it reruns later) and goes before the queued ones."""
    compilations, inputs, expected, driver = setup
    low, high = compilations[Priority.LOW], compilations[Priority.HIGH]
    with Burst(high) as burst:
        for _ in range(2):  # its memories are known to the driver: a frame is one ring write
            _run(high, inputs, burst)
        with _Stopped(driver, monkeypatch) as stopped:
            for number in range(LOWS):
                stopped.send(f"low{number}", lambda: _run(low, inputs))
            stopped.send("frame", lambda: _run(high, inputs, burst))
    assert not stopped.errors
    assert stopped.finished[0] == "frame", stopped.finished
    for output in stopped.outputs.values():
        np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)
