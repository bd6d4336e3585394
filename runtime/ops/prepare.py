"""Shape inference before a kernel runs, for every operation whose outputs can outgrow its inputs.

Each function takes the step's :class:`OpContext` (inputs bound, nothing computed) and returns
an :class:`~runtime.ops.budget.OutputPlan` (output shapes and scratch bytes), or None when the
outputs are no larger than an input (same-shape arithmetic: the hot path pays one comparison).
The executor uses :data:`PREPARES` for operations whose record has no ``prepare`` of its own and
checks the plan against the caller's buffers and the memory budget (``runtime.ops.budget``).
Shapes give the right element count; where the layout is ambiguous (NCHW) the order may differ.

Example:
    >>> import numpy as np
    >>> from runtime.hal.types import Operation, OperationType
    >>> ctx = OpContext(Operation(OperationType.PAD, (0, 1), (2,)),
    ...                 [np.zeros((1, 4), np.float32), np.int32([[0, 0], [0, 2**28]])], [], [])
    >>> PREPARES[OperationType.PAD](ctx).shapes
    [(1, 268435460)]
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from runtime.hal.types import OperationType as O
from runtime.ops.budget import OutputPlan, element_count
from runtime.ops.registry import OpContext, OpValidationError

_WIDE = 8  # bytes of the widest temporary element (float64 / int64 accumulators)


def _broadcast(ctx: OpContext) -> OutputPlan | None:
    """Binary (and SELECT's ternary) broadcasting: outputs as large as the broadcast shape."""
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


def _pad(ctx: OpContext) -> OutputPlan:
    x, paddings = ctx.inputs[0], np.asarray(ctx.inputs[1])
    if paddings.size != 2 * x.ndim:
        raise OpValidationError(f"input 1: expected paddings of shape [{x.ndim}, 2], "
                                f"got {list(paddings.shape)}")
    pads = paddings.reshape(-1, 2).tolist()
    if any(p < 0 for pair in pads for p in pair):
        raise OpValidationError("input 1: paddings must be non-negative")
    return OutputPlan([tuple(d + head + tail for d, (head, tail) in zip(x.shape, pads))])


def _tile(ctx: OpContext) -> OutputPlan:
    x, multiples = ctx.inputs[0], np.asarray(ctx.inputs[1]).ravel().tolist()
    if len(multiples) != x.ndim or any(m < 0 for m in multiples):
        raise OpValidationError(f"input 1: multiples {multiples} do not fit rank {x.ndim}")
    return OutputPlan([tuple(d * m for d, m in zip(x.shape, multiples))])


def _fill(ctx: OpContext) -> OutputPlan:
    dims = np.asarray(ctx.inputs[0]).ravel().tolist()
    if any(d < 0 for d in dims):
        raise OpValidationError(f"input 0: negative dimensions {dims}")
    return OutputPlan([tuple(dims)])


def _concatenation(ctx: OpContext) -> OutputPlan | None:
    tensors = [x for x in ctx.inputs[:-1] if isinstance(x, np.ndarray)]
    if len(tensors) < 2:
        return None
    return OutputPlan([(sum(x.size for x in tensors),)])


def _gather(ctx: OpContext) -> OutputPlan:
    x, axis, indices = ctx.inputs[0], int(ctx.inputs[1]), np.asarray(ctx.inputs[2])
    if not -x.ndim <= axis < x.ndim:
        raise OpValidationError(f"input 1: axis {axis} out of range for rank {x.ndim}")
    return OutputPlan([(x.size // max(x.shape[axis], 1) * indices.size,)])


def _embedding_lookup(ctx: OpContext) -> OutputPlan:
    lookups, values = np.asarray(ctx.inputs[0]), ctx.inputs[1]
    return OutputPlan([(lookups.size * (values.size // max(values.shape[0], 1) if values.ndim else 1),)])


def _resize(ctx: OpContext) -> OutputPlan:
    """RESIZE_*: output height/width given (INT32) or scaled (FLOAT) by inputs 1 and 2."""
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
    return OutputPlan([(x.shape[0], out_h, out_w, channels)], x.shape[0] * out_h * out_w * channels * _WIDE)


def _space_to_batch(ctx: OpContext) -> OutputPlan:
    x, paddings = ctx.inputs[0], np.asarray(ctx.inputs[2]).reshape(-1).tolist()
    if len(paddings) != 4 or min(paddings) < 0:
        raise OpValidationError(f"input 2: paddings {paddings} must be 4 non-negative values")
    nchw = len(ctx.inputs) > 3 and bool(ctx.inputs[3])
    spatial = x.shape[2:4] if nchw else x.shape[1:3]
    padded = (spatial[0] + paddings[0] + paddings[1]) * (spatial[1] + paddings[2] + paddings[3])
    return OutputPlan([(x.size // max(spatial[0] * spatial[1], 1) * padded,)])


# --------------------------------------------------------------------------- windows
def _pooling(ctx: OpContext) -> OutputPlan:
    from runtime.ops.pooling import POOL_NAMES  # noqa: PLC0415
    from runtime.ops.window import is_implicit, read_scalars  # noqa: PLC0415
    explicit = not is_implicit(len(ctx.inputs), ctx.input_operands, 7)
    values = read_scalars(ctx.inputs, 1, POOL_NAMES, explicit)
    key = (values["pad"], values["stride_w"], values["stride_h"], values["filter_w"], values["filter_h"])
    return _pool_plan(ctx.inputs[0].shape, bool(values.get("layout", False)), explicit, key)


@functools.lru_cache(maxsize=512)
def _pool_plan(shape: tuple, nchw: bool, explicit: bool, key: tuple) -> OutputPlan:
    from runtime.ops.pooling import POOL_NAMES  # noqa: PLC0415
    from runtime.ops.window import checked_output_hw, read_window  # noqa: PLC0415
    batch, height, width, channels = (shape[0], shape[2], shape[3], shape[1]) if nchw else shape
    pad, stride_w, stride_h, filter_w, filter_h = key
    inputs = [None, *(pad if explicit else (pad,)), stride_w, stride_h, filter_w, filter_h, 0]
    if min(int(filter_w), int(filter_h)) < 1:
        raise OpValidationError(f"bad filter size {(filter_h, filter_w)}")
    window = read_window(inputs, 1, POOL_NAMES, explicit, (height, width), (int(filter_h), int(filter_w)))
    out_h, out_w = checked_output_hw(window, (height, width))
    rows = batch * height * out_w * channels  # the separable pass's intermediate
    return OutputPlan([(batch, out_h, out_w, channels)], 4 * _WIDE * (rows + batch * out_h * out_w * channels))


_SPATIAL_PLANS: dict = {}  # (type, shapes, scalars and their Python types) -> OutputPlan


def _spatial(ctx: OpContext) -> OutputPlan:
    scalars = tuple(ctx.inputs[3:])
    key = (ctx.operation.type, ctx.inputs[0].shape, ctx.inputs[1].shape, scalars, tuple(map(type, scalars)))
    plan = _SPATIAL_PLANS.get(key)
    if plan is None:
        plan = _spatial_plan(ctx)
        if len(_SPATIAL_PLANS) < 512:
            _SPATIAL_PLANS[key] = plan
    return plan


def _spatial_plan(ctx: OpContext) -> OutputPlan:
    from runtime.ops.convolution import (CONV_NAMES, DEPTHWISE_NAMES,  # noqa: PLC0415
                                         FULL_IM2COL_BYTES, _conv_params, full_im2col_bytes)
    depthwise = ctx.operation.type == O.DEPTHWISE_CONV_2D
    window, _, x = _conv_params(ctx, DEPTHWISE_NAMES if depthwise else CONV_NAMES)
    from runtime.ops.window import checked_output_hw  # noqa: PLC0415
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


def _transpose_conv(ctx: OpContext) -> OutputPlan:
    from runtime.ops.transpose_conv import _transpose_params  # noqa: PLC0415
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


def _grouped_conv(ctx: OpContext) -> OutputPlan:
    from runtime.ops.window import checked_output_hw, is_implicit, read_window  # noqa: PLC0415
    from runtime.ops.transpose_conv import GROUPED_NAMES  # noqa: PLC0415
    explicit = not is_implicit(len(ctx.inputs), ctx.input_operands, 9)
    nchw = bool(ctx.inputs[(7 if explicit else 4) + 4])
    x, w = ctx.inputs[0], ctx.inputs[1]
    batch, height, width, channels = (x.shape[0], x.shape[2], x.shape[3], x.shape[1]) if nchw else x.shape
    window = read_window(ctx.inputs, 3, GROUPED_NAMES, explicit, (height, width), w.shape[1:3])
    out_h, out_w = checked_output_hw(window, (height, width))
    top, bottom, left, right = window.pads
    padded_h = height + top + bottom
    scratch = batch * padded_h * ((width + left + right) + out_w * window.kernel[1]) * channels
    return OutputPlan([(batch, out_h, out_w, w.shape[0])], _WIDE * (scratch + 2 * batch * out_h * out_w * w.shape[0]))


def _fully_connected(ctx: OpContext) -> OutputPlan:
    x, w = ctx.inputs[0], ctx.inputs[1]
    if w.ndim != 2 or w.shape[1] <= 0:
        raise OpValidationError(f"input 1: weights of shape {list(w.shape)}")
    batch = x.size // w.shape[1]
    return OutputPlan([(batch, w.shape[0])], _WIDE * (2 * batch * w.shape[0] + x.size))


_BROADCASTING: Sequence[O] = (O.ADD, O.SUB, O.MUL, O.DIV, O.POW, O.MAXIMUM, O.MINIMUM, O.PRELU,
                              O.EQUAL, O.NOT_EQUAL, O.GREATER, O.GREATER_EQUAL, O.LESS,
                              O.LESS_EQUAL, O.LOGICAL_AND, O.LOGICAL_OR, O.SELECT)

#: Shape inference by operation type, for records registered without a ``prepare``.
PREPARES = {
    **{op: _broadcast for op in _BROADCASTING},
    O.PAD: _pad, O.PAD_V2: _pad, O.TILE: _tile, O.FILL: _fill, O.CONCATENATION: _concatenation,
    O.GATHER: _gather, O.EMBEDDING_LOOKUP: _embedding_lookup, O.RESIZE_BILINEAR: _resize,
    O.RESIZE_NEAREST_NEIGHBOR: _resize, O.SPACE_TO_BATCH_ND: _space_to_batch,
    O.AVERAGE_POOL_2D: _pooling, O.MAX_POOL_2D: _pooling, O.L2_POOL_2D: _pooling,
    O.CONV_2D: _spatial, O.DEPTHWISE_CONV_2D: _spatial, O.FULLY_CONNECTED: _fully_connected,
    O.TRANSPOSE_CONV_2D: _transpose_conv, O.GROUPED_CONV_2D: _grouped_conv,
}
