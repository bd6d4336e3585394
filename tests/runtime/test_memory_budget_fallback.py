"""Issue 12 end to end: a real ``sample-float-fast`` process with a 1 MiB driver memory budget
behind the runtime API. RESOURCE_EXHAUSTED_PERSISTENT is final for the driver (CPU fallback at
compilation or execution), RESOURCE_EXHAUSTED_TRANSIENT is retried once on it first; without
CPU fallback the NnError carries the NNAPI result code, name and number. Outputs are checked
against the same model compiled for the nnapi-reference CPU device only."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime import Compilation, Execution, Model, ResultCode, manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.drivers.memory_budget import DRIVER_BUDGET_ENV
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from tests.runtime.helpers import add_model, code_of
from tests.support.log_capture import captured_log

BUDGET = 1 << 20
BIG = 40960      # a [1, BIG] constant ADD holds ~640 KiB of the driver's budget: two do not fit
HUGE = 98304     # ~1.5 MiB: more than the whole budget
LARGE_REQUEST = 131072  # 1.5 MiB of inputs and output


@pytest.fixture
def driver(monkeypatch):
    """The CPU plus a fresh budgeted ``sample-float-fast`` process (the manager's devices)."""
    monkeypatch.setenv(DRIVER_BUDGET_ENV, str(BUDGET))
    device = RemoteDevice("sample-float-fast", timeout_s=30.0)
    manager.forTest_set_devices([CpuDevice(), device])
    yield device
    manager.forTest_reset()
    device.shutdown()


def constant_add_model(n: int) -> Model:
    """``out [1, n] = x + c``, ``c`` a constant (4n bytes)."""
    model = Model("constant-add")
    x = model.add_operand(T.TENSOR_FLOAT32, (1, n))
    c = model.add_operand(T.TENSOR_FLOAT32, (1, n))
    act = model.add_operand(T.INT32)
    out = model.add_operand(T.TENSOR_FLOAT32, (1, n))
    model.set_operand_value(c, np.linspace(-1, 1, n, dtype=np.float32).reshape(1, n))
    model.set_operand_value(act, 0)
    model.add_operation(Op.ADD, [x, c, act], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


def compiled(model: Model, devices=None) -> Compilation:
    compilation = Compilation(model) if devices is None else Compilation.for_devices(model, devices)
    compilation.finish()
    return compilation


def run_constant(compilation: Compilation, n: int) -> np.ndarray:
    execution = Execution(compilation)
    execution.set_input(0, np.linspace(0, 3, n, dtype=np.float32).reshape(1, n))
    out = np.zeros((1, n), np.float32)
    execution.set_output(0, out)
    execution.compute()
    return out


def dynamic_execution(compilation: Compilation, n: int) -> tuple[Execution, np.ndarray]:
    """``a + b`` on [1, n] (the model's dimensions unknown: any size fits its footprint)."""
    execution = Execution(compilation)
    execution.set_input(0, np.arange(n, dtype=np.float32).reshape(1, n), (1, n))
    execution.set_input(1, np.full((1, n), 0.25, np.float32), (1, n))
    out = np.zeros((1, n), np.float32)
    execution.set_output(0, out, (1, n))
    return execution, out


def run_dynamic(compilation: Compilation, n: int) -> np.ndarray:
    execution, out = dynamic_execution(compilation, n)
    execution.compute()
    return out


def test_a_model_over_the_whole_budget_compiles_for_the_cpu(driver):
    model = constant_add_model(HUGE)
    with captured_log("nn", "compilation") as lines:
        compilation = compiled(model)
    assert [step.device.name for step in compilation.plan.steps] == ["nnapi-reference"]
    assert any("with CPU fallback (RESOURCE_EXHAUSTED_PERSISTENT, ResultCode 13: " in line
               for line in lines)
    expected = run_constant(compiled(model, [CpuDevice()]), HUGE)
    np.testing.assert_array_equal(run_constant(compilation, HUGE), expected)


def test_without_fallback_a_model_over_the_budget_fails_with_its_code(driver):
    code = code_of(lambda: compiled(constant_add_model(HUGE), [driver]))
    assert (code, code.name, int(code)) == (ResultCode.RESOURCE_EXHAUSTED_PERSISTENT,
                                           "RESOURCE_EXHAUSTED_PERSISTENT", 13)


def test_a_request_over_the_whole_budget_falls_back_to_the_cpu(driver):
    model = add_model(shape=(1, 0))
    with tracing.TraceSession() as session, captured_log("nn", "execution") as lines:
        compilation = compiled(model)  # the driver joins the session here
        assert [step.device.name for step in compilation.plan.steps] == ["sample-float-fast"]
        out = run_dynamic(compilation, LARGE_REQUEST)
        driver.capabilities()  # a reply after the driver flushed its spans
        names = [span.name for span in session.collect().spans()]
    np.testing.assert_array_equal(out, run_dynamic(compiled(model, [CpuDevice()]), LARGE_REQUEST))
    assert "execute: RESOURCE_EXHAUSTED_PERSISTENT (ResultCode 13)" in lines
    assert not any("retrying once" in line for line in lines)  # persistent: final for the driver
    assert any("step 0 on sample-float-fast failed; cpuFallbackPartial" in line for line in lines)
    assert "[NN_LD_PE]SampleDriver::execute::RESOURCE_EXHAUSTED_PERSISTENT" in names
    assert "[NN_LR_PE]ExecutionBuilder::cpuFallbackPartial" in names


def test_without_fallback_a_request_over_the_budget_fails_with_its_code(driver):
    execution, _ = dynamic_execution(compiled(add_model(shape=(1, 0)), [driver]), LARGE_REQUEST)
    code = code_of(execution.compute)
    assert (code.name, int(code)) == ("RESOURCE_EXHAUSTED_PERSISTENT", 13)


def test_a_transient_shortage_is_retried_then_falls_back_then_passes_once_freed(driver):
    holder = compiled(constant_add_model(BIG), [driver])  # holds ~640 KiB of the driver's budget
    model = add_model(shape=(1, 0))
    compilation = compiled(model)
    expected = run_dynamic(compiled(model, [CpuDevice()]), BIG)
    with captured_log("nn", "execution") as lines:
        np.testing.assert_array_equal(run_dynamic(compilation, BIG), expected)
    assert lines.count("execute: RESOURCE_EXHAUSTED_TRANSIENT (ResultCode 12)") == 2
    assert "RESOURCE_EXHAUSTED_TRANSIENT: retrying once" in lines
    assert any("cpuFallbackPartial" in line for line in lines)
    execution, _ = dynamic_execution(compiled(model, [driver]), BIG)
    code = code_of(execution.compute)
    assert (code.name, int(code)) == ("RESOURCE_EXHAUSTED_TRANSIENT", 12)
    holder.free()  # its prepared model's charge goes back to the driver
    with captured_log("nn", "execution") as lines:
        np.testing.assert_array_equal(run_dynamic(compilation, BIG), expected)
    assert not any("RESOURCE_EXHAUSTED" in line or "cpuFallback" in line for line in lines)


def test_a_model_that_fits_once_another_is_freed_is_transient_at_compilation(driver):
    holder = compiled(constant_add_model(BIG), [driver])
    code = code_of(lambda: compiled(constant_add_model(BIG), [driver]))
    assert (code.name, int(code)) == ("RESOURCE_EXHAUSTED_TRANSIENT", 12)
    with captured_log("nn", "compilation") as lines:
        fallback = compiled(constant_add_model(BIG))
    assert [step.device.name for step in fallback.plan.steps] == ["nnapi-reference"]
    assert any("with CPU fallback (RESOURCE_EXHAUSTED_TRANSIENT, ResultCode 12: " in line
               for line in lines)
    holder.free()
    again = compiled(constant_add_model(BIG))
    assert [step.device.name for step in again.plan.steps] == ["sample-float-fast"]
    expected = run_constant(compiled(constant_add_model(BIG), [CpuDevice()]), BIG)
    for compilation in (fallback, again):
        np.testing.assert_array_equal(run_constant(compilation, BIG), expected)
