"""BOX_WITH_NMS_LIMIT and DETECTION_POSTPROCESSING, plus the NMS both share with
GENERATE_PROPOSALS (AOSP ``GenerateProposals.cpp``).

NMS follows AOSP step for step, since ties and order decide which boxes survive: the best
remaining box (the first maximum) is swapped to the front, every other remaining box is
compared with it once, and a removed box is swapped with the last remaining one. IoU and soft
NMS score decay are float32. Quantized scores are dequantized to float32 and requantized
(round half away from zero) on output; boxes are copied unchanged.

BOX_WITH_NMS_LIMIT inputs: ``scores [R, C], rois [R, 4C], batch_split [R], score_threshold,
max_detections, kernel (0 hard, 1 linear, 2 gaussian), iou_threshold, sigma,
nms_score_threshold``; outputs ``scores [K], rois [K, 4], classes [K], batch_split [K]`` with K
known only at execution (class 0 is background and never output).
DETECTION_POSTPROCESSING inputs: ``scores [B, A, C], deltas [B, A, >=4], anchors [A, 4],
scale_y, scale_x, scale_h, scale_w, use_regular_nms, max_detections, max_classes_per_detection,
max_detections_per_class, score_threshold, iou_threshold, background_in_label``.

Example:
    >>> import numpy as np
    >>> boxes = np.float32([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]])
    >>> nms(np.float32([0.9, 0.8, 0.7]), [0, 1, 2], boxes, -1, hard_removal(0.5))
    [0, 2]
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops._common import expect, expect_count, expect_type, round_half_away
from nnscope.runtime.ops.registry import OpContext, register

_F32 = np.float32
_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_QUANT8 = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
#: A removal rule: (scores, candidate indexes, their IoUs with the kept box) -> removed mask.
Removal = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


# --------------------------------------------------------------------------- NMS
def iou(boxes: np.ndarray, box: np.ndarray) -> np.ndarray:
    """AOSP ``getIoUAxisAligned`` of every row of ``boxes`` [K, 4] with ``box`` (float32)."""
    area1 = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    area2 = (box[2] - box[0]) * (box[3] - box[1])
    w = np.maximum(np.minimum(boxes[:, 2], box[2]) - np.maximum(boxes[:, 0], box[0]), _F32(0))
    h = np.maximum(np.minimum(boxes[:, 3], box[3]) - np.maximum(boxes[:, 1], box[1]), _F32(0))
    inter = w * h
    with np.errstate(invalid="ignore", divide="ignore"):
        return inter / (area1 + area2 - inter)


def hard_removal(threshold: float) -> Removal:
    def removed(scores, candidates, ious):
        return ious >= _F32(threshold)
    return removed


def soft_removal(kernel: int, iou_threshold: float, sigma: float, score_threshold: float) -> Removal:
    """Soft NMS: decay the candidates' scores in place, remove those below the threshold."""
    expect(kernel in (0, 1, 2), f"unknown soft NMS kernel {kernel}")
    threshold = _F32(iou_threshold)

    def removed(scores, candidates, ious):
        if kernel == 0:
            decay = np.where(ious < threshold, _F32(1), _F32(0))
        elif kernel == 1:
            decay = np.where(ious < threshold, _F32(1), _F32(1) - ious)
        else:
            decay = np.exp(_F32(-1) * ious * ious / _F32(sigma))
        scores[candidates] = scores[candidates] * decay.astype(_F32)
        return scores[candidates] < _F32(score_threshold)
    return removed


def nms(scores: np.ndarray, select: Sequence[int], boxes: np.ndarray, max_detections: int,
        removal: Removal) -> list[int]:
    """AOSP's in-place single-class NMS over ``select``; returns the kept indexes in order.
    ``boxes[i]`` is the box of score index ``i``."""
    select = list(select)
    start, end = 0, len(select)
    limit = len(select) if max_detections < 0 else max_detections
    while start < end and start < limit:
        best = start + int(np.argmax(scores[select[start:end]]))
        select[start], select[best] = select[best], select[start]
        rest = np.asarray(select[start + 1:end], np.int64)
        gone = set(rest[removal(scores, rest, iou(boxes[rest], boxes[select[start]]))].tolist())
        index = start + 1
        while index < end:
            if select[index] in gone:
                end -= 1
                select[index], select[end] = select[end], select[index]
            else:
                index += 1
        start += 1
    return select[:start]


