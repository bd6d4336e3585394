"""Outputs of unknown shape (dimensions 0 in the model) get their real shape at execution:
OUTPUT_INSUFFICIENT_SIZE with the needed shape for a too-small buffer, in-process and through a
real sample-driver process, and unknown-shape temporaries between steps on different devices."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime import Compilation, Execution, Model, NnError, ResultCode, manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from tests.runtime.helpers import mixed_expected, mixed_model
from tests.support.log_capture import captured_log

RNG = np.random.default_rng(10)


@pytest.fixture(scope="module")
def drivers():
    """Real sample driver processes, shared by the module."""
    made = {name: RemoteDevice(name, timeout_s=30.0)
            for name in ("sample-all", "sample-float-fast", "sample-quant")}
    yield made
    for device in made.values():
        device.shutdown()


@pytest.fixture(params=["nnapi-reference", "sample-all"])
def device(request, drivers):
    """The in-process reference device, then a sample-all driver process."""
    return CpuDevice() if request.param == "nnapi-reference" else drivers[request.param]


def _tile_model(multiples=(2, 3)) -> Model:
    """TILE of a [2, 3] input by a constant: the output is declared [0, 0] (rank kept, as AOSP's
    dynamic-shape tests do)."""
    model = Model("tile")
    x = model.add_operand(T.TENSOR_FLOAT32, (2, 3))
    m = model.add_operand(T.TENSOR_INT32, (2,))
    out = model.add_operand(T.TENSOR_FLOAT32, (0, 0))
    model.set_operand_value(m, np.int32(multiples))
    model.add_operation(Op.TILE, [x, m], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


def _execution(compilation: Compilation, x: np.ndarray, out) -> Execution:
    execution = Execution(compilation)
    execution.set_input(0, x)
    execution.set_output(0, out)
    return execution


def test_too_small_output_reports_the_needed_shape(device):
    compilation = Compilation.for_devices(_tile_model(), [device])
    compilation.finish()
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    small = np.zeros(35, np.float32)  # one element short of [4, 9]
    execution = _execution(compilation, x, small)
    with pytest.raises(NnError) as info:
        execution.compute()
    assert info.value.code == ResultCode.OUTPUT_INSUFFICIENT_SIZE
    assert "needs shape [4, 9] (144 bytes), buffer has 140 bytes" in info.value.message
    assert execution.get_output_operand_dimensions(0) == (4, 9)
    assert execution.get_output_operand_rank(0) == 2
    exact = np.zeros(36, np.float32)
    retry = _execution(compilation, x, exact)
    retry.compute()
    assert retry.get_output_operand_dimensions(0) == (4, 9)
    np.testing.assert_array_equal(exact.reshape(4, 9), np.tile(x, (2, 3)))
    compilation.free()


def test_larger_buffer_gets_the_real_shape(device):
    compilation = Compilation.for_devices(_tile_model((1, 2)), [device])
    compilation.finish()
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    roomy = np.full(100, -1.0, np.float32)
    execution = _execution(compilation, x, roomy)
    execution.compute()
    assert execution.get_output_operand_dimensions(0) == (2, 6)
    np.testing.assert_array_equal(roomy[:12].reshape(2, 6), np.tile(x, (1, 2)))
    assert (roomy[12:] == -1.0).all()  # nothing written past the real shape
    compilation.free()


def test_unknown_rank_output_reports_its_rank(device):
    model = Model("tile-rank")
    x = model.add_operand(T.TENSOR_FLOAT32, (2, 3))
    m = model.add_operand(T.TENSOR_INT32, (2,))
    out = model.add_operand(T.TENSOR_FLOAT32)  # rank unknown too
    model.set_operand_value(m, np.int32([3, 1]))
    model.add_operation(Op.TILE, [x, m], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    compilation = Compilation.for_devices(model, [device])
    compilation.finish()
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    execution = _execution(compilation, x, np.zeros(4, np.float32))
    with pytest.raises(NnError) as info:
        execution.compute()
    assert info.value.code == ResultCode.OUTPUT_INSUFFICIENT_SIZE
    assert execution.get_output_operand_dimensions(0) == (6, 3)
    assert execution.get_output_operand_rank(0) == 2
    compilation.free()


@pytest.fixture
def float_and_quant(drivers):
    """``manager.devices()`` = the float-fast and quant drivers; the CPU is only the fallback."""
    manager.forTest_set_devices([drivers["sample-float-fast"], drivers["sample-quant"]])
    yield drivers
    manager.forTest_reset()


@pytest.mark.parametrize("width", [4, 40_000])  # temporaries under, then over the 64 KiB guess
def test_unknown_shape_temporaries_cross_driver_processes(float_and_quant, width):
    compilation = Compilation(mixed_model(width, unknown=True))
    compilation.finish()
    assert [(s.device.name, s.operations) for s in compilation.plan.steps] == [
        ("sample-float-fast", (0,)), ("nnapi-reference", (1,)), ("sample-quant", (2,)),
        ("nnapi-reference", (3,)), ("sample-float-fast", (4,))]
    x, y = RNG.uniform(-20, 20, (2, 1, width)).astype(np.float32)
    q = RNG.integers(100, 160, (1, width), dtype=np.uint8)
    out = np.zeros(width, np.float32)
    execution = Execution(compilation)
    for index, value in enumerate((x, y, q)):
        execution.set_input(index, value)
    execution.set_output(0, out)
    with captured_log("nn", "execution") as lines:
        execution.compute()
    assert execution.get_output_operand_dimensions(0) == (1, width)
    np.testing.assert_allclose(out.reshape(1, width), mixed_expected(x, y, q), rtol=1e-6)
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == 5 and all(line.endswith(": NONE") for line in steps), lines
    assert not any("failed" in line for line in lines), lines  # no step redone on the CPU
    compilation.free()


def test_too_small_model_output_after_partitioned_steps(float_and_quant):
    compilation = Compilation(mixed_model(6, unknown=True))
    compilation.finish()
    execution = Execution(compilation)
    for index, value in enumerate((np.ones((1, 6), np.float32), np.ones((1, 6), np.float32),
                                   np.full((1, 6), 128, np.uint8))):
        execution.set_input(index, value)
    execution.set_output(0, np.zeros(5, np.float32))
    with pytest.raises(NnError) as info:
        execution.compute()
    assert info.value.code == ResultCode.OUTPUT_INSUFFICIENT_SIZE
    assert "output 0" in info.value.message and "needs shape [1, 6]" in info.value.message
    assert execution.get_output_operand_dimensions(0) == (1, 6)
    compilation.free()
