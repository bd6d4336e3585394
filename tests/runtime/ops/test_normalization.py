"""L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION and INSTANCE_NORMALIZATION against every
runnable NNAPI CTS vector (also with output shapes left unknown), plus the fixed-point inverse
square root and a loop oracle for the LRN window."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType
from nnscope.runtime.ops.normalization import (_execute_lrn, inv_sqrt_multiplier, l2_normalize_quant)
from nnscope.runtime.ops.registry import OpContext
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.L2_NORMALIZATION, OperationType.LOCAL_RESPONSE_NORMALIZATION,
                 OperationType.INSTANCE_NORMALIZATION})
MIN_PASSED = {"L2_NORMALIZATION": 274, "LOCAL_RESPONSE_NORMALIZATION": 266,
              "INSTANCE_NORMALIZATION": 36}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)


def test_inverse_sqrt_multiplier_approximates_one_over_sqrt():
    sums = np.array([2, 3, 25, 1000, 65025, 1 << 20, (1 << 29) + 7, 3 * (1 << 30)], np.int64)
    multiplier, shift = inv_sqrt_multiplier(sums)
    assert (shift <= 0).all() and (multiplier > 0).all()
    approx = multiplier / 2.0 ** 31 * 2.0 ** shift.astype(float)
    np.testing.assert_allclose(approx, 1 / np.sqrt(sums), rtol=1e-5)  # big sums lose bits to //4


def test_quant_l2_of_zeros_is_the_zero_point_and_unit_rows_hit_the_scale():
    assert l2_normalize_quant(np.zeros((1, 4), np.int64), 1, signed=False).tolist() == [[128] * 4]
    assert l2_normalize_quant(np.int64([[0, -7, 0]]), 1, signed=True).tolist() == [[0, -128, 0]]


def test_lrn_matches_a_loop_over_the_window():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 3, 7)).astype(np.float32)
    radius, bias, alpha, beta = 2, 1.5, 0.3, 0.75
    expected = np.empty_like(x)
    for i in np.ndindex(x.shape[:-1]):
        for c in range(x.shape[-1]):
            window = x[i][max(0, c - radius):c + radius + 1]
            expected[i][c] = x[i][c] * (bias + alpha * (window ** 2).sum()) ** -beta
    operand = Operand(T.TENSOR_FLOAT32, x.shape)
    ops = [operand, Operand(T.INT32)] + [Operand(T.FLOAT32)] * 3 + [Operand(T.INT32)]
    ctx = OpContext(Operation(OperationType.LOCAL_RESPONSE_NORMALIZATION, tuple(range(6)), (6,)),
                    [np.moveaxis(x, -1, 1).copy(), radius, bias, alpha, beta, 1], ops, [operand])
    got = np.moveaxis(_execute_lrn(ctx)[0], 1, -1)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
