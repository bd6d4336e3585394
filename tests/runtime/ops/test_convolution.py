"""CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED against every runnable NNAPI CTS vector
(AOSP accuracy criteria, also with output shapes left unknown), plus the fixed-point
requantisation, the exact-accumulation switch, validation messages and a speed check."""
from __future__ import annotations

import re

import numpy as np
import pytest

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType
from nnscope.runtime.ops import registry
from nnscope.runtime.ops._common import multiply_by_quantized_multiplier, quantize_multiplier
from nnscope.runtime.ops._conv_quant import fixed_point_multiply
from nnscope.runtime.ops.convolution import _execute_conv
from nnscope.runtime.ops.registry import OpContext, OpValidationError
from tests.support.cts_vectors import cts_vector_tests

OPS = frozenset({OperationType.CONV_2D, OperationType.DEPTHWISE_CONV_2D,
                 OperationType.FULLY_CONNECTED})
#: Passing tests per operation when this was written (the rest need BOX_WITH_NMS_LIMIT,
#: ROI_ALIGN, ... or WHILE, which other families provide).
MIN_PASSED = {"CONV_2D": 836, "DEPTHWISE_CONV_2D": 530, "FULLY_CONNECTED": 96}


test_every_operation_is_covered_by_enough_vectors, test_cts_vector_passes = \
    cts_vector_tests(OPS, MIN_PASSED)


@pytest.mark.parametrize("real", [1e-9, 3e-4, 0.01, 0.3, 0.5, 0.999, 1.0, 1.7, 12.5])
def test_fixed_point_multiply_matches_tflite_helper(real):
    rng = np.random.default_rng(7)
    acc = np.concatenate([rng.integers(-2**26, 2**26, 50_000), rng.integers(-64, 64, 1000),
                          [0, 1, -1, 2**30, -2**30, 2**31 - 1, -2**31]])
    multiplier, shift = quantize_multiplier(real)
    expected = multiply_by_quantized_multiplier(acc, multiplier, shift)
    got = fixed_point_multiply(acc, np.array([multiplier]), np.array([shift]))
    np.testing.assert_array_equal(got, expected)


def _naive_conv_int(x, w, pad, stride):
    """int64 loop reference for a VALID/explicitly padded conv (zero points already removed)."""
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh = (xp.shape[1] - w.shape[1]) // stride + 1
    ow = (xp.shape[2] - w.shape[2]) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[0]), np.int64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride:i * stride + w.shape[1], j * stride:j * stride + w.shape[2]]
            out[:, i, j] = np.einsum("nhwc,ohwc->no", patch, w)
    return out


@pytest.mark.parametrize("filter_zero_point", [0, 255])  # 255: sums beyond float32's 2**24
def test_quant8_conv_is_exact_in_both_accumulator_precisions(filter_zero_point):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (1, 7, 6, 40)).astype(np.uint8)
    w = rng.integers(0, 256, (5, 3, 3, 40)).astype(np.uint8)
    bias = rng.integers(-5000, 5000, 5).astype(np.int32)
    operands = [Operand(T.TENSOR_QUANT8_ASYMM, x.shape, 0.5, 3),
                Operand(T.TENSOR_QUANT8_ASYMM, w.shape, 0.25, filter_zero_point),
                Operand(T.TENSOR_INT32, (5,), 0.125, 0)] + [Operand(T.INT32)] * 7
    output = Operand(T.TENSOR_QUANT8_ASYMM, (1, 4, 3, 5), 4096.0, 100)
    inputs = [x, w, bias, 1, 1, 1, 1, 2, 2, 0]  # explicit padding 1, stride 2
    (got,) = _execute_conv(OpContext(None, inputs, operands, [output]))
    acc = _naive_conv_int(x.astype(np.int64) - 3, w.astype(np.int64) - filter_zero_point, 1, 2)
    multiplier, shift = quantize_multiplier(0.5 * 0.25 / 4096.0)
    want = multiply_by_quantized_multiplier(acc + bias, multiplier, shift) + 100
    np.testing.assert_array_equal(got, np.clip(want, 0, 255))


def _conv_operands(count, input_type=T.TENSOR_FLOAT32, input_dims=(1, 4, 4, 1)):
    ops = [Operand(input_type, input_dims), Operand(input_type, (1, 2, 2, 1)),
           Operand(input_type, (1,))] + [Operand(T.INT32)] * (count - 3)
    return ops, [Operand(input_type, (1, 3, 3, 1))]


@pytest.mark.parametrize("count", [7, 8, 10, 11, 13])
def test_conv_validator_accepts_every_signature(count):
    inputs, outputs = _conv_operands(count)
    if count in (8, 10):  # implicit padding with layout (and dilation)
        inputs[7] = Operand(T.BOOL)
    if count in (11, 13):
        inputs[10] = Operand(T.BOOL)
    registry.get(OperationType.CONV_2D).validate(inputs, outputs)


@pytest.mark.parametrize("mutate, message", [
    (lambda ins: ins[:6], "expected 7 or 8 or 10 or 11 or 13 inputs, got 6"),
    (lambda ins: [Operand(T.TENSOR_FLOAT32, (4, 4, 1))] + ins[1:], "input 0 (input): expected rank 4"),
    (lambda ins: ins[:2] + [Operand(T.TENSOR_INT32, (1,))] + ins[3:], "input 2"),
    (lambda ins: ins[:5] + [Operand(T.FLOAT32)] + ins[6:], "input 5"),
])
def test_conv_validator_names_the_bad_input(mutate, message):
    inputs, outputs = _conv_operands(7)
    with pytest.raises(OpValidationError, match=re.escape(message)):
        registry.get(OperationType.CONV_2D).validate(mutate(inputs), outputs)


def test_fully_connected_rejects_rank_3_weights():
    inputs = [Operand(T.TENSOR_FLOAT32, (2, 3)), Operand(T.TENSOR_FLOAT32, (1, 4, 3)),
              Operand(T.TENSOR_FLOAT32, (4,)), Operand(T.INT32)]
    with pytest.raises(OpValidationError, match="input 1 \\(weights\\)"):
        registry.get(OperationType.FULLY_CONNECTED).validate(
            inputs, [Operand(T.TENSOR_FLOAT32, (2, 4))])
