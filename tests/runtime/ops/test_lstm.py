"""LSTM, UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM against every runnable NNAPI
CTS vector (also with output shapes left unknown), plus the cell's CIFG, state and direction
semantics."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType
from nnscope.runtime.ops.lstm import CellParams, CellWeights, _execute_lstm, lstm_cell
from nnscope.runtime.ops.lstm_sequence import _execute_bidirectional, _execute_unidirectional
from nnscope.runtime.ops.registry import OpContext, OpValidationError
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.LSTM, OperationType.UNIDIRECTIONAL_SEQUENCE_LSTM,
                 OperationType.BIDIRECTIONAL_SEQUENCE_LSTM})
MIN_PASSED = {"LSTM": 72, "UNIDIRECTIONAL_SEQUENCE_LSTM": 26, "BIDIRECTIONAL_SEQUENCE_LSTM": 22}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

RNG = np.random.default_rng(7)
UNITS, INPUT, BATCH = 3, 2, 2


def _weights(cifg=False, peephole=False, projection=0):
    m = lambda *shape: RNG.uniform(-0.5, 0.5, shape).astype(np.float32)  # noqa: E731
    out = projection or UNITS
    return [None if cifg else m(UNITS, INPUT), m(UNITS, INPUT), m(UNITS, INPUT), m(UNITS, INPUT),
            None if cifg else m(UNITS, out), m(UNITS, out), m(UNITS, out), m(UNITS, out),
            *(([None] if cifg else [m(UNITS)]) + [m(UNITS), m(UNITS)] if peephole else [None] * 3),
            None if cifg else m(UNITS), m(UNITS), m(UNITS), m(UNITS),
            m(projection, UNITS) if projection else None, None]


def _ctx(op, inputs, n_out):
    operands = [Operand(T.TENSOR_FLOAT32) for _ in inputs]
    return OpContext(Operation(op, tuple(range(len(inputs))), ()), inputs, operands,
                     [Operand(T.TENSOR_FLOAT32)] * n_out)


def _lstm(x, h, c, weights, clip=(0.0, 0.0)):
    return _execute_lstm(_ctx(OperationType.LSTM, [x, *weights, h, c, 4, *clip], 4))


def test_cifg_input_gate_is_one_minus_the_forget_gate():
    zero = np.zeros((UNITS, 1), np.float32)
    bias = np.float32([0.5, -1.0, 2.0])
    x, h, c = np.ones((1, 1), np.float32), np.zeros((1, UNITS), np.float32), np.ones((1, UNITS),
                                                                                     np.float32)
    cand = np.float32([0.3, 0.2, 0.1])
    cifg = CellWeights(None, zero, zero, zero, None, zero.repeat(UNITS, 1), zero.repeat(UNITS, 1),
                       zero.repeat(UNITS, 1), bf=bias, bc=cand, bo=np.zeros(UNITS, np.float32))
    full = cifg._replace(i2i=zero, r2i=zero.repeat(UNITS, 1), bi=-bias)
    _, c_cifg = lstm_cell(x, h, c, cifg, CellParams())
    _, c_full = lstm_cell(x, h, c, full, CellParams())
    forget = 1 / (1 + np.exp(-bias))
    assert np.allclose(c_cifg, forget * 1 + (1 - forget) * np.tanh(cand), atol=1e-6)
    assert np.allclose(c_cifg, c_full, atol=1e-6)


@pytest.mark.parametrize("cifg,peephole,projection", [(False, False, 0), (True, True, 0),
                                                      (False, True, 4)])
def test_lstm_state_outputs_chain_like_the_sequence_op(cifg, peephole, projection):
    weights = _weights(cifg, peephole, projection)
    out = projection or UNITS
    xs = RNG.uniform(-1, 1, (3, BATCH, INPUT)).astype(np.float32)
    h, c = np.zeros((BATCH, out), np.float32), np.zeros((BATCH, UNITS), np.float32)
    steps = []
    for x in xs:
        scratch, h, c, output = _lstm(x, h, c, weights)
        assert scratch.shape == (BATCH, UNITS * (3 if cifg else 4)) and (output == h).all()
        steps.append(output)
    inputs = [xs, *weights, np.zeros((BATCH, out), np.float32), np.zeros((BATCH, UNITS), np.float32),
              4, 0.0, 0.0, True, None, None, None, None]
    seq, h_seq, c_seq = _execute_unidirectional(_ctx(OperationType.UNIDIRECTIONAL_SEQUENCE_LSTM,
                                                     inputs, 3))
    assert np.allclose(seq, np.stack(steps), atol=1e-6)
    assert np.allclose(h_seq, h, atol=1e-6) and np.allclose(c_seq, c, atol=1e-6)


def test_cell_and_projection_clips_bound_the_states():
    weights = [w * 20 if w is not None else None for w in _weights(projection=2)]
    x = np.full((BATCH, INPUT), 5, np.float32)
    _, h, c, _ = _lstm(x, np.zeros((BATCH, 2), np.float32), np.full((BATCH, UNITS), 9, np.float32),
                       weights, clip=(0.5, 0.25))
    assert np.abs(c).max() <= 0.5 + 1e-7 and np.abs(h).max() <= 0.25 + 1e-7
    assert np.isclose(np.abs(h).max(), 0.25)


def test_bidirectional_backward_walks_time_in_reverse_and_merges():
    fw, bw = _weights(), _weights()
    xs = RNG.uniform(-1, 1, (4, BATCH, INPUT)).astype(np.float32)
    zeros = [np.zeros((BATCH, UNITS), np.float32)] * 4
    inputs = [xs, *fw, *bw, *zeros, None, *[None] * 8, 4, 0.0, 0.0, True, True, *[None] * 8]
    merged = _execute_bidirectional(_ctx(OperationType.BIDIRECTIONAL_SEQUENCE_LSTM, inputs, 1))[0]
    uni = lambda x, w: _execute_unidirectional(_ctx(  # noqa: E731
        OperationType.UNIDIRECTIONAL_SEQUENCE_LSTM,
        [x, *w, zeros[0], zeros[0], 4, 0.0, 0.0, True, None, None, None, None], 1))[0]
    assert np.allclose(merged[..., :UNITS], uni(xs, fw), atol=1e-6)
    assert np.allclose(merged[..., UNITS:], uni(xs[::-1], bw)[::-1], atol=1e-6)


def test_state_of_the_wrong_shape_is_a_validation_error():
    with pytest.raises(OpValidationError, match="cell state"):
        _lstm(np.ones((BATCH, INPUT), np.float32), np.zeros((BATCH, UNITS), np.float32),
              np.zeros((BATCH + 1, UNITS), np.float32), _weights())
