"""ROI_ALIGN and ROI_POOLING (AOSP ``RoiAlign.cpp``, ``RoiPooling.cpp``).

Inputs: ``input [N, H, W, C], rois [R, 4] (x1, y1, x2, y2 in image coordinates), batch_split
[R], out_h, out_w, height_stride, width_stride`` then, for ROI_ALIGN only, ``sampling_h,
sampling_w`` and last the NCHW ``layout``. A ROI's coordinates are divided by the strides to
reach the feature map. Float16 runs in float32; quant8 (asymm or signed) inputs take
TENSOR_QUANT16_ASYMM rois of scale 0.125. ROI_ALIGN averages bilinear samples (quantized: with
weights quantized to 1/255 and TFLite's fixed-point rescale); ROI_POOLING takes the max of each
bin. Zero ROIs give an empty output, which is how the ``zero_sized`` vectors chain detection ops.

Example:
    >>> import numpy as np
    >>> feat = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    >>> align_float(feat[0], np.float32([0, 0, 4, 4]), (2, 2), (1, 1))[..., 0].tolist()
    [[5.0, 7.0], [13.0, 15.0]]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops._common import (expect, expect_count, expect_rank, expect_type,
                                 multiply_by_quantized_multiplier,
                                 quantize_multiplier_smaller_than_one, round_half_away)
from nnscope.runtime.ops.window import from_nhwc, to_nhwc
from nnscope.runtime.ops.registry import OpContext, register

_F32 = np.float32
_QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
_W_SCALE = _F32(1.0) / _F32(255.0)


# --------------------------------------------------------------------------- ROI geometry
def _roi_boxes(ctx: OpContext, feat_hw: Sequence[int]) -> np.ndarray:
    """The rois as float32 [R, 4] on the feature map (divided by the strides), checked."""
    rois, roi_op = ctx.inputs[1], ctx.input_operands[1]
    h_stride, w_stride = ctx.inputs[5], ctx.inputs[6]
    scales = np.array([_F32(1) / _F32(w_stride), _F32(1) / _F32(h_stride)] * 2, _F32)
    boxes = rois.astype(_F32).reshape(-1, 4)
    if roi_op.type == T.TENSOR_QUANT16_ASYMM:
        boxes = boxes * scales * _F32(0.125)
    else:
        expect(bool((boxes >= 0).all()), "input 1: negative roi coordinate")
        boxes = boxes * scales
    limits = np.array([feat_hw[1], feat_hw[0]] * 2, _F32)
    expect(bool((boxes <= limits).all()), "input 1: roi outside the feature map")
    expect(bool((boxes[:, 0] <= boxes[:, 2]).all() and (boxes[:, 1] <= boxes[:, 3]).all()),
           "input 1: roi with x2 < x1 or y2 < y1")
    return boxes


def _batch_ids(ctx: OpContext, count: int, batches: int) -> np.ndarray:
    ids = np.asarray(ctx.inputs[2]).reshape(-1).astype(np.int64)
    expect(ids.size == count, f"input 2: {ids.size} batch ids for {count} rois")
    expect(bool(((ids >= 0) & (ids < batches)).all()), f"input 2: batch id outside [0, {batches})")
    return ids


# --------------------------------------------------------------------------- ROI_ALIGN
def _sample_axis(start, size, out_size: int, ratio: int, limit: int):
    """Sample positions of one axis: (low index, high index, fraction), each [out, ratio]."""
    step = _F32(size) / _F32(out_size)
    ratio = ratio if ratio > 0 else int(np.ceil(step))
    bin_size = step / _F32(ratio)
    starts = step * np.arange(out_size, dtype=_F32) + _F32(start)
    pos = starts[:, None] + bin_size / _F32(2) + bin_size * np.arange(ratio, dtype=_F32)[None]
    low = np.floor(pos).astype(np.int64)
    frac = (pos - low.astype(_F32)).astype(_F32)
    edge = low >= limit - 1
    low = np.where(edge, limit - 1, low)
    return low, np.where(edge, low, low + 1), np.where(edge, _F32(0), frac)


def _align_samples(box, out_hw, ratios, feat_hw):
    """Per axis sample data for one roi (a ROI is at least 1x1)."""
    width = max(_F32(box[2] - box[0]), _F32(1))
    height = max(_F32(box[3] - box[1]), _F32(1))
    ys = _sample_axis(box[1], height, out_hw[0], ratios[0], feat_hw[0])
    xs = _sample_axis(box[0], width, out_hw[1], ratios[1], feat_hw[1])
    return ys, xs


def _corner_weights(ys, xs):
    """The four bilinear weights [oh, rh, ow, rw] in AOSP's order (y1x1, y1x2, y2x1, y2x2)."""
    dy1, dx1 = ys[2][:, :, None, None], xs[2][None, None]
    dy2, dx2 = _F32(1) - dy1, _F32(1) - dx1
    return dx2 * dy2, dx1 * dy2, dx2 * dy1, dx1 * dy1


