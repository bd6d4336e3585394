"""LSTM: one step of a long short-term memory cell (AOSP ``LSTM.cpp``, ``LSTMCell``), and the
float cell shared with UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM.

Inputs (23, or 27 with layer normalisation): input [batch, input_size]; input-to-{input, forget,
cell, output} weights [units, input_size]; recurrent-to-{...} weights [units, output_size];
cell-to-{input, forget, output} peephole weights [units]; {input, forget, cell, output} gate
biases [units]; projection weights [output_size, units] and bias [output_size]; output state
[batch, output_size]; cell state [batch, units]; activation (INT32, TFLite codes); cell clip and
projection clip (0 = off); then four layer-norm weights [units]. Optional inputs may be omitted
(or zero-sized): no input-gate weights means CIFG (input gate = 1 - forget gate), no peephole or
projection weights turn those parts off. Outputs: scratch [batch, units * (3 if CIFG else 4)],
output state, cell state, output. Float16 is computed in float32.

Example:
    >>> import numpy as np
    >>> g = lambda: np.zeros((1, 1), np.float32)
    >>> w = CellWeights(None, g(), g(), g(), None, g(), g(), g(), bf=np.ones(1, np.float32))
    >>> h, c = lstm_cell(np.ones((1, 1), np.float32), g(), np.ones((1, 1), np.float32), w,
    ...                  CellParams(activation=4))
    >>> round(float(c[0, 0]), 4)   # forget gate sigmoid(1) keeps 73 % of the old cell
    0.7311
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.registry import OpContext, OpValidationError, register

_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_LAYER_NORM_EPSILON = 1e-8


def present(array) -> bool:
    """An optional tensor input is given: neither omitted nor zero-sized."""
    return array is not None and np.asarray(array).size > 0


def as_f32(array):
    return np.asarray(array, np.float32) if present(array) else None


# --------------------------------------------------------------------------- activations
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


_ACTIVATIONS = {0: lambda x: x, 1: lambda x: np.maximum(x, 0), 2: lambda x: np.clip(x, -1, 1),
                3: lambda x: np.clip(x, 0, 6), 4: np.tanh, 6: _sigmoid}


def activation_function(code: int):
    """The TFLite activation (0 none, 1 relu, 2 relu1, 3 relu6, 4 tanh, 6 sigmoid)."""
    if int(code) not in _ACTIVATIONS:
        raise OpValidationError(f"unsupported LSTM/RNN activation {code}")
    return _ACTIVATIONS[int(code)]


# --------------------------------------------------------------------------- the cell
class CellWeights(NamedTuple):
    """Float32 weights of one LSTM direction; None where optional and absent."""
    i2i: np.ndarray | None
    i2f: np.ndarray
    i2c: np.ndarray
    i2o: np.ndarray
    r2i: np.ndarray | None
    r2f: np.ndarray
    r2c: np.ndarray
    r2o: np.ndarray
    c2i: np.ndarray | None = None
    c2f: np.ndarray | None = None
    c2o: np.ndarray | None = None
    bi: np.ndarray | None = None
    bf: np.ndarray | None = None
    bc: np.ndarray | None = None
    bo: np.ndarray | None = None
    proj_w: np.ndarray | None = None
    proj_b: np.ndarray | None = None
    ln_i: np.ndarray | None = None
    ln_f: np.ndarray | None = None
    ln_c: np.ndarray | None = None
    ln_o: np.ndarray | None = None
    aux_i: np.ndarray | None = None
    aux_f: np.ndarray | None = None
    aux_c: np.ndarray | None = None
    aux_o: np.ndarray | None = None

    @property
    def cifg(self) -> bool:
        return self.i2i is None

    @property
    def layer_norm(self) -> bool:
        return self.ln_f is not None


class CellParams(NamedTuple):
    activation: int = 4
    cell_clip: float = 0.0
    proj_clip: float = 0.0


def weights_from(arrays: Sequence) -> CellWeights:
    """CellWeights from the 16 weight/bias inputs (i2x, r2x, c2x, biases, projection) followed by
    up to 4 layer-norm and 4 aux weights, each as float32 or None."""
    values = [as_f32(a) for a in arrays]
    return CellWeights(*values)


def _norm(gate: np.ndarray, weight: np.ndarray, bias) -> np.ndarray:
    mean = gate.mean(axis=1, keepdims=True)
    variance = (gate * gate).mean(axis=1, keepdims=True) - mean * mean
    normed = (gate - mean) / np.sqrt(variance + _LAYER_NORM_EPSILON) * weight
    return normed + bias if bias is not None else normed


def _gate(x, h, aux, w_in, w_rec, w_aux, bias, w: CellWeights, peephole, cell, ln):
    gate = x @ w_in.T + h @ w_rec.T
    if aux is not None and w_aux is not None:
        gate = gate + aux @ w_aux.T
    if peephole is not None:
        gate = gate + peephole * cell
    if w.layer_norm:
        return _norm(gate, ln, bias)
    return gate + bias if bias is not None else gate


def lstm_cell(x, h, cell, w: CellWeights, params: CellParams, aux=None):
    """One float32 LSTM step: (new output state, new cell state); the output is the output state."""
    act = activation_function(params.activation)
    forget = _sigmoid(_gate(x, h, aux, w.i2f, w.r2f, w.aux_f, w.bf, w, w.c2f, cell, w.ln_f))
    if w.cifg:
        input_gate = 1.0 - forget
    else:
        input_gate = _sigmoid(_gate(x, h, aux, w.i2i, w.r2i, w.aux_i, w.bi, w, w.c2i, cell, w.ln_i))
    candidate = act(_gate(x, h, aux, w.i2c, w.r2c, w.aux_c, w.bc, w, None, cell, w.ln_c))
    new_cell = forget * cell + input_gate * candidate
    if params.cell_clip > 0:
        new_cell = np.clip(new_cell, -params.cell_clip, params.cell_clip)
    output_gate = _sigmoid(_gate(x, h, aux, w.i2o, w.r2o, w.aux_o, w.bo, w, w.c2o, new_cell, w.ln_o))
    output = output_gate * act(new_cell)
    if w.proj_w is not None:
        output = output @ w.proj_w.T
        if w.proj_b is not None:
            output = output + w.proj_b
        if params.proj_clip > 0:
            output = np.clip(output, -params.proj_clip, params.proj_clip)
    return output.astype(np.float32), new_cell.astype(np.float32)


# --------------------------------------------------------------------------- validation
def validate_float_weights(inputs: Sequence[Operand], indexes, in_type: T) -> None:
    """Every given tensor among ``indexes`` has the input's float type."""
    for index in indexes:
        if index < len(inputs) and inputs[index].type != in_type:
            c.expect_same_type(inputs, index, in_type)


