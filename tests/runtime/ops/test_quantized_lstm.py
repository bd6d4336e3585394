"""QUANTIZED_16BIT_LSTM and QUANTIZED_LSTM: every CTS vector (bit-exact against the expected
data), signature validation at model validation, and the gemmlowp fixed-point helpers."""
from __future__ import annotations

import dataclasses
import gzip
import json
import math

import numpy as np
import pytest

from nnscope.runtime.cts import loader
from nnscope.runtime.hal.types import (HalModel, Operand, OperandLifetime as L, OperandType as T,
                               Operation, OperationType)
from nnscope.runtime.ops import _qlstm_fixed as fx
from nnscope.runtime.ops._qlstm_cell import qlstm_step
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.ops.lstm import CellParams, CellWeights, lstm_cell
from nnscope.runtime.ops.quantized_lstm import _execute_qlstm, quantized_16bit_lstm_step
from nnscope.runtime.ops.registry import OpContext, OpValidationError
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.QUANTIZED_16BIT_LSTM, OperationType.QUANTIZED_LSTM})
MIN_PASSED = {"QUANTIZED_16BIT_LSTM": 12, "QUANTIZED_LSTM": 6}

test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)

needs_vectors = pytest.mark.skipif(not (loader.CTS_ROOT / "index.json").exists(),
                                   reason="CTS vectors not installed")


# --------------------------------------------------------------------------- fixed point
def test_srdhm_saturates_only_min_times_min():
    assert fx.srdhm32(fx.INT32_MIN, fx.INT32_MIN) == fx.INT32_MAX
    assert fx.srdhm32(fx.INT32_MIN, fx.INT32_MAX) == -fx.INT32_MAX
    assert fx.srdhm16(-32768, -32768) == 32767
    assert fx.srdhm16(-32768, 32767) == -32767


def test_srdhm_rounds_half_up_and_halves_exactly():
    assert fx.srdhm16(16384, 16384) == 8192            # 0.5 * 0.5 = 0.25
    assert fx.srdhm16(1, 16384) == 1                   # +0.5 ulp rounds up
    assert fx.srdhm16(-1, 16384) == 0                  # -0.5 ulp rounds toward +inf
    assert fx.srdhm32(1 << 30, 1 << 30) == 1 << 29


def test_multiply_by_pot_saturates_left_and_rounds_right():
    assert fx.multiply_by_pot(20000, 1).item() == 32767
    assert fx.multiply_by_pot(-20000, 1).item() == -32768
    assert fx.multiply_by_pot(5, -1).item() == 3       # 2.5 -> 3
    assert fx.multiply_by_pot(-5, -1).item() == -3     # -2.5 -> -3 (away from zero)
    assert fx.multiply_by_pot(1 << 29, 2, total_bits=32).item() == fx.INT32_MAX


def test_wrap16_is_cpp_narrowing():
    assert fx.wrap16(np.array([32768, -32769, 65535])).tolist() == [-32768, 32767, -1]


@pytest.mark.parametrize("bits", [0, 3, 4, 6])
def test_logistic_and_tanh_track_the_real_functions(bits):
    raw = np.arange(-32768, 32768, dtype=np.int64)
    real = raw / 2.0 ** (15 - bits)
    assert np.abs(fx.logistic(raw, bits) / 32768 - 1 / (1 + np.exp(-real))).max() < 3e-4
    assert np.abs(fx.tanh(raw, bits) / 32768 - np.tanh(real)).max() < 4e-4


def test_logistic_and_tanh_fixed_points():
    assert fx.logistic(np.array([0]), 3).tolist() == [16384]       # 0.5
    assert fx.tanh(np.array([0]), 3).tolist() == [0]
    assert fx.exp_on_negative_values(np.array([0]), 3).tolist() == [32767]
    a = np.array([1, 100, 4096, 30000])
    assert (fx.tanh(-a, 3) == -fx.tanh(a, 3)).all()
    assert (np.abs(fx.logistic(a, 3) + fx.logistic(-a, 3) - 32767) <= 1).all()


