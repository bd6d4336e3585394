"""Builders shared by the memory-domain tests: small float models, compilations on one device,
the reference CPU device's answer, and a producer -> consumer descriptor."""
from __future__ import annotations

import numpy as np

from nnscope.runtime import Compilation, Execution, MemoryDesc
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.hal.types import OperandType as T, OperationType as Op
from nnscope.runtime.model import Model
from tests.runtime.helpers import code_of  # noqa: F401 - the memory-domain tests import it here

N = 6
RNG = np.random.default_rng(12)


def binary_model(op: Op, shape=(N,), other=None, out_type=T.TENSOR_FLOAT32, finish=True) -> Model:
    """``out = a <op> b`` with ``b`` of shape ``other`` (broadcast) or ``shape`` (``finish``: a
    finished model, else only its operands)."""
    model = Model(f"{op.name.lower()}")
    a = model.add_operand(T.TENSOR_FLOAT32, shape)
    b = model.add_operand(T.TENSOR_FLOAT32, other or shape)
    act = model.add_operand(T.INT32)
    out = model.add_operand(out_type, shape)
    if not finish:
        return model
    model.set_operand_value(act, 0)
    model.add_operation(op, [a, b, act], [out])
    model.identify_inputs_and_outputs([a, b], [out])
    model.finish()
    return model


def compiled(model: Model, device) -> Compilation:
    compilation = Compilation.for_devices(model, [device])
    compilation.finish()
    return compilation


def reference(model: Model, *inputs) -> np.ndarray:
    """The output of ``model`` on the in-process reference CPU device (plain buffers)."""
    execution = Execution(compiled(model, CpuDevice()))
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    out = np.empty_like(inputs[0])
    execution.set_output(0, out)
    execution.compute()
    return out


def chain_desc(producer: Compilation, consumer: Compilation, dims=None) -> MemoryDesc:
    desc = MemoryDesc()
    desc.add_output_role(producer, 0, 1.0)
    desc.add_input_role(consumer, 0, 0.5)
    if dims is not None:
        desc.set_dimensions(dims)
    desc.finish()
    return desc
