"""Bursts through real driver processes: ``runtime.Burst`` and ``Execution.burst_compute``.

Oracles: the same execution through ``compute()`` on the in-process reference device, the
closed-form results of the helper models, and the driver process's own ``/proc/<pid>/maps``
(which pools it has mapped) and ``/proc/<pid>/task`` (its threads).
"""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Burst, Compilation, Duration, Execution, Memory, NnError, ResultCode, manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.ipc.client.burst import BurstController
from tests.runtime.helpers import add_execution, add_model, mixed_expected, mixed_model
from tests.support.log_capture import captured_log
from tests.support.stopped import stop_process


@pytest.fixture
def devices(float_and_quant_drivers):
    return float_and_quant_drivers


def _compiled(model, devices=None) -> Compilation:
    compilation = Compilation(model) if devices is None else Compilation.for_devices(model, devices)
    compilation.finish()
    return compilation


def _memfd_maps(pid: int, name: str) -> int:
    with open(f"/proc/{pid}/maps") as maps:
        return sum(f"/memfd:{name} " in line for line in maps)


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_burst_outputs_equal_compute_on_the_reference(devices):
    fast = devices["sample-float-fast"]
    compilation = _compiled(add_model(), [fast])
    rng = np.random.default_rng(1)
    with Burst(compilation) as burst:
        assert isinstance(burst.controllers[0], BurstController)
        for _ in range(20):
            a, b = (rng.standard_normal((1, 4)).astype(np.float32) for _ in range(2))
            out = np.zeros((1, 4), np.float32)
            add_execution(compilation, a, b, out).burst_compute(burst)
            np.testing.assert_array_equal(out, a + b)


def test_burst_measures_timing_in_the_driver(devices):
    compilation = _compiled(add_model(), [devices["sample-float-fast"]])
    out = np.zeros((1, 4), np.float32)
    execution = add_execution(compilation, np.ones((1, 4), np.float32), np.ones((1, 4), np.float32), out)
    execution.set_measure_timing(True)
    with Burst(compilation) as burst:
        execution.burst_compute(burst)
    on_hardware = execution.get_duration(Duration.ON_HARDWARE)
    in_driver = execution.get_duration(Duration.IN_DRIVER)
    assert on_hardware is not None and in_driver is not None and 0 < on_hardware <= in_driver
    np.testing.assert_array_equal(out, 2)


def test_burst_errors_are_those_of_compute(devices):
    fast = devices["sample-float-fast"]
    compilation, other = _compiled(add_model(), [fast]), _compiled(add_model(), [fast])
    ones = np.ones((1, 4), np.float32)
    burst = Burst(compilation)
    execution = add_execution(compilation, ones, ones, np.zeros((1, 4), np.float32))
    for bad, code in ((None, ResultCode.UNEXPECTED_NULL), ("burst", ResultCode.BAD_DATA)):
        with pytest.raises(NnError) as error:
            execution.burst_compute(bad)
        assert error.value.code == code
    with Burst(other) as foreign, pytest.raises(NnError) as error:
        execution.burst_compute(foreign)
    assert error.value.code == ResultCode.BAD_DATA and "different compilations" in str(error.value)
    unset = Execution(compilation)
    with pytest.raises(NnError) as error:
        unset.burst_compute(burst)
    assert error.value.code == ResultCode.BAD_DATA and "not set" in str(error.value)
    execution.burst_compute(burst)
    with pytest.raises(NnError) as error:  # single-use, as compute()
        execution.burst_compute(burst)
    assert error.value.code == ResultCode.BAD_STATE
    burst.free()
    with pytest.raises(NnError) as error:
        add_execution(compilation, ones, ones, np.zeros((1, 4), np.float32)).burst_compute(burst)
    assert error.value.code == ResultCode.BAD_STATE and "freed" in str(error.value)
    with pytest.raises(NnError) as error:
        Burst(None)
    assert error.value.code == ResultCode.UNEXPECTED_NULL


