"""Shared builders and fake devices for the runtime tests."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime import Compilation, Execution, Model, NnError, ResultCode
from nnscope.runtime.drivers.cpu import CpuDevice
from nnscope.runtime.hal.device_types import Capabilities, PerformanceInfo
from nnscope.runtime.hal.types import FuseCode, OperandType as T, OperationType as Op, PaddingCode


def add_model(shape=(1, 4), fuse=FuseCode.NONE, out_shape=None) -> Model:
    """``a + b`` (finished)."""
    model = Model("add")
    a = model.add_operand(T.TENSOR_FLOAT32, shape)
    b = model.add_operand(T.TENSOR_FLOAT32, shape)
    act = model.add_operand(T.INT32)
    out = model.add_operand(T.TENSOR_FLOAT32, shape if out_shape is None else out_shape)
    model.set_operand_value(act, int(fuse))
    model.add_operation(Op.ADD, [a, b, act], [out])
    model.identify_inputs_and_outputs([a, b], [out])
    model.finish()
    return model


def chain_model() -> Model:
    """((x + c) * y) + c: ADD, MUL, ADD with constant c, for partitioning tests."""
    model = Model("chain")
    x = model.add_operand(T.TENSOR_FLOAT32, (2, 3))
    y = model.add_operand(T.TENSOR_FLOAT32, (2, 3))
    c = model.add_operand(T.TENSOR_FLOAT32, (2, 3))
    act = model.add_operand(T.INT32)
    t1 = model.add_operand(T.TENSOR_FLOAT32, (2, 3))
    t2 = model.add_operand(T.TENSOR_FLOAT32, (2, 3))
    out = model.add_operand(T.TENSOR_FLOAT32, (2, 3))
    model.set_operand_value(c, np.full((2, 3), 0.5, np.float32))
    model.set_operand_value(act, 0)
    model.add_operation(Op.ADD, [x, c, act], [t1])
    model.add_operation(Op.MUL, [t1, y, act], [t2])
    model.add_operation(Op.ADD, [t2, c, act], [out])
    model.identify_inputs_and_outputs([x, y], [out])
    model.finish()
    return model


def conv_model(weights: np.ndarray, bias: np.ndarray, hw=(5, 5), stride=1) -> Model:
    """CONV_2D, SAME padding, NHWC, fused NONE."""
    model = Model("conv")
    out_c, kh, kw, in_c = weights.shape
    oh, ow = -(-hw[0] // stride), -(-hw[1] // stride)
    x = model.add_operand(T.TENSOR_FLOAT32, (1, *hw, in_c))
    w = model.add_operand(T.TENSOR_FLOAT32, weights.shape)
    b = model.add_operand(T.TENSOR_FLOAT32, bias.shape)
    scalars = [model.add_operand(T.INT32) for _ in range(4)]
    out = model.add_operand(T.TENSOR_FLOAT32, (1, oh, ow, out_c))
    model.set_operand_value(w, weights)
    model.set_operand_value(b, bias)
    for index, value in zip(scalars, (PaddingCode.SAME, stride, stride, FuseCode.NONE)):
        model.set_operand_value(index, int(value))
    model.add_operation(Op.CONV_2D, [x, w, b, *scalars], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


def run(model_or_compilation, *inputs, out_shape=None, devices=None) -> np.ndarray:
    """Compile (if needed), execute with numpy buffers, return output 0."""
    compilation = model_or_compilation
    if isinstance(compilation, Model):
        compilation = Compilation(compilation, devices)
        compilation.finish()
    execution = Execution(compilation)
    for index, value in enumerate(inputs):
        execution.set_input(index, value)
    graph = compilation.model.to_hal().main
    shape = out_shape or graph.operands[graph.output_indexes[0]].dimensions
    out = np.zeros(shape, np.float32)
    execution.set_output(0, out)
    execution.compute()
    return out


def code_of(call) -> ResultCode:
    """The result code of the NnError that ``call()`` must raise."""
    with pytest.raises(NnError) as caught:
        call()
    return caught.value.code


def add_execution(compilation: Compilation, a, b, out) -> Execution:
    """An execution of an :func:`add_model` compilation: inputs ``a`` and ``b``, output ``out``."""
    execution = Execution(compilation)
    execution.set_input(0, a)
    execution.set_input(1, b)
    execution.set_output(0, out)
    return execution


def ones_add_execution(compilation: Compilation) -> Execution:
    """An execution of a finished :func:`add_model` compilation, ready to compute: both inputs
    ones, output a zeros buffer (all [1, 4] float32)."""
    execution = Execution(compilation)
    x = np.ones((1, 4), np.float32)
    execution.set_input(0, x)
    execution.set_input(1, x)
    execution.set_output(0, np.zeros((1, 4), np.float32))
    return execution


class AddOnlyDevice(CpuDevice):
    """A faster-than-CPU fake device that supports only ADD (to force partitioning)."""

    name = "fake-add-only"

    def capabilities(self) -> Capabilities:
        fast = PerformanceInfo(0.5, 0.5)
        return Capabilities(fast, fast, tuple((t, fast) for t in T), fast, fast)

    def supported_operations(self, model):
        return [op.type == Op.ADD for op in model.main.operations]


def mixed_model(width: int = 4, unknown: bool = False) -> Model:
    """Float and quant8 work joined by QUANTIZE/DEQUANTIZE, for partitioning across drivers:
    ``out = dequantize(quantize(x + c) + q) * y`` (float ADD, QUANTIZE, quant ADD, DEQUANTIZE,
    float MUL) on [1, width] inputs. Quantization: scale 0.5, zero point 128. ``unknown``: every
    temporary and the output declared [0, 0] (shapes known only at execution)."""
    model = Model("mixed-unknown" if unknown else "mixed")
    shape = (1, width)
    inner = (0, 0) if unknown else shape
    x, y = (model.add_operand(T.TENSOR_FLOAT32, shape) for _ in range(2))
    q = model.add_operand(T.TENSOR_QUANT8_ASYMM, shape, scale=0.5, zero_point=128)
    c = model.add_operand(T.TENSOR_FLOAT32, shape)
    act = model.add_operand(T.INT32)
    a = model.add_operand(T.TENSOR_FLOAT32, inner)
    qa, qs = (model.add_operand(T.TENSOR_QUANT8_ASYMM, inner, scale=0.5, zero_point=128)
              for _ in range(2))
    f = model.add_operand(T.TENSOR_FLOAT32, inner)
    out = model.add_operand(T.TENSOR_FLOAT32, inner)
    model.set_operand_value(c, np.full(shape, 1.0, np.float32))
    model.set_operand_value(act, 0)
    model.add_operation(Op.ADD, [x, c, act], [a])
    model.add_operation(Op.QUANTIZE, [a], [qa])
    model.add_operation(Op.ADD, [qa, q, act], [qs])
    model.add_operation(Op.DEQUANTIZE, [qs], [f])
    model.add_operation(Op.MUL, [f, y, act], [out])
    model.identify_inputs_and_outputs([x, y, q], [out])
    model.finish()
    return model


def mixed_expected(x: np.ndarray, y: np.ndarray, q: np.ndarray) -> np.ndarray:
    """What :func:`mixed_model` computes (quantization by round-half-even, as the kernels)."""
    qa = np.clip(np.round((x + 1.0) / 0.5) + 128, 0, 255)
    qs = np.clip(np.round(((qa - 128) * 0.5 + (q.astype(np.float64) - 128) * 0.5) / 0.5) + 128, 0, 255)
    return ((qs - 128) * 0.5 * y).astype(np.float32)
