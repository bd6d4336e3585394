"""The ``sample-fibonacci`` driver process: getSupportedExtensions, FIBONACCI results against
Fibonacci numbers computed here with Python ints, INVALID_ARGUMENT for every bad extension
operand or parameter, spans naming the extension operation, and that the allowlist lives in the
runtime only: a program speaking HAL directly uses the extension although it is refused."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from nnscope import tracing
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.hal.device_types import Request, RequestArgument
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.extensions import Extension, ExtensionOperandTypeInformation
from nnscope.runtime.hal.types import ErrorStatus, OperandType as T
from tests.runtime.drivers.fib_hal import (FIBONACCI, INT64, NAME, PREFIX, QUANT64, fib_model,
                                           fib_request, int64, outputs)
from tests.runtime.extension_helpers import fibonacci, refused


@pytest.fixture(scope="module")
def fib_device():
    device = RemoteDevice("sample-fibonacci", timeout_s=30.0)
    yield device
    device.shutdown()


def _run(device, model, n_bytes, out_bytes):
    prepared = device.prepare_model(model)
    request, pool = fib_request(n_bytes, out_bytes)
    return prepared.execute(request, measure_timing=True), pool, len(n_bytes or b"")


def test_supported_extensions_as_aosp_example(fib_device):
    assert fib_device.supported_extensions() == (Extension(NAME, (
        ExtensionOperandTypeInformation(0, False, 8), ExtensionOperandTypeInformation(1, True, 8))),)
    assert RemoteDevice("sample-fibonacci").name == "sample-fibonacci"


@pytest.mark.parametrize("n,scale,zero_point", [(1, 1.0, 0), (2, 0.5, 10), (10, 0.5, 10),
                                                (30, 0.25, 3), (93, 1.0, 0), (40, 3.0, 7)])
def test_quant64_output_is_quantized_fibonacci(fib_device, n, scale, zero_point):
    model = fib_model(scale=scale, zero_point=zero_point)
    assert fib_device.supported_operations(model) == [True]
    result, pool, offset = _run(fib_device, model, int64(n), 8 * n)
    assert result.status == ErrorStatus.NONE and result.output_shapes[0].dimensions == (n,)
    assert result.timing is not None
    expected = [int(f / scale + zero_point) for f in fibonacci(n)]
    assert outputs(pool, offset, np.uint64, n) == expected


def test_float32_input_and_output(fib_device):
    model = fib_model(n_type=T.TENSOR_FLOAT32, n_dims=(1,), out_type=T.TENSOR_FLOAT32)
    result, pool, offset = _run(fib_device, model, np.float32([12.7]).tobytes(), 4 * 12)
    assert result.status == ErrorStatus.NONE
    assert outputs(pool, offset, np.float32, 12) == [float(f) for f in fibonacci(12)]


def test_constant_n_and_a_small_output_buffer(fib_device):
    model = fib_model(constant_n=8)
    result, pool, _ = _run(fib_device, model, None, 8 * 8)
    assert result.status == ErrorStatus.NONE
    assert outputs(pool, 0, np.uint64, 8) == [f * 2 + 10 for f in fibonacci(8)]
    result, _, _ = _run(fib_device, fib_model(), int64(20), 8 * 19)
    assert result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert result.output_shapes[0].dimensions == (20,) and not result.output_shapes[0].is_sufficient


_BAD_MODELS = {
    "params too short": dict(extension_data=b"\x00" * 15),
    "params too long": dict(extension_data=b"\x00" * 17),
    "params missing": dict(extension_data=b""),
    "zero scale": dict(scale=0.0),
    "negative scale": dict(scale=-1.0),
    "nan scale": dict(scale=float("nan")),
    "inf scale": dict(scale=float("inf")),
    "negative zero point": dict(zero_point=-1),
    "output rank 2": dict(out_dims=(2, 2)),
    "int64 with dimensions": dict(n_dims=(1,)),
    "float n of 2 values": dict(n_type=T.TENSOR_FLOAT32, n_dims=(2,)),
    "unknown type within": dict(out_type=(PREFIX << 16) | 9),
    "output int64 scalar": dict(out_type=INT64),
    "input quant64": dict(n_type=QUANT64),
    "unknown operation within": dict(op_type=(PREFIX << 16) | 1),
    "ordinary type": dict(n_type=T.TENSOR_INT32, n_dims=(1,)),
    "other extension's operand": dict(out_type=(8 << 16) | 1,
                                      pairs=((NAME, PREFIX), ("com.example.other", 8))),
    "other extension's operation": dict(op_type=(8 << 16) | 0,
                                        pairs=((NAME, PREFIX), ("com.example.other", 8))),
    "extension missing from the model": dict(pairs=(("com.example.other", PREFIX),)),
    "constant n = 0": dict(constant_n=0),
    "constant n negative": dict(constant_n=-5),
}


@pytest.mark.parametrize("case", sorted(_BAD_MODELS))
def test_bad_extension_operands_and_parameters_are_invalid_argument(fib_device, case):
    model = fib_model(**_BAD_MODELS[case])
    with pytest.raises(HalError) as error:
        fib_device.prepare_model(model)
    assert error.value.status == ErrorStatus.INVALID_ARGUMENT
    try:
        assert fib_device.supported_operations(model) == [False]
    except HalError as invalid:  # a model that fails HAL validation itself
        assert invalid.status == ErrorStatus.INVALID_ARGUMENT
    assert fib_device.capabilities() is not None  # still serving


@pytest.mark.parametrize("n_bytes,out_bytes", [(int64(0), 8), (int64(-3), 8), (int64(94), 8 * 94),
                                               (int64(1 << 40), 8), (b"\x01" * 4, 8),
                                               (b"\x01" * 12, 8)])
def test_bad_n_at_execution_is_invalid_argument(fib_device, n_bytes, out_bytes):
    result, _, _ = _run(fib_device, fib_model(), n_bytes, out_bytes)
    assert result.status == ErrorStatus.INVALID_ARGUMENT


def test_quantized_overflow_is_invalid_argument(fib_device):
    result, _, _ = _run(fib_device, fib_model(scale=1e-3), int64(90), 8 * 90)
    assert result.status == ErrorStatus.INVALID_ARGUMENT


def test_spans_name_the_extension_operation():
    with tracing.TraceSession() as session:
        device = RemoteDevice("sample-fibonacci")
        try:
            result, _, _ = _run(device, fib_model(), int64(5), 40)
            device.capabilities()
            data = session.collect()
            pid = device.pid
        finally:
            device.shutdown()
    assert result.status == ErrorStatus.NONE
    names = [s.name for s in data.spans() if s.pid == pid]
    assert "[NN_LD_PE]FibonacciDriver::execute" in names
    assert any(n.endswith("]com.example.fibonacci:FIBONACCI") for n in names), names
    assert "[NN_LD_PC]FibonacciDriver::prepareModel" in names


def test_hal_bypasses_the_allowlist(fib_device):
    """The allowlist is a runtime library check: refused programs get False and BAD_DATA from
    the runtime API, but HAL messages go straight to the driver (README: protects against
    accidental use, not deliberate bypass)."""
    from nnscope.runtime import Model, NnError  # noqa: PLC0415
    with refused():
        assert fib_device.get_extension_support(NAME) is False
        with pytest.raises(NnError, match="nnapi_extensions_app_allowlist"):
            Model().get_extension_operation_type(NAME, 0)
        assert [e.name for e in fib_device.supported_extensions()] == [NAME]
        result, pool, offset = _run(fib_device, fib_model(), int64(6), 48)
    assert result.status == ErrorStatus.NONE
    assert outputs(pool, offset, np.uint64, 6) == [f * 2 + 10 for f in fibonacci(6)]


def test_request_pointing_outside_its_pool(fib_device):
    prepared = fib_device.prepare_model(fib_model())
    pool = bytearray(struct.pack("<q", 5) + bytes(40))
    bad = Request((RequestArgument(pool_index=0, offset=44, length=8),),
                  (RequestArgument(pool_index=0, offset=8, length=40),), (pool,))
    assert prepared.execute(bad).status == ErrorStatus.INVALID_ARGUMENT
    assert FIBONACCI >> 16 == PREFIX
