"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN and SVDF (AOSP ``RNN.cpp``,
``UnidirectionalSequenceRNN.cpp``, ``BidirectionalSequenceRNN.cpp``, ``SVDF.cpp``). Float16 is
computed in float32.

RNN: input [batch, input_size], weights [units, input_size], recurrent weights [units, units],
bias [units], hidden state [batch, units], fused activation -> (hidden state, output), both
``act(x W' + h R' + b)``.
UNIDIRECTIONAL_SEQUENCE_RNN: input [max_time, batch, input_size] (batch-major when time_major,
INT32 input 6, is 0), weights, recurrent weights, bias, hidden state, activation -> output and
(NNAPI 1.3) the final hidden state.
BIDIRECTIONAL_SEQUENCE_RNN: input; forward weights, recurrent weights, bias, hidden state (1-4);
the same backward (5-8); aux input and forward/backward aux weights (9-11, optional: with an aux
input but no aux weights the backward cell reads the aux input); activation, time_major (BOOL),
merge_outputs (BOOL) -> forward and backward outputs (one concatenated when merged), then
optionally the two final hidden states.
SVDF: input [batch, input_size], feature weights [filters, input_size], time weights
[filters, memory], bias [units] (optional), state [batch, filters * memory], rank, activation ->
(state, output [batch, units]) where filters = units * rank. As in AOSP, the feature activations
go in each filter's last state column, the output is computed, then the state shifts one column
left and its last column is zeroed.

Example:
    >>> import numpy as np
    >>> one = np.ones((1, 1), np.float32)
    >>> rnn_step(one, one, one, one, np.ones(1, np.float32), 0).tolist()
    [[3.0]]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.lstm import as_f32, present, validate_float_weights
from nnscope.runtime.ops.lstm_sequence import from_time_major, run_sequence, to_time_major
from nnscope.runtime.ops.registry import OpContext, register

_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


def rnn_step(x, h, weights, recurrent, bias, activation: int, aux=None, aux_weights=None):
    """``act(x W' + h R' + b [+ aux A'])`` in float32."""
    total = x @ weights.T + h @ recurrent.T + bias
    if aux is not None and aux_weights is not None:
        total = total + aux @ aux_weights.T
    return c.apply_fused_activation(total.astype(np.float32), int(activation))


def _check_rnn_shapes(x_size: int, batch: int, weights, recurrent, bias, h, what="") -> None:
    units = weights.shape[0]
    c.expect(weights.shape == (units, x_size), f"{what}weights shape {list(weights.shape)} != "
             f"{[units, x_size]}")
    c.expect(recurrent.shape == (units, units), f"{what}recurrent weights must be {[units, units]}")
    c.expect(bias.shape == (units,), f"{what}bias must be {[units]}")
    c.expect(h.shape == (batch, units), f"{what}hidden state must be {[batch, units]}")


def _expect_float_io(inputs, outputs, count, out_counts, tensor_indexes, rank) -> T:
    c.expect_count(inputs, count, "inputs")
    c.expect_count(outputs, out_counts, "outputs")
    in_type = c.expect_type(inputs, 0, _FLOATS)
    c.expect_rank(inputs, 0, exact=rank)
    validate_float_weights(inputs, tensor_indexes, in_type)
    for index in range(len(outputs)):
        c.expect_same_type(outputs, index, in_type, "output")
    return in_type


