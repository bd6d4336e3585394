"""SLICE, STRIDED_SLICE, GATHER, SPLIT, TILE, TRANSPOSE, SQUEEZE, EXPAND_DIMS and PAD_V2 against
every runnable NNAPI CTS vector (also with output shapes left unknown), plus STRIDED_SLICE's
masks and negative strides against numpy slicing, and the errors of bad indices."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
from nnscope.runtime.ops import registry
from nnscope.runtime.ops.registry import OpContext, OpValidationError
from tests.runtime.ops.test_core_family_kernels import run
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({O.SLICE, O.STRIDED_SLICE, O.GATHER, O.SPLIT, O.TILE, O.TRANSPOSE, O.SQUEEZE,
                 O.EXPAND_DIMS, O.PAD_V2})
#: Passing tests per operation when this was written (200 more SLICE tests sit in WHILE
#: bodies, which the control-flow family provides).
MIN_PASSED = {"SLICE": 46, "STRIDED_SLICE": 194, "GATHER": 97, "SPLIT": 62, "TILE": 32,
              "TRANSPOSE": 41, "SQUEEZE": 40, "EXPAND_DIMS": 44, "PAD_V2": 56}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

X = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
F = Operand(T.TENSOR_FLOAT32, (3, 4, 5))
V3 = Operand(T.TENSOR_INT32, (3,))
I = Operand(T.INT32)


def _strided(begin, end, strides, begin_mask=0, end_mask=0, shrink=0):
    inputs = [X, np.int32(begin), np.int32(end), np.int32(strides), begin_mask, end_mask, shrink]
    return run(O.STRIDED_SLICE, inputs, [F, V3, V3, V3, I, I, I], [Operand(T.TENSOR_FLOAT32, ())])


@pytest.mark.parametrize("args, expected", [
    (([0, 0, 0], [3, 4, 5], [1, 1, 1]), X),
    (([-1, 1, 4], [-4, 3, 0], [-1, 1, -2]), X[-1::-1, 1:3, 4:0:-2]),
    (([2, 0, 1], [0, 9, -1], [1, 2, 1], 0b001, 0b011), X[:, 0::2, 1:-1]),
    (([1, 2, 0], [2, 3, 5], [1, 1, 1], 0, 0, 0b011), X[1, 2, :]),
    (([0, 10, -10], [1, 12, 2], [1, 1, 1]), X[0:1, 4:4, 0:2]),
])
def test_strided_slice_matches_numpy(args, expected):
    np.testing.assert_array_equal(_strided(*args), expected)


def test_strided_slice_shrunk_axis_needs_one_element_and_a_positive_stride():
    with pytest.raises(OpValidationError, match="must select one element"):
        _strided([0, 0, 0], [2, 4, 5], [1, 1, 1], shrink=0b001)
    with pytest.raises(OpValidationError, match="positive stride"):
        _strided([1, 0, 0], [0, 4, 5], [-1, 1, 1], shrink=0b001)


def test_gather_with_negative_axis_and_index_check():
    idx = Operand(T.TENSOR_INT32, (2, 2))
    out = run(O.GATHER, [X, -2, np.int32([[3, 0], [1, 1]])], [F, I, idx], [F])
    np.testing.assert_array_equal(out, X[:, [[3, 0], [1, 1]], :])
    with pytest.raises(OpValidationError, match=r"indices must be in \[0, 4\)"):
        run(O.GATHER, [X, 1, np.int32([[4, 0], [0, 0]])], [F, I, idx], [F])


def test_split_squeeze_expand_dims():
    record = registry.get(O.SPLIT)
    ctx = OpContext(Operation(O.SPLIT, (0, 1, 2), (3, 4)), [X, -1, 2], [F, I, I], [F, F])
    with pytest.raises(OpValidationError, match="does not split into 2"):
        record.execute(ctx)
    ctx = OpContext(Operation(O.SPLIT, (0, 1, 2), (3, 4)), [X, 1, 2], [F, I, I], [F, F])
    first, second = record.execute(ctx)
    np.testing.assert_array_equal(second, X[:, 2:])
    one = np.float32([[[7]]])
    assert run(O.SQUEEZE, [one, None], [Operand(T.TENSOR_FLOAT32, (1, 1, 1)), V3],
               [F]).shape == (1,)
    with pytest.raises(OpValidationError, match="has size 4, not 1"):
        run(O.SQUEEZE, [X, np.int32([1])], [F, Operand(T.TENSOR_INT32, (1,))], [F])
    assert run(O.EXPAND_DIMS, [X, -1], [F, I], [F]).shape == (3, 4, 5, 1)


def test_pad_v2_quant8_value_is_a_stored_value_and_transpose_defaults_to_reversal():
    q = Operand(T.TENSOR_QUANT8_ASYMM, (1, 2), scale=0.5, zero_point=100)
    pads = Operand(T.TENSOR_INT32, (2, 2))
    out = run(O.PAD_V2, [np.uint8([[1, 2]]), np.int32([[0, 0], [1, 2]]), 7], [q, pads, I], [q])
    assert out.tolist() == [[7, 1, 2, 7, 7]]
    with pytest.raises(OpValidationError, match="pad value 300 outside"):
        run(O.PAD_V2, [np.uint8([[1, 2]]), np.int32([[0, 0], [1, 2]]), 300], [q, pads, I], [q])
    np.testing.assert_array_equal(run(O.TRANSPOSE, [X, None], [F, V3], [F]), X.T)
