"""Shared kernel helpers: fused activations, (de)quantisation, TFLite fixed-point maths, validators.

Kernels of every family import from here, so the names are stable. Rounding follows the
NNAPI/TFLite reference (``std::round``: half away from zero) and integer helpers reproduce
gemmlowp's fixed-point primitives bit for bit, vectorised over int64 numpy arrays.

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType
    >>> q = Operand(OperandType.TENSOR_QUANT8_ASYMM, (3,), scale=0.5, zero_point=128)
    >>> quantize(np.array([-1.0, 0.25, 1.0], np.float32), q).tolist()
    [126, 129, 130]
    >>> quantized_activation_range(FuseCode.RELU6, 0.5, 128, np.uint8)
    (128, 140)
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import FuseCode, Operand, OperandType, numpy_dtype
from nnscope.runtime.ops.budget import OutputPlan
from nnscope.runtime.ops.registry import OpValidationError

FLOAT_TYPES = frozenset({OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16})
QUANT8_TYPES = frozenset({OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED})
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


# --------------------------------------------------------------------------- type predicates
def is_quant8(op_type: OperandType) -> bool:
    """TENSOR_QUANT8_ASYMM or TENSOR_QUANT8_ASYMM_SIGNED (the asymmetric 8-bit types)."""
    return op_type in QUANT8_TYPES


def is_quant8_signed(op_type: OperandType) -> bool:
    return op_type == OperandType.TENSOR_QUANT8_ASYMM_SIGNED


def dtype_range(dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


# --------------------------------------------------------------------------- rounding / activations
def round_half_away(values: np.ndarray) -> np.ndarray:
    """``std::round`` for arrays: half away from zero, computed in float64 (exact for float32)."""
    values = np.asarray(values, dtype=np.float64)
    return np.trunc(values + np.copysign(0.5, values))


def _round_scalar(value: float) -> int:
    return int(math.copysign(math.floor(abs(value) + 0.5), value))


def apply_fused_activation(array: np.ndarray, fuse_code: int) -> np.ndarray:
    """Apply a float fused activation (NONE/RELU/RELU1/RELU6); returns a new or the same array."""
    if fuse_code == FuseCode.NONE:
        return array
    if fuse_code == FuseCode.RELU:
        return np.maximum(array, 0, dtype=array.dtype)
    if fuse_code == FuseCode.RELU1:
        return np.clip(array, -1, 1).astype(array.dtype, copy=False)
    if fuse_code == FuseCode.RELU6:
        return np.clip(array, 0, 6).astype(array.dtype, copy=False)
    raise OpValidationError(f"unknown fused activation code {fuse_code}")


def apply_fused_activation_inplace(array: np.ndarray, fuse_code: int) -> np.ndarray:
    """:func:`apply_fused_activation` written into ``array`` (a kernel's own fresh result)."""
    if fuse_code == FuseCode.NONE:
        return array
    if fuse_code == FuseCode.RELU:
        return np.maximum(array, 0, out=array)
    if fuse_code == FuseCode.RELU1:
        return np.clip(array, -1, 1, out=array)
    if fuse_code == FuseCode.RELU6:
        return np.clip(array, 0, 6, out=array)
    raise OpValidationError(f"unknown fused activation code {fuse_code}")


def quantized_activation_range(fuse_code: int, scale: float, zero_point: int, dtype) -> tuple[int, int]:
    """Clamp bounds for a quantized output, like AOSP ``CalculateActivationRange<T>``."""
    qmin, qmax = dtype_range(dtype)
    scale32 = np.float32(scale)

    def q(value: float) -> int:
        return zero_point + _round_scalar(float(np.float32(value) / scale32))

    if fuse_code == FuseCode.NONE:
        return qmin, qmax
    if fuse_code == FuseCode.RELU:
        return max(qmin, q(0.0)), qmax
    if fuse_code == FuseCode.RELU1:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    if fuse_code == FuseCode.RELU6:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    raise OpValidationError(f"unknown fused activation code {fuse_code}")


# --------------------------------------------------------------------------- (de)quantisation
def dequantize(array: np.ndarray, operand: Operand, dtype=np.float32) -> np.ndarray:
    """Real values of a quantized tensor: ``scale * (q - zero_point)`` (per-channel aware)."""
    centered = array.astype(np.float32) - np.float32(operand.zero_point)
    if operand.channel_quant is not None:
        shape = [1] * array.ndim
        shape[operand.channel_quant.channel_dim] = -1
        scales = np.asarray(operand.channel_quant.scales, np.float32).reshape(shape)
        return (centered * scales).astype(dtype, copy=False)
    return (centered * np.float32(operand.scale)).astype(dtype, copy=False)


def quantize(values: np.ndarray, operand: Operand) -> np.ndarray:
    """Quantize real values to ``operand``'s type: ``zp + round(x / scale)`` clamped to the dtype."""
    dtype = numpy_dtype(operand.type)
    scaled = np.asarray(values, np.float32) / np.float32(operand.scale)
    result = round_half_away(scaled) + operand.zero_point
    lo, hi = dtype_range(dtype)
    return np.clip(result, lo, hi).astype(dtype)


def saturate_cast(values: np.ndarray, dtype, lo: int | None = None, hi: int | None = None) -> np.ndarray:
    """Clamp integer values to [lo, hi] (default: the dtype range) and cast."""
    dlo, dhi = dtype_range(dtype)
    lo = dlo if lo is None else lo
    hi = dhi if hi is None else hi
    return np.clip(values, lo, hi).astype(dtype)


# --------------------------------------------------------------------------- TFLite fixed point
def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """TFLite ``QuantizeMultiplier``: (Q31 multiplier, shift) with shift > 0 meaning left shift."""
    if real_multiplier == 0.0:
        return 0, 0
    significand, shift = math.frexp(real_multiplier)
    q_fixed = _round_scalar(significand * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def quantize_multiplier_smaller_than_one(real_multiplier: float) -> tuple[int, int]:
    """AOSP ``QuantizeMultiplierSmallerThanOneExp``: (multiplier, shift <= 0)."""
    if not 0.0 <= real_multiplier < 1.0:
        raise OpValidationError(f"quantized multiplier {real_multiplier} is not in [0, 1)")
    return quantize_multiplier(real_multiplier)


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int64 arrays holding int32 values."""
    a = np.asarray(a, np.int64)
    product = a * np.int64(b)
    nudge = np.where(product >= 0, 1 << 30, 1 - (1 << 30))
    total = product + nudge
    # C++ integer division truncates toward zero.
    result = np.where(total >= 0, total >> 31, -((-total) >> 31))
    if b == _INT32_MIN:
        result = np.where(a == _INT32_MIN, _INT32_MAX, result)
    return result


def rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: divide by 2**exponent, rounding half away from zero."""
    if exponent == 0:
        return x
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite ``MultiplyByQuantizedMultiplier`` (shift > 0 = left shift) on int64 arrays."""
    x = np.asarray(x, np.int64)
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    if left:
        x = np.clip(x * (1 << left), _INT32_MIN, _INT32_MAX)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), right)


# --------------------------------------------------------------------------- validator helpers
def expect(condition: bool, message: str) -> None:
    """Raise OpValidationError(message) unless condition holds."""
    if not condition:
        raise OpValidationError(message)


def expect_count(operands: Sequence[Operand], allowed: int | Sequence[int], what: str) -> None:
    """Check the number of inputs/outputs; ``what`` is "inputs" or "outputs"."""
    allowed = (allowed,) if isinstance(allowed, int) else tuple(allowed)
    if len(operands) not in allowed:  # messages are built only on failure (prepare-path cost)
        raise OpValidationError(f"expected {' or '.join(map(str, allowed))} {what}, got {len(operands)}")


def expect_type(operands: Sequence[Operand], index: int, allowed, what: str = "input") -> OperandType:
    """Check ``operands[index].type`` is one of ``allowed`` (a type or collection); return it."""
    allowed = (allowed,) if isinstance(allowed, OperandType) else tuple(allowed)
    actual = operands[index].type
    if actual not in allowed:
        raise OpValidationError(f"{what} {index}: expected "
                                f"{'|'.join(t.name for t in allowed)}, got {actual.name}")
    return actual


def expect_same_type(operands: Sequence[Operand], index: int, op_type: OperandType,
                     what: str = "input") -> None:
    if operands[index].type != op_type:
        raise OpValidationError(f"{what} {index}: expected {op_type.name} like input 0, "
                                f"got {operands[index].type.name}")


def expect_rank(operands: Sequence[Operand], index: int, max_rank: int | None = None,
                exact: int | None = None, what: str = "input") -> None:
    """Check an operand's rank (rank 0 = unknown dimensions is accepted for temporaries/outputs)."""
    rank = len(operands[index].dimensions)
    if exact is not None and rank not in (0, exact):
        raise OpValidationError(f"{what} {index}: expected rank {exact}, got {rank}")
    if max_rank is not None and rank > max_rank:
        raise OpValidationError(f"{what} {index}: expected rank <= {max_rank}, got {rank}")


def expect_quant_params(operand: Operand, scale: float, zero_point: int, what: str) -> None:
    """Check fixed output quantisation (e.g. LOGISTIC: scale 1/256)."""
    expect(operand.scale == np.float32(scale) and operand.zero_point == zero_point,
           f"{what}: expected scale {scale} and zeroPoint {zero_point}, "
           f"got {operand.scale} and {operand.zero_point}")


# --------------------------------------------------------------------------- shape helpers
def broadcast_shape(a: np.ndarray, b: np.ndarray, what: str = "inputs 0 and 1") -> tuple[int, ...]:
    """numpy broadcast of two tensors' shapes; OpValidationError when they do not broadcast."""
    try:
        return np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise OpValidationError(f"{what}: shapes {list(a.shape)} and {list(b.shape)} "
                                "do not broadcast") from None


def infer_broadcast(ctx) -> OutputPlan | None:
    """Shape inference of binary (and SELECT's ternary) broadcasting: outputs as large as the
    broadcast shape; None for same-shape operands (the hot path pays one comparison)."""
    inputs = ctx.inputs
    if len(inputs) == 3 and type(inputs[2]) is not np.ndarray and inputs[0].shape == inputs[1].shape:
        return None  # the common case, first: same-shape arithmetic with a fused activation
    shapes = [x.shape for x in inputs if isinstance(x, np.ndarray)]
    if len(shapes) < 2 or all(shape == shapes[0] for shape in shapes):
        return None
    try:
        return OutputPlan([np.broadcast_shapes(*shapes)])
    except ValueError:
        raise OpValidationError(f"shapes {[list(s) for s in shapes]} do not broadcast") from None


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """A non-negative axis in [0, rank) from NNAPI's [-rank, rank)."""
    expect(-rank <= axis < rank, f"{what}: axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def requantize(values: np.ndarray, source: Operand, target: Operand) -> np.ndarray:
    """Quant8 values of ``source``'s scale/zero point re-expressed in ``target``'s (round half
    away from zero, saturating); returned as-is when both parameters match."""
    if source.scale == target.scale and source.zero_point == target.zero_point:
        return values
    real = (values.astype(np.float32) - np.float32(source.zero_point)) * np.float32(source.scale)
    return quantize(real, target)


def same_type_binary(allowed):
    """A validator of two same-typed inputs (of ``allowed`` types) and one output of that type."""
    def validate(inputs, outputs) -> None:
        expect_count(inputs, 2, "inputs")
        expect_count(outputs, 1, "outputs")
        in_type = expect_type(inputs, 0, allowed)
        expect_same_type(inputs, 1, in_type)
        expect_same_type(outputs, 0, in_type, "output")
    return validate


def checked_paddings(x: np.ndarray, paddings) -> np.ndarray:
    """PAD/PAD_V2's input 1 as a [rank, 2] array, checked against ``x``."""
    paddings = np.asarray(paddings).reshape(-1, 2)
    expect(paddings.shape[0] == x.ndim,
           f"input 1: expected paddings of shape [{x.ndim}, 2], got {list(paddings.shape)}")
    expect(bool((paddings >= 0).all()), "input 1: paddings must be non-negative")
    return paddings


def infer_pad(ctx) -> OutputPlan:
    """PAD's and PAD_V2's output shape: input 1 holds (head, tail) per dimension."""
    x, paddings = ctx.inputs[0], np.asarray(ctx.inputs[1])
    if paddings.size != 2 * x.ndim:
        raise OpValidationError(f"input 1: expected paddings of shape [{x.ndim}, 2], "
                                  f"got {list(paddings.shape)}")
    pads = paddings.reshape(-1, 2).tolist()
    if any(p < 0 for pair in pads for p in pair):
        raise OpValidationError("input 1: paddings must be non-negative")
    return OutputPlan([tuple(d + head + tail for d, (head, tail) in zip(x.shape, pads))])


def constant_pad(x: np.ndarray, paddings: Sequence[Sequence[int]], value) -> np.ndarray:
    """``x`` inside a border of ``value`` (``paddings``: int (before, after) per axis): one
    fill and one copy (np.pad costs ~10x more on the small tensors of a real model)."""
    shape = [n + before + after for n, (before, after) in zip(x.shape, paddings)]
    padded = np.full(shape, value, x.dtype) if value else np.zeros(shape, x.dtype)
    padded[tuple([slice(before, before + n) for n, (before, _) in zip(x.shape, paddings)])] = x
    return padded