def test_inv_sqrt_multiplier():
    assert fx.inv_sqrt_multiplier(1) == (fx.INT32_MAX, 0)
    assert fx.inv_sqrt_multiplier(0) == (fx.INT32_MAX, 0)
    for value in (4, 12345, 1 << 20, (1 << 31) - 1):
        multiplier, shift = fx.inv_sqrt_multiplier(value)
        assert math.isclose(multiplier * 2.0 ** (shift - 31), 1 / math.sqrt(value), rel_tol=1e-6)


# --------------------------------------------------------------------------- vectors, bit-exact
def _vector(spec: str, index: int = 0):
    raw = json.loads(gzip.open(loader.CTS_ROOT / f"{spec}.json.gz").read())
    operands = raw["tests"][index]["model"]["main"]["operands"]
    ops = [Operand(T[o["type"]], tuple(o["dimensions"]), o["scale"], o["zeroPoint"])
           for o in operands]
    values = []
    for op, o in zip(ops, operands):
        if not o["dimensions"]:
            values.append(o["data"][0])
        else:
            values.append(np.array(o["data"]).reshape(op.dimensions) if o["data"] else None)
    return values, ops


@needs_vectors
def test_16bit_lstm_vector_is_bit_exact():
    v, ops = _vector("V1_2/quantized_lstm")
    cell, out = quantized_16bit_lstm_step(v[0], v[1:5], v[5:9], v[9:13], v[13], v[14],
                                          ops[1].zero_point, ops[9].scale)
    assert cell.tolist() == v[15].tolist()
    assert out.tolist() == v[16].tolist()
    assert cell.dtype == np.int16 and out.dtype == np.uint8


@needs_vectors
@pytest.mark.parametrize("spec, index", [("V1_3/qlstm_projection", 0),
                                         ("V1_3/qlstm_projection", 2),
                                         ("V1_3/qlstm_noprojection", 0)])
def test_qlstm_vectors_are_bit_exact(spec, index):
    v, ops = _vector(spec, index)
    output, cell = qlstm_step(v[:32], ops[:32])
    assert output.tolist() == v[34].tolist() == v[32].tolist()
    assert cell.tolist() == v[33].tolist()


# --------------------------------------------------------------------------- validation
def _model(spec: str, name: str) -> HalModel:
    test = next(t for t in loader.load_file(loader.CTS_ROOT / f"{spec}.json.gz") if t.name == name)
    return test.model


def _with_operand(model: HalModel, index: int, **changes) -> HalModel:
    operands = list(model.main.operands)
    operands[index] = dataclasses.replace(operands[index], **changes)
    return dataclasses.replace(model, main=dataclasses.replace(model.main,
                                                               operands=tuple(operands)))


def _reject(model: HalModel, pattern: str) -> None:
    with pytest.raises(OpValidationError, match=pattern):
        CpuExecutor(model)


@needs_vectors
@pytest.mark.parametrize("index, changes, pattern", [
    (0, {"type": T.TENSOR_QUANT8_ASYMM_SIGNED}, "input 0: expected TENSOR_QUANT8_ASYMM"),
    (9, {"type": T.TENSOR_FLOAT32}, "input 9: expected TENSOR_INT32"),
    (15, {"type": T.TENSOR_INT32}, "output 0: expected TENSOR_QUANT16_SYMM"),
    (2, {"dimensions": (4, 3)}, r"input 2: shape \[4, 3\]"),
    (6, {"dimensions": (4, 4, 1)}, "input 6: expected rank 2"),
    (10, {"dimensions": (5,)}, r"input 10: shape \[5\]"),
    (0, {"zero_point": 0}, "input 0: expected scale"),
    (3, {"scale": 0.5}, "input 3: expected scale"),
    (13, {"scale": 1 / 1024}, "input 13: cell state must have scale 2\\^-11"),
])
def test_16bit_lstm_rejects_bad_signatures_at_model_validation(index, changes, pattern):
    model = _model("V1_2/quantized_lstm", "quantized_lstm")
    CpuExecutor(model)  # the vector's own model is valid
    _reject(_with_operand(model, index, **changes), pattern)