def expect_clip_type(inputs: Sequence[Operand], index: int, in_type: T) -> None:
    c.expect_type(inputs, index, T.FLOAT16 if in_type == T.TENSOR_FLOAT16 else T.FLOAT32)


def _validate_lstm(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    c.expect_count(inputs, (23, 27), "inputs")
    c.expect_count(outputs, 4, "outputs")
    in_type = c.expect_type(inputs, 0, _FLOATS)
    c.expect_rank(inputs, 0, exact=2)
    validate_float_weights(inputs, [*range(1, 20), *range(23, len(inputs))], in_type)
    c.expect_type(inputs, 20, T.INT32)
    expect_clip_type(inputs, 21, in_type)
    expect_clip_type(inputs, 22, in_type)
    for index in range(4):
        c.expect_same_type(outputs, index, in_type, "output")


# --------------------------------------------------------------------------- LSTM
def check_cell_shapes(w: CellWeights, input_size: int, output_size: int, units: int,
                      what: str = "") -> None:
    """The weights fit [units, input_size] / [units, output_size]; partial CIFG or layer norm
    sets are errors."""
    for name in ("i2i", "i2f", "i2c", "i2o"):
        value = getattr(w, name)
        c.expect(value is None or value.shape == (units, input_size),
                 f"{what}{name} weights shape {None if value is None else list(value.shape)} "
                 f"!= {[units, input_size]}")
    for name in ("r2i", "r2f", "r2c", "r2o"):
        value = getattr(w, name)
        c.expect(value is None or value.shape == (units, output_size),
                 f"{what}{name} weights shape {None if value is None else list(value.shape)} "
                 f"!= {[units, output_size]}")
    c.expect((w.i2i is None) == (w.r2i is None),
             f"{what}CIFG needs both input-gate weights present or both omitted")
    c.expect(w.layer_norm == (w.ln_c is not None) == (w.ln_o is not None),
             f"{what}layer normalisation needs forget, cell and output weights")
    c.expect(w.proj_w is not None or output_size == units,
             f"{what}without projection the output size {output_size} must equal units {units}")


def _execute_lstm(ctx: OpContext) -> list:
    args = ctx.inputs
    x = np.asarray(args[0])
    weights = weights_from([*args[1:18], *args[23:27]])
    params = CellParams(int(args[20]), float(args[21]), float(args[22]))
    h, cell = as_f32(args[18]), as_f32(args[19])
    units = weights.i2f.shape[0]
    output_size = weights.proj_w.shape[0] if weights.proj_w is not None else units
    check_cell_shapes(weights, x.shape[1], output_size, units)
    c.expect(h is not None and h.shape == (x.shape[0], output_size),
             f"input 18: output state must be {[x.shape[0], output_size]}")
    c.expect(cell is not None and cell.shape == (x.shape[0], units),
             f"input 19: cell state must be {[x.shape[0], units]}")
    out, new_cell = lstm_cell(x.astype(np.float32), h, cell, weights, params)
    scratch = np.zeros((x.shape[0], units * (3 if weights.cifg else 4)), x.dtype)
    return [scratch, out.astype(x.dtype), new_cell.astype(x.dtype), out.astype(x.dtype)]


register(OperationType.LSTM, "lstm", _validate_lstm, _execute_lstm)
