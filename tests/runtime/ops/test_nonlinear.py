"""HARD_SWISH, ELU, PRELU and LOG_SOFTMAX against every runnable NNAPI CTS vector (also with
output shapes left unknown), plus quant8 PRELU's fixed-point rescaling and LOG_SOFTMAX's axis."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType as O
from nnscope.runtime.ops.registry import OpValidationError
from tests.runtime.ops.test_core_family_kernels import run
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({O.HARD_SWISH, O.ELU, O.PRELU, O.LOG_SOFTMAX})
#: Tests per operation in the vectors when this was written (all pass).
MIN_PASSED = {"HARD_SWISH": 21, "ELU": 15, "PRELU": 44, "LOG_SOFTMAX": 12}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

U8 = T.TENSOR_QUANT8_ASYMM


def test_quant8_prelu_rescales_both_branches():
    x_op = Operand(U8, (2, 2), scale=0.5, zero_point=128)
    alpha_op = Operand(U8, (2,), scale=0.1, zero_point=50)
    out = Operand(U8, (2, 2), scale=0.25, zero_point=120)
    x, alpha = np.uint8([[100, 200], [128, 127]]), np.uint8([60, 40])
    result = run(O.PRELU, [x, alpha], [x_op, alpha_op], [out])
    # -14 * 1.0 -> -56 steps; 36 -> 144 steps (saturates); 0 -> 0; -0.5 * -1.0 -> +2 steps
    assert result.tolist() == [[64, 255], [120, 122]]


def test_quant8_prelu_is_within_one_step_of_the_real_result():
    rng = np.random.default_rng(5)
    x_op = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (4, 8), scale=0.07, zero_point=-3)
    alpha_op = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (8,), scale=0.01, zero_point=4)
    out = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (4, 8), scale=0.05, zero_point=-10)
    x = rng.integers(-128, 128, (4, 8)).astype(np.int8)
    alpha = rng.integers(-128, 128, 8).astype(np.int8)
    result = run(O.PRELU, [x, alpha], [x_op, alpha_op], [out]).astype(int)
    real_x, real_a = 0.07 * (x.astype(int) + 3), 0.01 * (alpha.astype(int) - 4)
    expected = np.clip(np.round(np.where(real_x >= 0, real_x, real_x * real_a) / 0.05) - 10,
                       -128, 127)
    assert np.abs(result - expected).max() <= 1


def test_hard_swish_quant8_follows_the_float_curve():
    op = Operand(U8, (6,), scale=0.1, zero_point=100)
    out = Operand(U8, (6,), scale=0.05, zero_point=60)
    x = np.uint8([0, 60, 70, 100, 130, 200])  # -10, -4, -3, 0, 3, 10
    result = run(O.HARD_SWISH, [x], [op], [out])
    assert result.tolist() == [60, 60, 60, 60, 120, 255]


def test_log_softmax_negative_axis_and_beta():
    f = Operand(T.TENSOR_FLOAT32, (2, 3))
    x = np.float32([[1, 2, 3], [0, 0, 0]])
    result = run(O.LOG_SOFTMAX, [x, 2.0, -2], [f, Operand(T.FLOAT32), Operand(T.INT32)], [f])
    scaled = 2.0 * x
    expected = scaled - np.log(np.exp(scaled).sum(axis=0, keepdims=True))
    np.testing.assert_allclose(result, expected, rtol=6e-7, atol=1e-5)  # the CTS criteria
    with pytest.raises(OpValidationError, match="axis 2 out of range"):
        run(O.LOG_SOFTMAX, [x, 1.0, 2], [f, Operand(T.FLOAT32), Operand(T.INT32)], [f])


def test_elu_alpha_scalar_must_match_the_tensor_type():
    f16 = Operand(T.TENSOR_FLOAT16, (3,))
    out = run(O.ELU, [np.float16([-1, 0, 2]), 0.5], [f16, Operand(T.FLOAT16)], [f16])
    np.testing.assert_allclose(out, [0.5 * (np.exp(-1) - 1), 0, 2], rtol=1e-3)
    with pytest.raises(OpValidationError, match="input 1"):
        run(O.ELU, [np.float16([1]), 0.5], [f16, Operand(T.FLOAT32)], [f16])
