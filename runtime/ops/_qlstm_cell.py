"""The integer QUANTIZED_LSTM step (AOSP ``QLSTM.cpp`` with ``QuantUtils``; TFLite's 8x8->16
integer LSTM).

Each gate is two int8 matmuls rescaled to its intermediate scale and accumulated in int16
(saturating), an optional peephole term, an optional integer layer normalisation (which adds
the gate bias), then gemmlowp's Q3.12 logistic/tanh. The cell state is int16 with scale
2**cell_shift; the hidden state ``o * tanh(c)`` is requantized to int8 and optionally projected.

Where AOSP's Android 11 code is known to be off, this follows TFLite's reference instead (the
results agree on every CTS vector): peepholes read the previous cell state (the updated one for
the output gate) over ``units`` elements; without layer normalisation the gate bias is folded
into the input matmul; a missing projection bias counts as zeros; without projection the output
is the hidden state; the hidden zero point is added (AOSP subtracts it and compensates in the
projection bias, the same result whenever there is a projection); the projection clip is in
units of the output state's scale.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from nnscope.runtime.hal.types import Operand
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops import _qlstm_fixed as fx
from nnscope.runtime.ops.registry import OpValidationError

#: Input indexes per gate (input, forget, cell, output).
I2G, R2G, BIAS, LAYER_NORM, INTERMEDIATE = 1, 5, 12, 20, 26
PEEPHOLE = {0: 9, 1: 10, 3: 11}
PROJECTION_W, PROJECTION_B, PREV_OUTPUT, PREV_CELL = 16, 17, 18, 19
CELL_CLIP, PROJECTION_CLIP, HIDDEN_ZP, HIDDEN_SCALE = 24, 25, 30, 31


def present(value) -> bool:
    return value is not None and np.asarray(value).size > 0


def checked_log2(x: float) -> int:
    """AOSP ``CheckedLog2``: the exponent of a power-of-two scale, else OpValidationError."""
    if not x > 0:
        raise OpValidationError(f"scale {x} is not a power of two")
    log2 = math.log(x) / math.log(2.0)
    rounded = round(log2)
    if abs(log2 - rounded) >= 1e-3:
        raise OpValidationError(f"scale {x} is not a power of two")
    return int(rounded)


def _multiplier(real: float) -> tuple[int, int]:
    return c.quantize_multiplier(float(real))


def _f32_scale(*factors: float) -> float:
    """``a * b / d`` computed in float32 as AOSP does with its float scales."""
    a, b, d = (np.float32(f) for f in factors)
    return float(a * b / d)


class _Step(NamedTuple):
    ins: Sequence
    ops: Sequence[Operand]
    x: np.ndarray        # int64 [batch, input_size]
    h: np.ndarray        # int64 [batch, output_size]
    cell: np.ndarray     # int64 [batch, units]
    cell_shift: int


# --------------------------------------------------------------------------- building blocks
def matmul_accumulate(x, weights, bias, multiplier: int, shift: int, out_zp: int, acc, lo, hi):
    """QuantUtils ``MatrixBatchVectorMultiplyAccumulate``: acc + rescale(bias + x W') + zp,
    saturated to [lo, hi]."""
    total = bias + x @ np.asarray(weights, np.int64).T
    scaled = c.multiply_by_quantized_multiplier(total, multiplier, shift)
    return np.clip(scaled + out_zp + acc, lo, hi)


def zero_point_bias(zero_point: int, weights, bias=None) -> np.ndarray:
    """``PrecomputeZeroPointTimesWeightWithBias``: bias + zero_point * row sums of weights."""
    row_sums = np.asarray(weights, np.int64).sum(axis=1)
    base = np.zeros_like(row_sums) if bias is None else np.asarray(bias, np.int64)
    return base + zero_point * row_sums


def layer_norm(gate, weights, bias, scale: float, variance_limit: int) -> np.ndarray:
    """QuantUtils ``ApplyLayerNorm`` on an int16 gate [batch, units]."""
    scale_a, scale_b = _multiplier(scale)
    n = gate.shape[1]
    mean = fx.trunc_div(gate.sum(axis=1) * 1024, n)
    variance = (gate * gate).sum(axis=1) * ((1 << 20) // n) - mean * mean
    variance = fx.trunc_div(variance, 1 << 20)
    weights = np.asarray(weights, np.int64)
    bias = np.zeros(n, np.int64) if bias is None else np.asarray(bias, np.int64)
    out = np.empty_like(gate)
    for row in range(gate.shape[0]):
        inv_a, inv_b = fx.inv_sqrt_multiplier(int(variance[row]) if variance[row] >= 1
                                              else variance_limit)
        shifted = 1024 * gate[row] - mean[row]
        rescaled = c.multiply_by_quantized_multiplier(shifted, inv_a, inv_b)
        value = rescaled * weights + bias
        value = fx.trunc_div(np.where(value > 0, value + 512, value - 512), 1024)
        value = c.multiply_by_quantized_multiplier(value, scale_a, scale_b + 12)
        out[row] = np.clip(value, fx.INT16_MIN, fx.INT16_MAX)
    return out


# --------------------------------------------------------------------------- gates
def _matmuls(s: _Step, gate: int, fold_bias: bool) -> np.ndarray:
    ops, ins = s.ops, s.ins
    inter = float(ins[INTERMEDIATE + gate])
    acc = np.zeros((s.x.shape[0], s.cell.shape[1]), np.int64)
    gate_bias = ins[BIAS + gate] if fold_bias and present(ins[BIAS + gate]) else None
    for source, index, operand, bias in ((s.x, I2G + gate, ops[0], gate_bias),
                                         (s.h, R2G + gate, ops[PREV_OUTPUT], None)):
        weights = ins[index]
        effective = zero_point_bias(-operand.zero_point, weights, bias)
        multiplier, shift = _multiplier(_f32_scale(ops[index].scale, operand.scale, inter))
        acc = matmul_accumulate(source, weights, effective, multiplier, shift, 0, acc,
                                fx.INT16_MIN, fx.INT16_MAX)
    return acc


def _peephole(s: _Step, gate: int, cell, acc) -> np.ndarray:
    index = PEEPHOLE[gate]
    real = np.float32(2.0 ** s.cell_shift * float(np.float32(s.ops[index].scale))
                      / float(np.float32(s.ins[INTERMEDIATE + gate])))
    multiplier, shift = _multiplier(real)
    product = np.asarray(s.ins[index], np.int64) * cell
    scaled = c.multiply_by_quantized_multiplier(product, multiplier, shift)
    return np.clip(acc + scaled, fx.INT16_MIN, fx.INT16_MAX)


def gate_preactivation(s: _Step, gate: int, cell=None) -> np.ndarray:
    """The int16 Q3.12 input of a gate's activation."""
    norm = s.ins[LAYER_NORM + gate]
    acc = _matmuls(s, gate, fold_bias=not present(norm))
    if gate in PEEPHOLE and present(s.ins[PEEPHOLE[gate]]):
        acc = _peephole(s, gate, cell, acc)
    if present(norm):
        norm_scale = float(np.float32(s.ops[LAYER_NORM + gate].scale))
        limit = min(1, int(np.float32(10000) * np.float32(norm_scale)))
        bias = s.ins[BIAS + gate] if present(s.ins[BIAS + gate]) else None
        acc = layer_norm(acc, norm, bias, norm_scale, limit)
    return acc


# --------------------------------------------------------------------------- the step
def _new_cell(s: _Step, input_gate, forget_gate, cell_gate) -> np.ndarray:
    kept = fx.wrap16(c.rounding_divide_by_pot(forget_gate * s.cell, 15))
    added = fx.wrap16(c.rounding_divide_by_pot(input_gate * cell_gate, 30 + s.cell_shift))
    cell = fx.saturating_add16(kept, added)
    clip = float(s.ins[CELL_CLIP])
    if clip > 0:
        scale = np.float32(s.ops[PREV_CELL].scale)
        limit = int(min(max(np.float32(clip) / scale, -32768.0), 32767.0))
        if limit > 0:
            cell = np.clip(cell, -limit, limit)
    return cell


def _hidden(s: _Step, output_gate, cell) -> np.ndarray:
    hidden_scale = float(np.float32(s.ins[HIDDEN_SCALE]))
    multiplier, shift = _multiplier(np.float32(2.0 ** -15 / hidden_scale * 2.0 ** -15))
    product = output_gate * fx.tanh(cell, s.cell_shift + 15)
    value = c.multiply_by_quantized_multiplier(product, multiplier, shift) + int(s.ins[HIDDEN_ZP])
    return np.clip(value, -128, 127)


def _project(s: _Step, hidden) -> np.ndarray:
    weights, out_op = s.ins[PROJECTION_W], s.ops[PREV_OUTPUT]
    if not present(weights):
        return hidden
    bias = s.ins[PROJECTION_B] if present(s.ins[PROJECTION_B]) else None
    effective = zero_point_bias(-int(s.ins[HIDDEN_ZP]), weights, bias)
    real = _f32_scale(s.ops[PROJECTION_W].scale, s.ins[HIDDEN_SCALE], out_op.scale)
    multiplier, shift = _multiplier(real)
    out = matmul_accumulate(hidden, weights, effective, multiplier, shift, out_op.zero_point,
                            0, -128, 127)
    clip = float(s.ins[PROJECTION_CLIP])
    if clip > 0:
        limit = int(min(max(np.float32(clip) / np.float32(out_op.scale), -128.0), 127.0))
        if limit > 0:
            out = np.clip(out, -limit, limit)
    return out


def qlstm_step(ins: Sequence, ops: Sequence[Operand]) -> tuple[np.ndarray, np.ndarray]:
    """One QUANTIZED_LSTM step: (int8 output [batch, output_size], int16 cell [batch, units])."""
    cell_shift = checked_log2(float(ops[PREV_CELL].scale))
    c.expect(-15 <= cell_shift <= -9,
             f"input {PREV_CELL}: cell state scale 2^{cell_shift} is outside [2^-15, 2^-9]")
    s = _Step(ins, ops, np.asarray(ins[0], np.int64), np.asarray(ins[PREV_OUTPUT], np.int64),
              np.asarray(ins[PREV_CELL], np.int64), cell_shift)
    forget = fx.logistic(gate_preactivation(s, 1, s.cell), 3)
    cell_gate = fx.tanh(gate_preactivation(s, 2), 3)
    if present(ins[I2G]):
        input_gate = fx.logistic(gate_preactivation(s, 0, s.cell), 3)
    else:  # CIFG
        input_gate = fx.INT16_MAX - forget
    cell = _new_cell(s, input_gate, forget, cell_gate)
    output_gate = fx.logistic(gate_preactivation(s, 3, cell), 3)
    out = _project(s, _hidden(s, output_gate, cell))
    return out.astype(np.int8), cell.astype(np.int16)
