"""TFLite recurrent builtins -> NNAPI RNN, SVDF, LSTM and the UNIDIRECTIONAL_/BIDIRECTIONAL_
SEQUENCE_ RNN and LSTM (float32; merged into ``_operators.CONVERTERS``).

TFLite keeps a cell's state in variable tensors that persist between invocations; NNAPI takes
the state as an input and returns the new one. A state tensor that is not a model input starts
at zero on every execution (LiteRT's first invocation), and the state outputs NNAPI requires go
to temporaries. Omitted optional tensors (index -1: CIFG, no peephole, no projection, no layer
norm) become NNAPI omitted operands. LSTM activation codes are shared (NONE, RELU, RELU6, TANH,
SIGMOID) and pass through; RNN and SVDF take a FuseCode, so a TANH RNN has no NNAPI form.
Hybrid or quantized cells (and the 5-input quantized "basic" LSTM) have no mapping here.

Example:
    >>> sorted(RECURRENT_CONVERTERS)
    ['BIDIRECTIONAL_SEQUENCE_LSTM', 'BIDIRECTIONAL_SEQUENCE_RNN', 'LSTM', 'RNN', 'SVDF',
     'UNIDIRECTIONAL_SEQUENCE_LSTM', 'UNIDIRECTIONAL_SEQUENCE_RNN']
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnscope.runtime.hal.types import OperandType, OperationType as Op
from nnscope.runtime.tflite._builder import GraphBuilder, UnsupportedOperator
from nnscope.runtime.tflite._reader import TfliteOperator

_F32 = OperandType.TENSOR_FLOAT32


def _float32_input(b: GraphBuilder, op: TfliteOperator) -> int:
    x = b.tensor(op.inputs[0])
    weights = b.graph.tensors[op.inputs[1]]
    if b.operands[x].type != _F32 or weights.type_name != "FLOAT32":
        raise UnsupportedOperator(f"{op.name} with {b.operands[x].type.name} input and "
                                  f"{weights.type_name} weights (float32 cells only)")
    return x


def _state(b: GraphBuilder, tensor_index: int) -> int:
    """The state input: a model input as is, else zeros (a fresh variable tensor)."""
    if tensor_index not in b.graph.inputs and not b.is_constant(tensor_index):
        b.fold(tensor_index, np.zeros(b.graph.tensors[tensor_index].shape, np.float32))
    return b.tensor(tensor_index)


def _optional(b: GraphBuilder, tensor_index: int) -> int:
    return b.omitted(_F32) if tensor_index < 0 else b.tensor(tensor_index)


_LSTM_ACTIVATIONS = (0, 1, 3, 4, 6)  # NONE, RELU, RELU6, TANH, SIGMOID (same codes in NNAPI)
_FUSE_CODES = (0, 1, 2, 3)  # RNN and SVDF take a FuseCode: NONE, RELU, RELU1, RELU6
_NAMES = {4: "TANH", 5: "SIGN_BIT", 6: "SIGMOID"}


def _activation(op: TfliteOperator, allowed=_LSTM_ACTIVATIONS) -> int:
    code = int(op.options.FusedActivationFunction()) if op.options is not None else 0
    if code not in allowed:
        raise UnsupportedOperator(f"{op.name} with activation {_NAMES.get(code, code)}")
    return code


def _rnn(b: GraphBuilder, op: TfliteOperator) -> None:
    x = _float32_input(b, op)
    state = _state(b, op.inputs[4])
    inputs = [x, *(b.tensor(i) for i in op.inputs[1:4]), state,
              b.scalar(_activation(op, _FUSE_CODES))]
    out = b.tensor(op.outputs[0])
    b.add(Op.RNN, inputs, [b.temporary(state), out])


def _sequence_rnn(b: GraphBuilder, op: TfliteOperator) -> None:
    x = _float32_input(b, op)
    time_major = int(bool(op.options.TimeMajor())) if op.options is not None else 0
    inputs = [x, *(b.tensor(i) for i in op.inputs[1:4]), _state(b, op.inputs[4]),
              b.scalar(_activation(op, _FUSE_CODES)), b.scalar(time_major)]
    b.add(Op.UNIDIRECTIONAL_SEQUENCE_RNN, inputs, [b.tensor(op.outputs[0])])


def _svdf(b: GraphBuilder, op: TfliteOperator) -> None:
    x = _float32_input(b, op)
    rank = int(op.options.Rank()) if op.options is not None else 1
    state = _state(b, op.inputs[4])
    inputs = [x, b.tensor(op.inputs[1]), b.tensor(op.inputs[2]), _optional(b, op.inputs[3]),
              state, b.scalar(rank), b.scalar(_activation(op, _FUSE_CODES))]
    b.add(Op.SVDF, inputs, [b.temporary(state), b.tensor(op.outputs[0])])


def _lstm_inputs(b: GraphBuilder, op: TfliteOperator) -> tuple[list[int], list[int]]:
    """(inputs 0-17 and the two states, the layer-norm weights or [] when all omitted)."""
    if len(op.inputs) not in (20, 24):
        raise UnsupportedOperator(f"{op.name} with {len(op.inputs)} inputs (a basic or "
                                  "quantized kernel)")
    x = _float32_input(b, op)
    weights = [x] + [_optional(b, i) for i in op.inputs[1:18]]
    states = [_state(b, op.inputs[18]), _state(b, op.inputs[19])]
    norms = list(op.inputs[20:24])
    layer_norm = [_optional(b, i) for i in norms] if any(i >= 0 for i in norms) else []
    return weights + states, layer_norm


def _clips(b: GraphBuilder, op: TfliteOperator) -> list[int]:
    o = op.options
    cell_clip, proj_clip = (float(o.CellClip()), float(o.ProjClip())) if o is not None else (0, 0)
    return [b.scalar(_activation(op)), b.scalar(float(cell_clip)), b.scalar(float(proj_clip))]


def _lstm(b: GraphBuilder, op: TfliteOperator) -> None:
    if op.options is not None and op.options.KernelType() != 0:
        raise UnsupportedOperator("LSTM with the BASIC kernel type")
    inputs, layer_norm = _lstm_inputs(b, op)
    batch = b.operands[inputs[0]].dimensions[0]
    units = b.graph.tensors[op.inputs[4]].shape[0]  # input-to-forget weights [units, input]
    gates = 3 if op.inputs[1] < 0 else 4  # CIFG has no input gate
    scratch = b.temporary(inputs[0], (batch, units * gates))
    outputs = [scratch, b.temporary(inputs[18]), b.temporary(inputs[19]), b.tensor(op.outputs[0])]
    b.add(Op.LSTM, inputs + _clips(b, op) + layer_norm, outputs)


def _sequence_lstm(b: GraphBuilder, op: TfliteOperator) -> None:
    inputs, layer_norm = _lstm_inputs(b, op)
    time_major = bool(op.options.TimeMajor()) if op.options is not None else True
    inputs += _clips(b, op) + [b.scalar(time_major)] + layer_norm
    b.add(Op.UNIDIRECTIONAL_SEQUENCE_LSTM, inputs, [b.tensor(op.outputs[0])])


def _bidirectional_options(op: TfliteOperator) -> tuple[bool, bool]:
    o = op.options
    return (bool(o.MergeOutputs()), bool(o.TimeMajor())) if o is not None else (False, True)


def _bidirectional_rnn(b: GraphBuilder, op: TfliteOperator) -> None:
    """Same input order as NNAPI: input, forward (1-4), backward (5-8), aux (9-11)."""
    x = _float32_input(b, op)
    if len(op.inputs) != 12:
        raise UnsupportedOperator(f"BIDIRECTIONAL_SEQUENCE_RNN with {len(op.inputs)} inputs")
    merge, time_major = _bidirectional_options(op)
    states = {4, 8}
    inputs = [x] + [_state(b, i) if k in states else _optional(b, i)
                    for k, i in enumerate(op.inputs) if k > 0]
    inputs += [b.scalar(_activation(op, _FUSE_CODES)), b.scalar(time_major), b.scalar(merge)]
    b.add(Op.BIDIRECTIONAL_SEQUENCE_RNN, inputs, [b.tensor(o) for o in op.outputs])


def _bidirectional_lstm(b: GraphBuilder, op: TfliteOperator) -> None:
    """TFLite's 48 inputs are NNAPI's first 48; no layer norm (8 omitted operands)."""
    x = _float32_input(b, op)
    if len(op.inputs) != 48:
        raise UnsupportedOperator(f"BIDIRECTIONAL_SEQUENCE_LSTM with {len(op.inputs)} inputs")
    merge, time_major = _bidirectional_options(op)
    inputs = [x] + [_state(b, i) if 35 <= k <= 38 else _optional(b, i)
                    for k, i in enumerate(op.inputs) if k > 0]
    inputs += _clips(b, op) + [b.scalar(merge), b.scalar(time_major)]
    inputs += [b.omitted(_F32) for _ in range(8)]
    b.add(Op.BIDIRECTIONAL_SEQUENCE_LSTM, inputs, [b.tensor(o) for o in op.outputs])


#: TFLite builtin operator name -> converter(builder, operator).
RECURRENT_CONVERTERS: dict[str, Callable[[GraphBuilder, TfliteOperator], None]] = {
    "RNN": _rnn, "UNIDIRECTIONAL_SEQUENCE_RNN": _sequence_rnn, "SVDF": _svdf, "LSTM": _lstm,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _sequence_lstm,
    "BIDIRECTIONAL_SEQUENCE_RNN": _bidirectional_rnn,
    "BIDIRECTIONAL_SEQUENCE_LSTM": _bidirectional_lstm,
}