def _corners(feat: np.ndarray, ys, xs):
    """The four corner values, each [oh, rh, ow, rw, C]."""
    rows = (feat[ys[0]], feat[ys[1]])
    return (rows[0][:, :, xs[0]], rows[0][:, :, xs[1]], rows[1][:, :, xs[0]], rows[1][:, :, xs[1]])


def align_float(feat: np.ndarray, box, out_hw, ratios) -> np.ndarray:
    """ROI_ALIGN of one roi on one NHWC batch item ``feat`` [H, W, C]."""
    feat = feat.astype(_F32)
    ys, xs = _align_samples(box, out_hw, ratios, feat.shape[:2])
    total = sum(w[..., None] * v for w, v in zip(_corner_weights(ys, xs), _corners(feat, ys, xs)))
    count = ys[0].shape[1] * xs[0].shape[1]
    return total.sum(axis=(1, 3)) / _F32(count)


def align_quant(feat: np.ndarray, box, out_hw, ratios, x_op: Operand, out_op: Operand):
    ys, xs = _align_samples(box, out_hw, ratios, feat.shape[:2])
    weights = [round_half_away((w / _W_SCALE).astype(_F32)).astype(np.int64)
               for w in _corner_weights(ys, xs)]
    centered = feat.astype(np.int64) - int(x_op.zero_point)
    total = sum(w[..., None] * v for w, v in zip(weights, _corners(centered, ys, xs)))
    count = ys[0].shape[1] * xs[0].shape[1]
    real = _F32(x_op.scale) * _W_SCALE / _F32(out_op.scale) / _F32(count)
    multiplier, shift = quantize_multiplier_smaller_than_one(float(real))
    return multiply_by_quantized_multiplier(total.sum(axis=(1, 3)), multiplier, shift) \
        + out_op.zero_point


def _execute_align(ctx: OpContext) -> list:
    nchw = bool(ctx.inputs[9])
    x = to_nhwc(ctx.inputs[0], nchw)
    out_hw, ratios = _out_hw(ctx), (int(ctx.inputs[7]), int(ctx.inputs[8]))
    expect(min(ratios) >= 0, f"sampling ratios {ratios} must be >= 0")
    boxes = _roi_boxes(ctx, x.shape[1:3])
    ids = _batch_ids(ctx, len(boxes), x.shape[0])
    x_op, out_op = ctx.input_operands[0], ctx.output_operands[0]
    quant = x_op.type in _QUANT8
    out = np.zeros((len(boxes), *out_hw, x.shape[3]), np.int64 if quant else _F32)
    for index, (box, batch) in enumerate(zip(boxes, ids)):
        out[index] = (align_quant(x[batch], box, out_hw, ratios, x_op, out_op) if quant
                      else align_float(x[batch], box, out_hw, ratios))
    return [from_nhwc(_cast(out, x.dtype), nchw)]