@needs_vectors
@pytest.mark.parametrize("index, changes, pattern", [
    (0, {"type": T.TENSOR_QUANT8_ASYMM}, "input 0: expected TENSOR_QUANT8_ASYMM_SIGNED"),
    (9, {"type": T.TENSOR_QUANT8_SYMM}, "input 9: expected TENSOR_QUANT16_SYMM"),
    (30, {"type": T.FLOAT32}, "input 30: expected INT32"),
    (33, {"type": T.TENSOR_QUANT8_SYMM}, "output 1: expected TENSOR_QUANT16_SYMM"),
    (5, {"dimensions": (4, 2)}, r"input 5: shape \[4, 2\]"),
    (16, {"dimensions": (3, 5)}, r"input 16: shape \[3, 5\]"),
    (21, {"dimensions": (4, 1)}, "input 21: expected rank 1"),
    (19, {"scale": 0.001}, "is not a power of two"),
    (19, {"scale": 2.0 ** -8}, "cell state scale must be"),
    (2, {"lifetime": L.NO_VALUE}, "input 2 is required"),
])
def test_qlstm_rejects_bad_signatures_at_model_validation(index, changes, pattern):
    model = _model("V1_3/qlstm_projection", "qlstm_projection")
    CpuExecutor(model)
    _reject(_with_operand(model, index, **changes), pattern)


@needs_vectors
def test_qlstm_half_cifg_is_an_op_error_not_a_numpy_error():
    v, ops = _vector("V1_3/qlstm_projection")
    v[1] = None  # input-to-input weights omitted, recurrent-to-input kept
    ctx = OpContext(Operation(OperationType.QUANTIZED_LSTM, tuple(range(32)), (32, 33, 34)),
                    v[:32], ops[:32], ops[32:])
    with pytest.raises(OpValidationError, match="CIFG"):
        _execute_qlstm(ctx)


# --------------------------------------------------------------------------- float oracles
RNG = np.random.default_rng(11)


def _quantize(real, scale, dtype, zero_point=0):
    info = np.iinfo(dtype)
    return np.clip(np.round(real / scale) + zero_point, info.min, info.max).astype(dtype)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@pytest.mark.parametrize("batch, input_size, units", [(2, 3, 4), (1, 4, 4), (3, 5, 2)])
def test_16bit_lstm_tracks_float_math(batch, input_size, units):
    """Same fused matmul layout as the kernel, float activations: a few output quanta apart."""
    w_scale, w_zp = 0.004, 100
    x = RNG.integers(0, 256, (batch, input_size)).astype(np.uint8)
    h = RNG.integers(0, 256, (batch, units)).astype(np.uint8)
    w_in = [RNG.integers(0, 256, (units, input_size)).astype(np.uint8) for _ in range(4)]
    w_rec = [RNG.integers(0, 256, (units, units)).astype(np.uint8) for _ in range(4)]
    biases = [RNG.integers(-40000, 40000, units).astype(np.int32) for _ in range(4)]
    cell = RNG.integers(-4096, 4096, (batch, units)).astype(np.int16)
    new_cell, out = quantized_16bit_lstm_step(x, w_in, w_rec, biases, cell, h, w_zp,
                                              w_scale / 128)
    concat = (np.concatenate([x, h], axis=1).astype(np.float64) - 128) / 128
    gates = [concat @ ((np.concatenate([r, i], axis=1).astype(np.float64) - w_zp) * w_scale).T
             + b * w_scale / 128
             for i, r, b in zip(w_in, w_rec, biases)]
    gates = [np.clip(g, -8, 8 - 2 ** -12) for g in gates]
    c_real = (_sigmoid(gates[1]) * cell / 2048 + _sigmoid(gates[0]) * np.tanh(gates[2]))
    h_real = _sigmoid(gates[3]) * np.tanh(np.clip(c_real, -8, 8))
    assert np.abs(new_cell / 2048 - c_real).max() < 2e-3
    assert np.abs(out.astype(np.int64) - np.clip(np.round(h_real * 128) + 128, 0, 255)).max() <= 1


