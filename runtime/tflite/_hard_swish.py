"""HARD_SWISH: NNAPI's own HARD_SWISH from feature level 30 (NNAPI 1.3, Android 11); below it,
the NNAPI 1.0 operations the TFLite NNAPI delegate builds it from (its
``TransformHardSwishIntoSupportedOps``, used when the device's API level is below 30):

    hard_swish(x) = x * relu6(x + 3) / 6 = 0.5x * relu1(x / 3) + 0.5x

    s1 = MUL(x, 1/3, fused RELU1)    s2 = MUL(x, 0.5)
    s3 = MUL(s1, s2)                 y  = ADD(s2, s3)

The constants are one-element tensors that broadcast against x. A quantized x's stages get
the delegate's quantization, from x's real range [lo, hi] (its 256 steps): s1 spans
[max(lo/3, -1), min(hi/3, 1)] and s3 [0, max(s1 hi * s2 hi, s1 lo * s2 lo)] in 255 steps, s2
keeps x's zero point with half its scale; a constant is the step 64 with scale value/64. The
delegate works in uint8 there (an int8 model's tensors passed as uint8 below API 30). Here the
stages have x's type: an int8 model's are signed, each step and zero point the delegate's
minus 128, and become the delegate's when ``delegate.int8`` makes the partition uint8.

Example:
    >>> from nnscope.runtime.tflite._reader import TfliteGraph, TfliteOperator, TfliteTensor
    >>> x, y = (TfliteTensor(n, (1, 4), "FLOAT32", None) for n in "xy")
    >>> graph = TfliteGraph((x, y), (TfliteOperator("HARD_SWISH", (0,), (1,)),), (0,), (1,))
    >>> def operations(level):
    ...     builder = GraphBuilder(graph, level)
    ...     hard_swish(builder, graph.operators[0])
    ...     return [operation.type.name for operation in builder.operations]
    >>> operations(30), operations(29)
    (['HARD_SWISH'], ['MUL', 'MUL', 'MUL', 'ADD'])
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import FuseCode, Operand, OperandType, OperationType as Op
from nnscope.runtime.tflite._builder import GraphBuilder
from nnscope.runtime.tflite._reader import TfliteOperator

#: The feature level from which NNAPI has HARD_SWISH (NNAPI 1.3, Android 11).
HARD_SWISH_LEVEL = 30

_T = OperandType
#: Per quantized type, what its steps and zero points add to the delegate's uint8 ones.
_UINT8_OFFSET = {_T.TENSOR_QUANT8_ASYMM: 0, _T.TENSOR_QUANT8_ASYMM_SIGNED: -128}
#: The step a quantized constant is stored as (its scale: the value / this step).
_CONSTANT_STEP = 64


def hard_swish(b: GraphBuilder, op: TfliteOperator) -> None:
    """NNAPI HARD_SWISH at the builder's feature level from 30 (or none given); below it,
    MUL, MUL, MUL and ADD as the delegate emits them."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    if b.feature_level is None or b.feature_level >= HARD_SWISH_LEVEL:
        b.add(Op.HARD_SWISH, [x], [out])
    else:
        hard_swish_from_mul_and_add(b, x, out)


def hard_swish_from_mul_and_add(b: GraphBuilder, x: int, out: int) -> None:
    """``out = 0.5x * relu1(x / 3) + 0.5x`` in NNAPI 1.0 operations, as the delegate builds it."""
    third, half, product = _stage_quantization(b.operands[x])
    none = b.scalar(int(FuseCode.NONE))
    s1 = b.temporary(x, quantization=third)
    b.add(Op.MUL, [x, _constant(b, x, 1 / 3), b.scalar(int(FuseCode.RELU1))], [s1])
    s2 = b.temporary(x, quantization=half)
    b.add(Op.MUL, [x, _constant(b, x, 0.5), none], [s2])
    s3 = b.temporary(x, quantization=product)
    b.add(Op.MUL, [s1, s2, none], [s3])
    b.add(Op.ADD, [s2, s3, none], [out])


def _constant(b: GraphBuilder, x: int, value: float) -> int:
    """A one-element constant of x's type holding ``value`` (the step 64, when quantized)."""
    operand = b.operands[x]
    if operand.type not in _UINT8_OFFSET:
        return b.constant(np.array([value]), operand.type)
    offset = _UINT8_OFFSET[operand.type]
    scale = float(np.float32(value) / np.float32(_CONSTANT_STEP))
    return b.constant(np.array([_CONSTANT_STEP + offset]), operand.type, scale, offset)


def _stage_quantization(x: Operand) -> tuple[tuple[float, int] | None, ...]:
    """(scale, zero point) of s1, s2 and s3 for a quantized ``x``; None for a float one."""
    if x.type not in _UINT8_OFFSET:
        return None, None, None
    offset = _UINT8_OFFSET[x.type]
    scale, zero_point = np.float32(x.scale), x.zero_point - offset
    lo, hi = np.float32(-zero_point) * scale, np.float32(255 - zero_point) * scale
    third_lo = max(lo / np.float32(3), np.float32(-1))
    third_hi = min(hi / np.float32(3), np.float32(1))
    half_lo, half_hi = lo / np.float32(2), hi / np.float32(2)
    product_hi = max(third_hi * half_hi, third_lo * half_lo)
    return (_shifted(_uint8_quantization(third_lo, third_hi), offset),
            (float(scale / np.float32(2)), x.zero_point),
            _shifted(_uint8_quantization(np.float32(0), product_hi), offset))


def _uint8_quantization(lo: np.float32, hi: np.float32) -> tuple[float, int]:
    """The delegate's uint8 (scale, zero point) for the real range [lo, hi]
    (``CalculateQuantizationParams``: 255 steps, the zero point truncated, at 0 or 255 when
    the range leaves out 0)."""
    scale = np.float32(hi - lo) / np.float32(255)
    if lo > 0:
        return float(scale), 0
    if hi < 0:
        return float(scale), 255
    return float(scale), int(np.float32(-lo) / scale)


def _shifted(quantization: tuple[float, int], offset: int) -> tuple[float, int]:
    scale, zero_point = quantization
    return scale, zero_point + offset
