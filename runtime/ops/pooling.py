"""Pooling kernels (AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D): validate, shape inference, execute.

The window geometry (padding, strides, layout) is ``runtime.ops.window``'s, shared with the
convolutions. Pooling windows, whose size is a mere scalar, are reduced in time linear in the
input whatever their size (:func:`sliding_reduce`).

Signatures (NNAPI 1.0-1.3): explicit ``input, pad_l, pad_r, pad_t, pad_b, stride_w, stride_h,
filter_w, filter_h, fuse[, layout]`` (10/11 inputs) or implicit ``input, padding_code,
stride_w, stride_h, filter_w, filter_h, fuse[, layout]`` (7/8 inputs).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.ops.window import read_window
    >>> x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    >>> window = read_window([x, 2, 2, 2, 2, 2, 0], first=1, names=POOL_NAMES, explicit=False,
    ...                      in_hw=(4, 4), kernel=(2, 2))
    >>> max_pool(x, window).reshape(2, 2).tolist()
    [[5.0, 7.0], [13.0, 15.0]]
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType, OperationType
from nnscope.runtime.ops._common import (apply_fused_activation, dtype_range, expect, expect_count,
                                 expect_rank, expect_type, quantized_activation_range)
from nnscope.runtime.ops.budget import WIDE_BYTES, OutputPlan
from nnscope.runtime.ops.registry import OpContext, OpValidationError, register
from nnscope.runtime.ops.window import (Window, checked_output_hw, expect_scalars, from_nhwc, is_implicit,
                                pad_nhwc, read_scalars, read_window, to_nhwc, window_taps)

#: Scalar inputs after the padding input(s) of a pooling operation, in signature order.
POOL_NAMES = ("stride_w", "stride_h", "filter_w", "filter_h", "fuse", "layout")
_T = OperandType
_QUANT8 = (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED)
_FLOATS = (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)
_MAX_TAPS = 16  # max pooling windows up to this many cells go tap by tap


# --------------------------------------------------------------------------- kernels (NHWC)
def axis_bounds(size: int, out: int, kernel: int, stride: int, head: int) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) of each output position's window along one axis, clipped to the input (padding
    cells never count: they are 0 for sums and never win a max)."""
    starts = np.arange(out, dtype=np.int64) * stride - head
    return np.clip(starts, 0, size), np.clip(starts + kernel, 0, size)


