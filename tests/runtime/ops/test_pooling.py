"""AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D against every runnable NNAPI CTS vector (also
with output shapes left unknown), plus the shared window geometry and validation."""
from __future__ import annotations

import re

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType, PaddingCode
from nnscope.runtime.ops import registry
from nnscope.runtime.ops.pooling import POOL_NAMES, average_pool_quant, max_pool
from nnscope.runtime.ops.window import Window, implicit_padding, is_implicit, read_window
from nnscope.runtime.ops.registry import OpValidationError
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.AVERAGE_POOL_2D, OperationType.MAX_POOL_2D,
                 OperationType.L2_POOL_2D})
#: Passing tests per operation when this was written (the rest use BOX_WITH_NMS_LIMIT and
#: ROI_ALIGN for zero-sized inputs, which another family provides).
MIN_PASSED = {"AVERAGE_POOL_2D": 142, "MAX_POOL_2D": 112, "L2_POOL_2D": 48}


test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)


@pytest.mark.parametrize("size, stride, dilation, kernel, code, expected", [
    (5, 1, 1, 3, PaddingCode.SAME, (1, 1)),
    (6, 2, 1, 3, PaddingCode.SAME, (0, 1)),   # AOSP puts the odd cell at the tail
    (7, 2, 2, 3, PaddingCode.SAME, (2, 2)),   # dilated: effective kernel 5
    (5, 1, 1, 3, PaddingCode.VALID, (0, 0)),
    (3, 4, 1, 1, PaddingCode.SAME, (0, 0)),
])
def test_implicit_padding_matches_aosp(size, stride, dilation, kernel, code, expected):
    assert implicit_padding(size, stride, dilation, kernel, code) == expected


def test_padding_code_must_be_same_or_valid():
    with pytest.raises(OpValidationError, match="padding code 3"):
        implicit_padding(5, 1, 1, 3, 3)


def test_implicit_form_is_recognised_by_count_or_bool_layout():
    ints, flag = Operand(T.INT32), Operand(T.BOOL)
    assert is_implicit(7, [ints] * 7, 7)
    assert is_implicit(8, [ints] * 7 + [flag], 7)
    assert not is_implicit(10, [ints] * 10, 7)


def test_average_pool_excludes_padding_and_rounds_half_away_from_zero():
    x = np.array([[1, 2], [4, 5]], np.int8).reshape(1, 2, 2, 1)
    window = read_window([x, 1, 1, 1, 2, 2, 0], 1, POOL_NAMES, False, (2, 2), (2, 2))
    assert window.pads == (0, 1, 0, 1)
    # SAME, stride 1: windows hold 4, 2, 2 and 1 real cells (12/4, 7/2, 9/2, 5/1)
    assert average_pool_quant(x, window).ravel().tolist() == [3, 4, 5, 5]
    assert average_pool_quant(-x, window).ravel().tolist() == [-3, -4, -5, -5]
    corner = Window((2, 2), (1, 1), (1, 1), (1, 0, 1, 0))
    assert average_pool_quant(np.array([[[[5], [6]], [[7], [8]]]], np.int8),
                              corner)[0, 0, 0, 0] == 5  # only one real cell under the window


def test_max_pool_ignores_padding_for_negative_inputs():
    x = -np.arange(1, 5, dtype=np.float32).reshape(1, 2, 2, 1)
    window = Window((3, 3), (1, 1), (1, 1), (1, 1, 1, 1))
    assert max_pool(x, window).ravel().tolist() == [-1.0] * 4


def _pool_operands(count, input_type=T.TENSOR_FLOAT32):
    return ([Operand(input_type, (1, 4, 4, 1))] + [Operand(T.INT32)] * (count - 1),
            [Operand(input_type, (1, 2, 2, 1))])


@pytest.mark.parametrize("count", [7, 8, 10, 11])
def test_pool_validator_accepts_every_signature(count):
    inputs, outputs = _pool_operands(count)
    if count in (8, 11):
        inputs[-1] = Operand(T.BOOL)
    registry.get(OperationType.MAX_POOL_2D).validate(inputs, outputs)


@pytest.mark.parametrize("op, inputs, message", [
    (OperationType.MAX_POOL_2D, _pool_operands(9)[0], "expected 7 or 8 or 10 or 11 inputs, got 9"),
    (OperationType.L2_POOL_2D, _pool_operands(7, T.TENSOR_QUANT8_ASYMM)[0],
     "input 0: expected TENSOR_FLOAT32|TENSOR_FLOAT16, got TENSOR_QUANT8_ASYMM"),
    (OperationType.AVERAGE_POOL_2D,
     [Operand(T.TENSOR_FLOAT32, (4, 4, 1))] + _pool_operands(7)[0][1:], "input 0: expected rank 4"),
    (OperationType.AVERAGE_POOL_2D, _pool_operands(7)[0][:3] + [Operand(T.FLOAT32)]
     + _pool_operands(7)[0][4:], "input 3: expected INT32"),
])
def test_pool_validator_names_the_bad_input(op, inputs, message):
    outputs = [Operand(inputs[0].type, (1, 2, 2, 1))]
    with pytest.raises(OpValidationError, match=re.escape(message)):
        registry.get(op).validate(inputs, outputs)
