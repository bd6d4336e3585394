"""L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION and INSTANCE_NORMALIZATION (AOSP
``L2Normalization.cpp``, ``LocalResponseNormalization.cpp``, ``InstanceNormalization.cpp``).

L2_NORMALIZATION: ``input[, axis = -1]``, ``x / max(||x||, 1e-6)`` along the axis. Quant8
outputs have the fixed scale 1/128 (zero point 128 asymm, 0 signed) and are computed in integer
arithmetic like TFLite: ``128 * (x - zp)`` times the Newton-Raphson inverse square root of the
sum of squares (``GetInvSqrtQuantizedMultiplierExp``).
LOCAL_RESPONSE_NORMALIZATION: ``input, radius, bias, alpha, beta[, axis = -1]``,
``x * (bias + alpha * sum of x^2 over [i - radius, i + radius]) ** -beta``.
INSTANCE_NORMALIZATION: ``input, gamma, beta, epsilon, layout``, per batch item and channel
``(x - mean) * gamma / sqrt(var + epsilon) + beta``. Float16 runs in float32.

Example:
    >>> import numpy as np
    >>> l2_normalize_quant(np.int64([[0, 3, 4]]), axis=1, signed=True).tolist()
    [[0, 77, 102]]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops._common import (expect, expect_count, expect_quant_params, expect_rank,
                                 expect_type, rounding_divide_by_pot)
from nnscope.runtime.ops.window import from_nhwc, to_nhwc
from nnscope.runtime.ops.registry import OpContext, register

_F32 = np.float32
_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_INT32_MAX = (1 << 31) - 1


# --------------------------------------------------------------------------- fixed point
def _high_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int64 arrays of int32 values."""
    product = a * b
    nudge = np.where(product >= 0, 1 << 30, 1 - (1 << 30))
    total = product + nudge
    result = np.where(total >= 0, total >> 31, -((-total) >> 31))
    return np.where((a == -(1 << 31)) & (b == -(1 << 31)), _INT32_MAX, result)


def _saturating_shift_left(x: np.ndarray, bits: int) -> np.ndarray:
    return np.clip(x << bits, -(1 << 31), _INT32_MAX)


