"""Pooling kernels (AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D) and the shared 2-D window geometry.

The geometry half (:func:`is_implicit`, :func:`read_window`, :func:`window_taps`, layout helpers)
is also what ``runtime.ops.convolution`` uses: NNAPI's explicit (left, right, top, bottom) and
implicit (SAME/VALID code) padding, strides, dilation and the optional NCHW ``layout`` input.
Convolution windows are evaluated tap by tap on strided views (each filter tap costs one
vectorised numpy operation over the whole output); pooling windows, whose size is a mere scalar,
are reduced in time linear in the input whatever their size (:func:`sliding_reduce`).

Signatures (NNAPI 1.0-1.3): explicit ``input, pad_l, pad_r, pad_t, pad_b, stride_w, stride_h,
filter_w, filter_h, fuse[, layout]`` (10/11 inputs) or implicit ``input, padding_code,
stride_w, stride_h, filter_w, filter_h, fuse[, layout]`` (7/8 inputs).

Example:
    >>> import numpy as np
    >>> x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    >>> window = read_window([x, 2, 2, 2, 2, 2, 0], first=1, names=POOL_NAMES, explicit=False,
    ...                      in_hw=(4, 4), kernel=(2, 2))
    >>> max_pool(x, window).reshape(2, 2).tolist()
    [[5.0, 7.0], [13.0, 15.0]]
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Sequence

import numpy as np

from runtime.hal.types import Operand, OperandType, OperationType, PaddingCode
from runtime.ops._common import (apply_fused_activation, constant_pad, dtype_range, expect,
                                 expect_count, expect_rank, expect_type,
                                 quantized_activation_range)
from runtime.ops.registry import OpContext, OpValidationError, register

#: Scalar inputs after the padding input(s) of a pooling operation, in signature order.
POOL_NAMES = ("stride_w", "stride_h", "filter_w", "filter_h", "fuse", "layout")
_T = OperandType
_QUANT8 = (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED)
_FLOATS = (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)
_MAX_TAPS = 16  # max pooling windows up to this many cells go tap by tap
_WINDOWS: dict = {}  # read_window's memo
_WINDOWS_KEPT = 1024


class Window(NamedTuple):
    """A resolved 2-D window: (height, width) pairs and pads (top, bottom, left, right)."""

    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int, int, int]

    def output_hw(self, in_hw: Sequence[int]) -> tuple[int, int]:
        """NNAPI ``computeOutSize`` for both spatial dimensions."""
        sizes = []
        for axis in (0, 1):
            effective = (self.kernel[axis] - 1) * self.dilation[axis] + 1
            padded = in_hw[axis] + self.pads[2 * axis] + self.pads[2 * axis + 1]
            sizes.append((padded - effective + self.stride[axis]) // self.stride[axis])
        return sizes[0], sizes[1]


# --------------------------------------------------------------------------- geometry
def is_implicit(count: int, operands: Sequence[Operand], implicit_count: int) -> bool:
    """AOSP's rule: implicit padding if exactly ``implicit_count`` inputs, or if the input at
    that position (layout in the implicit form, an INT32 in the explicit one) is a BOOL."""
    return count == implicit_count or (
        count > implicit_count and operands[implicit_count].type == _T.BOOL)


def implicit_padding(in_size: int, stride: int, dilation: int, kernel: int,
                     code: int) -> tuple[int, int]:
    """AOSP ``calculateExplicitPadding``: (head, tail) for a SAME/VALID padding code."""
    if code not in (PaddingCode.SAME, PaddingCode.VALID):
        raise OpValidationError(f"unknown implicit padding code {code}")
    if code == PaddingCode.VALID:
        return 0, 0
    effective = (kernel - 1) * dilation + 1
    out_size = (in_size + stride - 1) // stride
    total = max((out_size - 1) * stride + effective - in_size, 0)
    return total // 2, total - total // 2


def read_scalars(inputs: Sequence, first: int, names: Sequence[str], explicit: bool) -> dict:
    """Name the scalar inputs from position ``first``: ``pad`` (4-tuple l, r, t, b, or the
    implicit code) followed by ``names``; omitted trailing/optional inputs are absent."""
    pad_count = 4 if explicit else 1
    pad = tuple(inputs[first:first + pad_count])
    values = {name: value for name, value in zip(names, inputs[first + pad_count:])
              if value is not None}
    values["pad"] = pad if explicit else pad[0]
    return values


def read_window(inputs: Sequence, first: int, names: Sequence[str], explicit: bool,
                in_hw: Sequence[int], kernel: Sequence[int]) -> Window:
    """Resolve strides, dilation and padding of a conv/pool signature into a :class:`Window`
    (remembered per signature: a model runs the same few windows every execution)."""
    key = (first, names, explicit, *in_hw, *kernel, *inputs[first:])
    try:
        return _WINDOWS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable scalar input
        return _resolve_window(inputs, first, names, explicit, in_hw, kernel)
    if len(_WINDOWS) >= _WINDOWS_KEPT:
        _WINDOWS.clear()
    window = _WINDOWS[key] = _resolve_window(inputs, first, names, explicit, in_hw, kernel)
    return window


def _resolve_window(inputs: Sequence, first: int, names: Sequence[str], explicit: bool,
                    in_hw: Sequence[int], kernel: Sequence[int]) -> Window:
    values = read_scalars(inputs, first, names, explicit)
    stride = (int(values["stride_h"]), int(values["stride_w"]))
    dilation = (int(values.get("dilation_h", 1)), int(values.get("dilation_w", 1)))
    if min(stride) < 1 or min(dilation) < 1:
        raise OpValidationError(f"bad stride {stride} or dilation {dilation}")
    if explicit:
        left, right, top, bottom = (int(p) for p in values["pad"])
        pads = (top, bottom, left, right)
    else:
        code = int(values["pad"])
        pads = (implicit_padding(in_hw[0], stride[0], dilation[0], kernel[0], code)
                + implicit_padding(in_hw[1], stride[1], dilation[1], kernel[1], code))
    if min(pads) < 0:
        raise OpValidationError(f"negative padding {pads}")
    return Window((int(kernel[0]), int(kernel[1])), stride, dilation, pads)


def window_taps(padded: np.ndarray, window: Window,
                out_hw: Sequence[int]) -> Iterator[tuple[int, int, np.ndarray]]:
    """Yield (kh, kw, view) where view[n, oh, ow, c] = padded[n, oh*sh + kh*dh, ow*sw + kw*dw, c]."""
    (sh, sw), (dh, dw) = window.stride, window.dilation
    for kh in range(window.kernel[0]):
        for kw in range(window.kernel[1]):
            y0, x0 = kh * dh, kw * dw
            yield kh, kw, padded[:, y0:y0 + (out_hw[0] - 1) * sh + 1:sh,
                                 x0:x0 + (out_hw[1] - 1) * sw + 1:sw, :]


def pad_nhwc(x: np.ndarray, window: Window, fill) -> np.ndarray:
    """``x`` inside a border of ``fill`` (the window's pads)."""
    top, bottom, left, right = window.pads
    if not (top or bottom or left or right):
        return x
    return constant_pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), fill)


