"""TRANSPOSE_CONV_2D and GROUPED_CONV_2D (AOSP ``TransposeConv2D.cpp``, ``GroupedConv2D.cpp``).

Both take float32/float16 (computed in float32) or quant8 asymm/signed inputs with a quant8 or a
per-channel (channelDim 0) TENSOR_QUANT8_SYMM_PER_CHANNEL filter [OC, KH, KW, IC(/groups)]; the
quantized paths accumulate exactly and requantize like CONV_2D (``_conv_quant.requantize``).

TRANSPOSE_CONV_2D scatters ``x[n, h, w] @ filter[:, i, j]`` to output row ``h * stride_h + i -
pad_top`` (one matmul, then one strided add per filter tap). Implicit padding derives the
padding from the requested output shape (input 3, a TENSOR_INT32 [4]), and the bottom/right
padding may then be negative, as in AOSP. GROUPED_CONV_2D is one CONV_2D per channel group.

Signatures:
    TRANSPOSE_CONV_2D explicit  input, filter, bias, pad_l, pad_r, pad_t, pad_b, stride_w,
                                stride_h, fuse, layout                               (11 inputs)
    TRANSPOSE_CONV_2D implicit  input, filter, bias, output_shape, padding_code, stride_w,
                                stride_h, fuse, layout                               (9 inputs)
    GROUPED_CONV_2D explicit    input, filter, bias, pad_l, pad_r, pad_t, pad_b, stride_w,
                                stride_h, groups, fuse, layout                       (12 inputs)
    GROUPED_CONV_2D implicit    input, filter, bias, padding_code, stride_w, stride_h, groups,
                                fuse, layout                                         (9 inputs)

Example:
    >>> import numpy as np
    >>> x = np.ones((1, 2, 2, 1), np.float32); w = np.ones((1, 2, 2, 1), np.float32)
    >>> transpose_conv_taps(x, w, (2, 2), (0, 0, 0, 0), (4, 4))[0, :, :, 0].tolist()[0]
    [1.0, 1.0, 1.0, 1.0]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType, PaddingCode
from nnscope.runtime.ops._common import apply_fused_activation, expect, expect_count, expect_type
from nnscope.runtime.ops._conv_quant import centered_pair, exact_int as _exact_int, filter_scales, requantize
from nnscope.runtime.ops.convolution import conv_matmul, expect_weights
from nnscope.runtime.ops.window import (checked_output_hw, expect_scalars, from_nhwc, is_implicit,
                                read_window, to_nhwc)
from nnscope.runtime.ops.budget import WIDE_BYTES as _WIDE, OutputPlan
from nnscope.runtime.ops.registry import OpContext, OpValidationError, register

_QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
GROUPED_NAMES = ("stride_w", "stride_h", "groups", "fuse", "layout")


# --------------------------------------------------------------------------- TRANSPOSE_CONV_2D
def transpose_padding(out_size: int, stride: int, kernel: int, code: int) -> tuple[int, int]:
    """AOSP ``calculateExplicitPaddingTransposeConv``: (head, tail); the tail may be negative."""
    if code != PaddingCode.SAME:
        expect(code == PaddingCode.VALID, f"unknown implicit padding code {code}")
        return 0, 0
    tiles = (out_size + stride - 1) // stride
    total = (tiles - 1) * stride + kernel - out_size
    head = total // 2 if total > 0 else 0
    return head, total - head


def transpose_conv_taps(x: np.ndarray, w: np.ndarray, stride: Sequence[int],
                        pads: Sequence[int], out_hw: Sequence[int]) -> np.ndarray:
    """sum of taps without bias: NHWC ``x``, filter [OC, KH, KW, IC], pads (top, _, left, _)."""
    batch, in_h, in_w, channels = x.shape
    out_c, kh, kw = w.shape[:3]
    (sh, sw), top, left = stride, pads[0], pads[2]
    products = (x.reshape(-1, channels) @ w.reshape(-1, channels).T).reshape(
        batch, in_h, in_w, out_c, kh, kw)
    full_h = max((in_h - 1) * sh + kh, top + out_hw[0])
    full_w = max((in_w - 1) * sw + kw, left + out_hw[1])
    full = np.zeros((batch, full_h, full_w, out_c), products.dtype)
    for i in range(kh):
        for j in range(kw):
            full[:, i:i + (in_h - 1) * sh + 1:sh, j:j + (in_w - 1) * sw + 1:sw] += \
                products[..., i, j]
    return full[:, top:top + out_hw[0], left:left + out_hw[1]]


def _transpose_params(ctx: OpContext) -> tuple[tuple[int, int], tuple[int, ...], int, bool]:
    """(stride (h, w), pads (top, bottom, left, right), fuse, nchw)."""
    args = ctx.inputs
    kh, kw = ctx.inputs[1].shape[1:3]
    if len(args) == 11:
        left, right, top, bottom, sw, sh, fuse, nchw = (args[i] for i in range(3, 11))
    else:
        shape, code, sw, sh, fuse, nchw = (args[i] for i in range(3, 9))
        shape = [int(v) for v in np.asarray(shape).ravel()]
        expect(len(shape) == 4, f"input 3: output shape needs 4 values, got {shape}")
        out_h, out_w = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
        top, bottom = transpose_padding(out_h, int(sh), kh, int(code))
        left, right = transpose_padding(out_w, int(sw), kw, int(code))
    expect(min(int(left), int(top)) >= 0 and min(int(sw), int(sh)) > 0 and int(fuse) >= 0,
           f"bad padding ({left}, {top}) or stride ({sw}, {sh})")
    return (int(sh), int(sw)), (int(top), int(bottom), int(left), int(right)), int(fuse), bool(nchw)


def _execute_transpose(ctx: OpContext) -> list:
    stride, pads, fuse, nchw = _transpose_params(ctx)
    x, w, bias = to_nhwc(ctx.inputs[0], nchw), ctx.inputs[1], ctx.inputs[2]
    expect(x.shape[3] == w.shape[3], f"input 1: filter depth {w.shape[3]} != input depth {x.shape[3]}")
    out_hw = tuple(x.shape[1 + a] * stride[a] + w.shape[1 + a] - stride[a] - pads[2 * a]
                   - pads[2 * a + 1] for a in (0, 1))
    expect(min(out_hw) > 0, f"empty output {out_hw}")
    if ctx.input_operands[0].type in _QUANT8:
        x_op, w_op = ctx.input_operands[:2]
        xc, wc = centered_pair(x, x_op, w, w_op, (1, 2, 3))
        acc = _exact_int(transpose_conv_taps(xc, wc, stride, pads, out_hw)) + bias.astype(np.int64)
        y = requantize(acc, x_op.scale, filter_scales(w_op, w.shape[0]), ctx.output_operands[0], fuse)
        return [from_nhwc(y, nchw)]
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    y = transpose_conv_taps(xf, wf, stride, pads, out_hw) + bias.astype(np.float32)
    return [from_nhwc(apply_fused_activation(y, fuse).astype(x.dtype), nchw)]


def _validate_transpose(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, (9, 11), "inputs")
    expect_count(outputs, 1, "outputs")
    input_type = expect_type(inputs, 0, _FLOATS + _QUANT8)
    _expect_common(inputs, input_type)
    if len(inputs) == 9:
        expect_type(inputs, 3, T.TENSOR_INT32)
        expect(len(inputs[3].dimensions) in (0, 1), "input 3 (output shape): expected rank 1")
        expect_scalars(inputs, 4, ("stride_w", "stride_h", "fuse", "layout"), False)
    else:
        expect_scalars(inputs, 3, ("stride_w", "stride_h", "fuse", "layout"), True)
    expect_type(outputs, 0, input_type, "output")
    expect(len(outputs[0].dimensions) in (0, 4), "output 0: expected rank 4")


def _expect_common(inputs: Sequence[Operand], input_type: T) -> None:
    for index, rank, name in ((0, 4, "input"), (1, 4, "filter"), (2, 1, "bias")):
        expect(len(inputs[index].dimensions) in (0, rank),
               f"input {index} ({name}): expected rank {rank}, got {len(inputs[index].dimensions)}")
    expect_weights(inputs, input_type, 0)


# --------------------------------------------------------------------------- GROUPED_CONV_2D
def grouped_conv(x: np.ndarray, w: np.ndarray, window, groups: int) -> np.ndarray:
    """sum of taps without bias, one CONV_2D per group (NHWC ``x``, filter [OC, KH, KW, IC/g])."""
    in_per, out_per = x.shape[3] // groups, w.shape[0] // groups
    parts = [conv_matmul(np.ascontiguousarray(x[..., g * in_per:(g + 1) * in_per]),
                          w[g * out_per:(g + 1) * out_per], window) for g in range(groups)]
    return np.concatenate(parts, axis=3)


def _execute_grouped(ctx: OpContext) -> list:
    explicit = not is_implicit(len(ctx.inputs), ctx.input_operands, 9)
    tail = ctx.inputs[(7 if explicit else 4):]
    groups, fuse, nchw = int(tail[2]), int(tail[3]), bool(tail[4])
    x, w, bias = to_nhwc(ctx.inputs[0], nchw), ctx.inputs[1], ctx.inputs[2]
    expect(groups > 0 and x.shape[3] % groups == 0 and w.shape[0] % groups == 0
           and w.shape[3] * groups == x.shape[3],
           f"{groups} groups do not split input depth {x.shape[3]} / filter {list(w.shape)}")
    window = read_window(ctx.inputs, 3, GROUPED_NAMES, explicit, x.shape[1:3], w.shape[1:3])
    if ctx.input_operands[0].type in _QUANT8:
        x_op, w_op = ctx.input_operands[:2]
        xc, wc = centered_pair(x, x_op, w, w_op, (1, 2, 3))
        acc = _exact_int(grouped_conv(xc, wc, window, groups)) + bias.astype(np.int64)
        y = requantize(acc, x_op.scale, filter_scales(w_op, w.shape[0]), ctx.output_operands[0], fuse)
        return [from_nhwc(y, nchw)]
    y = grouped_conv(x.astype(np.float32), w.astype(np.float32), window, groups)
    y = apply_fused_activation(y + bias.astype(np.float32), fuse)
    return [from_nhwc(y.astype(x.dtype), nchw)]


def _validate_grouped(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, (9, 12), "inputs")
    expect_count(outputs, 1, "outputs")
    input_type = expect_type(inputs, 0, _FLOATS + _QUANT8)
    _expect_common(inputs, input_type)
    expect_scalars(inputs, 3, GROUPED_NAMES, len(inputs) == 12)
    expect_type(outputs, 0, input_type, "output")
    expect(len(outputs[0].dimensions) in (0, 4), "output 0: expected rank 4")


def _infer_transpose(ctx: OpContext) -> OutputPlan:
    stride, pads, _, nchw = _transpose_params(ctx)
    x, w = ctx.inputs[0], ctx.inputs[1]
    batch, in_h, in_w, channels = (x.shape[0], x.shape[2], x.shape[3], x.shape[1]) if nchw else x.shape
    out_c, kh, kw = w.shape[:3]
    out_h = in_h * stride[0] + kh - stride[0] - pads[0] - pads[1]
    out_w = in_w * stride[1] + kw - stride[1] - pads[2] - pads[3]
    if min(out_h, out_w) <= 0:
        raise OpValidationError(f"empty output {(out_h, out_w)}")
    full = batch * max((in_h - 1) * stride[0] + kh, pads[0] + out_h) \
        * max((in_w - 1) * stride[1] + kw, pads[2] + out_w) * out_c
    products = batch * in_h * in_w * out_c * kh * kw
    return OutputPlan([(batch, out_h, out_w, out_c)], _WIDE * (full + products + channels))


def _infer_grouped(ctx: OpContext) -> OutputPlan:
    explicit = not is_implicit(len(ctx.inputs), ctx.input_operands, 9)
    nchw = bool(ctx.inputs[(7 if explicit else 4) + 4])
    x, w = ctx.inputs[0], ctx.inputs[1]
    batch, height, width, channels = (x.shape[0], x.shape[2], x.shape[3], x.shape[1]) if nchw else x.shape
    window = read_window(ctx.inputs, 3, GROUPED_NAMES, explicit, (height, width), w.shape[1:3])
    out_h, out_w = checked_output_hw(window, (height, width))
    top, bottom, left, right = window.pads
    scratch = batch * (height + top + bottom) * ((width + left + right) + out_w * window.kernel[1]) * channels
    out_c = w.shape[0]
    return OutputPlan([(batch, out_h, out_w, out_c)], _WIDE * (scratch + 2 * batch * out_h * out_w * out_c))


register(OperationType.TRANSPOSE_CONV_2D, "convolution", _validate_transpose, _execute_transpose,
         infer_shapes=_infer_transpose)
register(OperationType.GROUPED_CONV_2D, "convolution", _validate_grouped, _execute_grouped,
         infer_shapes=_infer_grouped)
