"""TFLite RNN, SVDF, LSTM and the unidirectional/bidirectional sequence RNN and LSTM (with
zero-initialised variable state) compute what LiteRT computes on its first invocation."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import OperationType
from nnscope.runtime.tflite import UnsupportedOperator, convert_tflite
from tests.runtime.tflite.litert_helpers import Tensor, build, litert_run, nnscope_run
from tests.runtime.tflite.test_tflite_loader import BUILTIN, OPTIONS, _options

RNG = np.random.default_rng(5)
BATCH, INPUT, UNITS, TIME = 2, 3, 4, 5
TANH = 4


class Graph:
    """Tensors appended one by one; ``const`` and ``state`` return their indexes."""

    def __init__(self, x_shape):
        self.tensors = [Tensor(tuple(x_shape))]

    def add(self, tensor: Tensor) -> int:
        self.tensors.append(tensor)
        return len(self.tensors) - 1

    def const(self, *shape) -> int:
        return self.add(Tensor(shape, data=(RNG.standard_normal(shape) * 0.5).astype(np.float32)))

    def state(self, *shape) -> int:
        return self.add(Tensor(shape, variable=True))


def _run_both(graph: Graph, op, out_shape, x):
    out = graph.add(Tensor(tuple(out_shape)))
    operator = (op[0], op[1], [out], op[2], op[3])
    data = build(graph.tensors, [operator], [0], [out])
    (expected,) = litert_run(data, [x])
    (actual,) = nnscope_run(data, [x])
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    return convert_tflite(data)[0]


def test_rnn_and_sequence_rnn():
    g = Graph((BATCH, INPUT))
    ins = [0, g.const(UNITS, INPUT), g.const(UNITS, UNITS), g.const(UNITS), g.state(BATCH, UNITS)]
    x = RNG.standard_normal((BATCH, INPUT)).astype(np.float32)
    model = _run_both(g, (BUILTIN.RNN, ins, OPTIONS.RNNOptions,
                          _options("RNNOptions", FusedActivationFunction=3)), (BATCH, UNITS), x)
    assert [op.type for op in model.main.operations] == [OperationType.RNN]
    tanh = (BUILTIN.RNN, ins, [5], OPTIONS.RNNOptions,
            _options("RNNOptions", FusedActivationFunction=TANH))
    with pytest.raises(UnsupportedOperator, match=r"operator 0 \(RNN\): RNN with activation "
                                                  "TANH has no NNAPI form"):
        convert_tflite(build(g.tensors, [tanh], [0], [5]))
    g = Graph((BATCH, TIME, INPUT))
    ins = [0, g.const(UNITS, INPUT), g.const(UNITS, UNITS), g.const(UNITS), g.state(BATCH, UNITS)]
    x = RNG.standard_normal((BATCH, TIME, INPUT)).astype(np.float32)
    _run_both(g, (BUILTIN.UNIDIRECTIONAL_SEQUENCE_RNN, ins, OPTIONS.SequenceRNNOptions,
                  _options("SequenceRNNOptions", TimeMajor=False, FusedActivationFunction=1)),
              (BATCH, TIME, UNITS), x)


def test_svdf():
    rank, memory = 2, 5
    g = Graph((BATCH, INPUT))
    ins = [0, g.const(UNITS * rank, INPUT), g.const(UNITS * rank, memory), g.const(UNITS),
           g.state(BATCH, UNITS * rank * memory)]
    x = RNG.standard_normal((BATCH, INPUT)).astype(np.float32)
    _run_both(g, (BUILTIN.SVDF, ins, OPTIONS.SVDFOptions,
                  _options("SVDFOptions", Rank=rank, FusedActivationFunction=0)), (BATCH, UNITS), x)


def _lstm_inputs(g: Graph, cifg=False, peephole=False, projection=0, layer_norm=False):
    output = projection or UNITS
    gates = range(3 if cifg else 4)
    skip = [-1] if cifg else []
    ins = [0, *skip, *(g.const(UNITS, INPUT) for _ in gates),
           *skip, *(g.const(UNITS, output) for _ in gates)]
    ins += [g.const(UNITS) if peephole and not (cifg and k == 0) else -1 for k in range(3)]
    ins += [*skip, *(g.const(UNITS) for _ in gates)]
    ins += [g.const(projection, UNITS), g.const(projection)] if projection else [-1, -1]
    ins += [g.state(BATCH, output), g.state(BATCH, UNITS)]
    if layer_norm:
        ins += [*skip, *(g.const(UNITS) for _ in gates)]
    return ins, output


@pytest.mark.parametrize("variant", [dict(), dict(cifg=True, peephole=True),
                                     dict(projection=3, peephole=True),
                                     dict(cifg=True, layer_norm=True)],
                         ids=["basic", "cifg_peephole", "projection", "cifg_layer_norm"])
def test_lstm_and_sequence_lstm(variant):
    g = Graph((BATCH, INPUT))
    ins, output = _lstm_inputs(g, **variant)
    x = RNG.standard_normal((BATCH, INPUT)).astype(np.float32)
    options = _options("LSTMOptions", FusedActivationFunction=TANH, CellClip=3.0, ProjClip=0.0)
    _run_both(g, (BUILTIN.LSTM, ins, OPTIONS.LSTMOptions, options), (BATCH, output), x)
    g = Graph((TIME, BATCH, INPUT))
    ins, output = _lstm_inputs(g, **variant)
    x = RNG.standard_normal((TIME, BATCH, INPUT)).astype(np.float32)
    options = _options("UnidirectionalSequenceLSTMOptions", FusedActivationFunction=TANH,
                       CellClip=0.0, ProjClip=0.0, TimeMajor=True)
    _run_both(g, (BUILTIN.UNIDIRECTIONAL_SEQUENCE_LSTM, ins,
                  OPTIONS.UnidirectionalSequenceLSTMOptions, options), (TIME, BATCH, output), x)


def _run_outputs(graph: Graph, op, out_shapes, x):
    outs = [graph.add(Tensor(tuple(shape))) for shape in out_shapes]
    data = build(graph.tensors, [(op[0], op[1], outs, op[2], op[3])], [0], outs)
    expected, actual = litert_run(data, [x]), nnscope_run(data, [x])
    assert len(actual) == len(expected) == len(out_shapes)
    for got, want in zip(actual, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("merge", [False, True], ids=["separate", "merged"])
def test_bidirectional_sequence_rnn(merge):
    g = Graph((BATCH, TIME, INPUT))
    def cell():
        return [g.const(UNITS, INPUT), g.const(UNITS, UNITS), g.const(UNITS), g.state(BATCH, UNITS)]
    ins = [0, *cell(), *cell(), -1, -1, -1]
    x = RNG.standard_normal((BATCH, TIME, INPUT)).astype(np.float32)
    shapes = [(BATCH, TIME, 2 * UNITS)] if merge else [(BATCH, TIME, UNITS)] * 2
    options = _options("BidirectionalSequenceRNNOptions", TimeMajor=False, MergeOutputs=merge,
                       FusedActivationFunction=1)
    _run_outputs(g, (BUILTIN.BIDIRECTIONAL_SEQUENCE_RNN, ins,
                     OPTIONS.BidirectionalSequenceRNNOptions, options), shapes, x)


@pytest.mark.parametrize("merge", [False, True], ids=["separate", "merged"])
def test_bidirectional_sequence_lstm(merge):
    g = Graph((TIME, BATCH, INPUT))
    forward, _ = _lstm_inputs(g, peephole=True)
    backward, _ = _lstm_inputs(g, cifg=True)
    # _lstm_inputs ends with the two states; the bidirectional order puts all four at 35-38.
    ins = [0, *forward[1:18], *backward[1:18], *forward[18:20], *backward[18:20]] + [-1] * 9
    x = RNG.standard_normal((TIME, BATCH, INPUT)).astype(np.float32)
    shapes = [(TIME, BATCH, 2 * UNITS)] if merge else [(TIME, BATCH, UNITS)] * 2
    options = _options("BidirectionalSequenceLSTMOptions", FusedActivationFunction=TANH,
                       CellClip=0.0, ProjClip=0.0, MergeOutputs=merge, TimeMajor=True)
    _run_outputs(g, (BUILTIN.BIDIRECTIONAL_SEQUENCE_LSTM, ins,
                     OPTIONS.BidirectionalSequenceLSTMOptions, options), shapes, x)
