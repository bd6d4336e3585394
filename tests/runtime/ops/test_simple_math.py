"""ABS .. FLOOR, POW, MAXIMUM, MINIMUM, CAST, RANK and FILL against every runnable NNAPI CTS
vector (also with output shapes left unknown), plus CAST's truncation and saturation,
requantizing MAXIMUM and int32 wrap-around."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType as O
from nnscope.runtime.ops.registry import OpValidationError
from tests.runtime.ops.test_core_family_kernels import run
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({O.ABS, O.NEG, O.EXP, O.LOG, O.RSQRT, O.SIN, O.SQRT, O.FLOOR, O.POW, O.MAXIMUM,
                 O.MINIMUM, O.CAST, O.RANK, O.FILL})
#: Tests per operation in the vectors when this was written (all pass).
MIN_PASSED = {"ABS": 4, "NEG": 4, "EXP": 3, "LOG": 3, "RSQRT": 3, "SIN": 3, "SQRT": 3,
              "FLOOR": 6, "POW": 24, "MAXIMUM": 26, "MINIMUM": 26, "CAST": 62, "RANK": 19,
              "FILL": 10}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)


def test_cast_float_truncates_and_saturates_to_quant8():
    f = Operand(T.TENSOR_FLOAT32, (5,))
    x = np.float32([-3.7, 0.9, 1.5, 254.9, 400.0])
    u8 = Operand(T.TENSOR_QUANT8_ASYMM, (5,), scale=4.0, zero_point=100)  # parameters ignored
    assert run(O.CAST, [x], [f], [u8]).tolist() == [0, 0, 1, 254, 255]
    assert run(O.CAST, [x], [f], [Operand(T.TENSOR_INT32, (5,))]).tolist() == [-3, 0, 1, 254, 400]


def test_cast_rejects_another_shape_and_a_type_change_of_identity_types():
    with pytest.raises(OpValidationError, match="differs from input shape"):
        run(O.CAST, [np.int32([1, 2])], [Operand(T.TENSOR_INT32, (2,))],
            [Operand(T.TENSOR_FLOAT32, (3,))])
    with pytest.raises(OpValidationError, match="output 0"):
        run(O.CAST, [np.bool_([1, 0])], [Operand(T.TENSOR_BOOL8, (2,))],
            [Operand(T.TENSOR_INT32, (2,))])


def test_quant8_maximum_compares_after_requantizing_to_the_output():
    a = Operand(T.TENSOR_QUANT8_ASYMM, (2,), scale=1.0, zero_point=0)
    b = Operand(T.TENSOR_QUANT8_ASYMM, (2,), scale=0.5, zero_point=128)
    out = Operand(T.TENSOR_QUANT8_ASYMM, (2,), scale=2.0, zero_point=10)
    # a: 6, 40 ; b: 0.5*(160-128)=16, 0.5*(100-128)=-14 ; max 16, 40 -> 8+10, 20+10
    result = run(O.MAXIMUM, [np.uint8([6, 40]), np.uint8([160, 100])], [a, b], [out])
    assert result.tolist() == [18, 30]


def test_int32_abs_and_neg_wrap_like_cpp():
    i = Operand(T.TENSOR_INT32, (3,))
    x = np.int32([-5, 7, -2**31])
    assert run(O.ABS, [x], [i], [i]).tolist() == [5, 7, -2**31]
    assert run(O.NEG, [x], [i], [i]).tolist() == [5, -7, -2**31]


def test_rank_and_fill():
    q = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (1, 2, 3), scale=1.0)
    assert int(run(O.RANK, [np.zeros((1, 2, 3), np.int8)], [q], [Operand(T.INT32)])) == 3
    out = run(O.FILL, [np.int32([2, 3]), 1.5], [Operand(T.TENSOR_INT32, (2,)), Operand(T.FLOAT16)],
              [Operand(T.TENSOR_FLOAT16, (2, 3))])
    assert out.dtype == np.float16 and out.tolist() == [[1.5] * 3] * 2
