"""UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM (AOSP
``UnidirectionalSequenceLSTM.cpp``, ``BidirectionalSequenceLSTM.cpp``): the float LSTM cell of
:mod:`runtime.ops.lstm` run over every time step.

UNIDIRECTIONAL (28 inputs): LSTM's 23 inputs with input [max_time, batch, input_size] (or
[batch, max_time, ...] when time_major, input 23 BOOL, is false), then four layer-norm weights.
Outputs: output [.., output_size], and (NNAPI 1.3) the final output state and cell state.

BIDIRECTIONAL (61 inputs): input; forward weights 1-17 and backward weights 18-34 (LSTM order);
forward/backward output and cell states 35-38; aux input 39 with forward 40-43 and backward 44-47
aux-input weights; activation, cell clip, projection clip, merge_outputs, time_major (48-52);
forward/backward layer-norm weights 53-60. With an aux input but no aux weights the backward
cell reads the aux input instead of the input ("parallel linking", as AOSP). Outputs: forward and
backward outputs (one concatenated output when merge_outputs), then optionally the four final
states. The backward cell walks time in reverse; its outputs stay at their time steps.

Example:
    >>> import numpy as np
    >>> run_sequence(np.zeros((2, 1, 1), np.float32), lambda x, h, c: (h + 1, c), None,
    ...              np.zeros((1, 1), np.float32), None, reverse=True)[0].ravel().tolist()
    [2.0, 1.0]
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.lstm import (CellParams, as_f32, check_cell_shapes, expect_clip_type, lstm_cell,
                              present, validate_float_weights, weights_from)
from nnscope.runtime.ops.registry import OpContext, register

_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


def run_sequence(x, step, aux, h, cell, reverse: bool = False):
    """Run ``step(x_t, h, cell, [aux_t]) -> (h, cell)`` over time-major ``x``; (outputs, h, cell)."""
    outputs = [None] * x.shape[0]
    order = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in order:
        h, cell = step(x[t], h, cell) if aux is None else step(x[t], h, cell, aux[t])
        outputs[t] = h
    return np.stack(outputs) if outputs else np.zeros((0, *h.shape), np.float32), h, cell


def to_time_major(x: np.ndarray, time_major: bool) -> np.ndarray:
    c.expect(x.ndim == 3, f"input 0: expected rank 3, got {x.ndim}")
    return np.asarray(x, np.float32) if time_major else np.swapaxes(x, 0, 1).astype(np.float32)


def from_time_major(y: np.ndarray, time_major: bool, dtype) -> np.ndarray:
    return (y if time_major else np.swapaxes(y, 0, 1)).astype(dtype)


def _direction(x, aux, weights, params, h, cell, reverse=False, what=""):
    units = weights.i2f.shape[0]
    output_size = weights.proj_w.shape[0] if weights.proj_w is not None else units
    check_cell_shapes(weights, x.shape[2], output_size, units, what)
    batch = x.shape[1]
    c.expect(h is not None and h.shape == (batch, output_size),
             f"{what}output state must be {[batch, output_size]}")
    c.expect(cell is not None and cell.shape == (batch, units),
             f"{what}cell state must be {[batch, units]}")

    def step(x_t, h_t, c_t, aux_t=None):
        return lstm_cell(x_t, h_t, c_t, weights, params, aux_t)
    return run_sequence(x, step, aux, h, cell, reverse)


# --------------------------------------------------------------------------- unidirectional
def _validate_unidirectional(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    c.expect_count(inputs, (24, 28), "inputs")
    c.expect_count(outputs, (1, 3), "outputs")
    in_type = c.expect_type(inputs, 0, _FLOATS)
    c.expect_rank(inputs, 0, exact=3)
    validate_float_weights(inputs, [*range(1, 20), *range(24, len(inputs))], in_type)
    c.expect_type(inputs, 20, T.INT32)
    expect_clip_type(inputs, 21, in_type)
    expect_clip_type(inputs, 22, in_type)
    c.expect_type(inputs, 23, T.BOOL)
    for index in range(len(outputs)):
        c.expect_same_type(outputs, index, in_type, "output")


def _execute_unidirectional(ctx: OpContext) -> list:
    args = ctx.inputs
    dtype, time_major = np.asarray(args[0]).dtype, bool(args[23])
    x = to_time_major(args[0], time_major)
    weights = weights_from([*args[1:18], *args[24:28]])
    params = CellParams(int(args[20]), float(args[21]), float(args[22]))
    y, h, cell = _direction(x, None, weights, params, as_f32(args[18]), as_f32(args[19]))
    results = [from_time_major(y, time_major, dtype), h.astype(dtype), cell.astype(dtype)]
    return results[:len(ctx.output_operands)]


# --------------------------------------------------------------------------- bidirectional
def _validate_bidirectional(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    c.expect_count(inputs, 61, "inputs")
    c.expect_count(outputs, (1, 2, 5, 6), "outputs")
    in_type = c.expect_type(inputs, 0, _FLOATS)
    c.expect_rank(inputs, 0, exact=3)
    validate_float_weights(inputs, [*range(1, 48), *range(53, 61)], in_type)
    c.expect_type(inputs, 48, T.INT32)
    expect_clip_type(inputs, 49, in_type)
    expect_clip_type(inputs, 50, in_type)
    c.expect_type(inputs, 51, T.BOOL)
    c.expect_type(inputs, 52, T.BOOL)
    for index in range(len(outputs)):
        c.expect_same_type(outputs, index, in_type, "output")


def _execute_bidirectional(ctx: OpContext) -> list:
    args = ctx.inputs
    dtype, merge, time_major = np.asarray(args[0]).dtype, bool(args[51]), bool(args[52])
    x = to_time_major(args[0], time_major)
    aux = to_time_major(args[39], time_major) if present(args[39]) else None
    fw = weights_from([*args[1:18], *args[53:57], *args[40:44]])
    bw = weights_from([*args[18:35], *args[57:61], *args[44:48]])
    params = CellParams(int(args[48]), float(args[49]), float(args[50]))
    has_aux_weights = fw.aux_f is not None
    bw_input, aux_in = x, aux
    if aux is not None and not has_aux_weights:
        bw_input, aux_in = aux, None  # parallel linking: the backward cell reads the aux input
    c.expect(aux is not None or not has_aux_weights, "input 39: aux weights need an aux input")
    y_fw, h_fw, c_fw = _direction(x, aux_in, fw, params, as_f32(args[35]), as_f32(args[36]),
                                  what="forward ")
    y_bw, h_bw, c_bw = _direction(bw_input, aux_in, bw, params, as_f32(args[37]),
                                  as_f32(args[38]), reverse=True, what="backward ")
    if merge:
        outputs = [from_time_major(np.concatenate([y_fw, y_bw], axis=2), time_major, dtype)]
    else:
        outputs = [from_time_major(y_fw, time_major, dtype), from_time_major(y_bw, time_major, dtype)]
    states = [s.astype(dtype) for s in (h_fw, c_fw, h_bw, c_bw)]
    c.expect(len(ctx.output_operands) in (len(outputs), len(outputs) + 4),
             f"expected {len(outputs)} or {len(outputs) + 4} outputs with merge_outputs={merge}, "
             f"got {len(ctx.output_operands)}")
    return (outputs + states)[:len(ctx.output_operands)]


register(OperationType.UNIDIRECTIONAL_SEQUENCE_LSTM, "lstm_sequence", _validate_unidirectional,
         _execute_unidirectional)
register(OperationType.BIDIRECTIONAL_SEQUENCE_LSTM, "lstm_sequence", _validate_bidirectional,
         _execute_bidirectional)