def multi_class_nms(scores: np.ndarray, classes: int, boxes: np.ndarray, score_threshold: float,
                    max_detections: int, per_class: int, removal: Removal) -> list[int]:
    """NMS per class 1..C-1 over flat ``scores`` [R * C], then the best ``max_detections``."""
    selected: list[int] = []
    for c in range(1, classes):
        candidates = np.nonzero(scores[c::classes] > _F32(score_threshold))[0] * classes + c
        selected += nms(scores, candidates.tolist(), boxes, per_class, removal)
    selected.sort(key=lambda i: -scores[i])
    return selected if max_detections < 0 else selected[:max_detections]


# --------------------------------------------------------------------------- BOX_WITH_NMS_LIMIT
def to_float(array: np.ndarray, operand: Operand) -> np.ndarray:
    """float32 values of a float or quantized tensor (``(q - zeroPoint) * scale``)."""
    if array.dtype.kind == "f":
        return array.astype(_F32)
    return (array.astype(_F32) - _F32(operand.zero_point)) * _F32(operand.scale)


def from_float(values: np.ndarray, operand: Operand) -> np.ndarray:
    """float32 values as ``operand``'s type (quantized: ``round(x / scale + zeroPoint)``)."""
    dtype = np.dtype({T.TENSOR_FLOAT32: np.float32, T.TENSOR_FLOAT16: np.float16,
                      T.TENSOR_QUANT8_ASYMM: np.uint8, T.TENSOR_QUANT8_ASYMM_SIGNED: np.int8,
                      T.TENSOR_QUANT16_ASYMM: np.uint16, T.TENSOR_QUANT16_SYMM: np.int16}[operand.type])
    if dtype.kind == "f":
        return values.astype(dtype)
    scaled = round_half_away(values.astype(_F32) / _F32(operand.scale) + _F32(operand.zero_point))
    info = np.iinfo(dtype)
    return np.clip(scaled, info.min, info.max).astype(dtype)


