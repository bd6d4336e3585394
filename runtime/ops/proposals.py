"""AXIS_ALIGNED_BBOX_TRANSFORM, GENERATE_PROPOSALS and HEATMAP_MAX_KEYPOINT (AOSP
``GenerateProposals.cpp``, ``HeatmapMaxKeypoint.cpp``).

Everything runs in float32: float16 inputs are widened, quantized ones dequantized
(``(q - zeroPoint) * scale``) and the results requantized to the output operand (boxes are
TENSOR_QUANT16_ASYMM with scale 0.125, anchors of GENERATE_PROPOSALS TENSOR_QUANT16_SYMM).

AXIS_ALIGNED_BBOX_TRANSFORM: ``rois [R, 4], deltas [R, 4C] (dx, dy, dw, dh), batch [R],
image_info [B, 2] (height, width)`` -> boxes [R, 4C] moved, scaled and clipped to the image.
GENERATE_PROPOSALS: ``scores [B, H, W, A], deltas [B, H, W, 4A], anchors [A, 4], image_info,
height_stride, width_stride, pre_nms_top_n, post_nms_top_n, iou_threshold, min_size, layout`` ->
scores [K], rois [K, 4], batch [K] after decoding, size filtering and hard NMS per image.
HEATMAP_MAX_KEYPOINT: ``heatmaps [N, S, S, K], boxes [N, 4], layout`` -> scores [N, K] and
keypoints [N, K, 2], the heatmap maximum refined by a quadratic fit of its 3x3 neighbourhood.

Example:
    >>> import numpy as np
    >>> bbox_transform(np.float32([[0, 0, 10, 10]]), np.float32([[0.1, 0, 0, 0]]),
    ...                np.float32([[100, 100]])).tolist()
    [[1.0, 0.0, 11.0, 10.0]]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops._common import expect, expect_count, expect_type
from nnscope.runtime.ops.detection import from_float, hard_removal, nms, to_float
from nnscope.runtime.ops.window import to_nhwc
from nnscope.runtime.ops.registry import OpContext, register

_F32 = np.float32
_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


# --------------------------------------------------------------------------- AXIS_ALIGNED_BBOX_TRANSFORM
def bbox_transform(rois: np.ndarray, deltas: np.ndarray, image_hw: np.ndarray) -> np.ndarray:
    """Apply deltas [R, 4C] to corner boxes [R, 4]; ``image_hw`` [R, 2] clips each row."""
    classes = deltas.shape[-1] // 4
    rois, deltas = rois.astype(_F32), deltas.astype(_F32).reshape(len(rois), classes, 4)
    width, height = (rois[:, 2] - rois[:, 0])[:, None], (rois[:, 3] - rois[:, 1])[:, None]
    cx = ((rois[:, 0] + rois[:, 2]) / _F32(2))[:, None]
    cy = ((rois[:, 1] + rois[:, 3]) / _F32(2))[:, None]
    new_w, new_h = np.exp(deltas[..., 2]) * width, np.exp(deltas[..., 3]) * height
    new_x, new_y = cx + deltas[..., 0] * width, cy + deltas[..., 1] * height
    corners = np.stack([new_x - new_w / _F32(2), new_y - new_h / _F32(2),
                        new_x + new_w / _F32(2), new_y + new_h / _F32(2)], axis=-1)
    limits = np.stack([image_hw[:, 1], image_hw[:, 0]] * 2, axis=-1)[:, None, :]
    clipped = np.minimum(np.maximum(corners, _F32(0)), limits)
    return clipped.reshape(len(rois), classes * 4).astype(_F32)


def _execute_bbox(ctx: OpContext) -> list:
    rois = to_float(ctx.inputs[0], ctx.input_operands[0]).reshape(-1, 4)
    deltas = to_float(ctx.inputs[1], ctx.input_operands[1])
    batch = np.asarray(ctx.inputs[2]).reshape(-1).astype(np.int64)
    info = to_float(ctx.inputs[3], ctx.input_operands[3]).reshape(-1, 2)
    expect(bool(((batch >= 0) & (batch < len(info))).all()), "input 2: batch index out of range")
    expect(bool((rois[:, 0] < rois[:, 2]).all() and (rois[:, 1] < rois[:, 3]).all()),
           "input 0: roi with x2 <= x1 or y2 <= y1")
    boxes = bbox_transform(rois, deltas, info[batch])
    return [from_float(boxes, ctx.output_operands[0])]


def _validate_bbox(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 4, "inputs")
    expect_count(outputs, 1, "outputs")
    roi_type = expect_type(inputs, 0, _FLOATS + (T.TENSOR_QUANT16_ASYMM,))
    delta_types = _QUANT8 if roi_type == T.TENSOR_QUANT16_ASYMM else (roi_type,)
    expect_type(inputs, 1, delta_types)
    expect_type(inputs, 2, T.TENSOR_INT32)
    expect_type(inputs, 3, roi_type)
    expect_type(outputs, 0, roi_type, "output")


# --------------------------------------------------------------------------- GENERATE_PROPOSALS
def _keep_sized(boxes: np.ndarray, select: np.ndarray, image_hw, min_size: float) -> np.ndarray:
    """AOSP ``filterBoxes``: wider and taller than min_size, centre inside the image."""
    b = boxes[select]
    width, height = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    cx, cy = b[:, 0] + width / _F32(2), b[:, 1] + height / _F32(2)
    keep = ((width > _F32(min_size)) & (height > _F32(min_size)) & (cx < image_hw[1])
            & (cy < image_hw[0]))
    return select[keep]


def _proposals_one(scores, deltas, anchors_grid, image_hw, p: dict):
    """(kept indexes, decoded boxes) of one image; scores [HWA], deltas [HWA, 4]."""
    boxes = bbox_transform(anchors_grid, deltas, np.broadcast_to(image_hw, (len(deltas), 2)))
    select = np.arange(len(scores))
    if 0 < p["pre"] < len(select):
        select = np.argsort(-scores, kind="stable")[:p["pre"]]
    select = _keep_sized(boxes, select, image_hw, p["min_size"])
    return nms(scores, select.tolist(), boxes, p["post"], hard_removal(p["iou"])), boxes


def _anchor_grid(anchors: np.ndarray, hw: Sequence[int], strides: Sequence[float]) -> np.ndarray:
    """Anchors shifted to every feature position: [H * W * A, 4] (x1, y1, x2, y2)."""
    shift_y = np.arange(hw[0], dtype=_F32) * _F32(strides[0])
    shift_x = np.arange(hw[1], dtype=_F32) * _F32(strides[1])
    shifts = np.stack(np.broadcast_arrays(shift_x[None, :], shift_y[:, None]) * 2, axis=-1)
    return (anchors[None, None] + shifts[:, :, None, :]).reshape(-1, 4).astype(_F32)


def _execute_proposals(ctx: OpContext) -> list:
    ops, nchw = ctx.input_operands, bool(ctx.inputs[10])
    scores = to_float(to_nhwc(ctx.inputs[0], nchw), ops[0])
    deltas = to_float(to_nhwc(ctx.inputs[1], nchw), ops[1])
    anchors = to_float(ctx.inputs[2], ops[2]).reshape(-1, 4)
    info = to_float(ctx.inputs[3], ops[3]).reshape(-1, 2)
    expect(bool((anchors[:, 0] < anchors[:, 2]).all() and (anchors[:, 1] < anchors[:, 3]).all()),
           "input 2: anchor with x2 <= x1 or y2 <= y1")
    p = {"pre": int(ctx.inputs[6]), "post": int(ctx.inputs[7]), "iou": ctx.inputs[8],
         "min_size": ctx.inputs[9]}
    grid = _anchor_grid(anchors, scores.shape[1:3], (ctx.inputs[4], ctx.inputs[5]))
    out_scores, out_boxes, out_batches = [], [], []
    for b in range(scores.shape[0]):
        flat = scores[b].reshape(-1)
        kept, boxes = _proposals_one(flat, deltas[b].reshape(-1, 4), grid, info[b], p)
        out_scores.append(flat[kept])
        out_boxes.append(boxes[kept].reshape(-1, 4))
        out_batches.append(np.full(len(kept), b, np.int32))
    return [from_float(np.concatenate(out_scores), ctx.output_operands[0]),
            from_float(np.concatenate(out_boxes).reshape(-1, 4), ctx.output_operands[1]),
            np.concatenate(out_batches).astype(np.int32)]


def _validate_proposals(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 11, "inputs")
    expect_count(outputs, 3, "outputs")
    kind = expect_type(inputs, 0, _FLOATS + _QUANT8)
    quant = kind in _QUANT8
    scalar = T.FLOAT16 if kind == T.TENSOR_FLOAT16 else T.FLOAT32
    wanted = (kind, T.TENSOR_QUANT16_SYMM if quant else kind,
              T.TENSOR_QUANT16_ASYMM if quant else kind, scalar, scalar, T.INT32, T.INT32,
              scalar, scalar, T.BOOL)
    for index, operand_type in enumerate(wanted, start=1):
        expect_type(inputs, index, operand_type)
    box_type = T.TENSOR_QUANT16_ASYMM if quant else kind
    for index, operand_type in enumerate((kind, box_type, T.TENSOR_INT32)):
        expect_type(outputs, index, operand_type, "output")


# --------------------------------------------------------------------------- HEATMAP_MAX_KEYPOINT
def _refine(grid: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """AOSP ``solveForDelta`` for grids [M, 3, 3]: (delta [M, 2] as (dx, dy), score [M])."""
    g = grid.astype(_F32)
    two, four = _F32(2), _F32(4)
    b = np.stack([-(g[:, 1, 2] - g[:, 1, 0]) / two, -(g[:, 2, 1] - g[:, 0, 1]) / two], axis=1)
    a00 = g[:, 1, 0] - two * g[:, 1, 1] + g[:, 1, 2]
    a01 = (g[:, 2, 2] - g[:, 2, 0] - g[:, 0, 2] + g[:, 0, 0]) / four
    a11 = g[:, 0, 1] - two * g[:, 1, 1] + g[:, 2, 1]
    cross = a00 * a11
    det = cross - a01 * a01
    solvable = ~(np.abs(det) < _F32(tolerance) + _F32(tolerance) * cross)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.stack([(a11 * b[:, 0] - a01 * b[:, 1]) / det,
                          (a00 * b[:, 1] - a01 * b[:, 0]) / det], axis=1)
    delta = np.where(solvable[:, None], delta, _F32(0)).astype(_F32)
    peak = np.abs(delta).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.where((peak > _F32(1.5))[:, None], delta * (_F32(1.5) / peak)[:, None], delta)
    quad = ((a00 * delta[:, 0] + a01 * delta[:, 1]) * delta[:, 0]
            + (a01 * delta[:, 0] + a11 * delta[:, 1]) * delta[:, 1])
    score = g[:, 1, 1] - b[:, 0] * delta[:, 0] - b[:, 1] * delta[:, 1] + quad / two
    return delta, np.where(solvable, score, g[:, 1, 1]).astype(_F32)


def heatmap_keypoints(heat: np.ndarray, boxes: np.ndarray, tolerance: float):
    """(scores [N, K], keypoints [N, K, 2]) for NHWC heatmaps [N, S, S, K], float32."""
    n, size, _, k = heat.shape
    flat = heat.transpose(0, 3, 1, 2).reshape(n * k, size * size)
    best = np.argmax(flat, axis=1)
    row, col = best // size, best % size
    offsets = np.arange(-1, 2)
    rows = row[:, None] + offsets
    cols = col[:, None] + offsets
    rows = np.where(rows < 0, 1, np.where(rows >= size, size - 2, rows))
    cols = np.where(cols < 0, 1, np.where(cols >= size, size - 2, cols))
    maps = flat.reshape(n * k, size, size)
    grid = maps[np.arange(n * k)[:, None, None], rows[:, :, None], cols[:, None, :]]
    delta, score = _refine(grid, tolerance)
    box = np.repeat(boxes.astype(_F32), k, axis=0)
    rel_x = (col.astype(_F32) + delta[:, 0] + _F32(0.5)) / _F32(size)
    rel_y = (row.astype(_F32) + delta[:, 1] + _F32(0.5)) / _F32(size)
    x = rel_x * (box[:, 2] - box[:, 0]) + box[:, 0]
    y = rel_y * (box[:, 3] - box[:, 1]) + box[:, 1]
    return score.reshape(n, k), np.stack([x, y], axis=1).reshape(n, k, 2).astype(_F32)


def _execute_heatmap(ctx: OpContext) -> list:
    heat = to_float(to_nhwc(ctx.inputs[0], bool(ctx.inputs[2])), ctx.input_operands[0])
    boxes = to_float(ctx.inputs[1], ctx.input_operands[1]).reshape(-1, 4)
    expect(heat.shape[1] == heat.shape[2] and heat.shape[1] >= 2,
           f"input 0: heatmaps must be square and at least 2x2, got {list(heat.shape)}")
    expect(len(boxes) == heat.shape[0], "input 1: one box per heatmap expected")
    expect(bool((boxes[:, 0] < boxes[:, 2]).all() and (boxes[:, 1] < boxes[:, 3]).all()),
           "input 1: box with x2 <= x1 or y2 <= y1")
    tolerance = 1e-3 if ctx.inputs[0].dtype == np.float16 else 1e-5
    scores, points = heatmap_keypoints(heat, boxes, tolerance)
    return [from_float(scores, ctx.output_operands[0]), from_float(points, ctx.output_operands[1])]


def _validate_heatmap(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 3, "inputs")
    expect_count(outputs, 2, "outputs")
    kind = expect_type(inputs, 0, _FLOATS + _QUANT8)
    box_type = T.TENSOR_QUANT16_ASYMM if kind in _QUANT8 else kind
    expect_type(inputs, 1, box_type)
    expect_type(inputs, 2, T.BOOL)
    expect_type(outputs, 0, kind, "output")
    expect_type(outputs, 1, box_type, "output")


register(OperationType.AXIS_ALIGNED_BBOX_TRANSFORM, "detection", _validate_bbox, _execute_bbox)
register(OperationType.GENERATE_PROPOSALS, "detection", _validate_proposals, _execute_proposals)
register(OperationType.HEATMAP_MAX_KEYPOINT, "detection", _validate_heatmap, _execute_heatmap)
