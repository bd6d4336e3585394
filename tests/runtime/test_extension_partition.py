"""Models mixing ordinary and extension operations, compiled on real driver processes: the
partition puts FIBONACCI on ``sample-fibonacci`` and the rest elsewhere, the numbers match
Fibonacci numbers computed here plus the nnapi-reference CPU for the ordinary operations, and a
missing extension is an error naming the extension and the devices, never a CPU fallback."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime import Compilation, Execution, Model, NnError, ResultCode, manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.extension_models import NAME, fibonacci, fibonacci_input
from nnscope.runtime.hal import fibonacci_extension as fx
from nnscope.runtime.hal.types import FuseCode, OperandType as T, OperationType as Op
from tests.runtime.extension_helpers import ClaimingDevice, allowed
from tests.runtime.extension_helpers import fibonacci as fibonacci_oracle

N = 12


@pytest.fixture(scope="module")
def remote():
    devices = {name: RemoteDevice(name, timeout_s=30.0) for name in
               ("sample-all", "sample-float-fast", "sample-fibonacci")}
    yield devices
    for device in devices.values():
        device.shutdown()


@pytest.fixture
def all_devices(remote):
    cpu = CpuDevice()
    manager.forTest_set_devices([cpu, *remote.values()])
    with allowed():
        yield cpu, remote
    manager.forTest_reset()


def _tail(model: Model, numbers: int, x: int, act: int, n: int) -> int:
    """out = TANH(numbers * x / 100) + x: the ordinary operations after FIBONACCI."""
    scaled, hundred, ratio = (model.add_operand(T.TENSOR_FLOAT32, s) for s in ((n,), (1,), (n,)))
    squashed, out = model.add_operand(T.TENSOR_FLOAT32, (n,)), model.add_operand(T.TENSOR_FLOAT32, (n,))
    model.set_operand_value(hundred, np.float32([100.0]))
    model.add_operation(Op.MUL, [numbers, x, act], [scaled])
    model.add_operation(Op.DIV, [scaled, hundred, act], [ratio])
    model.add_operation(Op.TANH, [ratio], [squashed])
    model.add_operation(Op.ADD, [squashed, x, act], [out])
    return out


def _mixed(n: int) -> Model:
    """count = n0 + 1; numbers = FIBONACCI(count); out = _tail(numbers, x)."""
    model = Model("mixed")
    n0, one, count = (model.add_operand(T.TENSOR_FLOAT32, (1,)) for _ in range(3))
    x, numbers = model.add_operand(T.TENSOR_FLOAT32, (n,)), model.add_operand(T.TENSOR_FLOAT32, (n,))
    act = model.add_operand(T.INT32)
    model.set_operand_value(one, np.float32([1.0]))
    model.set_operand_value(act, FuseCode.NONE)
    model.add_operation(Op.ADD, [n0, one, act], [count])
    model.add_operation(model.get_extension_operation_type(NAME, fx.FIBONACCI), [count], [numbers])
    out = _tail(model, numbers, x, act, n)
    model.identify_inputs_and_outputs([n0, x], [out])
    model.finish()
    return model


def _reference(numbers: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The ordinary operations alone on nnapi-reference, fed the oracle's Fibonacci numbers."""
    n = len(numbers)
    model = Model("reference")
    numbers_in, x_in = model.add_operand(T.TENSOR_FLOAT32, (n,)), model.add_operand(T.TENSOR_FLOAT32, (n,))
    act = model.add_operand(T.INT32)
    model.set_operand_value(act, FuseCode.NONE)
    out = _tail(model, numbers_in, x_in, act, n)
    model.identify_inputs_and_outputs([numbers_in, x_in], [out])
    model.finish()
    return _compute(Compilation.for_devices(model, [CpuDevice()]), [numbers, x], np.zeros(n, np.float32))


def _compute(compilation: Compilation, inputs, out):
    if compilation.plan is None:
        compilation.finish()
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    execution.set_output(0, out)
    execution.compute()
    return out


