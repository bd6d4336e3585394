"""Hand-checked kernel behaviour of the elementwise, activation, reshape and quantization
families (the CTS vectors cover the rest): rounding, broadcasting, int32, validators."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import ChannelQuant, FuseCode, Operand, OperandType as T, Operation, OperationType as O
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops import registry
from nnscope.runtime.ops.registry import OpContext, OpValidationError

F32, I32 = T.TENSOR_FLOAT32, T.TENSOR_INT32
U8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


def run(op_type, inputs, in_operands, out_operands):
    record = registry.get(op_type)
    record.validate(in_operands, out_operands)
    operation = Operation(op_type, tuple(range(len(inputs))), (len(inputs),))
    return record.execute(OpContext(operation, inputs, in_operands, out_operands))[0]


def binary(op_type, a, b, op_a, op_b=None, out=None, fuse=0):
    op_b = op_b or op_a
    return run(op_type, [a, b, fuse], [op_a, op_b, Operand(T.INT32)], [out or op_a])


# ----------------------------------------------------------------------------- _common
def test_round_half_away_from_zero():
    assert c.round_half_away(np.float32([0.5, -0.5, 1.5, -2.5, 0.49999997])).tolist() == \
        [1, -1, 2, -3, 0]


def test_quantize_clamps_and_rounds_away():
    q = Operand(U8, (4,), scale=0.5, zero_point=10)
    assert c.quantize(np.float32([-100, 0.25, -0.25, 200]), q).tolist() == [0, 11, 9, 255]


def test_dequantize_per_channel():
    op = Operand(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, (2, 2), channel_quant=ChannelQuant((0.5, 2.0), 1))
    assert c.dequantize(np.int8([[2, 2], [-4, 1]]), op).tolist() == [[1.0, 4.0], [-2.0, 2.0]]


@pytest.mark.parametrize("fuse, expected", [(FuseCode.NONE, (0, 255)), (FuseCode.RELU, (128, 255)),
                                            (FuseCode.RELU1, (126, 130)), (FuseCode.RELU6, (128, 140))])
def test_quantized_activation_range(fuse, expected):
    assert c.quantized_activation_range(fuse, 0.5, 128, np.uint8) == expected


def test_fixed_point_helpers_match_gemmlowp():
    assert c.rounding_divide_by_pot(np.int64([5, -5, 6, -7]), 1).tolist() == [3, -3, 3, -4]
    assert c.quantize_multiplier(0.5) == (1 << 30, 0)
    big = np.int64([-(1 << 31)])
    assert c.saturating_rounding_doubling_high_mul(big, -(1 << 31)).tolist() == [(1 << 31) - 1]


# ----------------------------------------------------------------------------- elementwise
def test_float_broadcast_and_relu6():
    out = binary(O.ADD, np.float32([[1], [5]]), np.float32([1, 2, 3]), Operand(F32, (2, 1)),
                 Operand(F32, (3,)), Operand(F32, (2, 3)), fuse=FuseCode.RELU6)
    assert out.tolist() == [[2, 3, 4], [6, 6, 6]]


def test_float16_computed_through_float32():
    h = Operand(T.TENSOR_FLOAT16, (2,))
    out = binary(O.MUL, np.float16([1.5, 2048]), np.float16([2, 1.0009765625]), h)
    assert out.dtype == np.float16 and out.tolist() == [3.0, 2050.0]


def test_quant8_add_different_scales():
    a, b = Operand(U8, (2,), 2.0, 0), Operand(U8, (2,), 1.0, 0)
    out = binary(O.ADD, np.uint8([1, 2]), np.uint8([3, 4]), a, b, Operand(U8, (2,), 1.0, 0))
    assert out.tolist() == [5, 8]


def test_quant8_signed_sub_rounds_half_away():
    s = Operand(S8, (2,), 1.0, 0)
    out = binary(O.SUB, np.int8([0, 5]), np.int8([5, 0]), s, s, Operand(S8, (2,), 10.0, 0))
    assert out.tolist() == [-1, 1]  # -0.5 -> -1 and 0.5 -> 1, like gemmlowp


def test_quant8_mul_needs_output_scale_above_product():
    a = Operand(U8, (1,), 1.0, 0)
    with pytest.raises(OpValidationError, match="output scale > input0 scale"):
        binary(O.MUL, np.uint8([2]), np.uint8([3]), a, a, Operand(U8, (1,), 0.5, 0))


def test_int32_div_is_floor_and_zero_divisor_gives_zero():
    i = Operand(I32, (4,))
    out = binary(O.DIV, np.int32([7, -7, 7, 5]), np.int32([2, 2, -2, 0]), i)
    assert out.tolist() == [3, -4, -4, 0]


def test_int32_requires_no_activation():
    i = Operand(I32, (1,))
    with pytest.raises(OpValidationError, match="fused activation NONE"):
        binary(O.ADD, np.int32([1]), np.int32([1]), i, fuse=FuseCode.RELU)


def test_div_rejects_quant8():
    q = Operand(U8, (1,), 1.0, 0)
    with pytest.raises(OpValidationError, match=r"input 0: expected TENSOR_FLOAT32\|TENSOR_FLOAT16"
                                                r"\|TENSOR_INT32, got TENSOR_QUANT8_ASYMM"):
        binary(O.DIV, np.uint8([1]), np.uint8([1]), q)


def test_rank_above_four_rejected():
    t = Operand(F32, (1,) * 5)
    with pytest.raises(OpValidationError, match="input 0: expected rank <= 4, got 5"):
        binary(O.ADD, np.zeros((1,) * 5, np.float32), np.zeros((1,) * 5, np.float32), t)


# ----------------------------------------------------------------------------- activation
def test_quant_relu1_clamps_in_quantized_domain():
    q = Operand(U8, (3,), 0.5, 128)
    assert run(O.RELU1, [np.uint8([0, 129, 255])], [q], [q]).tolist() == [126, 129, 130]


def test_softmax_beta_and_axis():
    t = Operand(F32, (2, 2))
    x = np.float32([[0, 1], [0, 0]])
    out = run(O.SOFTMAX, [x, 2.0, 0], [t, Operand(T.FLOAT32), Operand(T.INT32)], [t])
    np.testing.assert_allclose(out[:, 1], [np.exp(2) / (1 + np.exp(2)), 1 / (1 + np.exp(2))], rtol=1e-6)


def test_logistic_quant_output_scale_checked():
    q = Operand(U8, (1,), 0.1, 0)
    with pytest.raises(OpValidationError, match="output 0: expected scale 0.00390625 and zeroPoint 0"):
        run(O.LOGISTIC, [np.uint8([0])], [q], [q])


def test_tanh_quant8_signed():
    out = run(O.TANH, [np.int8([-128, 0, 10])], [Operand(S8, (3,), 0.1, 0)],
              [Operand(S8, (3,), 1 / 128, 0)])
    assert out.tolist() == [-128, 0, round(np.tanh(1.0) * 128)]


# ----------------------------------------------------------------------------- reshape
def test_reshape_minus_one_and_bad_shape():
    t, s = Operand(F32, (2, 3)), Operand(I32, (2,))
    assert run(O.RESHAPE, [np.zeros((2, 3), np.float32), np.int32([3, -1])], [t, s], [t]).shape == (3, 2)
    with pytest.raises(OpValidationError, match="does not fit 6 elements"):
        run(O.RESHAPE, [np.zeros((2, 3), np.float32), np.int32([4, -1])], [t, s], [t])


def test_concat_negative_axis_and_requantization():
    a, b = Operand(U8, (1, 2), 1.0, 0), Operand(U8, (1, 2), 0.5, 10)
    out = Operand(U8, (1, 4), 1.0, 0)
    result = run(O.CONCATENATION, [np.uint8([[1, 2]]), np.uint8([[13, 15]]), -1],
                 [a, b, Operand(T.INT32)], [out])
    assert result.tolist() == [[1, 2, 2, 3]]  # (13-10)*0.5 = 1.5 -> 2, (15-10)*0.5 = 2.5 -> 3


def test_concat_rank_mismatch_rejected():
    with pytest.raises(OpValidationError, match="input 1: expected rank 2 like input 0, got 3"):
        registry.get(O.CONCATENATION).validate(
            [Operand(F32, (1, 2)), Operand(F32, (1, 2, 1)), Operand(T.INT32)], [Operand(F32, (2, 2))])


def test_pad_quant_uses_zero_point():
    q = Operand(U8, (1, 2), 0.5, 7)
    out = run(O.PAD, [np.uint8([[1, 2]]), np.int32([[0, 0], [1, 2]])], [q, Operand(I32, (2, 2))],
              [Operand(U8, (1, 5), 0.5, 7)])
    assert out.tolist() == [[7, 1, 2, 7, 7]]


# ----------------------------------------------------------------------------- quantization
def test_dequantize_to_float16():
    out = run(O.DEQUANTIZE, [np.int8([-128, 1])], [Operand(S8, (2,), 0.5, -1)],
              [Operand(T.TENSOR_FLOAT16, (2,))])
    assert out.dtype == np.float16 and out.tolist() == [-63.5, 1.0]


def test_quantize_rejects_quant_input():
    with pytest.raises(OpValidationError, match="input 0: expected TENSOR_FLOAT32|TENSOR_FLOAT16"):
        registry.get(O.QUANTIZE).validate([Operand(U8, (1,), 1.0, 0)], [Operand(U8, (1,), 1.0, 0)])