W_SCALE, PEEPHOLE_SCALE, CELL_SCALE = 0.5 / 127, 0.5 / 32767, 2.0 ** -11


def _qlstm_case(cifg: bool, peephole: bool, projection: bool):
    """QUANTIZED_LSTM inputs without layer normalisation (gates in Q3.12, cell in Q4.11)."""
    batch, input_size, units = 2, 3, 4
    out_size = 2 if projection else units
    q8 = lambda shape: _quantize(RNG.uniform(-0.5, 0.5, shape), W_SCALE, np.int8)  # noqa: E731
    ins: list = [None] * 32
    ops = [Operand(T.TENSOR_INT32)] * 32
    ins[0] = _quantize(RNG.uniform(-1, 1, (batch, input_size)), 1 / 128, np.int8)
    ins[18] = _quantize(RNG.uniform(-1, 1, (batch, out_size)), 1 / 128, np.int8)
    ins[19] = _quantize(RNG.uniform(-1, 1, (batch, units)), CELL_SCALE, np.int16)
    ops[0] = ops[18] = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (), 1 / 128, 0)
    ops[19] = Operand(T.TENSOR_QUANT16_SYMM, (), CELL_SCALE, 0)
    for gate in range(1 if cifg else 0, 4):
        ins[1 + gate], ins[5 + gate] = q8((units, input_size)), q8((units, out_size))
        ops[1 + gate] = ops[5 + gate] = Operand(T.TENSOR_QUANT8_SYMM, (), W_SCALE, 0)
        ins[12 + gate] = _quantize(RNG.uniform(-0.5, 0.5, units), W_SCALE / 128, np.int32)
    for index in ((10, 11) if cifg else (9, 10, 11)) if peephole else ():
        ins[index] = _quantize(RNG.uniform(-0.5, 0.5, units), PEEPHOLE_SCALE, np.int16)
        ops[index] = Operand(T.TENSOR_QUANT16_SYMM, (), PEEPHOLE_SCALE, 0)
    if projection:
        ins[16] = q8((out_size, units))
        ops[16] = Operand(T.TENSOR_QUANT8_SYMM, (), W_SCALE, 0)
        ins[17] = _quantize(RNG.uniform(-0.1, 0.1, out_size), W_SCALE / 128, np.int32)
    ins[24:32] = [0.0, 0.0, *[2.0 ** -12] * 4, 0, 1 / 128]  # clips, gate scales, hidden zp/scale
    return ins, ops


@pytest.mark.parametrize("cifg", [False, True], ids=["gates", "cifg"])
@pytest.mark.parametrize("peephole", [False, True], ids=["", "peephole"])
@pytest.mark.parametrize("projection", [False, True], ids=["", "projection"])
def test_qlstm_without_layer_norm_tracks_the_float_lstm(cifg, peephole, projection):
    ins, ops = _qlstm_case(cifg, peephole, projection)
    output, cell = qlstm_step(ins, ops)

    def deq(index, scale):
        return None if ins[index] is None else ins[index].astype(np.float32) * np.float32(scale)

    weights = CellWeights(*(deq(i, W_SCALE) for i in range(1, 9)),
                          *(deq(i, PEEPHOLE_SCALE) for i in range(9, 12)),
                          *(deq(i, W_SCALE / 128) for i in range(12, 16)),
                          deq(16, W_SCALE), deq(17, W_SCALE / 128))
    h_ref, c_ref = lstm_cell(deq(0, 1 / 128), deq(18, 1 / 128), deq(19, CELL_SCALE), weights,
                             CellParams(activation=4))
    assert np.abs(cell * CELL_SCALE - c_ref).max() < 4e-3
    assert np.abs(output / 128 - np.clip(h_ref, -1, 127 / 128)).max() <= 3 / 128
