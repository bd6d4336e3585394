"""SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, DEPTH_TO_SPACE, SPACE_TO_DEPTH and CHANNEL_SHUFFLE
against every runnable NNAPI CTS vector (also with output shapes left unknown), plus NCHW
against NHWC, the quant8 pad value, round trips and negative axes."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType as O
from nnscope.runtime.ops.registry import OpValidationError
from nnscope.runtime.ops.space import batch_to_space, space_to_batch
from tests.runtime.ops.test_core_family_kernels import run
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({O.SPACE_TO_BATCH_ND, O.BATCH_TO_SPACE_ND, O.DEPTH_TO_SPACE, O.SPACE_TO_DEPTH,
                 O.CHANNEL_SHUFFLE})
#: Tests per operation in the vectors when this was written (all pass).
MIN_PASSED = {"SPACE_TO_BATCH_ND": 224, "BATCH_TO_SPACE_ND": 64, "DEPTH_TO_SPACE": 80,
              "SPACE_TO_DEPTH": 80, "CHANNEL_SHUFFLE": 200}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

X = np.arange(2 * 4 * 6 * 4, dtype=np.float32).reshape(2, 4, 6, 4)
F = Operand(T.TENSOR_FLOAT32, (2, 4, 6, 4))
I, B, V2 = Operand(T.INT32), Operand(T.BOOL), Operand(T.TENSOR_INT32, (2,))
PADS = Operand(T.TENSOR_INT32, (2, 2))


@pytest.mark.parametrize("op_type, args, params", [
    (O.SPACE_TO_DEPTH, [2], [I]), (O.DEPTH_TO_SPACE, [2], [I]),
    (O.SPACE_TO_BATCH_ND, [np.int32([2, 3]), np.int32([[1, 1], [0, 3]])], [V2, PADS]),
    (O.BATCH_TO_SPACE_ND, [np.int32([1, 2])], [V2]),
])
def test_nchw_equals_nhwc_transposed(op_type, args, params):
    nhwc = run(op_type, [X, *args, False], [F, *params, B], [F])
    nchw = run(op_type, [X.transpose(0, 3, 1, 2).copy(), *args, True], [F, *params, B], [F])
    np.testing.assert_array_equal(nchw, nhwc.transpose(0, 3, 1, 2))


def test_space_to_batch_pads_quant8_with_the_zero_point_and_round_trips():
    q = Operand(T.TENSOR_QUANT8_ASYMM, (1, 2, 2, 1), scale=0.5, zero_point=77)
    x = np.uint8([[[[1], [2]], [[3], [4]]]])
    out = run(O.SPACE_TO_BATCH_ND, [x, np.int32([2, 2]), np.int32([[0, 0], [0, 2]])],
              [q, V2, PADS], [q])
    assert out.shape == (4, 1, 2, 1)
    assert out[:, 0, :, 0].tolist() == [[1, 77], [2, 77], [3, 77], [4, 77]]
    tiles = space_to_batch(X, 2, 3, [[0, 0], [0, 0]], 0)
    np.testing.assert_array_equal(batch_to_space(tiles, 2, 3), X)


def test_depth_to_space_uses_tflite_depth_order():
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 1, 8)  # block 2, depth 2
    out = run(O.DEPTH_TO_SPACE, [x, 2], [Operand(T.TENSOR_FLOAT32, (1, 1, 1, 8)), I], [F])
    assert out[0, :, :, 0].tolist() == [[0, 2], [4, 6]]
    with pytest.raises(OpValidationError, match="depth 4 is not a multiple of block 3"):
        run(O.DEPTH_TO_SPACE, [X, 3], [F, I], [F])


def test_channel_shuffle_negative_axis():
    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    f = Operand(T.TENSOR_FLOAT32, (1, 6))
    assert run(O.CHANNEL_SHUFFLE, [x, 2, -1], [f, I, I], [f]).tolist() == [[0, 3, 1, 4, 2, 5]]
    with pytest.raises(OpValidationError, match="do not split into 4 groups"):
        run(O.CHANNEL_SHUFFLE, [x, 4, -1], [f, I, I], [f])
