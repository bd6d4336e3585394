"""QUANTIZED_16BIT_LSTM (NNAPI 1.2, AOSP ``QuantizedLSTM.cpp``) and QUANTIZED_LSTM (NNAPI 1.3,
AOSP ``QLSTM.cpp``): one LSTM step in integer arithmetic, reproducing the gemmlowp fixed point.

QUANTIZED_16BIT_LSTM: input [batch, input_size] (QUANT8_ASYMM, scale 1/128, zero point 128);
input-to-{input, forget, cell, output} weights [units, input_size] and recurrent-to-{...} weights
[units, units] (QUANT8_ASYMM, one shared scale and zero point); four INT32 gate biases [units]
(scale = weights scale / 128, zero point 0); previous cell state [batch, units] (QUANT16_SYMM,
scale 2**-11, zero point 0); previous output [batch, units] (like the input). Outputs: cell
state and output, shaped and quantized like the previous ones. Gates are computed in Q3.12, the
cell state in Q4.11 and the output as 128 + round(o * tanh(c) * 128). As in AOSP (whose results
the CTS vectors hold), each gate is one matmul of the concatenation [input, previous output] with
the row [recurrent weights | input weights], matched column by column.

QUANTIZED_LSTM: 32 inputs (input, 8 int8 weights, 3 int16 peepholes, 4 int32 biases, projection
weights and bias, previous output and cell state, 4 int16 layer-norm weights, cell and projection
clips, 4 gate intermediate scales, hidden zero point and scale) -> output state, cell state,
output. Optional tensors (input gate = CIFG, peepholes, projection, layer norm) may be omitted.
See ``_qlstm_cell`` for the arithmetic.

Example:
    >>> import numpy as np
    >>> x = np.full((1, 1), 128, np.uint8)           # all real values 0: every gate sees 0
    >>> w = [np.full((1, 1), 100, np.uint8)] * 4
    >>> r = [np.full((1, 1), 100, np.uint8)] * 4
    >>> b = [np.zeros(1, np.int32)] * 4
    >>> cell, out = quantized_16bit_lstm_step(x, w, r, b, np.full((1, 1), 2048, np.int16),
    ...                                       np.full((1, 1), 128, np.uint8), 100, 1 / 32768)
    >>> int(cell[0, 0]), int(out[0, 0])             # c = 0.5 * 1.0, h = 0.5 * tanh(0.5)
    (1024, 158)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandLifetime as L, OperandType as T, OperationType
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops import _qlstm_fixed as fx
from nnscope.runtime.ops._qlstm_cell import (BIAS, I2G, LAYER_NORM, PEEPHOLE, PREV_CELL, PREV_OUTPUT,
                                     PROJECTION_B, PROJECTION_W, R2G, checked_log2, present,
                                     qlstm_step)
from nnscope.runtime.ops.registry import OpContext, register

_Q8, _I32, _Q16 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32, T.TENSOR_QUANT16_SYMM


# --------------------------------------------------------------------------- shape checks
def _dims(value) -> tuple[int, ...] | None:
    """Known dimensions of an Operand or array; None when omitted or (partly) unknown."""
    if isinstance(value, Operand):
        if value.lifetime == L.NO_VALUE or not value.dimensions or 0 in value.dimensions:
            return None
        return tuple(value.dimensions)
    return tuple(np.shape(value)) if present(value) else None


def _expect_shape(dims, index: int, expected: Sequence[int | None]) -> None:
    """``dims`` (when known) has ``expected`` shape; None entries match anything."""
    if dims is None:
        return
    c.expect(len(dims) == len(expected) and all(e is None or d == e
                                                for d, e in zip(dims, expected)),
             f"input {index}: shape {list(dims)} does not match {[e or '?' for e in expected]}")


# --------------------------------------------------------------------------- QUANTIZED_16BIT_LSTM
def _check_16bit_shapes(values: Sequence) -> None:
    x, h = _dims(values[0]), _dims(values[14])
    batch = x[0] if x else (h[0] if h else None)
    units = h[1] if h else None
    input_size = x[1] if x else None
    _expect_shape(x, 0, (batch, input_size))
    for index in range(1, 5):
        _expect_shape(_dims(values[index]), index, (units, input_size))
    for index in range(5, 9):
        _expect_shape(_dims(values[index]), index, (units, units))
    for index in range(9, 13):
        _expect_shape(_dims(values[index]), index, (units,))
    _expect_shape(_dims(values[13]), 13, (batch, units))
    _expect_shape(h, 14, (batch, units))


def _validate_16bit(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    c.expect_count(inputs, 15, "inputs")
    c.expect_count(outputs, 2, "outputs")
    for index, op_type in enumerate([_Q8] * 9 + [_I32] * 4 + [_Q16, _Q8]):
        c.expect_type(inputs, index, op_type)
    c.expect_type(outputs, 0, _Q16, "output")
    c.expect_type(outputs, 1, _Q8, "output")
    for index, rank in enumerate([2] * 9 + [1] * 4 + [2, 2]):
        c.expect_rank(inputs, index, exact=rank)
    for index in (0, 14):
        c.expect_quant_params(inputs[index], 1 / 128, 128, f"input {index}")
    weights = inputs[1]
    c.expect(weights.scale != 0, "input 1: weights scale must not be 0")
    for index in range(2, 9):
        c.expect_quant_params(inputs[index], weights.scale, weights.zero_point, f"input {index}")
    bias_scale = float(np.float32(weights.scale)) / 128
    for index in range(9, 13):
        c.expect_quant_params(inputs[index], bias_scale, 0, f"input {index}")
    c.expect(inputs[13].zero_point == 0 and checked_log2(inputs[13].scale) + 15 == 4,
             "input 13: cell state must have scale 2^-11 and zero point 0 (4 integer bits)")
    _check_16bit_shapes(inputs)


def quantized_16bit_lstm_step(x, input_weights, recurrent_weights, biases, cell, h,
                              weights_zero_point: int, bias_scale: float):
    """(int16 cell state, uint8 output); weights and biases in NNAPI order (input, forget, cell,
    output gates)."""
    multiplier, shift = c.quantize_multiplier(4096.0 * float(np.float32(bias_scale)))
    # AOSP fuses the gates into one matmul of the concatenation [input, previous output] with
    # rows [recurrent weights | input weights], column for column; the CTS vectors expect it.
    concat = np.concatenate([np.asarray(x, np.int64), np.asarray(h, np.int64)], axis=1) - 128
    gates = []
    for w_in, w_rec, bias in zip(input_weights, recurrent_weights, biases):
        rows = np.concatenate([np.asarray(w_rec, np.int64), np.asarray(w_in, np.int64)], axis=1)
        acc = np.asarray(bias, np.int64) + concat @ (rows - weights_zero_point).T
        scaled = c.multiply_by_quantized_multiplier(acc, multiplier, shift)
        gates.append(np.clip(scaled, fx.INT16_MIN, fx.INT16_MAX))  # Q3.12
    input_gate, forget_gate, output_gate = (fx.logistic(gates[i], 3) for i in (0, 1, 3))
    modulation = fx.tanh(gates[2], 3)
    kept = fx.srdhm16(forget_gate, np.asarray(cell, np.int64))               # Q4.11
    added = fx.rescale(fx.srdhm16(input_gate, modulation), 0, 4)             # Q0.15 -> Q4.11
    new_cell = fx.saturating_add16(added, kept)
    activation = fx.srdhm16(output_gate, fx.tanh(fx.rescale(new_cell, 4, 3), 3))
    output = np.clip(c.rounding_divide_by_pot(activation, 8), -128, 127) + 128
    return new_cell.astype(np.int16), output.astype(np.uint8)


def _execute_16bit(ctx: OpContext) -> list:
    args = ctx.inputs
    for index in range(15):
        c.expect(present(args[index]), f"input {index} is required")
    _check_16bit_shapes(args)
    weights = ctx.input_operands[1]
    return list(quantized_16bit_lstm_step(args[0], args[1:5], args[5:9], args[9:13], args[13],
                                          args[14], weights.zero_point,
                                          ctx.input_operands[9].scale))


# --------------------------------------------------------------------------- QUANTIZED_LSTM
_QLSTM_TYPES = ([T.TENSOR_QUANT8_ASYMM_SIGNED] + [T.TENSOR_QUANT8_SYMM] * 8 + [_Q16] * 3
                + [_I32] * 4 + [T.TENSOR_QUANT8_SYMM, _I32, T.TENSOR_QUANT8_ASYMM_SIGNED, _Q16]
                + [_Q16] * 4 + [T.FLOAT32] * 6 + [T.INT32, T.FLOAT32])
_QLSTM_RANKS = {0: 2, **{i: 2 for i in range(1, 9)}, **{i: 1 for i in range(9, 16)},
                PROJECTION_W: 2, PROJECTION_B: 1, PREV_OUTPUT: 2, PREV_CELL: 2,
                **{i: 1 for i in range(20, 24)}}
_REQUIRED = (0, 2, 3, 4, 6, 7, 8, 13, 14, 15, PREV_OUTPUT, PREV_CELL)


def _check_qlstm_shapes(values: Sequence) -> None:
    x, h, cell = _dims(values[0]), _dims(values[PREV_OUTPUT]), _dims(values[PREV_CELL])
    i2o, r2o = _dims(values[4]), _dims(values[8])
    batch = next((d[0] for d in (x, h, cell) if d), None)
    input_size = x[1] if x else (i2o[1] if i2o else None)
    units = next((d[0] for d in (i2o, r2o) if d), cell[1] if cell else None)
    output_size = r2o[1] if r2o else (h[1] if h else None)
    _expect_shape(x, 0, (batch, input_size))
    for gate in range(4):
        _expect_shape(_dims(values[I2G + gate]), I2G + gate, (units, input_size))
        _expect_shape(_dims(values[R2G + gate]), R2G + gate, (units, output_size))
        _expect_shape(_dims(values[BIAS + gate]), BIAS + gate, (units,))
        _expect_shape(_dims(values[LAYER_NORM + gate]), LAYER_NORM + gate, (units,))
    for index in PEEPHOLE.values():
        _expect_shape(_dims(values[index]), index, (units,))
    _expect_shape(_dims(values[PROJECTION_W]), PROJECTION_W, (output_size, units))
    _expect_shape(_dims(values[PROJECTION_B]), PROJECTION_B, (output_size,))
    _expect_shape(h, PREV_OUTPUT, (batch, output_size))
    _expect_shape(cell, PREV_CELL, (batch, units))


def _validate_qlstm(inputs: Sequence[Operand], outputs: Sequence[Operand]) -> None:
    c.expect_count(inputs, 32, "inputs")
    c.expect_count(outputs, 3, "outputs")
    for index, op_type in enumerate(_QLSTM_TYPES):
        c.expect_type(inputs, index, op_type)
    for index, op_type in enumerate((T.TENSOR_QUANT8_ASYMM_SIGNED, _Q16,
                                     T.TENSOR_QUANT8_ASYMM_SIGNED)):
        c.expect_type(outputs, index, op_type, "output")
    for index, rank in _QLSTM_RANKS.items():
        c.expect_rank(inputs, index, exact=rank)
    for index in _REQUIRED:
        c.expect(inputs[index].lifetime != L.NO_VALUE, f"input {index} is required")
    shift = checked_log2(float(inputs[PREV_CELL].scale))
    c.expect(-15 <= shift <= -9, f"input {PREV_CELL}: cell state scale must be 2^-15 .. 2^-9")
    _check_qlstm_shapes(inputs)


def _check_qlstm_optionals(args: Sequence) -> None:
    """All-or-none rules for CIFG, peepholes and layer normalisation (AOSP ``prepare``)."""
    cifg = not present(args[I2G])
    c.expect(cifg == (not present(args[R2G])),
             "CIFG needs input-to-input and recurrent-to-input weights both present or omitted")
    c.expect(cifg == (not present(args[BIAS])), "the input gate bias must be omitted with CIFG"
             if cifg else "input 12: input gate bias is required without CIFG")
    peepholes = [present(args[i]) for i in PEEPHOLE.values()]
    c.expect(not any(peepholes) or (all(peepholes[1:]) and (peepholes[0] or cifg)),
             "peephole weights must be all present or all omitted")
    norms = [present(args[LAYER_NORM + gate]) for gate in range(4)]
    c.expect(not (cifg and norms[0]), "input 20: input layer norm weights given with CIFG")
    c.expect(len(set(norms[1:] if cifg else norms)) == 1,
             "layer norm weights must be all present or all omitted")
    c.expect(present(args[PROJECTION_W]) or not present(args[PROJECTION_B]),
             "input 17: projection bias given without projection weights")


def _execute_qlstm(ctx: OpContext) -> list:
    args = ctx.inputs
    for index in _REQUIRED:
        c.expect(present(args[index]), f"input {index} is required")
    _check_qlstm_shapes(args)
    _check_qlstm_optionals(args)
    if not present(args[PROJECTION_W]):
        c.expect(np.shape(args[PREV_OUTPUT])[1] == np.shape(args[4])[0],
                 "without projection the output size must equal the number of units")
    output, cell = qlstm_step(args, ctx.input_operands)
    return [output, cell, output.copy()]


register(OperationType.QUANTIZED_16BIT_LSTM, "quantized_lstm", _validate_16bit, _execute_16bit)
register(OperationType.QUANTIZED_LSTM, "quantized_lstm", _validate_qlstm, _execute_qlstm)
