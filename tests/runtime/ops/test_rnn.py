"""RNN, UNIDIRECTIONAL/BIDIRECTIONAL_SEQUENCE_RNN and SVDF against every runnable NNAPI CTS vector
(also with output shapes left unknown), plus hand-computed steps, batch-major layout, aux-input
linking and the SVDF state shift."""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType
from nnscope.runtime.ops.registry import OpContext
from nnscope.runtime.ops.rnn import _execute_bidirectional, _execute_unidirectional, rnn_step, svdf
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.RNN, OperationType.UNIDIRECTIONAL_SEQUENCE_RNN,
                 OperationType.BIDIRECTIONAL_SEQUENCE_RNN, OperationType.SVDF})
MIN_PASSED = {"RNN": 10, "UNIDIRECTIONAL_SEQUENCE_RNN": 24, "BIDIRECTIONAL_SEQUENCE_RNN": 90,
              "SVDF": 22}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

RNG = np.random.default_rng(3)


def _ctx(op, inputs, n_out):
    operands = [Operand(T.TENSOR_FLOAT32) for _ in inputs]
    return OpContext(Operation(op, tuple(range(len(inputs))), ()), inputs, operands,
                     [Operand(T.TENSOR_FLOAT32)] * n_out)


def _params(units, size):
    m = lambda *shape: RNG.uniform(-0.5, 0.5, shape).astype(np.float32)  # noqa: E731
    return [m(units, size), m(units, units), m(units), np.zeros((2, units), np.float32)]


def test_rnn_step_by_hand_with_relu():
    x = np.float32([[1, 2]])
    w, r = np.float32([[1, 0], [0, -1]]), np.float32([[0.5, 0], [0, 0.5]])
    out = rnn_step(x, np.float32([[2, 2]]), w, r, np.float32([0, 0.5]), 1)
    assert out.tolist() == [[2.0, 0.0]]  # [1 + 1 + 0, max(-2 + 1 + 0.5, 0)]


def test_sequence_rnn_batch_major_matches_time_major_and_returns_the_last_state():
    params = _params(3, 2)
    xs = RNG.uniform(-1, 1, (4, 2, 2)).astype(np.float32)
    time_major, h = _execute_unidirectional(_ctx(OperationType.UNIDIRECTIONAL_SEQUENCE_RNN,
                                                 [xs, *params, 3, 1], 2))
    batch_major = _execute_unidirectional(_ctx(OperationType.UNIDIRECTIONAL_SEQUENCE_RNN,
                                               [xs.transpose(1, 0, 2).copy(), *params, 3, 0], 1))[0]
    assert np.allclose(batch_major.transpose(1, 0, 2), time_major)
    assert np.allclose(h, time_major[-1]) and time_major.max() <= 6


def test_bidirectional_rnn_aux_input_without_weights_feeds_the_backward_cell():
    fw, bw = _params(3, 2), _params(3, 2)
    xs, aux = (RNG.uniform(-1, 1, (4, 2, 2)).astype(np.float32) for _ in range(2))
    linked = _execute_bidirectional(_ctx(OperationType.BIDIRECTIONAL_SEQUENCE_RNN,
                                         [xs, *fw, *bw, aux, None, None, 0, True, False], 2))
    uni = lambda x, p: _execute_unidirectional(_ctx(  # noqa: E731
        OperationType.UNIDIRECTIONAL_SEQUENCE_RNN, [x, *p, 0, 1], 1))[0]
    assert np.allclose(linked[0], uni(xs, fw), atol=1e-6)
    assert np.allclose(linked[1], uni(aux[::-1], bw)[::-1], atol=1e-6)


def test_svdf_writes_the_newest_column_then_shifts_the_state_left():
    x = np.float32([[1, 2]])
    features = np.float32([[1, 1], [0, 1]])           # 2 filters, rank 1 -> 2 units
    times = np.float32([[1, 10, 100], [1, 1, 1]])     # memory 3
    state = np.float32([[5, 6, 0, 7, 8, 0]])
    new_state, output = svdf(x, features, times, np.float32([0, 1]), state, 1, 0)
    assert new_state.tolist() == [[6, 3, 0, 8, 2, 0]]
    assert output.tolist() == [[5 + 60 + 300, 7 + 8 + 2 + 1]]