def sliding_reduce(x: np.ndarray, axis: int, lo: np.ndarray, hi: np.ndarray, kernel: int,
                   ufunc, identity) -> np.ndarray:
    """``ufunc`` over ``x[lo[o]:hi[o]]`` along ``axis`` for every o, in time linear in the input
    whatever the window size (van Herk / Gil-Werman): a window clipped at the start is a prefix
    of the axis, one clipped at the end a suffix, and an inner window (exactly ``kernel`` cells)
    spans at most two blocks of ``kernel`` cells: a block suffix and the next block's prefix.
    An empty window gives ``identity``."""
    x = np.moveaxis(x, axis, 0)
    size = x.shape[0]
    result = np.full((len(lo), *x.shape[1:]), identity, x.dtype)
    empty = hi <= lo
    left = (lo == 0) & ~empty
    right = (hi == size) & ~left & ~empty
    inner = ~(empty | left | right)
    if left.any():
        result[left] = ufunc.accumulate(x, axis=0)[hi[left] - 1]
    if right.any():
        result[right] = ufunc.accumulate(x[::-1], axis=0)[::-1][lo[right]]
    if inner.any():
        blocks = -(-size // kernel)
        padded = np.full((blocks * kernel, *x.shape[1:]), identity, x.dtype)
        padded[:size] = x
        shaped = padded.reshape(blocks, kernel, *x.shape[1:])
        block_prefix = ufunc.accumulate(shaped, axis=1).reshape(padded.shape)
        block_suffix = ufunc.accumulate(shaped[:, ::-1], axis=1)[:, ::-1].reshape(padded.shape)
        first, last = lo[inner], hi[inner] - 1
        aligned = (first % kernel == 0).reshape(-1, *([1] * (x.ndim - 1)))
        result[inner] = np.where(aligned, block_suffix[first],
                                 ufunc(block_suffix[first], block_prefix[last]))
    return np.moveaxis(result, 0, axis)


def _window_reduce(x: np.ndarray, window: Window, ufunc, identity) -> tuple[np.ndarray, np.ndarray]:
    """(reduction over each window of NHWC ``x``, count of valid cells shaped (1, OH, OW, 1)):
    the window is separable, so rows then columns, each in linear time."""
    out_hw = checked_output_hw(window, x.shape[1:3])
    if window.dilation != (1, 1):
        raise OpValidationError(f"pooling has no dilation, got {window.dilation}")
    top, _, left, _ = window.pads
    lo_w, hi_w = axis_bounds(x.shape[2], out_hw[1], window.kernel[1], window.stride[1], left)
    lo_h, hi_h = axis_bounds(x.shape[1], out_hw[0], window.kernel[0], window.stride[0], top)
    rows = sliding_reduce(x, 2, lo_w, hi_w, window.kernel[1], ufunc, identity)
    total = sliding_reduce(rows, 1, lo_h, hi_h, window.kernel[0], ufunc, identity)
    count = np.maximum(hi_h - lo_h, 0)[:, None] * np.maximum(hi_w - lo_w, 0)[None, :]
    return total, count.reshape(1, *out_hw, 1)


def max_pool(x: np.ndarray, window: Window) -> np.ndarray:
    """Max over each window (padding never wins; a window of padding only gives the lowest value).
    Small windows (padded by less than a window) take one ``np.maximum`` per tap over strided
    views (a 2x2 pool: 3 passes); others the linear-time separable reduction."""
    fill = -np.inf if x.dtype.kind == "f" else dtype_range(x.dtype)[0]
    (kh, kw), (top, bottom, left, right) = window.kernel, window.pads
    if kh * kw > _MAX_TAPS or window.dilation != (1, 1) or max(top, bottom) >= kh \
            or max(left, right) >= kw:  # padding within a window: the padded copy stays small
        return _window_reduce(x, window, np.maximum, fill)[0]
    out_hw = checked_output_hw(window, x.shape[1:3])
    taps = window_taps(pad_nhwc(x, window, fill), window, out_hw)
    result = np.array(next(taps)[2])
    for _, _, view in taps:
        np.maximum(result, view, out=result)
    return result


def window_sum(x: np.ndarray, window: Window, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(sum over each window in ``dtype``, count of valid cells) with zero padding."""
    return _window_reduce(x.astype(dtype, copy=False), window, np.add, 0)


def average_pool_quant(x: np.ndarray, window: Window) -> np.ndarray:
    """TFLite integer average: (sum +- count/2) / count, rounding half away from zero."""
    total, count = window_sum(x, window, np.int64)
    half = count // 2
    return np.where(total >= 0, (total + half) // count, -((-total + half) // count))


# --------------------------------------------------------------------------- NNAPI records
def _pool_window(ctx: OpContext) -> tuple[Window, bool, int, np.ndarray]:
    """(window, nchw, fuse code, NHWC input) of a pooling OpContext."""
    explicit = not is_implicit(len(ctx.inputs), ctx.input_operands, 7)
    values = read_scalars(ctx.inputs, 1, POOL_NAMES, explicit)
    nchw = bool(values.get("layout", False))
    x = to_nhwc(ctx.inputs[0], nchw)
    kernel = (int(values["filter_h"]), int(values["filter_w"]))
    if min(kernel) < 1:
        raise OpValidationError(f"bad filter size {kernel}")
    window = read_window(ctx.inputs, 1, POOL_NAMES, explicit, x.shape[1:3], kernel)
    return window, nchw, int(values["fuse"]), x


def _finish(y: np.ndarray, ctx: OpContext, fuse: int, nchw: bool) -> list:
    out = ctx.output_operands[0]
    if out.type in _QUANT8:
        dtype = np.dtype(np.uint8 if out.type == _T.TENSOR_QUANT8_ASYMM else np.int8)
        lo, hi = quantized_activation_range(fuse, out.scale, out.zero_point, dtype)
        return [from_nhwc(np.clip(y, lo, hi).astype(dtype), nchw)]
    y = apply_fused_activation(y.astype(np.float32, copy=False), fuse)
    return [from_nhwc(y.astype(ctx.inputs[0].dtype, copy=False), nchw)]


def _execute_average(ctx: OpContext) -> list:
    window, nchw, fuse, x = _pool_window(ctx)
    if ctx.input_operands[0].type in _QUANT8:
        return _finish(average_pool_quant(x, window), ctx, fuse, nchw)
    total, count = window_sum(x, window, np.float32)
    return _finish(total / count.astype(np.float32), ctx, fuse, nchw)


def _execute_max(ctx: OpContext) -> list:
    window, nchw, fuse, x = _pool_window(ctx)
    if x.dtype == np.float16:
        x = x.astype(np.float32)
    return _finish(max_pool(x, window), ctx, fuse, nchw)


def _execute_l2(ctx: OpContext) -> list:
    window, nchw, fuse, x = _pool_window(ctx)
    x = x.astype(np.float32, copy=False)
    total, count = window_sum(x * x, window, np.float32)
    return _finish(np.sqrt(total / count.astype(np.float32)), ctx, fuse, nchw)


def _pool_validator(allowed_types):
    def validate(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
        expect_count(inputs, (7, 8, 10, 11), "inputs")
        expect_count(outputs, 1, "outputs")
        input_type = expect_type(inputs, 0, allowed_types)
        expect_rank(inputs, 0, exact=4)
        explicit = not is_implicit(len(inputs), inputs, 7)
        expect(len(inputs) in ((10, 11) if explicit else (7, 8)),
               f"expected 10/11 (explicit) or 7/8 (implicit padding) inputs, got {len(inputs)}")
        expect_scalars(inputs, 1, POOL_NAMES, explicit)
        expect_type(outputs, 0, input_type, "output")
        expect_rank(outputs, 0, exact=4, what="output")
    return validate


def _infer_pool(ctx: OpContext) -> OutputPlan:
    explicit = not is_implicit(len(ctx.inputs), ctx.input_operands, 7)
    values = read_scalars(ctx.inputs, 1, POOL_NAMES, explicit)
    key = (values["pad"], values["stride_w"], values["stride_h"], values["filter_w"], values["filter_h"])
    return _pool_plan(ctx.inputs[0].shape, bool(values.get("layout", False)), explicit, key)


@functools.lru_cache(maxsize=512)
def _pool_plan(shape: tuple, nchw: bool, explicit: bool, key: tuple) -> OutputPlan:
    batch, height, width, channels = (shape[0], shape[2], shape[3], shape[1]) if nchw else shape
    pad, stride_w, stride_h, filter_w, filter_h = key
    inputs = [None, *(pad if explicit else (pad,)), stride_w, stride_h, filter_w, filter_h, 0]
    if min(int(filter_w), int(filter_h)) < 1:
        raise OpValidationError(f"bad filter size {(filter_h, filter_w)}")
    window = read_window(inputs, 1, POOL_NAMES, explicit, (height, width), (int(filter_h), int(filter_w)))
    out_h, out_w = checked_output_hw(window, (height, width))
    rows = batch * height * out_w * channels  # the separable pass's intermediate
    scratch = 4 * WIDE_BYTES * (rows + batch * out_h * out_w * channels)
    return OutputPlan([(batch, out_h, out_w, channels)], scratch)


register(OperationType.AVERAGE_POOL_2D, "pooling", _pool_validator(_FLOATS + _QUANT8),
         _execute_average, infer_shapes=_infer_pool)
register(OperationType.MAX_POOL_2D, "pooling", _pool_validator(_FLOATS + _QUANT8), _execute_max,
         infer_shapes=_infer_pool)
register(OperationType.L2_POOL_2D, "pooling", _pool_validator(_FLOATS), _execute_l2,
         infer_shapes=_infer_pool)
