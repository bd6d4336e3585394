"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR (AOSP ``ResizeImageOps.cpp`` over TFLite's
reference kernels).

Inputs: ``input, width, height[, layout[, align_corners[, half_pixel_centers]]]``. ``width`` and
``height`` are the output size (INT32) or scale factors (FLOAT32, or FLOAT16 for a float16
input): the output size is then ``floor(in_size * scale)``. RESIZE_BILINEAR may omit the layout
(NNAPI 1.0, 3 inputs). Coordinates are computed in float32 as TFLite does; a quantized bilinear
result is truncated toward zero (TFLite's ``static_cast<T>``), as AOSP's vectors expect.

Example:
    >>> import numpy as np
    >>> x = np.float32([[1, 2], [3, 4]]).reshape(1, 2, 2, 1)
    >>> bilinear(x, (3, 3), align=True, half=False)[0, :, :, 0].tolist()
    [[1.0, 1.5, 2.0], [2.0, 2.5, 3.0], [3.0, 3.5, 4.0]]
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops.budget import WIDE_BYTES, OutputPlan
from nnscope.runtime.ops._common import expect, expect_count, expect_rank, expect_type
from nnscope.runtime.ops.window import from_nhwc, to_nhwc
from nnscope.runtime.ops.registry import OpContext, OpValidationError, register

_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_F32 = np.float32


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return _F32(in_size - 1) / _F32(out_size - 1)
    return _F32(in_size) / _F32(out_size)


def _bilinear_axis(in_size: int, out_size: int, align: bool, half: bool):
    """(scaled coordinate, lower index, upper index, fraction) per output position (TFLite's
    ``ComputeInterpolationValues``)."""
    scale = _scale(in_size, out_size, align)
    positions = np.arange(out_size, dtype=_F32)
    scaled = (positions + _F32(0.5)) * scale - _F32(0.5) if half else positions * scale
    lower = np.maximum(np.floor(scaled).astype(np.int64), 0)
    upper = np.minimum(np.ceil(scaled).astype(np.int64), in_size - 1)
    return lower, upper, (scaled - lower.astype(_F32)).astype(_F32)


def bilinear(x: np.ndarray, out_hw: Sequence[int], align: bool, half: bool) -> np.ndarray:
    """Bilinear resize of NHWC ``x`` in float32 (the caller casts back)."""
    y0, y1, dy = _bilinear_axis(x.shape[1], out_hw[0], align, half)
    x0, x1, dx = _bilinear_axis(x.shape[2], out_hw[1], align, half)
    xf = x.astype(_F32)
    dy, dx = dy[None, :, None, None], dx[None, None, :, None]
    rows0, rows1 = xf[:, y0], xf[:, y1]
    one = _F32(1)
    return (rows0[:, :, x0] * (one - dy) * (one - dx) + rows1[:, :, x0] * dy * (one - dx)
            + rows0[:, :, x1] * (one - dy) * dx + rows1[:, :, x1] * dy * dx)


def _nearest_axis(in_size: int, out_size: int, align: bool, half: bool) -> np.ndarray:
    """TFLite ``GetNearestNeighbor`` for every output position."""
    scale = _scale(in_size, out_size, align)
    offset = _F32(0.5) if half else _F32(0)
    scaled = (np.arange(out_size, dtype=_F32) + offset) * scale
    index = np.trunc(np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)) if align else np.floor(scaled)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if half else index


def nearest(x: np.ndarray, out_hw: Sequence[int], align: bool, half: bool) -> np.ndarray:
    rows = _nearest_axis(x.shape[1], out_hw[0], align, half)
    cols = _nearest_axis(x.shape[2], out_hw[1], align, half)
    return x[:, rows][:, :, cols]


# --------------------------------------------------------------------------- NNAPI records
def _flags(ctx: OpContext) -> tuple[bool, bool, bool]:
    """(nchw, align_corners, half_pixel_centers); omitted trailing inputs are false."""
    values = [bool(v) if v is not None else False for v in ctx.inputs[3:6]]
    values += [False] * (3 - len(values))
    return values[0], values[1], values[2]


def output_size(ctx: OpContext, in_hw: Sequence[int]) -> tuple[int, int]:
    """The (height, width) asked for by inputs 2 and 1: sizes, or scales of the input size."""
    width, height = ctx.inputs[1], ctx.inputs[2]
    if ctx.input_operands[2].type == T.INT32:
        size = (int(height), int(width))
    else:
        size = tuple(int(math.floor(_F32(n) * _F32(s))) for n, s in zip(in_hw, (height, width)))
    expect(min(size) > 0, f"output size {list(size)} must be positive")
    return size


def _execute(kernel, ctx: OpContext) -> list:
    nchw, align, half = _flags(ctx)
    expect(not (align and half), "align_corners and half_pixel_centers cannot both be true")
    x = to_nhwc(ctx.inputs[0], nchw)
    expect(min(x.shape[1:]) > 0, f"input 0: empty spatial or channel dimension {list(x.shape)}")
    out_hw = output_size(ctx, x.shape[1:3])
    y = kernel(x, out_hw, align, half)
    if y.dtype != x.dtype:
        y = np.trunc(y).astype(x.dtype) if x.dtype.kind in "iu" else y.astype(x.dtype)
    return [from_nhwc(y, nchw)]


def _validator(min_inputs: int):
    def validate(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
        expect_count(inputs, range(min_inputs, 7), "inputs")
        expect_count(outputs, 1, "outputs")
        input_type = expect_type(inputs, 0, _TYPES)
        expect_rank(inputs, 0, exact=4)
        scalar_type = expect_type(inputs, 2, (T.INT32, T.FLOAT32, T.FLOAT16))
        expect_type(inputs, 1, scalar_type)
        if scalar_type != T.INT32:
            wanted = T.FLOAT16 if input_type == T.TENSOR_FLOAT16 else T.FLOAT32
            expect(scalar_type == wanted, f"input 1/2: scales of a {input_type.name} input "
                   f"must be {wanted.name}, got {scalar_type.name}")
        for index in range(3, len(inputs)):
            expect_type(inputs, index, T.BOOL)
        expect_type(outputs, 0, input_type, "output")
        expect_rank(outputs, 0, exact=4, what="output")
    return validate


def execute_bilinear(ctx: OpContext) -> list:
    return _execute(bilinear, ctx)


def execute_nearest(ctx: OpContext) -> list:
    return _execute(nearest, ctx)


def _infer_resize(ctx: OpContext) -> OutputPlan:
    """Output height/width given (INT32) or scaled (FLOAT) by inputs 1 and 2."""
    x, first, second = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    nchw = len(ctx.inputs) > 3 and bool(ctx.inputs[3])
    height, width = (x.shape[2], x.shape[3]) if nchw else (x.shape[1], x.shape[2])
    if isinstance(first, float) or isinstance(second, float):
        out_w, out_h = int(width * float(first)), int(height * float(second))
    else:
        out_w, out_h = int(first), int(second)
    if out_w <= 0 or out_h <= 0:
        raise OpValidationError(f"output size {out_h}x{out_w} is not positive")
    channels = x.shape[1] if nchw else x.shape[3]
    elements = x.shape[0] * out_h * out_w * channels
    return OutputPlan([(x.shape[0], out_h, out_w, channels)], elements * WIDE_BYTES)


register(OperationType.RESIZE_BILINEAR, "resize", _validator(3), execute_bilinear,
         infer_shapes=_infer_resize)
register(OperationType.RESIZE_NEAREST_NEIGHBOR, "resize", _validator(4), execute_nearest,
         infer_shapes=_infer_resize)