def test_a_burst_runs_one_execution_at_a_time(devices):
    compilation = _compiled(add_model(), [devices["sample-float-fast"]])
    ones = np.ones((1, 4), np.float32)
    first = add_execution(compilation, ones, ones, np.zeros((1, 4), np.float32))
    second = add_execution(compilation, ones, ones, np.zeros((1, 4), np.float32))
    with Burst(compilation) as burst:
        burst.begin(first, "burstCompute")  # an execution holds the burst
        with pytest.raises(NnError) as error:
            second.burst_compute(burst)
        assert error.value.code == ResultCode.BAD_STATE and "another execution" in str(error.value)
        burst.end()
        second.burst_compute(burst)


def test_output_insufficient_size_through_a_burst(devices):
    compilation = _compiled(add_model(shape=(1, 4), out_shape=(0, 0)), [devices["sample-float-fast"]])
    ones = np.ones((1, 4), np.float32)
    execution = add_execution(compilation, ones, ones, np.zeros(2, np.float32))
    with Burst(compilation) as burst, pytest.raises(NnError) as error:
        execution.burst_compute(burst)
    assert error.value.code == ResultCode.OUTPUT_INSUFFICIENT_SIZE
    assert execution.get_output_operand_dimensions(0) == (1, 4)


def test_partitioned_burst_keeps_one_burst_per_driver_step(devices):
    compilation = _compiled(mixed_model())
    steps = compilation.plan.steps
    assert len({step.device.name for step in steps}) >= 2
    rng = np.random.default_rng(7)
    with Burst(compilation) as burst:
        kinds = {step.device.name: type(burst.controllers[step.index]) for step in steps}
        assert kinds.get("nnapi-reference", type(None)) is type(None)
        assert all(kind is BurstController for name, kind in kinds.items() if name != "nnapi-reference")
        for _ in range(10):
            x, y = (rng.uniform(-4, 4, (1, 4)).astype(np.float32) for _ in range(2))
            q = rng.integers(0, 256, (1, 4)).astype(np.uint8)
            out = np.zeros((1, 4), np.float32)
            execution = Execution(compilation)
            for index, value in enumerate((x, y, q)):
                execution.set_input(index, value)
            execution.set_output(0, out)
            execution.burst_compute(burst)
            np.testing.assert_allclose(out, mixed_expected(x, y, q), rtol=1e-6)


def test_thousand_executions_reuse_slots_and_map_each_pool_once(devices):
    fast = devices["sample-float-fast"]
    compilation = _compiled(add_model(), [fast])
    names = ("burst-in-a", "burst-in-b", "burst-out")
    memories = [Memory.create_shared(16, name) for name in names]
    a, b, out = (memory.array(np.float32).reshape(1, 4) for memory in memories)
    execution = Execution(compilation)
    execution.set_input_from_memory(0, memories[0], 0, 16)
    execution.set_input_from_memory(1, memories[1], 0, 16)
    execution.set_output_from_memory(0, memories[2], 0, 16)
    execution.set_reusable(True)
    with Burst(compilation) as burst:
        for run in range(1000):
            a[:] = run
            b[:] = np.arange(4) * run
            execution.burst_compute(burst)
            np.testing.assert_array_equal(out[0], run + np.arange(4, dtype=np.float32) * run)
        slots = burst.controllers[0].slots
        assert [slots.slot_for(memory)[0] for memory in memories] == [0, 1, 2]
        assert [_memfd_maps(fast.pid, name) for name in names] == [1, 1, 1]
        memories[0].free()  # IBurstContext.freeMemory: the driver unmaps it at once
        assert _memfd_maps(fast.pid, names[0]) == 0
    for memory in memories[1:]:
        memory.free()


def test_release_ends_the_driver_listener_thread(devices):
    fast = devices["sample-float-fast"]
    compilation = _compiled(add_model(), [fast])
    fast.launch(wait=True)
    before = _threads(fast.pid)
    burst = Burst(compilation)
    assert _threads(fast.pid) == before + 1
    burst.free()  # joined in the driver; the kernel may list the thread a moment longer
    deadline = time.monotonic() + 60.0  # a bound on the wait, not a speed: a loaded machine is slow
    while _threads(fast.pid) != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads(fast.pid) == before