def batch_runs(batch_ids: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of each run of equal consecutive batch ids."""
    if batch_ids.size == 0:
        return []
    starts = [0] + (np.nonzero(np.diff(batch_ids))[0] + 1).tolist()
    return list(zip(starts, np.diff(starts + [batch_ids.size]).tolist()))


def _execute_box_nms(ctx: OpContext) -> list:
    scores_in, rois, batch_ids = ctx.inputs[:3]
    threshold, max_det, kernel, iou_thr, sigma, nms_thr = ctx.inputs[3:9]
    classes = scores_in.shape[1]
    scores = to_float(scores_in, ctx.input_operands[0]).reshape(-1)
    boxes = to_float(rois, ctx.input_operands[1]).reshape(-1, 4)
    expect(bool((boxes[:, 0] <= boxes[:, 2]).all() and (boxes[:, 1] <= boxes[:, 3]).all()),
           "input 1: box with x2 < x1 or y2 < y1")
    removal = soft_removal(int(kernel), iou_thr, sigma, nms_thr)
    picked: list[int] = []
    for start, length in batch_runs(np.asarray(batch_ids)):
        block = slice(start * classes, (start + length) * classes)
        kept = multi_class_nms(scores[block], classes, boxes[block], threshold, int(max_det),
                               int(max_det), removal)
        sub = scores[block]
        kept.sort(key=lambda i: (i % classes, -sub[i]))
        picked += [start * classes + i for i in kept]
    picked = np.asarray(picked, np.int64)
    return [from_float(scores[picked], ctx.output_operands[0]),
            rois.reshape(-1, 4)[picked].reshape(-1, 4),
            (picked % classes).astype(np.int32),
            np.asarray(batch_ids, np.int32)[picked // classes]]


def _validate_box_nms(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 9, "inputs")
    expect_count(outputs, 4, "outputs")
    score_type = expect_type(inputs, 0, _FLOATS + _QUANT8)
    roi_type = T.TENSOR_QUANT16_ASYMM if score_type in _QUANT8 else score_type
    scalar = T.FLOAT16 if score_type == T.TENSOR_FLOAT16 else T.FLOAT32
    for index, wanted in enumerate((roi_type, T.TENSOR_INT32, scalar, T.INT32, T.INT32, scalar,
                                    scalar, scalar), start=1):
        expect_type(inputs, index, wanted)
    for index, wanted in enumerate((score_type, roi_type, T.TENSOR_INT32, T.TENSOR_INT32)):
        expect_type(outputs, index, wanted, "output")
    _expect_ranks(inputs, (2, 2, 1))


def _expect_ranks(operands: Sequence[Operand], ranks: Sequence[int]) -> None:
    for index, rank in enumerate(ranks):
        actual = len(operands[index].dimensions)
        expect(actual in (0, rank), f"input {index}: expected rank {rank}, got {actual}")


# --------------------------------------------------------------------------- DETECTION_POSTPROCESSING
def decode_anchors(deltas: np.ndarray, anchors: np.ndarray, scales: Sequence[float]) -> np.ndarray:
    """Center-size decoding: anchors (y, x, h, w) + deltas -> boxes (y1, x1, y2, x2), float32."""
    sy, sx, sh, sw = (_F32(s) for s in scales)
    y = anchors[:, 0] + anchors[:, 2] * deltas[:, 0] / sy
    x = anchors[:, 1] + anchors[:, 3] * deltas[:, 1] / sx
    half_h = anchors[:, 2] * np.exp(deltas[:, 2] / sh) * _F32(0.5)
    half_w = anchors[:, 3] * np.exp(deltas[:, 3] / sw) * _F32(0.5)
    return np.stack([y - half_h, x - half_w, y + half_h, x + half_w], axis=1).astype(_F32)


def _postprocess_batch(scores, boxes, p: dict) -> tuple[list, list, list]:
    """(scores, boxes, classes) of one batch item, ``p`` holding the scalar inputs."""
    classes = scores.shape[1]
    flat = scores.reshape(-1)
    shift = 0 if p["bg_in_label"] else 1
    if p["regular"]:
        kept = multi_class_nms(flat, classes, np.repeat(boxes, classes, axis=0), p["threshold"],
                               p["max_det"], p["per_class"], hard_removal(p["iou"]))
        return ([flat[i] for i in kept], [boxes[i // classes] for i in kept],
                [i % classes - shift for i in kept])
    best = scores[:, 1:].max(axis=1)
    candidates = np.nonzero(best > _F32(p["threshold"]))[0].tolist()
    kept = nms(best, candidates, boxes, p["max_det"], hard_removal(p["iou"]))
    count = min(classes - 1, p["max_classes"])
    out = ([], [], [])
    for anchor in kept:
        order = 1 + np.argsort(-scores[anchor, 1:], kind="stable")[:count]
        out[0].extend(scores[anchor, order])
        out[1].extend([boxes[anchor]] * count)
        out[2].extend((order - shift).tolist())
    return out


def _execute_postprocess(ctx: OpContext) -> list:
    scores, deltas, anchors = (a.astype(_F32) for a in ctx.inputs[:3])
    names = ("regular", "max_det", "max_classes", "per_class", "threshold", "iou", "bg_in_label")
    p = dict(zip(names, ctx.inputs[7:14]))
    p.update(max_det=int(p["max_det"]), max_classes=int(p["max_classes"]),
             per_class=int(p["per_class"]))
    expect(p["max_det"] > 0 and (p["per_class"] > 0 if p["regular"] else p["max_classes"] > 0),
           "max detections (per class) must be positive")
    width = p["max_det"] * (1 if p["regular"] else p["max_classes"])
    batches = scores.shape[0]
    out_scores, out_boxes = np.zeros((batches, width), _F32), np.zeros((batches, width, 4), _F32)
    out_classes, counts = np.zeros((batches, width), np.int32), np.zeros(batches, np.int32)
    for b in range(batches):
        boxes = decode_anchors(deltas[b], anchors, ctx.inputs[3:7])
        kept_scores, kept_boxes, kept_classes = _postprocess_batch(scores[b], boxes, p)
        n = len(kept_scores)
        counts[b] = n
        if n:
            out_scores[b, :n], out_boxes[b, :n], out_classes[b, :n] = \
                kept_scores, np.stack(kept_boxes), kept_classes
    dtype = ctx.inputs[0].dtype
    return [out_scores.astype(dtype), out_boxes.astype(dtype), out_classes, counts]


def _validate_postprocess(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    expect_count(inputs, 14, "inputs")
    expect_count(outputs, 4, "outputs")
    kind = expect_type(inputs, 0, _FLOATS)
    scalar = T.FLOAT16 if kind == T.TENSOR_FLOAT16 else T.FLOAT32
    wanted = (kind, kind, scalar, scalar, scalar, scalar, T.BOOL, T.INT32, T.INT32, T.INT32,
              scalar, scalar, T.BOOL)
    for index, operand_type in enumerate(wanted, start=1):
        expect_type(inputs, index, operand_type)
    for index, operand_type in enumerate((kind, kind, T.TENSOR_INT32, T.TENSOR_INT32)):
        expect_type(outputs, index, operand_type, "output")
    _expect_ranks(inputs, (3, 3, 2))


register(OperationType.BOX_WITH_NMS_LIMIT, "detection", _validate_box_nms, _execute_box_nms)
register(OperationType.DETECTION_POSTPROCESSING, "detection", _validate_postprocess,
         _execute_postprocess)
