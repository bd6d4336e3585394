"""EMBEDDING_LOOKUP, HASHTABLE_LOOKUP and RANDOM_MULTINOMIAL against every runnable NNAPI CTS
vector (also with output shapes left unknown), plus misses, bad indexes and seeded draws."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.cts.accuracy import check_multinomial
from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType
from nnscope.runtime.ops.lookup import _execute_embedding, _execute_multinomial, hashtable_lookup
from nnscope.runtime.ops.registry import OpContext, OpValidationError
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.EMBEDDING_LOOKUP, OperationType.HASHTABLE_LOOKUP,
                 OperationType.RANDOM_MULTINOMIAL})
MIN_PASSED = {"EMBEDDING_LOOKUP": 11, "HASHTABLE_LOOKUP": 6, "RANDOM_MULTINOMIAL": 2}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)


def test_hashtable_misses_give_zero_rows_and_unsorted_keys_still_match():
    rows, hits = hashtable_lookup(np.int32([9, 4, 1]), np.int32([4, 1, 7]),
                                  np.float32([[1, 1], [2, 2], [3, 3]]))
    assert hits.tolist() == [0, 1, 1] and rows.tolist() == [[0, 0], [1, 1], [2, 2]]


def test_embedding_index_outside_the_table_is_a_validation_error():
    ops = [Operand(T.TENSOR_INT32, (2,)), Operand(T.TENSOR_FLOAT32, (3, 2))]
    ctx = OpContext(Operation(OperationType.EMBEDDING_LOOKUP, (0, 1), (2,)),
                    [np.int32([0, 3]), np.zeros((3, 2), np.float32)], ops, [ops[1]])
    with pytest.raises(OpValidationError, match="outside"):
        _execute_embedding(ctx)


def _multinomial(logits, samples, seed):
    ops = [Operand(T.TENSOR_FLOAT32, logits.shape), Operand(T.INT32), Operand(T.TENSOR_INT32, (2,))]
    ctx = OpContext(Operation(OperationType.RANDOM_MULTINOMIAL, (0, 1, 2), (3,)),
                    [logits, samples, np.int32(seed)], ops, [Operand(T.TENSOR_INT32)])
    return _execute_multinomial(ctx)[0]


def test_multinomial_follows_the_softmax_and_the_seed():
    logits = np.log(np.float32([[0.1, 0.2, 0.7], [0.5, 0.5, 1e-30]]))
    draws = _multinomial(logits, 20000, [1, 2])
    assert draws.shape == (2, 20000) and set(np.unique(draws[1])) <= {0, 1}
    assert check_multinomial([logits], draws, 0.02) == []
    assert (draws == _multinomial(logits, 20000, [1, 2])).all()
    assert not (draws == _multinomial(logits, 20000, [1, 3])).all()
