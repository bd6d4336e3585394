"""Sparse weights (DENSIFY) are densified at load time, and operators with no NNAPI form are
named in one error; hand-built flatbuffers, LiteRT as the oracle where it runs them."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import OperationType, ResultCode
from nnscope.runtime.tflite import convert_tflite
from nnscope.runtime.tflite._builder import UnsupportedOperator
from nnscope.runtime.tflite._sparsity import SparseLevel, Sparsity, densify
from tests.runtime.tflite.litert_helpers import (F32, I8, I16, I32, I64, Tensor, build, litert_run,
                                                 nnscope_run)
from tests.runtime.tflite.test_tflite_loader import BUILTIN, OPTIONS, _options

RNG = np.random.default_rng(11)


def _sparse_weights(rows=4, cols=8) -> np.ndarray:
    """Mostly zero, with whole zero 1x4 blocks and scattered zeros inside kept blocks."""
    dense = RNG.standard_normal((rows, cols)).astype(np.float32)
    dense[RNG.random((rows, cols)) < 0.3] = 0
    dense[0, 4:8] = dense[2, 0:4] = dense[3, :] = 0
    return dense


def _csr(dense: np.ndarray):
    """Rows DENSE, columns SPARSE_CSR: values are the non-zeros, row by row."""
    segments, indices = [0], []
    for row in dense:
        indices += [int(i) for i in np.flatnonzero(row)]
        segments.append(len(indices))
    levels = [("dense", dense.shape[0]), ("csr", segments, indices)]
    return dense[dense != 0], ((0, 1), (), levels)


def _block_csr(dense: np.ndarray, block=4):
    """1 x ``block`` blocks over the columns (block_map [1]); kept blocks store all values."""
    rows, cols = dense.shape
    segments, indices, values = [0], [], []
    for row in dense:
        for b in range(cols // block):
            chunk = row[b * block:(b + 1) * block]
            if np.any(chunk):
                indices.append(b)
                values.append(chunk)
        segments.append(len(indices))
    levels = [("dense", rows), ("csr", segments, indices), ("dense", block)]
    return np.concatenate(values), ((0, 1, 2), (1,), levels)


def _densify_fc_model(dense: np.ndarray, encode) -> bytes:
    values, sparsity = encode(dense)
    bias = np.float32([0.5, -1, 2, 0])
    tensors = [Tensor((2, 8), F32), Tensor(dense.shape, F32, values, sparsity=sparsity),
               Tensor(dense.shape, F32), Tensor((4,), F32, bias), Tensor((2, 4), F32)]
    ops = [(BUILTIN.DENSIFY, [1], [2], 0, None),
           (BUILTIN.FULLY_CONNECTED, [0, 2, 3], [4], OPTIONS.FullyConnectedOptions,
            _options("FullyConnectedOptions", FusedActivationFunction=0))]
    return build(tensors, ops, [0], [4])


@pytest.mark.parametrize("encode", [_csr, _block_csr], ids=["csr", "block_1x4"])
def test_densify_feeds_dense_weights_to_the_layer(encode):
    dense = _sparse_weights()
    data = _densify_fc_model(dense, encode)
    model, *_ = convert_tflite(data)
    assert [op.type for op in model.main.operations] == [OperationType.FULLY_CONNECTED]
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    (actual,) = nnscope_run(data, [x])
    np.testing.assert_allclose(actual, x @ dense.T + np.float32([0.5, -1, 2, 0]), rtol=1e-5,
                               atol=1e-6)
    (expected,) = litert_run(data, [x])
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_densify_int8_keeps_quantisation():
    dense = RNG.integers(-100, 100, (4, 8)).astype(np.int8)
    dense[:, 2:5] = 0
    values, sparsity = _csr(dense)
    tensors = [Tensor((1, 8), I8, None, 0.1, 0), Tensor((4, 8), I8, values, 0.02, 0,
                                                         sparsity=sparsity),
               Tensor((4, 8), I8, None, 0.02, 0), Tensor((1, 4), I8, None, 0.5, 3)]
    ops = [(BUILTIN.DENSIFY, [1], [2], 0, None),
           (BUILTIN.FULLY_CONNECTED, [0, 2, -1], [3], OPTIONS.FullyConnectedOptions,
            _options("FullyConnectedOptions", FusedActivationFunction=0))]
    data = build(tensors, ops, [0], [3])
    model, *_ = convert_tflite(data)
    weights = model.main.operands[model.main.operations[0].inputs[1]]
    assert (weights.scale, weights.dimensions) == (pytest.approx(0.02), (4, 8))
    x = RNG.integers(-128, 128, (1, 8)).astype(np.int8)
    (actual,) = nnscope_run(data, [x])
    (expected,) = litert_run(data, [x])
    assert np.abs(actual.astype(int) - expected.astype(int)).max() <= 1


def test_densify_blocks_in_traversal_order():
    # 2x2 blocks over both dimensions of a 4x4 tensor, blocks stored column-major.
    dense = np.arange(1, 17, dtype=np.float32).reshape(4, 4)
    dense[0:2, 2:4] = 0
    order, levels, values = (1, 0, 2, 3), [], []
    segments, indices = [0], []
    for block_col in range(2):
        for block_row in range(2):
            block = dense[2 * block_row:2 * block_row + 2, 2 * block_col:2 * block_col + 2]
            if np.any(block):
                indices.append(block_row)
                values.append(block.reshape(-1))
        segments.append(len(indices))
    levels = (SparseLevel(dense_size=2), SparseLevel(segments=tuple(segments),
                                                     indices=tuple(indices)),
              SparseLevel(dense_size=2), SparseLevel(dense_size=2))
    result = densify(np.concatenate(values), (4, 4), Sparsity(order, (0, 1), levels))
    np.testing.assert_array_equal(result, dense)


def test_malformed_sparse_tensor_is_named():
    values, (order, block_map, levels) = _csr(_sparse_weights())
    levels[1] = ("csr", [0, 2, 50, 51, 52], levels[1][2])  # segments beyond the indices
    data = _densify_fc_model_with(values, (order, block_map, levels))
    with pytest.raises(ValueError, match="m.tflite: tensor 't1': sparse tensor: array_segments"):
        convert_tflite(data, "m.tflite")


def _densify_fc_model_with(values, sparsity) -> bytes:
    tensors = [Tensor((2, 8), F32), Tensor((4, 8), F32, values, sparsity=sparsity),
               Tensor((4, 8), F32), Tensor((2, 4), F32)]
    ops = [(BUILTIN.DENSIFY, [1], [2], 0, None),
           (BUILTIN.FULLY_CONNECTED, [0, 2, -1], [3], OPTIONS.FullyConnectedOptions,
            _options("FullyConnectedOptions", FusedActivationFunction=0))]
    return build(tensors, ops, [0], [3])


# --------------------------------------------------------------------------- no NNAPI form
def test_custom_operator_is_named_with_its_index():
    tensors = [Tensor((4,), F32), Tensor((4,), F32), Tensor((4,), F32), Tensor((4,), F32),
               Tensor((4,), F32)]
    ops = [(BUILTIN.RELU, [0], [1], 0, None), (BUILTIN.RELU6, [1], [2], 0, None),
           (BUILTIN.LOGISTIC, [2], [3], 0, None), ("foo", [3], [4], 0, None)]
    with pytest.raises(UnsupportedOperator) as caught:
        convert_tflite(build(tensors, ops, [0], [4]), "m.tflite")
    assert str(caught.value) == "m.tflite: operator 3 (CUSTOM 'foo') has no NNAPI form"
    assert caught.value.result_code == ResultCode.BAD_DATA


@pytest.mark.parametrize("case, message", [
    ("batch_matmul", r"operator 0 \(BATCH_MATMUL\): BATCH_MATMUL with a non-constant "
                     "right-hand side"),
    ("squared_difference", r"operator 0 \(SQUARED_DIFFERENCE\): SQUARED_DIFFERENCE on "
                           "TENSOR_QUANT8_ASYMM_SIGNED"),
])
def test_inexpressible_forms_are_named(case, message):
    if case == "batch_matmul":
        tensors = [Tensor((2, 3), F32), Tensor((3, 4), F32), Tensor((2, 4), F32)]
        ops = [(BUILTIN.BATCH_MATMUL, [0, 1], [2], 0, None)]
        inputs = [0, 1]
    else:
        q = dict(scale=0.1, zero_point=0)
        tensors = [Tensor((4,), I8, **q), Tensor((4,), I8, **q), Tensor((4,), I8, **q)]
        ops = [(BUILTIN.SQUARED_DIFFERENCE, [0, 1], [2], 0, None)]
        inputs = [0, 1]
    with pytest.raises(UnsupportedOperator, match=message + ".* has no NNAPI form"):
        convert_tflite(build(tensors, ops, inputs, [2]))


def test_shape_folds_into_a_constant():
    tensors = [Tensor((2, 6), F32), Tensor((3, 4), F32), Tensor((2,), I32), Tensor((3, 4), F32)]
    ops = [(BUILTIN.SHAPE, [1], [2], OPTIONS.ShapeOptions, _options("ShapeOptions", OutType=I32)),
           (BUILTIN.RESHAPE, [0, 2], [3], 0, None)]
    data = build(tensors, ops, [0, 1], [3])
    x, y = np.arange(12, dtype=np.float32).reshape(2, 6), np.zeros((3, 4), np.float32)
    (actual,) = nnscope_run(data, [x, y])
    (expected,) = litert_run(data, [x, y])
    np.testing.assert_array_equal(actual, expected)


def test_a_type_nnapi_does_not_take_is_named_against_the_tflite_operator():
    q16 = dict(scale=0.1, zero_point=0)
    tensors = [Tensor((4,), F32), Tensor((4,), F32), Tensor((4,), I16, **q16),
               Tensor((4,), I16, **q16)]
    ops = [(BUILTIN.RELU, [0], [1], 0, None), (BUILTIN.RELU, [2], [3], 0, None)]
    with pytest.raises(UnsupportedOperator, match=r"^m.tflite: operator 1 \(RELU\): NNAPI RELU "
                       r"\(input 0: expected .*got TENSOR_QUANT16_SYMM\) has no NNAPI form$"):
        convert_tflite(build(tensors, ops, [0, 2], [1, 3]), "m.tflite")


def test_int64_constant_beyond_int32_is_named():
    tensors = [Tensor((2,), I64), Tensor((2,), I64, [1, 2**40]), Tensor((2,), I64)]
    with pytest.raises(UnsupportedOperator, match=r"operator 0 \(ADD\): INT64 constant 't1' "
                                                  "outside the INT32 range has no NNAPI form"):
        convert_tflite(build(tensors, [(BUILTIN.ADD, [0, 1], [2], 0, None)], [0], [2]))
