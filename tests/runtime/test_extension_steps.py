"""An extension-typed tensor passed between steps on two devices: the step executor sizes it
from the operand type information the devices report (2-byte elements here), so the consumer
gets exactly the producer's bytes. The devices are in-process test doubles with real kernels."""
from __future__ import annotations

import numpy as np

from nnscope.runtime import Compilation, Execution, Model, manager
from nnscope.runtime.drivers.base import Device, PreparedModel
from nnscope.runtime.hal.device_types import Capabilities, ExecutionResult, OutputShape, PerformanceInfo
from nnscope.runtime.hal.extensions import Extension, ExtensionOperandTypeInformation, type_within
from nnscope.runtime.hal.types import ErrorStatus, OperandType as T
from nnscope.runtime.hal.validate import pool_buffer
from tests.runtime.extension_helpers import allowed

EXT, HALF, PRODUCE, CONSUME = "com.example.halves", 0, 0, 1
SEEN = []


class _Prepared(PreparedModel):
    def __init__(self, kind):
        self.kind = kind

    def execute(self, request, measure_timing=False, deadline_ns=None):
        (arg,), (out,) = request.inputs, request.outputs
        data = bytes(memoryview(pool_buffer(request.pools[arg.pool_index])).cast("B")[
            arg.offset:arg.offset + arg.length])
        if self.kind == PRODUCE:  # float32 -> int16 halves of the values
            result = (np.frombuffer(data, np.float32) * 2).astype(np.int16).tobytes()
        else:  # int16 halves -> float32 values
            SEEN.append(arg.length)
            result = (np.frombuffer(data, np.int16) / 2).astype(np.float32).tobytes()
        if len(result) > out.length:
            return ExecutionResult(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE,
                                   (OutputShape((len(result) // 2,), False),))
        target = memoryview(pool_buffer(request.pools[out.pool_index])).cast("B")
        target[out.offset:out.offset + len(result)] = result
        count = len(data) // (4 if self.kind == PRODUCE else 2)
        return ExecutionResult(ErrorStatus.NONE, (OutputShape((count,)),))


class _HalvesDevice(Device):
    """Supports one operation of the extension (``kind``) and describes its operand type."""

    def __init__(self, name, kind):
        self.name, self.kind = name, kind

    def capabilities(self):
        perf = PerformanceInfo(0.5, 0.5)
        return Capabilities(perf, perf, ((T.TENSOR_FLOAT32, perf),), perf, perf)

    def supported_extensions(self):
        return (Extension(EXT, (ExtensionOperandTypeInformation(HALF, True, 2),)),)

    def supported_operations(self, model):
        return [op.type > 0xFFFF and type_within(op.type) == self.kind for op in model.main.operations]

    def prepare_model(self, model, *args, **kwargs):
        return _Prepared(self.kind)


def test_extension_tensor_between_devices_is_sized_from_device_information():
    manager.forTest_set_devices([_HalvesDevice("producer", PRODUCE), _HalvesDevice("consumer", CONSUME)])
    try:
        with allowed():
            model = Model("halves")
            x = model.add_operand(T.TENSOR_FLOAT32, (5,))
            halves = model.add_operand(model.get_extension_operand_type(EXT, HALF), (5,))
            y = model.add_operand(T.TENSOR_FLOAT32, (5,))
            model.add_operation(model.get_extension_operation_type(EXT, PRODUCE), [x], [halves])
            model.add_operation(model.get_extension_operation_type(EXT, CONSUME), [halves], [y])
            model.identify_inputs_and_outputs([x], [y])
            model.finish()
        compilation = Compilation(model)
        compilation.finish()
        assert [s.device.name for s in compilation.plan.steps] == ["producer", "consumer"]
        out = np.zeros(5, np.float32)
        execution = Execution(compilation)
        execution.set_input(0, np.float32([1, 2.5, -3, 4, 0.5]))
        execution.set_output(0, out)
        execution.compute()
    finally:
        manager.forTest_reset()
    assert SEEN == [10]  # 5 elements x 2 bytes, not 0 and not the 64 KiB guess
    assert out.tolist() == [1, 2.5, -3, 4, 0.5]
