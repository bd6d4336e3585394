"""Quantized convolution arithmetic: exact accumulation and TFLite's fixed-point requantization.

Shared by CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED (``runtime.ops.convolution``) and
TRANSPOSE_CONV_2D / GROUPED_CONV_2D (``runtime.ops.transpose_conv``): zero-point-free operands
whose float dot products are exact (:func:`centered_pair`), per-channel filter scales, and the
int accumulators rescaled as AOSP/TFLite do (``MultiplyByQuantizedMultiplier``, per channel).

Example:
    >>> import numpy as np
    >>> m, s = channel_multipliers(0.5, (0.25,), 0.125)
    >>> fixed_point_multiply(np.int64([7, -7]), m, s).tolist()
    [7, -7]
"""
from __future__ import annotations

import functools

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType
from nnscope.runtime.ops._common import quantize_multiplier, quantized_activation_range

_T = OperandType
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def filter_scales(filter_operand: Operand, channels: int) -> tuple[float, ...]:
    """Per-output-channel filter scales, repeated for per-tensor filters."""
    if filter_operand.channel_quant is not None:
        return tuple(filter_operand.channel_quant.scales)
    return (filter_operand.scale,) * channels


def fixed_point_multiply(acc: np.ndarray, multipliers: np.ndarray,
                         shifts: np.ndarray) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier`` with per-channel (last axis) Q31 multipliers.

    ``SaturatingRoundingDoublingHighMul``'s nudge-and-truncate equals one arithmetic shift,
    ``(a * b + 2**30) >> 31``; the saturating case (both INT32_MIN) cannot occur because
    multipliers are positive. ``RoundingDivideByPOT`` then rounds half away from zero.
    """
    left, right = np.maximum(shifts, 0), np.maximum(-shifts, 0)
    x = np.asarray(acc, np.int64)
    if left.any():
        x = np.clip(x << left, _INT32_MIN, _INT32_MAX)
    high = (x * multipliers + (1 << 30)) >> 31
    mask = (np.int64(1) << right) - 1
    return (high >> right) + ((high & mask) > (mask >> 1) + (high < 0))


@functools.lru_cache(maxsize=4096)
def channel_multipliers(input_scale: float, scales: tuple[float, ...],
                        output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(Q31 multipliers, shifts) per channel, like AOSP's ``GetQuantizedConvolutionMultipler``
    (the two float scales multiplied in float, then divided in double) + ``QuantizeMultiplier``.
    A single pair when every channel shares it. Cached: the scales are model constants."""
    products = (np.float32(input_scale) * np.asarray(scales, np.float32)).astype(np.float64)
    reals = products / np.float64(np.float32(output_scale))
    multipliers, shifts = np.array([quantize_multiplier(float(r)) for r in reals],
                                   np.int64).reshape(-1, 2).T
    if (multipliers == multipliers[0]).all() and (shifts == shifts[0]).all():
        multipliers, shifts = multipliers[:1], shifts[:1]  # per-tensor: cheaper broadcasting
    multipliers.setflags(write=False)
    shifts.setflags(write=False)
    return multipliers, shifts


def requantize(acc: np.ndarray, input_scale: float, scales: tuple[float, ...],
               output: Operand, fuse: int) -> np.ndarray:
    """int accumulators [..., C] -> output dtype: fixed-point rescale per channel, output zero
    point, then the fused activation range."""
    dtype = np.dtype(np.uint8 if output.type == _T.TENSOR_QUANT8_ASYMM else np.int8)
    multipliers, shifts = channel_multipliers(float(input_scale), scales, float(output.scale))
    result = fixed_point_multiply(acc, multipliers, shifts)
    lo, hi = quantized_activation_range(fuse, output.scale, output.zero_point, dtype)
    return np.clip(result + output.zero_point, lo, hi).astype(dtype)


def centered_pair(x: np.ndarray, x_op: Operand, w: np.ndarray, w_op: Operand,
                  reduce_axes) -> tuple[np.ndarray, np.ndarray]:
    """Zero-point-free input and filter as floats whose dot products are exact: float32 when
    ``max|x| * max L1(filter row)`` stays below 2**24, else float64 (exact below 2**53)."""
    wc = w.astype(np.float64) - float(w_op.zero_point)
    x_zp = int(x_op.zero_point)
    x_abs = max(int(x.max()) - x_zp, x_zp - int(x.min()), 0) if x.size else 0
    bound = x_abs * float(np.abs(wc).sum(axis=reduce_axes).max(initial=0.0))
    dtype = np.float32 if bound < 2 ** 24 else np.float64
    return np.subtract(x, x_zp, dtype=dtype), wc.astype(dtype)


def exact_int(values: np.ndarray) -> np.ndarray:
    """Exact float dot products (see :func:`centered_pair`) as int64 accumulators."""
    return np.rint(values).astype(np.int64)
