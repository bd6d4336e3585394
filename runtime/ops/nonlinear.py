"""Further activations: HARD_SWISH, ELU, PRELU, LOG_SOFTMAX (AOSP ``Activation.cpp``,
``Elu.cpp``, ``PRelu.cpp``, ``LogSoftmax.cpp``).

Float16 is computed through float32. Quant8 PRELU follows TFLite's reference kernel bit for bit
(``x >= 0``: ``x * s_in / s_out``; else ``x * alpha * s_in * s_alpha / s_out``, each with a Q31
multiplier) and broadcasts alpha against the input. Quant8 HARD_SWISH dequantizes, evaluates
``x * relu6(x + 3) / 6`` in float64 and requantizes (AOSP's fixed-point version may differ by one
step, within the CTS tolerance). LOG_SOFTMAX takes a beta scalar and an axis (negative counts
from the end).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> f = Operand(T.TENSOR_FLOAT32, (3,))
    >>> ctx = OpContext(Operation(O.HARD_SWISH, (0,), (1,)), [np.float32([-4, 1, 4])], [f], [f])
    >>> [round(v, 4) for v in execute_hard_swish(ctx)[0].tolist()]
    [-0.0, 0.6667, 4.0]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType, numpy_dtype
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.registry import OpContext, register

_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_TYPES = (*_FLOATS, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_SCALAR_OF = {T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_FLOAT16: T.FLOAT16}


# ----------------------------------------------------------------------------- validators
def _validate_hard_swish(inputs, outputs) -> None:
    c.expect_count(inputs, 1, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _TYPES)
    c.expect_same_type(outputs, 0, in_type, "output")


def _validate_elu(inputs, outputs) -> None:
    c.expect_count(inputs, 2, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _FLOATS)
    c.expect_type(inputs, 1, _SCALAR_OF[in_type])
    c.expect_same_type(outputs, 0, in_type, "output")


def _validate_log_softmax(inputs, outputs) -> None:
    c.expect_count(inputs, 3, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _FLOATS)
    c.expect_type(inputs, 1, _SCALAR_OF[in_type])
    c.expect_type(inputs, 2, T.INT32)
    c.expect_same_type(outputs, 0, in_type, "output")


# ----------------------------------------------------------------------------- kernels
def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def execute_hard_swish(ctx: OpContext) -> list:
    x = ctx.inputs[0]
    if x.dtype.kind == "f":
        return [_hard_swish(x.astype(np.float32)).astype(x.dtype)]
    operand, out = ctx.input_operands[0], ctx.output_operands[0]
    real = (x.astype(np.float64) - operand.zero_point) * np.float32(operand.scale)
    q = c.round_half_away(_hard_swish(real) / np.float32(out.scale)) + out.zero_point
    return [c.saturate_cast(q, numpy_dtype(out.type))]


def execute_elu(ctx: OpContext) -> list:
    x, alpha = ctx.inputs
    x32 = x.astype(np.float32)
    with np.errstate(over="ignore"):
        negative = np.float32(alpha) * (np.exp(np.minimum(x32, 0)) - np.float32(1))
    return [np.where(x32 > 0, x32, negative).astype(x.dtype)]


def _f32(value: float) -> float:
    return float(np.float32(value))


def _quant_prelu(x, alpha, op_x: Operand, op_alpha: Operand, out: Operand) -> np.ndarray:
    m_pos, sh_pos = c.quantize_multiplier(_f32(_f32(op_x.scale) / _f32(out.scale)))
    product = _f32(_f32(op_x.scale) * _f32(op_alpha.scale))
    m_neg, sh_neg = c.quantize_multiplier(_f32(product / _f32(out.scale)))
    value = x.astype(np.int64) - op_x.zero_point
    slope = alpha.astype(np.int64) - op_alpha.zero_point
    value, slope = np.broadcast_arrays(value, slope)
    positive = c.multiply_by_quantized_multiplier(value, m_pos, sh_pos)
    negative = c.multiply_by_quantized_multiplier(value * slope, m_neg, sh_neg)
    raw = np.where(value >= 0, positive, negative) + out.zero_point
    return c.saturate_cast(raw, numpy_dtype(out.type))


def execute_prelu(ctx: OpContext) -> list:
    x, alpha = ctx.inputs
    c.broadcast_shape(x, alpha)
    if x.dtype.kind == "f":
        x32, a32 = x.astype(np.float32), alpha.astype(np.float32)
        return [np.where(x32 >= 0, x32, x32 * a32).astype(x.dtype)]
    return [_quant_prelu(x, alpha, *ctx.input_operands, ctx.output_operands[0])]


def execute_log_softmax(ctx: OpContext) -> list:
    x, beta, axis = ctx.inputs
    axis = c.normalize_axis(axis, x.ndim, "input 2")
    x32 = x.astype(np.float32)
    shifted = (x32 - x32.max(axis=axis, keepdims=True)) * np.float32(beta)
    out = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return [out.astype(x.dtype)]


_FAMILY = "nonlinear"
register(OperationType.HARD_SWISH, _FAMILY, _validate_hard_swish, execute_hard_swish)
register(OperationType.ELU, _FAMILY, _validate_elu, execute_elu)
register(OperationType.PRELU, _FAMILY, c.same_type_binary(_TYPES), execute_prelu, infer_shapes=c.infer_broadcast)
register(OperationType.LOG_SOFTMAX, _FAMILY, _validate_log_softmax, execute_log_softmax)
