"""CPU fallback at execution: a driver process killed in the middle of a run of executions
(SIGKILL) still gives correct outputs, and the fallback shows in the trace and the VLOG. Only
the execution that met the dead driver falls back: the next one restarts it
(tests/runtime/test_driver_restart.py)."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, Execution, NnError, manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.hal.device_types import ExecutionResult
from nnscope.runtime.hal.types import ErrorStatus
from tests.runtime.helpers import AddOnlyDevice, add_model, chain_model, mixed_expected, mixed_model
from tests.support.log_capture import captured_log

RUNS, KILL_AT = 6, 3


@pytest.fixture
def execution_log():
    with captured_log("nn", "execution") as lines:
        yield lines


@pytest.fixture
def devices(float_and_quant_drivers):
    return float_and_quant_drivers


def _run(compilation, inputs, out_shape=(2, 3)) -> np.ndarray:
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    out = np.zeros(out_shape, np.float32)
    execution.set_output(0, out)
    execution.compute()
    return out


def _kill_mid_run(compilation, victim, make_inputs, expected, out_shape):
    for run in range(RUNS):
        if run == KILL_AT:
            os.kill(victim.pid, signal.SIGKILL)
        inputs = make_inputs(run)
        np.testing.assert_allclose(_run(compilation, inputs, out_shape), expected(*inputs), rtol=1e-6)


def test_killed_driver_of_a_simple_plan(devices, execution_log):
    victim = devices["sample-float-fast"]
    with tracing.TraceSession() as session:
        compilation = Compilation(chain_model())
        compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == ["sample-float-fast"]

        def make_inputs(run):
            return (np.full((2, 3), run, np.float32), np.arange(6, dtype=np.float32).reshape(2, 3))
        _kill_mid_run(compilation, victim, make_inputs, lambda x, y: (x + 0.5) * y + 0.5, (2, 3))
    names = [span.name for span in session.collect().spans()]
    assert names.count("[NN_LR_PE]ExecutionBuilder::cpuFallbackPartial") == 1
    assert "[NN_LR_PE]StepExecutor::computeOnCpuFallback" in names
    assert any("step 0 on sample-float-fast failed; cpuFallbackPartial" in l for l in execution_log)
    assert any(l.startswith("DEAD_OBJECT: driver sample-float-fast") for l in execution_log)


def test_killed_driver_of_one_step_of_a_compound_plan(devices, execution_log):
    victim = devices["sample-quant"]
    manager.forTest_set_devices(list(devices.values()))  # the CPU only as fallback
    with tracing.TraceSession() as session:
        compilation = Compilation(mixed_model())
        compilation.finish()
        assert "sample-quant" in [s.device.name for s in compilation.plan.steps]

        def make_inputs(run):
            x = np.float32([[run, 1.5, -2.0, 3.0]])
            return x, np.float32([[2.0, -1.0, 0.5, 1.0]]), np.uint8([[130, 120 + run, 128, 140]])
        _kill_mid_run(compilation, victim, make_inputs, mixed_expected, (1, 4))
    names = [span.name for span in session.collect().spans()]
    assert names.count("[NN_LR_PE]ExecutionBuilder::cpuFallbackPartial") == 1
    assert any("on sample-quant failed; cpuFallbackPartial" in l for l in execution_log)


def test_no_fallback_for_an_explicit_device_list(devices):
    victim = devices["sample-float-fast"]
    compilation = Compilation.for_devices(chain_model(), [victim])
    compilation.finish()
    x = np.ones((2, 3), np.float32)
    _run(compilation, (x, x))
    os.kill(victim.pid, signal.SIGKILL)
    with pytest.raises(NnError) as info:
        _run(compilation, (x, x))
    assert info.value.code.name in ("DEAD_OBJECT", "OP_FAILED")


class _Exhausted(AddOnlyDevice):
    """An in-process ADD device whose prepared models answer RESOURCE_EXHAUSTED ``status`` for
    their first ``failures`` executions (then compute), counting the calls."""

    name = "fake-exhausted"

    def __init__(self, status: ErrorStatus, failures: int):
        super().__init__()
        self.status, self.failures, self.calls = status, failures, 0

    def prepare_model(self, model, *args, **kwargs):
        prepared = super().prepare_model(model, *args, **kwargs)
        device, execute = self, prepared.execute

        def exhausted_first(request, measure=False, deadline_ns=None):
            device.calls += 1
            if device.calls <= device.failures:
                return ExecutionResult(device.status)
            return execute(request, measure, deadline_ns)
        prepared.execute = exhausted_first
        return prepared


@pytest.mark.parametrize("status, failures, calls, fallback", [
    (ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT, 1, 2, False),   # retried on the driver: done there
    (ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT, 2, 2, True),    # twice transient: then the CPU
    (ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT, 1, 1, True),   # final for the driver: the CPU
])
def test_transient_codes_are_retried_persistent_ones_are_not(status, failures, calls, fallback):
    device = _Exhausted(status, failures)
    manager.forTest_set_devices([CpuDevice(), device])
    try:
        with captured_log("nn", "execution") as lines:
            compilation = Compilation(add_model())
            compilation.finish()
            assert [step.device.name for step in compilation.plan.steps] == ["fake-exhausted"]
            out = np.zeros((1, 4), np.float32)
            execution = Execution(compilation)
            execution.set_input(0, np.full((1, 4), 2, np.float32))
            execution.set_input(1, np.ones((1, 4), np.float32))
            execution.set_output(0, out)
            execution.compute()
    finally:
        manager.forTest_reset()
    np.testing.assert_array_equal(out, 3)
    assert device.calls == calls
    assert any("cpuFallbackPartial" in line for line in lines) == fallback
