"""Activations: RELU, RELU1, RELU6, LOGISTIC, TANH, SOFTMAX (AOSP ``Activation.cpp``, ``Softmax.cpp``).

Float16 is computed in float32. Quant8 RELUs clamp in the quantized domain with the input's
scale/zero point (exact). Quant8 LOGISTIC/TANH/SOFTMAX dequantize, evaluate in float64 and
requantize to their fixed output scales (1/256, 1/128, 1/256); AOSP uses gemmlowp fixed point
there, so a value may differ by one step (within the CTS tolerance).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> t = Operand(T.TENSOR_FLOAT32, (1, 3)); beta = Operand(T.FLOAT32)
    >>> ctx = OpContext(Operation(O.SOFTMAX, (0, 1), (2,)), [np.float32([[0, 0, 0]]), 1.0],
    ...                 [t, beta], [t])
    >>> (execute_softmax(ctx)[0] * 3).round(3).tolist()
    [[1.0, 1.0, 1.0]]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import FuseCode, Operand, OperandType as T, OperationType, numpy_dtype
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.registry import OpContext, register

_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
#: Fixed output quantisation (scale, uint8 zero point, int8 zero point) of the quant8 kernels.
_FIXED_OUTPUT = {OperationType.LOGISTIC: (1 / 256, 0, -128), OperationType.TANH: (1 / 128, 128, 0),
                 OperationType.SOFTMAX: (1 / 256, 0, -128)}


def _validate_unary(op_type: OperationType):
    def validate(inputs, outputs) -> None:
        c.expect_count(inputs, 1, "inputs")
        c.expect_count(outputs, 1, "outputs")
        in_type = c.expect_type(inputs, 0, _TYPES)
        c.expect_same_type(outputs, 0, in_type, "output")
        c.expect_rank(inputs, 0, max_rank=4)
        _expect_fixed_output(op_type, in_type, outputs[0])
    return validate


def _expect_fixed_output(op_type: OperationType, in_type: T, output: Operand) -> None:
    if op_type in _FIXED_OUTPUT and c.is_quant8(in_type):
        scale, zp_u8, zp_s8 = _FIXED_OUTPUT[op_type]
        c.expect_quant_params(output, scale, zp_s8 if c.is_quant8_signed(in_type) else zp_u8,
                              "output 0")


def _validate_softmax(inputs, outputs) -> None:
    c.expect_count(inputs, (2, 3), "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _TYPES)
    beta_type = T.FLOAT16 if in_type == T.TENSOR_FLOAT16 else T.FLOAT32
    c.expect_type(inputs, 1, beta_type)
    if len(inputs) == 3:
        c.expect_type(inputs, 2, T.INT32)
    c.expect_same_type(outputs, 0, in_type, "output")
    c.expect_rank(inputs, 0, max_rank=4)
    _expect_fixed_output(OperationType.SOFTMAX, in_type, outputs[0])


# ----------------------------------------------------------------------------- kernels
def _relu_kernel(fuse: FuseCode):
    def execute(ctx: OpContext) -> list:
        x = ctx.inputs[0]
        if x.dtype.kind == "f":
            return [c.apply_fused_activation(x, fuse)]
        operand = ctx.input_operands[0]
        lo, hi = c.quantized_activation_range(fuse, operand.scale, operand.zero_point, x.dtype)
        return [np.clip(x, lo, hi).astype(x.dtype)]
    return execute


def _float_unary(x: np.ndarray, func) -> np.ndarray:
    with np.errstate(over="ignore"):
        return func(x.astype(np.float32)).astype(x.dtype)


def _quant_unary(x: np.ndarray, operand: Operand, out: Operand, func) -> np.ndarray:
    real = (x.astype(np.float64) - operand.zero_point) * np.float32(operand.scale)
    return _requantize(func(real), out)


def _requantize(real: np.ndarray, out: Operand) -> np.ndarray:
    dtype = numpy_dtype(out.type)
    q = c.round_half_away(real / np.float32(out.scale)) + out.zero_point
    return c.saturate_cast(q, dtype)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _unary_kernel(func):
    def execute(ctx: OpContext) -> list:
        x = ctx.inputs[0]
        if x.dtype.kind == "f":
            return [_float_unary(x, func)]
        with np.errstate(over="ignore"):
            return [_quant_unary(x, ctx.input_operands[0], ctx.output_operands[0], func)]
    return execute


def _softmax(real: np.ndarray, beta: float, axis: int) -> np.ndarray:
    shifted = (real - real.max(axis=axis, keepdims=True)) * beta
    exp = np.exp(shifted)
    return exp / exp.sum(axis=axis, keepdims=True)


def execute_softmax(ctx: OpContext) -> list:
    x, beta = ctx.inputs[0], float(ctx.inputs[1])
    axis = ctx.inputs[2] if len(ctx.inputs) > 2 and ctx.inputs[2] is not None else -1
    c.expect(-x.ndim <= axis < x.ndim, f"input 2: axis {axis} out of range for rank {x.ndim}")
    if x.dtype.kind == "f":
        return [_softmax(x.astype(np.float32), np.float32(beta), axis).astype(x.dtype)]
    operand = ctx.input_operands[0]
    real = (x.astype(np.float64) - operand.zero_point) * np.float32(operand.scale)
    return [_requantize(_softmax(real, beta, axis), ctx.output_operands[0])]


register(OperationType.RELU, "activation", _validate_unary(OperationType.RELU),
         _relu_kernel(FuseCode.RELU))
register(OperationType.RELU1, "activation", _validate_unary(OperationType.RELU1),
         _relu_kernel(FuseCode.RELU1))
register(OperationType.RELU6, "activation", _validate_unary(OperationType.RELU6),
         _relu_kernel(FuseCode.RELU6))
register(OperationType.LOGISTIC, "activation", _validate_unary(OperationType.LOGISTIC),
         _unary_kernel(_sigmoid))
register(OperationType.TANH, "activation", _validate_unary(OperationType.TANH),
         _unary_kernel(np.tanh))
register(OperationType.SOFTMAX, "activation", _validate_softmax, execute_softmax)
