"""TRANSPOSE_CONV_2D and GROUPED_CONV_2D against every runnable NNAPI CTS vector (also with
output shapes left unknown), plus naive-loop oracles for the scatter and the groups."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType, Operation
from nnscope.runtime.ops.convolution import conv2d_float
from nnscope.runtime.ops.window import Window
from nnscope.runtime.ops.registry import OpContext
from nnscope.runtime.ops.transpose_conv import (_execute_transpose, grouped_conv, transpose_conv_taps,
                                        transpose_padding)
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.TRANSPOSE_CONV_2D, OperationType.GROUPED_CONV_2D})
#: Vectors per operation when this was written (all of them).
MIN_PASSED = {"TRANSPOSE_CONV_2D": 792, "GROUPED_CONV_2D": 464}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)


def _naive_transpose(x, w, stride, pads, out_hw):
    """AOSP's loop: every input pixel adds x * filter at origin (h * stride - pad_top, ...)."""
    out = np.zeros((x.shape[0], *out_hw, w.shape[0]))
    for n, h, wi, i, j in np.ndindex(x.shape[0], x.shape[1], x.shape[2], w.shape[1], w.shape[2]):
        oh, ow = h * stride[0] - pads[0] + i, wi * stride[1] - pads[2] + j
        if 0 <= oh < out_hw[0] and 0 <= ow < out_hw[1]:
            out[n, oh, ow] += w[:, i, j] @ x[n, h, wi]
    return out


@pytest.mark.parametrize("stride, pads, out_hw", [((2, 2), (0, 0, 0, 0), (7, 9)),
                                                  ((2, 3), (1, 0, 2, 1), (6, 9)),
                                                  ((3, 1), (1, -2, 0, -1), (10, 7))])
def test_scatter_matches_aosp_loop_including_negative_tail_padding(stride, pads, out_hw):
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(4, 3, 3, 5))
    np.testing.assert_allclose(transpose_conv_taps(x, w, stride, pads, out_hw),
                               _naive_transpose(x, w, stride, pads, out_hw), atol=1e-12)


def test_implicit_same_padding_can_leave_a_negative_tail():
    assert transpose_padding(4, 2, 3, 1) == (0, 1)   # 2 tiles span 5 rows: one to cut
    assert transpose_padding(4, 2, 1, 1) == (0, -1)  # kernel shorter than the stride
    assert transpose_padding(8, 2, 5, 2) == (0, 0)   # VALID


def test_quant8_transpose_conv_is_exact_and_requantized():
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, (1, 3, 3, 4)).astype(np.uint8)
    w = rng.integers(0, 256, (2, 3, 3, 4)).astype(np.uint8)
    bias = np.int32([100, -100])
    ops = [Operand(T.TENSOR_QUANT8_ASYMM, x.shape, 0.5, 120),
           Operand(T.TENSOR_QUANT8_ASYMM, w.shape, 0.25, 130),
           Operand(T.TENSOR_INT32, (2,), 0.125)] + [Operand(T.INT32)] * 7 + [Operand(T.BOOL)]
    out = Operand(T.TENSOR_QUANT8_ASYMM, (1, 7, 7, 2), 64.0, 128)
    ctx = OpContext(Operation(OperationType.TRANSPOSE_CONV_2D, tuple(range(11)), (11,)),
                    [x, w, bias, 0, 0, 0, 0, 2, 2, 0, False], ops, [out])
    got = _execute_transpose(ctx)[0]
    exact = _naive_transpose(x.astype(np.int64) - 120, w.astype(np.int64) - 130, (2, 2),
                             (0, 0, 0, 0), (7, 7)) + bias
    expected = np.clip(np.floor(exact * 0.125 / 64.0 + 0.5) + 128, 0, 255)
    assert np.abs(got.astype(int) - expected).max() <= 1


def test_grouped_conv_is_one_conv_per_group():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1, 5, 5, 6)).astype(np.float32)
    w = rng.normal(size=(6, 3, 3, 2)).astype(np.float32)
    window = Window((3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
    got = grouped_conv(x, w, window, 3)
    expected = np.concatenate(
        [conv2d_float(np.ascontiguousarray(x[..., 2 * g:2 * g + 2]), w[2 * g:2 * g + 2],
                      np.zeros(2, np.float32), window) for g in range(3)], axis=3)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # group g sees only its own input channels: zeroing group 0's input leaves groups 1, 2
    x[..., :2] = 0
    np.testing.assert_allclose(grouped_conv(x, w, window, 3)[..., 2:], got[..., 2:], atol=1e-5)