def inv_sqrt_multiplier(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``GetInvSqrtQuantizedMultiplierExp(sum, reverse_shift=-1)`` elementwise:
    (Q31 multipliers, left shifts <= 0)."""
    x = np.asarray(sums, np.int64)
    shift = np.full(x.shape, 11, np.int64)
    while (big := x >= (1 << 29)).any():
        x = np.where(big, x // 4, x)
        shift += big
    x = np.maximum(x, 2)  # inputs 0 and 1 are handled apart below
    bit_length = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    pairs = (32 - bit_length - 1) // 2 - 1
    shift -= pairs
    x = x << (2 * pairs)
    raw_input = x >> 1
    half_input = rounding_divide_by_pot(raw_input, 1)
    three_halves = np.int64((1 << 28) + (1 << 27))
    guess = np.full(x.shape, 1 << 28, np.int64)
    for _ in range(5):
        cube = _saturating_shift_left(_high_mul(_high_mul(guess, guess), guess), 6)
        guess = _saturating_shift_left(
            _high_mul(three_halves, guess) - _high_mul(half_input, cube), 3)
    multiplier = _high_mul(guess, np.int64(1518500250))
    multiplier = np.where(shift < 0, multiplier << np.maximum(-shift, 0), multiplier)
    shift = np.maximum(shift, 0)
    small = np.asarray(sums) <= 1
    return np.where(small, _INT32_MAX, multiplier), np.where(small, 0, -shift)


def l2_normalize_quant(centered: np.ndarray, axis: int, signed: bool) -> np.ndarray:
    """Quantized L2 normalisation of zero-point-free values; returns output values."""
    sums = (centered * centered).sum(axis=axis, keepdims=True)
    multiplier, shift = inv_sqrt_multiplier(sums)
    scaled = _high_mul(centered * 128, multiplier)
    right = np.broadcast_to(-shift, scaled.shape)
    mask = (np.int64(1) << right) - 1
    result = (scaled >> right) + ((scaled & mask) > (mask >> 1) + (scaled < 0))
    return np.clip(result, -128, 127) if signed else np.clip(result + 128, 0, 255)


# --------------------------------------------------------------------------- L2_NORMALIZATION
def _axis(ctx: OpContext, position: int) -> int:
    rank = ctx.inputs[0].ndim
    axis = int(ctx.inputs[position]) if len(ctx.inputs) > position else -1
    expect(-rank <= axis < rank, f"axis {axis} out of range for rank {rank}")
    return axis % rank


def _execute_l2(ctx: OpContext) -> list:
    x, axis = ctx.inputs[0], _axis(ctx, 1)
    x_type = ctx.input_operands[0].type
    if x_type in _QUANT8:
        centered = x.astype(np.int64) - ctx.input_operands[0].zero_point
        signed = x_type == T.TENSOR_QUANT8_ASYMM_SIGNED
        return [l2_normalize_quant(centered, axis, signed).astype(x.dtype)]
    xf = x.astype(_F32)
    norm = np.maximum(np.sqrt((xf * xf).sum(axis=axis, keepdims=True)), _F32(1e-6))
    return [(xf / norm).astype(x.dtype)]


def _validate_l2(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, (1, 2), "inputs")
    expect_count(outputs, 1, "outputs")
    input_type = expect_type(inputs, 0, _FLOATS + _QUANT8)
    expect_rank(inputs, 0, max_rank=4)
    if len(inputs) == 2:
        expect_type(inputs, 1, T.INT32)
    expect_type(outputs, 0, input_type, "output")
    if input_type in _QUANT8:
        zero_point = 128 if input_type == T.TENSOR_QUANT8_ASYMM else 0
        expect_quant_params(outputs[0], 1 / 128, zero_point, "output 0")


# --------------------------------------------------------------------------- LRN
def _execute_lrn(ctx: OpContext) -> list:
    x, axis = ctx.inputs[0], _axis(ctx, 5)
    radius, bias, alpha, beta = ctx.inputs[1:5]
    xf = np.moveaxis(x.astype(_F32), axis, -1)
    cumulative = np.cumsum(np.float64(xf) ** 2, axis=-1)  # float64: no cancellation
    squares = np.concatenate([np.zeros((*xf.shape[:-1], 1)), cumulative], axis=-1)
    depth, index = xf.shape[-1], np.arange(xf.shape[-1])
    upper = np.minimum(index + int(radius), depth - 1) + 1
    lower = np.maximum(index - int(radius), 0)
    window = (squares[..., upper] - squares[..., lower]).astype(_F32)
    y = xf * np.power(_F32(bias) + _F32(alpha) * window, _F32(-beta))
    return [np.moveaxis(y, -1, axis).astype(x.dtype)]


def _validate_lrn(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, (5, 6), "inputs")
    expect_count(outputs, 1, "outputs")
    input_type = expect_type(inputs, 0, _FLOATS)
    expect_rank(inputs, 0, max_rank=4)
    scalar = T.FLOAT16 if input_type == T.TENSOR_FLOAT16 else T.FLOAT32
    for index, wanted in enumerate((T.INT32, scalar, scalar, scalar, T.INT32)[:len(inputs) - 1],
                                   start=1):
        expect_type(inputs, index, wanted)
    expect_type(outputs, 0, input_type, "output")


# --------------------------------------------------------------------------- INSTANCE_NORMALIZATION
def _execute_instance(ctx: OpContext) -> list:
    x, gamma, beta, epsilon, nchw = ctx.inputs
    xf = to_nhwc(x, bool(nchw)).astype(_F32)
    mean = xf.mean(axis=(1, 2), keepdims=True, dtype=np.float64).astype(_F32)
    centered = xf - mean
    var = (centered * centered).mean(axis=(1, 2), keepdims=True, dtype=np.float64).astype(_F32)
    y = centered * _F32(gamma) / np.sqrt(var + _F32(epsilon)) + _F32(beta)
    return [from_nhwc(y.astype(x.dtype), bool(nchw))]


def _validate_instance(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 5, "inputs")
    expect_count(outputs, 1, "outputs")
    input_type = expect_type(inputs, 0, _FLOATS)
    expect_rank(inputs, 0, exact=4)
    scalar = T.FLOAT16 if input_type == T.TENSOR_FLOAT16 else T.FLOAT32
    for index, wanted in enumerate((scalar, scalar, scalar, T.BOOL), start=1):
        expect_type(inputs, index, wanted)
    expect_type(outputs, 0, input_type, "output")


register(OperationType.L2_NORMALIZATION, "normalization", _validate_l2, _execute_l2)
register(OperationType.LOCAL_RESPONSE_NORMALIZATION, "normalization", _validate_lrn, _execute_lrn)
register(OperationType.INSTANCE_NORMALIZATION, "normalization", _validate_instance,
         _execute_instance)