def checked_output_hw(window: Window, in_hw: Sequence[int]) -> tuple[int, int]:
    out_hw = window.output_hw(in_hw)
    if min(out_hw) <= 0:
        raise OpValidationError(f"window {window} gives an empty output for input {tuple(in_hw)}")
    return out_hw


def to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return x.transpose(0, 2, 3, 1) if nchw else x


def from_nhwc(y: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(y.transpose(0, 3, 1, 2)) if nchw else y


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


def expect_scalars(operands: Sequence[Operand], first: int, names: Sequence[str],
                   explicit: bool) -> None:
    """Check the scalar inputs from ``first`` on: INT32 everywhere but a BOOL ``layout``."""
    kinds = ["pad"] * (4 if explicit else 1) + list(names)
    for index in range(first, len(operands)):
        wanted = _T.BOOL if kinds[index - first] == "layout" else _T.INT32
        expect_type(operands, index, wanted)


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


register(OperationType.AVERAGE_POOL_2D, "pooling", _pool_validator(_FLOATS + _QUANT8),
         _execute_average)
register(OperationType.MAX_POOL_2D, "pooling", _pool_validator(_FLOATS + _QUANT8), _execute_max)
register(OperationType.L2_POOL_2D, "pooling", _pool_validator(_FLOATS), _execute_l2)