# --------------------------------------------------------------------------- RNN
def _validate_rnn(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    _expect_float_io(inputs, outputs, 6, 2, range(1, 5), 2)
    c.expect_type(inputs, 5, T.INT32)


def _execute_rnn(ctx: OpContext) -> list:
    x, weights, recurrent, bias, h = (as_f32(a) for a in ctx.inputs[:5])
    _check_rnn_shapes(x.shape[1], x.shape[0], weights, recurrent, bias, h)
    out = rnn_step(x, h, weights, recurrent, bias, ctx.inputs[5]).astype(ctx.inputs[0].dtype)
    return [out, out.copy()]


# --------------------------------------------------------------------------- sequence RNNs
def _validate_unidirectional(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    _expect_float_io(inputs, outputs, 7, (1, 2), range(1, 5), 3)
    c.expect_type(inputs, 5, T.INT32)
    c.expect_type(inputs, 6, T.INT32)


def _direction(x, params, activation, reverse=False, aux=None, aux_weights=None, what=""):
    weights, recurrent, bias, h = params
    _check_rnn_shapes(x.shape[2], x.shape[1], weights, recurrent, bias, h, what)

    def step(x_t, h_t, _cell, aux_t=None):
        return rnn_step(x_t, h_t, weights, recurrent, bias, activation, aux_t, aux_weights), None
    y, h, _ = run_sequence(x, step, aux if aux_weights is not None else None, h, None, reverse)
    return y, h


def _execute_unidirectional(ctx: OpContext) -> list:
    dtype, time_major = ctx.inputs[0].dtype, bool(ctx.inputs[6])
    x = to_time_major(ctx.inputs[0], time_major)
    y, h = _direction(x, [as_f32(a) for a in ctx.inputs[1:5]], ctx.inputs[5])
    return [from_time_major(y, time_major, dtype), h.astype(dtype)][:len(ctx.output_operands)]


def _validate_bidirectional(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    _expect_float_io(inputs, outputs, 15, (1, 2, 3, 4), range(1, 12), 3)
    c.expect_type(inputs, 12, T.INT32)
    c.expect_type(inputs, 13, T.BOOL)
    c.expect_type(inputs, 14, T.BOOL)


def _execute_bidirectional(ctx: OpContext) -> list:
    args = ctx.inputs
    dtype, time_major, merge = args[0].dtype, bool(args[13]), bool(args[14])
    x = to_time_major(args[0], time_major)
    aux = to_time_major(args[9], time_major) if present(args[9]) else None
    fw_aux, bw_aux = as_f32(args[10]), as_f32(args[11])
    bw_input = x
    if aux is not None and fw_aux is None:
        bw_input, aux = aux, None  # parallel linking: the backward cell reads the aux input
    c.expect(aux is not None or fw_aux is None, "input 9: aux weights need an aux input")
    y_fw, h_fw = _direction(x, [as_f32(a) for a in args[1:5]], args[12], False, aux, fw_aux,
                            "forward ")
    y_bw, h_bw = _direction(bw_input, [as_f32(a) for a in args[5:9]], args[12], True, aux, bw_aux,
                            "backward ")
    if merge:
        outputs = [from_time_major(np.concatenate([y_fw, y_bw], axis=2), time_major, dtype)]
    else:
        outputs = [from_time_major(y_fw, time_major, dtype), from_time_major(y_bw, time_major, dtype)]
    c.expect(len(ctx.output_operands) in (len(outputs), len(outputs) + 2),
             f"expected {len(outputs)} or {len(outputs) + 2} outputs with merge_outputs={merge}, "
             f"got {len(ctx.output_operands)}")
    return (outputs + [h_fw.astype(dtype), h_bw.astype(dtype)])[:len(ctx.output_operands)]


# --------------------------------------------------------------------------- SVDF
def _validate_svdf(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    _expect_float_io(inputs, outputs, 7, 2, range(1, 5), 2)
    c.expect_type(inputs, 5, T.INT32)
    c.expect_type(inputs, 6, T.INT32)


def svdf(x, feature_weights, time_weights, bias, state, rank: int, activation: int):
    """(new state [batch, filters * memory], output [batch, units]) in float32."""
    batch, filters, memory = x.shape[0], feature_weights.shape[0], time_weights.shape[1]
    c.expect(rank > 0 and filters % rank == 0, f"input 5: rank {rank} does not divide {filters} "
             "filters")
    c.expect(time_weights.shape[0] == filters, "input 2: time weights need one row per filter")
    c.expect(state.size == batch * filters * memory,
             f"input 4: state must be {[batch, filters * memory]}")
    current = state.reshape(batch, filters, memory).copy()
    current[:, :, -1] = x @ feature_weights.T  # AOSP: the newest column, then shift left
    per_filter = (current * time_weights[None]).sum(axis=2)
    new_state = np.zeros_like(current)
    new_state[:, :, :-1] = current[:, :, 1:]
    output = per_filter.reshape(batch, filters // rank, rank).sum(axis=2)
    if bias is not None:
        output = output + bias
    output = c.apply_fused_activation(output.astype(np.float32), int(activation))
    return new_state.reshape(batch, filters * memory), output


def _execute_svdf(ctx: OpContext) -> list:
    x, features, times, bias, state = (as_f32(a) for a in ctx.inputs[:5])
    c.expect(features.shape[1] == x.shape[1], "input 1: feature weights must be [filters, "
             f"{x.shape[1]}]")
    new_state, output = svdf(x, features, times, bias, state, int(ctx.inputs[5]), ctx.inputs[6])
    dtype = ctx.inputs[0].dtype
    return [new_state.astype(dtype), output.astype(dtype)]


_FAMILY = "rnn"
register(OperationType.RNN, _FAMILY, _validate_rnn, _execute_rnn)
register(OperationType.UNIDIRECTIONAL_SEQUENCE_RNN, _FAMILY, _validate_unidirectional,
         _execute_unidirectional)
register(OperationType.BIDIRECTIONAL_SEQUENCE_RNN, _FAMILY, _validate_bidirectional,
         _execute_bidirectional)
register(OperationType.SVDF, _FAMILY, _validate_svdf, _execute_svdf)
