"""MEAN, REDUCE_*, ARGMAX, ARGMIN and TOPK_V2 against every runnable NNAPI CTS vector (also with
output shapes left unknown), plus negative and repeated axes, keep_dims, the all-axes [1] shape,
quant8 MEAN requantization and tie order."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType as O, Operation
from nnscope.runtime.ops import registry
from nnscope.runtime.ops.registry import OpContext, OpValidationError
from tests.runtime.ops.test_core_family_kernels import run
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({O.MEAN, O.REDUCE_SUM, O.REDUCE_PROD, O.REDUCE_MAX, O.REDUCE_MIN, O.REDUCE_ALL,
                 O.REDUCE_ANY, O.ARGMAX, O.ARGMIN, O.TOPK_V2})
#: Tests per operation in the vectors when this was written (all pass).
MIN_PASSED = {"MEAN": 46, "REDUCE_SUM": 26, "REDUCE_PROD": 26, "REDUCE_MAX": 42, "REDUCE_MIN": 42,
              "REDUCE_ALL": 4, "REDUCE_ANY": 4, "ARGMAX": 35, "ARGMIN": 35, "TOPK_V2": 35}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
F = Operand(T.TENSOR_FLOAT32, (2, 3, 4))


def _reduce(op_type, x, axes, keep, operand=F, out=None, keep_type=T.BOOL):
    axes_op = Operand(T.TENSOR_INT32, (len(axes),))
    return run(op_type, [x, np.int32(axes), keep], [operand, axes_op, Operand(keep_type)],
               [out or Operand(operand.type, ())])


@pytest.mark.parametrize("keep", [False, True])
def test_negative_and_repeated_axes(keep):
    out = _reduce(O.REDUCE_SUM, X, [-1, 0, 2], keep)
    np.testing.assert_array_equal(out, X.sum(axis=(0, 2), keepdims=keep))


def test_reducing_every_axis_without_keep_dims_gives_shape_1():
    assert _reduce(O.REDUCE_MAX, X, [0, 1, 2], False).shape == (1,)
    assert _reduce(O.REDUCE_MAX, X, [0, 1, 2], True).shape == (1, 1, 1)
    with pytest.raises(OpValidationError, match="axis 3 out of range"):
        _reduce(O.REDUCE_MIN, X, [3], False)


def test_quant8_mean_requantizes_to_the_output_parameters():
    x_op = Operand(T.TENSOR_QUANT8_ASYMM, (1, 4), scale=0.5, zero_point=10)
    out = Operand(T.TENSOR_QUANT8_ASYMM, (1,), scale=0.25, zero_point=3)
    x = np.uint8([[10, 12, 14, 17]])  # reals 0, 1, 2, 3.5 -> mean 1.625 -> 6.5 steps
    result = _reduce(O.MEAN, x, [1], 0, x_op, out, keep_type=T.INT32)
    assert result.tolist() == [10]  # round half away: 7 + 3


def test_argmax_first_of_ties_and_topk_ties_in_index_order():
    i = Operand(T.TENSOR_INT32, (2, 3))
    x = np.int32([[1, 5, 5], [7, 7, 7]])
    assert run(O.ARGMAX, [x, -1], [i, Operand(T.INT32)], [Operand(T.TENSOR_INT32, (2,))]).tolist() \
        == [1, 0]
    record = registry.get(O.TOPK_V2)
    outs = [Operand(T.TENSOR_INT32, (2, 2)), Operand(T.TENSOR_INT32, (2, 2))]
    values, indices = record.execute(OpContext(Operation(O.TOPK_V2, (0, 1), (2, 3)), [x, 2],
                                               [i, Operand(T.INT32)], outs))
    assert values.tolist() == [[5, 5], [7, 7]] and indices.tolist() == [[1, 2], [0, 1]]


def test_topk_k_out_of_range_is_a_validation_error():
    u8 = Operand(T.TENSOR_QUANT8_ASYMM, (3,), scale=1.0)
    ctx = OpContext(Operation(O.TOPK_V2, (0, 1), (2, 3)), [np.uint8([3, 1, 2]), 4],
                    [u8, Operand(T.INT32)], [u8, Operand(T.TENSOR_INT32, (3,))])
    with pytest.raises(OpValidationError, match="k 4 not in"):
        registry.get(O.TOPK_V2).execute(ctx)


def test_reduce_all_and_any_on_bool8():
    b = Operand(T.TENSOR_BOOL8, (2, 2))
    x = np.bool_([[True, False], [True, True]])
    assert _reduce(O.REDUCE_ALL, x, [1], False, b).tolist() == [False, True]
    assert _reduce(O.REDUCE_ANY, x, [0], True, b).tolist() == [[True, True]]
