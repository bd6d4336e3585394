"""Sample drivers: advertised capabilities, per-operation support, and each one serving a model
from its own process."""
import numpy as np
import pytest

from nnscope.runtime.drivers.registry import create_driver
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, OperandType as T, OperationType as Op
from nnscope.runtime.ops import registry as ops
from nnscope.runtime.ops.executor import CpuExecutor
from tests.runtime.drivers._hal import add_model, conv_model, make_request

FLOAT_ADD = add_model((4,))
QUANT_ADD = add_model((4,), T.TENSOR_QUANT8_ASYMM, scale=0.5, zero_point=10)
CONV = conv_model(np.ones((2, 3, 3, 1), np.float32), np.zeros(2, np.float32), hw=(4, 4))


@pytest.mark.parametrize("name, float_ok, quant_ok", [
    ("sample-all", True, True), ("sample-float-fast", True, False),
    ("sample-float-slow", True, False), ("sample-quant", False, True), ("sample-minimal", True, False),
])
def test_supported_operations_follow_operand_types(name, float_ok, quant_ok):
    driver = create_driver(name)
    assert driver.supported_operations(FLOAT_ADD) == [float_ok]
    assert driver.supported_operations(QUANT_ADD) == [quant_ok]
    assert driver.supported_operations(CONV) == [float_ok]


def test_capabilities_advertise_own_performance():
    perf = {name: create_driver(name).capabilities().performance(T.TENSOR_FLOAT32).exec_time
            for name in ("sample-float-fast", "sample-float-slow", "sample-all", "sample-minimal")}
    assert perf == {"sample-float-fast": 0.8, "sample-float-slow": 1.3, "sample-all": 1.1,
                    "sample-minimal": 0.4}
    quant = create_driver("sample-quant").capabilities()
    assert quant.performance(T.TENSOR_FLOAT32).exec_time == float("inf")
    assert quant.performance(T.TENSOR_QUANT8_ASYMM).exec_time == 50.0


def test_sample_minimal_supports_only_its_operations():
    driver = create_driver("sample-minimal")
    allowed = driver.config.operations
    assert {Op.ADD, Op.CONV_2D} <= allowed and Op.MUL not in allowed
    assert len(allowed) < len(ops.supported_types())
    mul = add_model((4,))
    mul = type(mul)(type(mul.main)(mul.main.operands, (mul.main.operations[0].__class__(
        Op.MUL, (0, 1, 2), (3,)),), (0, 1), (3,)), operand_values=mul.operand_values)
    assert driver.supported_operations(mul) == [False]
    assert create_driver("sample-all").supported_operations(mul) == [True]


def test_prepare_of_unsupported_model_is_invalid_argument():
    with pytest.raises(HalError) as error:
        create_driver("sample-quant").prepare_model(FLOAT_ADD)
    assert error.value.status == ErrorStatus.INVALID_ARGUMENT


@pytest.mark.parametrize("name", ["sample-float-fast", "sample-float-slow", "sample-quant",
                                  "sample-minimal"])
def test_each_sample_serves_its_model_from_a_process(fresh_device, name):
    device = fresh_device(name)
    model = QUANT_ADD if name == "sample-quant" else FLOAT_ADD
    dtype = np.uint8 if name == "sample-quant" else np.float32
    a, b = np.arange(4).astype(dtype), np.arange(10, 14).astype(dtype)
    request, _, (out,) = make_request(model, [a, b])
    assert device.capabilities() == create_driver(name).capabilities()
    result = device.prepare_model(model).execute(request, measure_timing=True)
    assert result.status == ErrorStatus.NONE
    np.testing.assert_array_equal(out, CpuExecutor(model).run([a, b])[0])
    assert result.timing.in_driver >= result.timing.on_device


def test_timing_is_unknown_unless_measured():
    driver = create_driver("sample-all")
    prepared = driver.prepare_model(FLOAT_ADD)
    request, _, _ = make_request(FLOAT_ADD, [np.ones(4, np.float32)] * 2)
    assert prepared.execute(request).timing is None
    timing = prepared.execute(request, measure_timing=True).timing
    assert timing.on_device is not None and timing.in_driver >= timing.on_device
