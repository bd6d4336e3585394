"""Convolution kernels: CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED (NNAPI 1.0-1.3).

Float16 runs in float32 and is rounded back, like AOSP's ``convFloat16``. Quantized kernels
(QUANT8_ASYMM, QUANT8_ASYMM_SIGNED, per-channel QUANT8_SYMM_PER_CHANNEL filters) subtract the
zero points, accumulate exactly (float64 BLAS holds every integer sum below 2**53), add the
int32 bias and requantize with TFLite's fixed-point ``MultiplyByQuantizedMultiplier`` of
``input_scale * filter_scale / output_scale`` before clamping to the fused activation range.
CONV_2D is an im2col matmul (whole up to 16 MiB, else per filter row); DEPTHWISE_CONV_2D accumulates one multiply-add per filter tap.

Signatures (optional trailing inputs in brackets):
    CONV_2D explicit   input, filter, bias, pad_l, pad_r, pad_t, pad_b, stride_w, stride_h,
                       fuse[, layout[, dilation_w, dilation_h]]            (10/11/13 inputs)
    CONV_2D implicit   input, filter, bias, padding_code, stride_w, stride_h, fuse
                       [, layout[, dilation_w, dilation_h]]                (7/8/10 inputs)
    DEPTHWISE_CONV_2D  as CONV_2D with ``depth_multiplier`` before ``fuse`` (11/12/14, 8/9/11)
    FULLY_CONNECTED    input, weights [units, input_size], bias [units], fuse

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.ops.window import read_window
    >>> x = np.ones((1, 3, 3, 1), np.float32)
    >>> w = np.full((1, 2, 2, 1), 0.25, np.float32)
    >>> win = read_window([None] * 3 + [2, 1, 1, 0], 3, CONV_NAMES, False, (3, 3), (2, 2))
    >>> conv2d_float(x, w, np.zeros(1, np.float32), win).reshape(2, 2).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType, OperationType
from nnscope.runtime.ops._common import (apply_fused_activation, apply_fused_activation_inplace, expect,
                                 expect_count, expect_rank, expect_type)
from nnscope.runtime.ops._conv_quant import centered_pair, exact_int as _exact_int, filter_scales, requantize
from nnscope.runtime.ops.window import (Window, checked_output_hw, expect_scalars, from_nhwc,
                                is_implicit, pad_nhwc, read_scalars, read_window, to_nhwc,
                                window_taps)
from nnscope.runtime.ops.budget import WIDE_BYTES as _WIDE, OutputPlan
from nnscope.runtime.ops.registry import OpContext, OpValidationError, register

CONV_NAMES = ("stride_w", "stride_h", "fuse", "layout", "dilation_w", "dilation_h")
DEPTHWISE_NAMES = ("stride_w", "stride_h", "multiplier", "fuse", "layout",
                   "dilation_w", "dilation_h")
_T = OperandType
_QUANT8 = (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED)
_FLOATS = (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)
_PER_CHANNEL = _T.TENSOR_QUANT8_SYMM_PER_CHANNEL
#: Up to this size the im2col matrix is built whole (one matmul); larger ones go row by row.
FULL_IM2COL_BYTES = 16 << 20
#: DEPTHWISE_CONV_2D outputs up to this many pixels are one einsum (fewer numpy calls).
SMALL_DEPTHWISE_PIXELS = 256
_TAP_BLOCK_ELEMENTS = 48 * 1024  # output elements per block of depthwise taps (192 KiB float32)


# --------------------------------------------------------------------------- NHWC kernels
def conv2d_float(x: np.ndarray, w: np.ndarray, bias: np.ndarray, window: Window) -> np.ndarray:
    """Float CONV_2D on NHWC ``x`` with filter [OC, KH, KW, IC] (im2col + one matmul)."""
    out = conv_matmul(x, w, window)
    out += bias  # the matmul's own result: added in place
    return out


def conv_matmul(x: np.ndarray, w: np.ndarray, window: Window) -> np.ndarray:
    """sum over taps of x * w without bias: columns over the filter width only, then one
    matmul per filter row (K = KW * IC), which keeps the im2col buffer KH times smaller.
    A pointwise (1x1, stride 1, unpadded) convolution is a single matmul on ``x`` itself."""
    out_h, out_w = checked_output_hw(window, x.shape[1:3])
    (kh, kw), (sh, sw), (dh, dw) = window.kernel, window.stride, window.dilation
    batch, channels, out_c = x.shape[0], x.shape[3], w.shape[0]
    if kh == kw == sh == sw == 1 and not any(window.pads):
        return (x.reshape(-1, channels) @ w.reshape(out_c, channels).T).reshape(
            batch, out_h, out_w, out_c)
    padded = pad_nhwc(x, window, 0)
    if full_im2col_bytes(window, x.shape, (out_h, out_w)) <= FULL_IM2COL_BYTES:
        return _conv_one_matmul(padded, w, window, (out_h, out_w))
    if kw == 1 and sw == 1:
        cols = padded[:, :, :, None, :]
    else:
        cols = np.empty((batch, padded.shape[1], out_w, kw, channels), x.dtype)
        for j in range(kw):
            cols[:, :, :, j, :] = padded[:, :, j * dw:j * dw + (out_w - 1) * sw + 1:sw, :]
    out = None
    for i in range(kh):
        rows = cols[:, i * dh:i * dh + (out_h - 1) * sh + 1:sh].reshape(-1, kw * channels)
        part = rows @ w[:, i].reshape(out_c, kw * channels).T
        out = part if out is None else np.add(out, part, out=out)
    return out.reshape(batch, out_h, out_w, out_c)


def full_im2col_bytes(window: Window, x_shape: Sequence[int], out_hw: Sequence[int]) -> int:
    """Bytes of the whole im2col matrix (float64 at worst) for an NHWC input of ``x_shape``."""
    return 8 * x_shape[0] * out_hw[0] * out_hw[1] * window.kernel[0] * window.kernel[1] * x_shape[3]


def _conv_one_matmul(padded: np.ndarray, w: np.ndarray, window: Window,
                     out_hw: Sequence[int]) -> np.ndarray:
    """The whole im2col matrix [N*OH*OW, KH*KW*IC] (the window view, copied once) times the
    filter: one matmul with K = KH*KW*IC."""
    rows = _window_view(padded, window, out_hw).reshape(-1, w[0].size)
    return (rows @ w.reshape(w.shape[0], -1).T).reshape(padded.shape[0], *out_hw, w.shape[0])


def depthwise_float(x: np.ndarray, w: np.ndarray, bias: np.ndarray, window: Window,
                    multiplier: int) -> np.ndarray:
    """Float DEPTHWISE_CONV_2D on NHWC ``x`` with filter [1, KH, KW, IC * multiplier]."""
    out = _depthwise_taps(x, w, window, multiplier)
    out += bias
    return out


def _depthwise_taps(x: np.ndarray, w: np.ndarray, window: Window, multiplier: int) -> np.ndarray:
    """sum over filter taps of (shifted x) * w[tap]: one einsum over rows for a stride-1-wide
    window or a small output; otherwise one multiply and one add per tap and block of rows."""
    out_hw = checked_output_hw(window, x.shape[1:3])
    if multiplier != 1:
        x = np.repeat(x, multiplier, axis=3)
    padded = pad_nhwc(x, window, 0)
    if window.stride[1] == 1:
        return _row_einsum(padded, w, window, out_hw).reshape(x.shape[0], *out_hw, w.shape[3])
    if out_hw[0] * out_hw[1] <= SMALL_DEPTHWISE_PIXELS:
        return np.einsum("nhwijc,ijc->nhwc", _window_view(padded, window, out_hw), w[0])
    taps = [view for _, _, view in window_taps(padded, window, out_hw)]
    weights = w[0].reshape(-1, w.shape[3])
    return _sum_of_taps(taps, weights).reshape(x.shape[0], *out_hw, w.shape[3])


def _sum_of_taps(taps: list, weights) -> np.ndarray:
    """sum of taps[k] * weights[k] over [N, OH, ...] views, a block of output rows at a time
    (a block and its product stay in a core's L2 cache)."""
    out = np.empty(taps[0].shape, np.result_type(taps[0], weights))
    block = max(1, _TAP_BLOCK_ELEMENTS // (out[:, 0].size or 1))
    product = np.empty((out.shape[0], min(block, out.shape[1]), *out.shape[2:]), out.dtype)
    for y in range(0, out.shape[1], block):
        target = out[:, y:y + block]
        scratch = product[:, :target.shape[1]]
        np.multiply(taps[0][:, y:y + block], weights[0], out=target)
        for view, weight in zip(taps[1:], weights[1:]):
            target += np.multiply(view[:, y:y + block], weight, out=scratch)
    return out


def _window_view(padded: np.ndarray, window: Window, out_hw: Sequence[int]) -> np.ndarray:
    """[N, OH, OW, KH, KW, C] read-only view: element (n, y, x, i, j) is the input under tap
    (i, j) of output pixel (y, x)."""
    (kh, kw), (sh, sw), (dh, dw) = window.kernel, window.stride, window.dilation
    sn, sy, sx, sc = padded.strides
    shape = (padded.shape[0], out_hw[0], out_hw[1], kh, kw, padded.shape[3])
    strides = (sn, sh * sy, sw * sx, dh * sy, dw * sx, sc)
    if not padded.flags.c_contiguous:
        return np.lib.stride_tricks.as_strided(padded, shape, strides, writeable=False)
    view = np.ndarray(shape, padded.dtype, padded, 0, strides)  # as_strided without its overhead
    view.flags.writeable = False
    return view


def _row_einsum(padded: np.ndarray, w: np.ndarray, window: Window, out_hw: Sequence[int]) -> np.ndarray:
    """Depthwise taps of a stride-1-wide window as one einsum over a [KH, KW, N, OH, OW * C]
    view of the input rows (each tap's rows are contiguous) and the filter tiled to OW * C:
    numpy then multiplies and adds tap by tap over long rows (~2.5x the per-tap ufuncs)."""
    (sh, _), (dh, dw) = window.stride, window.dilation
    rows = np.ascontiguousarray(padded)
    batch, height, width, channels = rows.shape
    item, row = rows.itemsize, width * channels
    shape = (*window.kernel, batch, out_hw[0], out_hw[1] * channels)
    strides = (dh * row * item, dw * channels * item, height * row * item, sh * row * item, item)
    view = np.ndarray(shape, rows.dtype, rows, 0, strides)
    return np.einsum("ijnhs,ijs->nhs", view, np.tile(w[0], (1, 1, out_hw[1])))


# --------------------------------------------------------------------------- execute
def _conv_params(ctx: OpContext, names: Sequence[str]) -> tuple[Window, dict, np.ndarray]:
    """(window, named scalars, NHWC input) for a CONV_2D/DEPTHWISE_CONV_2D context."""
    implicit_count = 7 if names is CONV_NAMES else 8
    explicit = not is_implicit(len(ctx.inputs), ctx.input_operands, implicit_count)
    values = read_scalars(ctx.inputs, 3, names, explicit)
    x = to_nhwc(ctx.inputs[0], bool(values.get("layout", False)))
    kernel = ctx.inputs[1].shape[1:3]
    return read_window(ctx.inputs, 3, names, explicit, x.shape[1:3], kernel), values, x


def _check_depth(x: np.ndarray, w: np.ndarray, depthwise: bool, multiplier: int) -> None:
    if depthwise:
        expect(w.shape[3] == x.shape[3] * multiplier,
               f"input 1: filter depth {w.shape[3]} != input depth {x.shape[3]} "
               f"* depth_multiplier {multiplier}")
    else:
        expect(w.shape[3] == x.shape[3],
               f"input 1: filter depth {w.shape[3]} != input depth {x.shape[3]}")


def _spatial_quant(ctx: OpContext, x: np.ndarray, window: Window, fuse: int,
                   multiplier: int | None) -> np.ndarray:
    """Quantized CONV_2D (``multiplier`` None) or DEPTHWISE_CONV_2D on NHWC ``x``."""
    (x_op, w_op), (w, bias) = ctx.input_operands[:2], ctx.inputs[1:3]
    depthwise = multiplier is not None
    xc, wc = centered_pair(x, x_op, w, w_op, (0, 1, 2) if depthwise else (1, 2, 3))
    raw = _depthwise_taps(xc, wc, window, multiplier) if depthwise else conv_matmul(xc, wc, window)
    acc = _exact_int(raw) + bias.astype(np.int64)
    scales = filter_scales(w_op, w.shape[3] if depthwise else w.shape[0])
    return requantize(acc, x_op.scale, scales, ctx.output_operands[0], fuse)


def _execute_spatial(ctx: OpContext, names: Sequence[str]) -> list:
    window, values, x = _conv_params(ctx, names)
    w, bias = ctx.inputs[1], ctx.inputs[2]
    fuse, nchw = int(values["fuse"]), bool(values.get("layout", False))
    depthwise = names is DEPTHWISE_NAMES
    multiplier = int(values.get("multiplier", 1))
    _check_depth(x, w, depthwise, multiplier)
    if ctx.input_operands[0].type in _QUANT8:
        y = _spatial_quant(ctx, x, window, fuse, multiplier if depthwise else None)
        return [from_nhwc(y, nchw)]
    xf, wf, bf = (a.astype(np.float32, copy=False) for a in (x, w, bias))
    y = (depthwise_float(xf, wf, bf, window, multiplier) if depthwise
         else conv2d_float(xf, wf, bf, window))
    y = apply_fused_activation_inplace(y, fuse).astype(x.dtype, copy=False)
    return [from_nhwc(y, nchw)]


def _execute_conv(ctx: OpContext) -> list:
    return _execute_spatial(ctx, CONV_NAMES)


def _execute_depthwise(ctx: OpContext) -> list:
    return _execute_spatial(ctx, DEPTHWISE_NAMES)


def _execute_fully_connected(ctx: OpContext) -> list:
    x, w, bias, fuse = ctx.inputs
    x_op, w_op = ctx.input_operands[0], ctx.input_operands[1]
    input_size = w.shape[1]
    expect(input_size > 0 and x.size % input_size == 0,
           f"input 0: {x.size} elements do not split into rows of input_size {input_size}")
    rows = x.reshape(-1, input_size)
    if x_op.type in _QUANT8:
        xc, wc = centered_pair(rows, x_op, w, w_op, 1)
        acc = _exact_int(xc @ wc.T) + bias.astype(np.int64)
        scales = filter_scales(w_op, w.shape[0])
        return [requantize(acc, x_op.scale, scales, ctx.output_operands[0], int(fuse))]
    y = rows.astype(np.float32) @ w.astype(np.float32).T + bias.astype(np.float32)
    return [apply_fused_activation(y, int(fuse)).astype(x.dtype, copy=False)]


# --------------------------------------------------------------------------- validation
def expect_weights(inputs: Sequence[Operand], input_type: OperandType, per_channel_dim) -> None:
    """Filter (input 1) and bias (input 2) types for a float/quant8 input type."""
    if input_type in _FLOATS:
        expect_type(inputs, 1, input_type)
        expect_type(inputs, 2, input_type)
        return
    allowed = (input_type, _PER_CHANNEL) if per_channel_dim is not None else (input_type,)
    filter_type = expect_type(inputs, 1, allowed)
    expect_type(inputs, 2, _T.TENSOR_INT32)
    if filter_type == _PER_CHANNEL:
        quant = inputs[1].channel_quant
        expect(quant is not None and quant.channel_dim == per_channel_dim,
               f"input 1: per-channel filter needs channelDim {per_channel_dim}")
        expect(inputs[1].zero_point == 0, "input 1: per-channel filter zeroPoint must be 0")


def _spatial_validator(names: Sequence[str], implicit_counts: tuple[int, ...],
                       explicit_counts: tuple[int, ...], channel_dim: int):
    def validate(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
        expect_count(inputs, sorted(set(implicit_counts + explicit_counts)), "inputs")
        expect_count(outputs, 1, "outputs")
        explicit = not is_implicit(len(inputs), inputs, implicit_counts[0])
        expect(len(inputs) in (explicit_counts if explicit else implicit_counts),
               f"{len(inputs)} inputs fit neither the explicit {explicit_counts} nor the "
               f"implicit {implicit_counts} padding signature")
        input_type = expect_type(inputs, 0, _FLOATS + _QUANT8)
        for index, rank, name in ((0, 4, "input"), (1, 4, "filter"), (2, 1, "bias")):
            expect(len(inputs[index].dimensions) in (0, rank),
                   f"input {index} ({name}): expected rank {rank}, "
                   f"got {len(inputs[index].dimensions)}")
        expect_weights(inputs, input_type, channel_dim)
        if channel_dim == 3 and inputs[1].dimensions:
            expect(inputs[1].dimensions[0] == 1, f"input 1 (filter): depthwise filter must be "
                   f"[1, H, W, C], got {list(inputs[1].dimensions)}")
        expect_scalars(inputs, 3, names, explicit)
        expect_type(outputs, 0, input_type, "output")
        expect_rank(outputs, 0, exact=4, what="output")
    return validate


def _validate_fully_connected(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 4, "inputs")
    expect_count(outputs, 1, "outputs")
    input_type = expect_type(inputs, 0, _FLOATS + _QUANT8)
    expect(len(inputs[0].dimensions) in (0, 2, 3, 4),
           f"input 0: expected rank 2..4, got {len(inputs[0].dimensions)}")
    expect(len(inputs[1].dimensions) in (0, 2),
           f"input 1 (weights): expected rank 2, got {len(inputs[1].dimensions)}")
    expect(len(inputs[2].dimensions) in (0, 1),
           f"input 2 (bias): expected rank 1, got {len(inputs[2].dimensions)}")
    expect_weights(inputs, input_type, None)
    expect_type(inputs, 3, _T.INT32)
    expect_type(outputs, 0, input_type, "output")
    expect_rank(outputs, 0, exact=2, what="output")


_SPATIAL_PLANS: dict = {}  # (type, shapes, scalars and their Python types) -> OutputPlan


def _infer_spatial(ctx: OpContext) -> OutputPlan:
    scalars = tuple(ctx.inputs[3:])
    key = (ctx.operation.type, ctx.inputs[0].shape, ctx.inputs[1].shape, scalars, tuple(map(type, scalars)))
    plan = _SPATIAL_PLANS.get(key)
    if plan is None:
        plan = _spatial_plan(ctx)
        if len(_SPATIAL_PLANS) < 512:
            _SPATIAL_PLANS[key] = plan
    return plan


def _spatial_plan(ctx: OpContext) -> OutputPlan:
    depthwise = ctx.operation.type == OperationType.DEPTHWISE_CONV_2D
    window, _, x = _conv_params(ctx, DEPTHWISE_NAMES if depthwise else CONV_NAMES)
    out_h, out_w = checked_output_hw(window, x.shape[1:3])
    w = ctx.inputs[1]
    batch, channels = x.shape[0], x.shape[3]
    out_c = w.shape[3] if depthwise else w.shape[0]
    top, bottom, left, right = window.pads
    padded = batch * (x.shape[1] + top + bottom) * (x.shape[2] + left + right) * channels
    columns = 0
    if not depthwise:
        whole = full_im2col_bytes(window, x.shape, (out_h, out_w))
        columns = whole // _WIDE if whole <= FULL_IM2COL_BYTES else \
            batch * (x.shape[1] + top + bottom) * out_w * window.kernel[1] * channels
    product = batch * out_h * out_w * out_c  # depthwise's per-tap product / the matmul's part
    return OutputPlan([(batch, out_h, out_w, out_c)], _WIDE * (padded + columns + 2 * product))


def _infer_fully_connected(ctx: OpContext) -> OutputPlan:
    x, w = ctx.inputs[0], ctx.inputs[1]
    if w.ndim != 2 or w.shape[1] <= 0:
        raise OpValidationError(f"input 1: weights of shape {list(w.shape)}")
    batch = x.size // w.shape[1]
    return OutputPlan([(batch, w.shape[0])], _WIDE * (2 * batch * w.shape[0] + x.size))


register(OperationType.CONV_2D, "convolution", _spatial_validator(CONV_NAMES, (7, 8, 10), (10, 11, 13), 0),
         _execute_conv, infer_shapes=_infer_spatial)
register(OperationType.DEPTHWISE_CONV_2D, "convolution",
         _spatial_validator(DEPTHWISE_NAMES, (8, 9, 11), (11, 12, 14), 3), _execute_depthwise,
         infer_shapes=_infer_spatial)
register(OperationType.FULLY_CONNECTED, "convolution", _validate_fully_connected,
         _execute_fully_connected, infer_shapes=_infer_fully_connected)