def test_mixed_model_partitions_and_matches_the_references(all_devices):
    model = _mixed(N)
    compilation = Compilation(model)
    compilation.finish()
    steps = [(s.device.name, [model.operations[i].type.name for i in s.operations])
             for s in compilation.plan.steps]
    assert ("sample-fibonacci", ["com.example.fibonacci:FIBONACCI"]) in steps
    assert all(name != "sample-fibonacci" for name, ops in steps if "ADD" in ops or "TANH" in ops)
    assert len(steps) >= 3
    x = np.linspace(-1, 1, N, dtype=np.float32)
    got = _compute(compilation, [np.float32([N - 1]), x], np.zeros(N, np.float32))
    numbers = np.asarray(fibonacci_oracle(N), np.float32)
    np.testing.assert_allclose(got, _reference(numbers, x), rtol=1e-6, atol=1e-6)
    assert got[0] == pytest.approx(np.tanh(x[0] / 100) + x[0], rel=1e-5)
    flags = model.get_supported_operations_for_devices([all_devices[1]["sample-fibonacci"]])
    assert flags == [False, True, False, False, False, False]


def test_quant64_example_through_the_runtime(all_devices):
    compilation = Compilation(fibonacci(scale=0.25, zero_point=3))
    compilation.finish()
    assert [s.device.name for s in compilation.plan.steps] == ["sample-fibonacci"]
    out = _compute(compilation, [fibonacci_input(20)], np.zeros(20, np.uint64))
    assert out.tolist() == [f * 4 + 3 for f in fibonacci_oracle(20)]


@pytest.mark.parametrize("mode", [manager.PARTITIONING_NO, manager.PARTITIONING_WITH_FALLBACK,
                                  manager.PARTITIONING_WITHOUT_FALLBACK])
def test_no_device_with_the_extension_is_an_error_not_a_cpu_fallback(remote, mode):
    manager.forTest_set_devices([CpuDevice(), *remote.values()])  # the model names a known one
    with allowed():
        model = _mixed(4)
    manager.forTest_set_devices([CpuDevice(), remote["sample-all"]])  # then it is gone
    try:
        with allowed(), manager.override_partitioning(mode):
            compilation = Compilation(model)
            with pytest.raises(NnError) as error:
                compilation.finish()
    finally:
        manager.forTest_reset()
    assert error.value.code == ResultCode.BAD_DATA
    message = error.value.message
    assert "com.example.fibonacci:FIBONACCI" in message and "no CPU fallback" in message
    assert "nnapi-reference lacks com.example.fibonacci" in message
    assert "sample-all lacks com.example.fibonacci" in message


def test_operand_of_an_extension_the_device_lacks_is_rejected(all_devices):
    manager.forTest_set_devices([CpuDevice(), *all_devices[1].values(),
                                 ClaimingDevice(["com.example.other"])])
    with allowed():
        model = Model("other-operand")
        n = model.add_operand(model.get_extension_operand_type(NAME, fx.EXAMPLE_INT64))
        other = model.add_operand(model.get_extension_operand_type("com.example.other", 1), (0,))
        model.add_operation(model.get_extension_operation_type(NAME, fx.FIBONACCI), [n], [other])
        model.identify_inputs_and_outputs([n], [other])
        model.finish()
    assert model.get_supported_operations_for_devices([all_devices[1]["sample-fibonacci"]]) == [False]
    with pytest.raises(NnError) as error:
        Compilation(model).finish()
    assert error.value.code == ResultCode.BAD_DATA
    assert "sample-fibonacci lacks com.example.other" in error.value.message


def test_explicit_device_list_without_the_ordinary_devices(all_devices):
    compilation = Compilation.for_devices(_mixed(4), [all_devices[1]["sample-fibonacci"]])
    with pytest.raises(NnError) as error:
        compilation.finish()
    assert error.value.code == ResultCode.BAD_DATA and "ADD" in error.value.message


def test_a_device_with_the_extension_that_rejects_the_operation_is_named(all_devices):
    with allowed():
        compilation = Compilation(fibonacci(scale=0.0))  # ExampleQuant64AsymmParams: scale > 0
        with pytest.raises(NnError) as error:
            compilation.finish()
    assert error.value.code == ResultCode.BAD_DATA
    assert "sample-fibonacci has it but does not support this operation" in error.value.message
    assert "sample-all lacks com.example.fibonacci" in error.value.message
