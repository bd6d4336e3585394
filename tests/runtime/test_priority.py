"""Priorities end to end: ``Compilation.set_priority`` reaches a real driver process through
prepareModel_1_3, and under a flood of low-priority executions from several threads a
high-priority execution of the same driver still finishes close to its idle latency and before
the low-priority ones that were queued before it (QoS, issue 12)."""
from __future__ import annotations

import statistics
import threading
import time

import numpy as np
import pytest

from runtime import Burst, Compilation, Execution, NnError, ResultCode
from runtime.builtin_models import mobilenet, sample_input
from runtime.hal.types import Priority
from runtime.manager import cpu_device

FLOOD_THREADS = 4
HIGH_RUNS = 7


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
    return compilations, inputs, _run(reference, inputs)[1], driver


def _run(compilation, inputs, burst=None) -> tuple[tuple[float, float], np.ndarray]:
    """One execution (through ``burst`` when given): its (start, end) and its output."""
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    out = np.zeros((1, 1000), np.float32)
    execution.set_output(0, out)
    start = time.perf_counter()
    if burst is None:
        execution.compute()
    else:
        execution.burst_compute(burst)
    return (start, time.perf_counter()), out


def _latency(span) -> float:
    return span[1] - span[0]


class _Flood:
    """``FLOOD_THREADS`` threads running ``compilation`` back to back, each span recorded."""

    def __init__(self, compilation, inputs, expected):
        self.stop, self.spans, self.wrong = threading.Event(), [], []
        self.threads = [threading.Thread(target=self._loop, args=(compilation, inputs, expected))
                        for _ in range(FLOOD_THREADS)]

    def _loop(self, compilation, inputs, expected):
        while not self.stop.is_set():
            span, out = _run(compilation, inputs)
            self.spans.append(span)
            if not np.allclose(out, expected, rtol=1e-5, atol=1e-6):
                self.wrong.append(out)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        time.sleep(0.5)  # the flood is queued up in the driver
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join()


def _in_attempts(attempt, attempts: int = 3):
    """Run ``attempt()`` (-> (ok, details)) until it is ok; the details of every try. Timing
    on a shared 2-core machine is noisy: the behaviour must show in one of a few tries."""
    tries = []
    for _ in range(attempts):
        ok, details = attempt()
        tries.append(details)
        if ok:
            return tries
    raise AssertionError(f"not met in {attempts} attempts: {tries}")


def test_high_priority_cuts_through_a_low_priority_flood(setup):
    compilations, inputs, expected, driver = setup
    low, high = compilations[Priority.LOW], compilations[Priority.HIGH]
    for _ in range(3):  # warm both models (the driver's estimate moves them to its scheduler)
        _run(high, inputs), _run(low, inputs)

    def attempt():
        idle = statistics.median(_latency(_run(high, inputs)[0]) for _ in range(HIGH_RUNS))
        highs = []
        with _Flood(low, inputs, expected) as flood:
            for _ in range(HIGH_RUNS):
                span, out = _run(high, inputs)
                np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
                highs.append(span)
                time.sleep(0.03)
        assert not flood.wrong
        loaded = statistics.median(_latency(span) for span in highs)
        low_loaded = statistics.median(_latency(span) for span in flood.spans)
        # the lows in flight when a high one started end after it: the queued ones and the
        # running one too (it yields), but for the odd one whose reply was already on its way
        overtaken = [sum(1 for s, e in flood.spans if s < hs and e > he) for hs, he in highs]
        in_flight = [sum(1 for s, e in flood.spans if s < hs < e) for hs, _ in highs]
        ok = (loaded <= 1.5 * idle and low_loaded > 2 * loaded
              and sum(overtaken) >= sum(in_flight) - HIGH_RUNS // 2
              and sum(in_flight) >= HIGH_RUNS * (FLOOD_THREADS - 1))  # the flood was in flight
        return ok, dict(idle=idle, loaded=loaded, low=low_loaded, overtaken=overtaken, in_flight=in_flight)

    _in_attempts(attempt)


def test_a_deadline_only_the_queue_makes_impossible_is_declined_at_once(setup):
    compilations, inputs, expected, _ = setup
    low = compilations[Priority.LOW]

    def attempt():
        idle = statistics.median(_latency(_run(low, inputs)[0]) for _ in range(5))
        left = 2 * idle  # enough for an idle run, not for the work queued before it
        execution = Execution(low)
        for index, value in enumerate(inputs):
            execution.set_input(index, value)
        execution.set_output(0, np.zeros((1, 1000), np.float32))
        execution.set_timeout(int(left * 1e9))
        with _Flood(low, inputs, expected):
            start = time.perf_counter()
            with pytest.raises(NnError) as error:
                execution.compute()
            elapsed = time.perf_counter() - start
        code = error.value.code
        # declined on arrival, not after waiting its turn
        return code == ResultCode.MISSED_DEADLINE_TRANSIENT and elapsed < 0.5 * left, (code.name, elapsed, left)

    _in_attempts(attempt)


def test_high_priority_burst_frames_cut_through_a_low_priority_flood(setup):
    """A burst runs its frames outside the driver's queue, on its listener thread; ranked by its
    model's priority (``Scheduler.exclusive``), a HIGH frame makes the client's running LOW
    execution yield (it reruns later) instead of waiting for it to finish."""
    compilations, inputs, expected, _ = setup
    low, high = compilations[Priority.LOW], compilations[Priority.HIGH]
    with Burst(high) as burst:
        def attempt():
            idle = statistics.median(_latency(_run(high, inputs, burst)[0]) for _ in range(5))
            frames = []
            with _Flood(low, inputs, expected) as flood:
                for _ in range(HIGH_RUNS):
                    span, out = _run(high, inputs, burst)
                    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
                    frames.append(span)
                    time.sleep(0.03)
            assert not flood.wrong
            loaded = statistics.median(_latency(span) for span in frames)
            # a LOW execution that ends while a frame waits is one the frame did not cut through
            # (but for the odd one whose reply was already on its way)
            waited_for = [sum(1 for s, e in flood.spans if s < fs < e < fe) for fs, fe in frames]
            in_flight = [sum(1 for s, e in flood.spans if s < fs < e) for fs, _ in frames]
            ok = (sum(waited_for) <= HIGH_RUNS // 2 and loaded <= 1.5 * idle
                  and sum(in_flight) >= HIGH_RUNS * (FLOOD_THREADS - 1))  # the flood was in flight
            return ok, dict(idle=idle, loaded=loaded, waited_for=waited_for, in_flight=in_flight)

        _in_attempts(attempt)
