"""The detection family (ROI_ALIGN, ROI_POOLING, BOX_WITH_NMS_LIMIT, DETECTION_POSTPROCESSING,
AXIS_ALIGNED_BBOX_TRANSFORM, GENERATE_PROPOSALS, HEATMAP_MAX_KEYPOINT) against every runnable
NNAPI CTS vector (also with output shapes left unknown), plus NMS order and empty results."""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType
from nnscope.runtime.ops.detection import (_execute_box_nms, batch_runs, hard_removal, nms,
                                   soft_removal)
from nnscope.runtime.ops.proposals import heatmap_keypoints
from nnscope.runtime.ops.registry import OpContext
from nnscope.runtime.ops.roi import align_float, pool_roi
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.ROI_ALIGN, OperationType.ROI_POOLING,
                 OperationType.BOX_WITH_NMS_LIMIT, OperationType.DETECTION_POSTPROCESSING,
                 OperationType.AXIS_ALIGNED_BBOX_TRANSFORM, OperationType.GENERATE_PROPOSALS,
                 OperationType.HEATMAP_MAX_KEYPOINT})
MIN_PASSED = {"ROI_ALIGN": 345, "ROI_POOLING": 60, "BOX_WITH_NMS_LIMIT": 305,
              "DETECTION_POSTPROCESSING": 24, "AXIS_ALIGNED_BBOX_TRANSFORM": 25,
              "GENERATE_PROPOSALS": 45, "HEATMAP_MAX_KEYPOINT": 56}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

BOXES = np.float32([[0, 0, 10, 10], [0, 0, 10, 9], [20, 20, 30, 30], [0, 0, 10, 10]])


def test_hard_nms_keeps_the_first_of_equal_scores_and_removes_overlaps():
    scores = np.float32([0.5, 0.9, 0.9, 0.5])
    assert nms(scores, [0, 1, 2, 3], BOXES, -1, hard_removal(0.5)) == [1, 2]
    assert nms(scores, [0, 1, 2, 3], BOXES, 1, hard_removal(0.5)) == [1]
    assert nms(scores, [3, 0], BOXES, -1, hard_removal(0.5)) == [3]


def test_linear_soft_nms_decays_overlapping_scores_in_place():
    scores = np.float32([0.9, 0.8, 0.7, 0.1])
    kept = nms(scores, [0, 1, 2], BOXES, -1, soft_removal(1, 0.3, 0.5, 0.05))
    assert kept == [0, 2, 1]                       # box 1 (IoU 0.9) decays to 0.08
    np.testing.assert_allclose(scores[:3], [0.9, 0.08, 0.7], rtol=1e-5)


def test_batch_runs_follow_consecutive_ids():
    assert batch_runs(np.int32([0, 0, 2, 2, 2, 1])) == [(0, 2), (2, 3), (5, 1)]
    assert batch_runs(np.int32([])) == []


def _box_nms_context(scores, rois, batches):
    ins = [Operand(T.TENSOR_FLOAT32, scores.shape), Operand(T.TENSOR_FLOAT32, rois.shape),
           Operand(T.TENSOR_INT32, batches.shape)] + [Operand(T.FLOAT32), Operand(T.INT32),
                                                      Operand(T.INT32)] + [Operand(T.FLOAT32)] * 3
    outs = [Operand(T.TENSOR_FLOAT32, (0,)), Operand(T.TENSOR_FLOAT32, (0, 4)),
            Operand(T.TENSOR_INT32, (0,)), Operand(T.TENSOR_INT32, (0,))]
    return OpContext(Operation(OperationType.BOX_WITH_NMS_LIMIT, tuple(range(9)), (9, 10, 11, 12)),
                     [scores, rois, batches, 0.3, -1, 0, 0.4, 1.0, 0.3], ins, outs)


def test_box_with_nms_limit_sorts_by_class_and_gives_empty_outputs_when_nothing_passes():
    scores = np.float32([[0.1, 0.9, 0.2], [0.1, 0.4, 0.8]])
    rois = np.tile(np.float32([[0, 0, 10, 10]]), (2, 3)) + np.float32([[0] * 12, [50] * 12])
    out = _execute_box_nms(_box_nms_context(scores, rois, np.int32([3, 3])))
    assert out[2].tolist() == [1, 1, 2] and out[3].tolist() == [3, 3, 3]
    np.testing.assert_allclose(out[0], [0.9, 0.4, 0.8])
    empty = _execute_box_nms(_box_nms_context(scores * 0, rois, np.int32([0, 0])))
    assert [a.shape for a in empty] == [(0,), (0, 4), (0,), (0,)]


def test_roi_align_and_pooling_average_and_max_inside_the_box():
    feat = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
    whole = align_float(feat, np.float32([0, 0, 4, 4]), (1, 1), (4, 4))
    # samples at 0.5, 1.5, 2.5, 3.5 per axis; past the last cell AOSP clamps (3.5 -> 3)
    assert whole[0, 0, 0] == 5 * np.mean([0.5, 1.5, 2.5, 3.0])
    assert pool_roi(feat, np.float32([1, 1, 2, 2]), (1, 1), 0)[0, 0, 0] == 10


def test_heatmap_peak_on_a_quadratic_is_found_between_cells():
    yy, xx = np.mgrid[0:5, 0:5].astype(np.float32)
    heat = -((xx - 2.3) ** 2 + (yy - 1.6) ** 2)
    scores, points = heatmap_keypoints(heat[None, :, :, None], np.float32([[0, 0, 5, 5]]), 1e-5)
    np.testing.assert_allclose(points[0, 0], [2.8, 2.1], atol=1e-5)  # cell centre + 0.5
    np.testing.assert_allclose(scores[0, 0], 0.0, atol=1e-5)
