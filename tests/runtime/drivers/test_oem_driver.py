"""OEM_OPERATION with OEM and TENSOR_OEM_BYTE operands: the ``sample-oem`` driver process runs
its documented toy semantics (XOR with a constant key; the oracle is computed here byte by byte),
rejects anything else with INVALID_ARGUMENT, and every other device rejects OEM operations."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime import Compilation, Execution, Model, NnError, ResultCode, manager
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.drivers.ipc import RemoteDevice
from nnscope.runtime.hal.errors import HalError
from nnscope.runtime.hal.types import ErrorStatus, OperandType as T, OperationType as Op

KEY = bytes([0x0F, 0xF0, 0x55])


@pytest.fixture(scope="module")
def devices():
    remote = {name: RemoteDevice(name, timeout_s=30.0) for name in ("sample-oem", "sample-all")}
    yield remote
    for device in remote.values():
        device.shutdown()


def _oem_model(shape=(2, 5), key=KEY, key_type=T.OEM, out_shape=None, data_type=T.TENSOR_OEM_BYTE,
               extra_input=False) -> Model:
    model = Model("oem")
    data = model.add_operand(data_type, shape)
    key_operand = model.add_operand(key_type)
    out = model.add_operand(T.TENSOR_OEM_BYTE, shape if out_shape is None else out_shape)
    model.set_operand_value(key_operand, key)
    inputs = [data, key_operand]
    if extra_input:
        inputs.append(key_operand)
    model.add_operation(Op.OEM_OPERATION, inputs, [out])
    model.identify_inputs_and_outputs([data], [out])
    model.finish()
    return model


def _expected(data: np.ndarray, key: bytes) -> list[int]:
    return [int(b) ^ key[i % len(key)] for i, b in enumerate(data.reshape(-1).tolist())]


def _run(compilation, data, out_shape):
    out = np.zeros(out_shape, np.uint8)
    execution = Execution(compilation)
    execution.set_input(0, data)
    execution.set_output(0, out)
    execution.compute()
    return out


def test_sample_oem_runs_the_toy_semantics(devices):
    manager.forTest_set_devices([CpuDevice(), *devices.values()])
    try:
        model = _oem_model()
        compilation = Compilation(model)
        compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == ["sample-oem"]
        data = np.arange(200, 210, dtype=np.uint8).reshape(2, 5)
        assert _run(compilation, data, (2, 5)).reshape(-1).tolist() == _expected(data, KEY)
    finally:
        manager.forTest_reset()


def test_other_devices_reject_oem_operations(devices):
    model = _oem_model()
    assert CpuDevice().supported_operations(model.to_hal()) == [False]
    assert devices["sample-all"].supported_operations(model.to_hal()) == [False]
    assert devices["sample-oem"].supported_operations(model.to_hal()) == [True]
    for mode in (manager.PARTITIONING_NO, manager.PARTITIONING_WITH_FALLBACK,
                 manager.PARTITIONING_WITHOUT_FALLBACK):
        manager.forTest_set_devices([CpuDevice(), devices["sample-all"]])
        try:
            with manager.override_partitioning(mode), pytest.raises(NnError) as error:
                Compilation(model).finish()
        finally:
            manager.forTest_reset()
        assert error.value.code == ResultCode.BAD_DATA and "OEM_OPERATION" in error.value.message


@pytest.mark.parametrize("case", [
    dict(key=b""), dict(key=bytes(65)), dict(out_shape=(3, 5)), dict(extra_input=True),
    dict(data_type=T.TENSOR_QUANT8_ASYMM_SIGNED), dict(key_type=T.TENSOR_OEM_BYTE)])
def test_bad_oem_models_are_invalid_argument(devices, case):
    try:
        model = _oem_model(**case)
    except NnError as error:  # the runtime itself refuses some (e.g. a QUANT8 without a scale)
        assert error.code == ResultCode.BAD_DATA
        return
    with pytest.raises(HalError) as error:
        devices["sample-oem"].prepare_model(model.to_hal())
    assert error.value.status == ErrorStatus.INVALID_ARGUMENT
    assert devices["sample-oem"].supported_operations(model.to_hal()) == [False]


def test_short_output_reports_the_needed_shape(devices):
    prepared = devices["sample-oem"].prepare_model(_oem_model(shape=(0,), out_shape=(0,)).to_hal())
    from nnscope.runtime.hal.device_types import Request, RequestArgument  # noqa: PLC0415
    pool = bytearray(range(8)) + bytearray(4)
    request = Request((RequestArgument(pool_index=0, offset=0, length=8, dimensions=(8,)),),
                      (RequestArgument(pool_index=0, offset=8, length=4),), (pool,))
    result = prepared.execute(request)
    assert result.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert result.output_shapes[0].dimensions == (8,) and not result.output_shapes[0].is_sufficient
