"""EQUAL .. GREATER_EQUAL, LOGICAL_AND/OR/NOT and SELECT against every runnable NNAPI CTS vector
(also with output shapes left unknown), plus quant8 real-value comparison and requantizing
SELECT."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType as O
from nnscope.runtime.ops.registry import OpValidationError
from tests.runtime.ops.test_core_family_kernels import run
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({O.EQUAL, O.NOT_EQUAL, O.LESS, O.LESS_EQUAL, O.GREATER, O.GREATER_EQUAL,
                 O.LOGICAL_AND, O.LOGICAL_OR, O.LOGICAL_NOT, O.SELECT})
#: Passing tests per operation when this was written (LESS, LESS_EQUAL and GREATER_EQUAL also
#: appear in WHILE conditions, which the control-flow family provides).
MIN_PASSED = {"EQUAL": 31, "NOT_EQUAL": 31, "LESS": 31, "LESS_EQUAL": 31, "GREATER": 31,
              "GREATER_EQUAL": 31, "LOGICAL_AND": 2, "LOGICAL_OR": 2, "LOGICAL_NOT": 1,
              "SELECT": 28}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

B8 = Operand(T.TENSOR_BOOL8, (3,))


def test_quant8_operands_compare_by_real_value():
    a = Operand(T.TENSOR_QUANT8_ASYMM, (3,), scale=1.0, zero_point=0)
    b = Operand(T.TENSOR_QUANT8_ASYMM, (3,), scale=2.0, zero_point=5)
    # a = 10, 20, 30 ; b = 2*(10-5)=10, 2*(12-5)=14, 2*(20-5)=30
    out = run(O.LESS, [np.uint8([10, 20, 30]), np.uint8([10, 12, 20])], [a, b], [B8])
    assert out.tolist() == [False, False, False]
    out = run(O.EQUAL, [np.uint8([10, 20, 30]), np.uint8([10, 12, 20])], [a, b], [B8])
    assert out.tolist() == [True, False, True]


def test_comparison_broadcasts_and_rejects_mismatched_shapes():
    f = Operand(T.TENSOR_FLOAT32, (2, 3))
    out = run(O.GREATER_EQUAL, [np.float32([[1, 2, 3], [4, 5, 6]]), np.float32([3])],
              [f, Operand(T.TENSOR_FLOAT32, (1,))], [Operand(T.TENSOR_BOOL8, (2, 3))])
    assert out.tolist() == [[False, False, True], [True, True, True]]
    with pytest.raises(OpValidationError, match="do not broadcast"):
        run(O.EQUAL, [np.float32([1, 2]), np.float32([1, 2, 3])], [f, f], [B8])


def test_select_requantizes_both_choices_to_the_output():
    a = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (3,), scale=0.5, zero_point=0)
    b = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (3,), scale=1.0, zero_point=-10)
    out = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (3,), scale=0.25, zero_point=3)
    result = run(O.SELECT, [np.bool_([True, False, True]), np.int8([4, 0, -120]),
                            np.int8([0, -8, 100])], [B8, a, b], [out])
    # a real 2.0 -> 8+3; b real 2.0 -> 8+3; a real -60 -> -240+3 saturates at -128
    assert result.tolist() == [11, 11, -128]


def test_select_needs_one_type_for_its_choices():
    f = Operand(T.TENSOR_FLOAT32, (3,))
    with pytest.raises(OpValidationError, match="input 2"):
        run(O.SELECT, [np.bool_([1, 0, 1]), np.float32([1, 2, 3]), np.int32([1, 2, 3])],
            [B8, f, Operand(T.TENSOR_INT32, (3,))], [f])