def test_driver_killed_during_a_burst_of_100_gives_every_output(devices):
    victim = devices["sample-float-fast"]
    compilation = _compiled(add_model())
    assert [step.device.name for step in compilation.plan.steps] == ["sample-float-fast"]
    with captured_log("nn", "execution") as lines, Burst(compilation) as burst:
        for run in range(100):
            if run == 50:
                os.kill(victim.pid, signal.SIGKILL)
            a = np.full((1, 4), run, np.float32)
            out = np.zeros((1, 4), np.float32)
            add_execution(compilation, a, a, out).burst_compute(burst)
            np.testing.assert_array_equal(out, 2 * a)
    assert any("cpuFallbackPartial" in line for line in lines)


def test_hung_driver_does_not_hang_the_burst(devices):
    victim = RemoteDevice("sample-float-fast", timeout_s=30.0)
    manager.forTest_set_devices([CpuDevice(), victim])
    try:
        compilation = _compiled(add_model())
        assert [step.device.name for step in compilation.plan.steps] == ["sample-float-fast"]
        burst = Burst(compilation)
        victim.timeout_s = 1.0  # once set up: a loaded machine may take longer to start and prepare
        ones = np.ones((1, 4), np.float32)
        stop_process(victim.pid)
        out = np.zeros((1, 4), np.float32)
        with captured_log("nn", "execution,manager") as lines:
            waiter = threading.Thread(
                target=lambda: add_execution(compilation, ones, ones, out).burst_compute(burst))
            waiter.start()
            waiter.join(60)  # a bound on the wait only
            assert not waiter.is_alive()
        np.testing.assert_array_equal(out, 2)  # DEAD_OBJECT after the timeout, then the CPU
        assert any("no burst result within 1s; driver killed" in line for line in lines), lines
        assert any("cpuFallbackPartial" in line for line in lines), lines
        burst.free()
    finally:
        victim.shutdown()


def test_a_deadline_goes_through_execute_and_still_computes(devices):
    compilation = _compiled(add_model(), [devices["sample-float-fast"]])
    ones = np.ones((1, 4), np.float32)
    out = np.zeros((1, 4), np.float32)
    execution = add_execution(compilation, ones, ones, out)
    execution.set_timeout(10_000_000_000)
    with Burst(compilation) as burst:
        execution.burst_compute(burst)
    np.testing.assert_array_equal(out, 2)


def test_burst_spans_on_both_sides(devices):
    compilation = _compiled(add_model(), [devices["sample-float-fast"]])
    ones = np.ones((1, 4), np.float32)
    with tracing.TraceSession() as session, Burst(compilation) as burst:
        for _ in range(3):
            add_execution(compilation, ones, ones, np.zeros((1, 4), np.float32)).burst_compute(burst)
    spans = list(session.collect().spans())
    names = [span.name for span in spans]
    assert names.count("[NN_LR_PE]ANeuralNetworksExecution_burstCompute") == 3
    assert names.count("[NN_LI_PE]ExecutionBurstController::compute") == 3
    server = [s for s in spans if s.name == "[NN_LD_PE]ExecutionBurstServer::execute"]
    assert len(server) == 3 and {s.pid for s in server} == {devices["sample-float-fast"].pid}


def test_repeats_are_traced_in_the_driver_once_it_joins_a_session(devices):
    fast = devices["sample-float-fast"]
    compilation = _compiled(add_model(), [fast])
    a, b = np.ones((1, 4), np.float32), np.arange(4, dtype=np.float32).reshape(1, 4)
    out = np.zeros((1, 4), np.float32)
    execution = add_execution(compilation, a, b, out)
    execution.set_reusable(True)
    with Burst(compilation) as burst:
        for _ in range(3):  # the driver repeats these through its bound run, untraced
            execution.burst_compute(burst)
        with tracing.TraceSession() as session:
            fast.launch()  # the running driver joins the session
            for value in (2, 3, 4):
                a[:] = value
                execution.burst_compute(burst)
                np.testing.assert_array_equal(out, value + b)
        fast.launch()  # and leaves it
    runs = [s for s in session.collect().spans() if s.name == "[NN_LC_PE]CpuExecutor::run"]
    assert len(runs) == 3 and {s.pid for s in runs} == {fast.pid}