def _cast(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(values, info.min, info.max).astype(dtype)
    return values.astype(dtype)


def _out_hw(ctx: OpContext) -> tuple[int, int]:
    out_hw = (int(ctx.inputs[3]), int(ctx.inputs[4]))
    expect(min(out_hw) > 0, f"output size {out_hw} must be positive")
    expect(min(float(ctx.inputs[5]), float(ctx.inputs[6])) > 0, "strides must be positive")
    return out_hw


# --------------------------------------------------------------------------- ROI_POOLING
def _pool_bins(start: int, end: int, out_size: int, limit: int):
    """[start, end) rows/cols of each output bin along one axis."""
    step = _F32(max(end - start + 1, 1)) / _F32(out_size)
    index = np.arange(out_size, dtype=_F32)
    lo = np.floor(step * index + _F32(start)).astype(np.int64)
    hi = np.ceil(step * (index + _F32(1)) + _F32(start)).astype(np.int64)
    return np.minimum(lo, limit), np.minimum(hi, limit)


def pool_roi(feat: np.ndarray, box, out_hw, empty) -> np.ndarray:
    """ROI_POOLING of one roi on [H, W, C]: max over each bin (``empty`` for an empty bin)."""
    start_x, start_y, end_x, end_y = (int(v) for v in round_half_away(box))
    rows = _pool_bins(start_y, end_y, out_hw[0], feat.shape[0])
    cols = _pool_bins(start_x, end_x, out_hw[1], feat.shape[1])
    out = np.full((*out_hw, feat.shape[2]), empty, feat.dtype)
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            window = feat[rows[0][i]:rows[1][i], cols[0][j]:cols[1][j]]
            if window.size:
                out[i, j] = window.max(axis=(0, 1))
    return out


def _execute_pooling(ctx: OpContext) -> list:
    nchw = bool(ctx.inputs[7])
    x = to_nhwc(ctx.inputs[0], nchw)
    out_hw = _out_hw(ctx)
    boxes = _roi_boxes(ctx, x.shape[1:3])
    ids = _batch_ids(ctx, len(boxes), x.shape[0])
    empty = ctx.input_operands[0].zero_point if x.dtype.kind in "iu" else 0
    out = np.zeros((len(boxes), *out_hw, x.shape[3]), x.dtype)
    for index, (box, batch) in enumerate(zip(boxes, ids)):
        out[index] = pool_roi(x[batch], box, out_hw, empty)
    return [from_nhwc(out, nchw)]


# --------------------------------------------------------------------------- validation
def _validator(count: int, sampling: bool):
    def validate(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
        expect_count(inputs, count, "inputs")
        expect_count(outputs, 1, "outputs")
        input_type = expect_type(inputs, 0, (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16) + _QUANT8)
        quant = input_type in _QUANT8
        expect_type(inputs, 1, T.TENSOR_QUANT16_ASYMM if quant else input_type)
        if quant:
            expect(inputs[1].scale == _F32(0.125) and inputs[1].zero_point == 0,
                   "input 1: quantized rois need scale 0.125 and zeroPoint 0")
        expect_type(inputs, 2, T.TENSOR_INT32)
        stride_type = T.FLOAT16 if input_type == T.TENSOR_FLOAT16 else T.FLOAT32
        scalar_types = [T.INT32, T.INT32, stride_type, stride_type]
        scalar_types += [T.INT32, T.INT32, T.BOOL] if sampling else [T.BOOL]
        for index, wanted in enumerate(scalar_types, start=3):
            expect_type(inputs, index, wanted)
        expect_rank(inputs, 0, exact=4)
        expect_rank(inputs, 1, exact=2)
        expect_type(outputs, 0, input_type, "output")
        expect_rank(outputs, 0, exact=4, what="output")
    return validate


register(OperationType.ROI_ALIGN, "roi", _validator(10, True), _execute_align)
register(OperationType.ROI_POOLING, "roi", _validator(8, False), _execute_pooling)
