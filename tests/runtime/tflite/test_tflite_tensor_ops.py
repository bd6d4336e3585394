"""TFLite comparison, maths, reduction and slicing builtins map to their NNAPI operations and
compute what numpy computes; options NNAPI cannot express are named in the error."""
from __future__ import annotations

import flatbuffers
import numpy as np
import pytest

from nnscope.runtime.hal.types import OperationType as Op
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.tflite import convert_tflite
from tests.runtime.tflite.test_tflite_loader import (BUILTIN, OPTIONS, _options, _schema, _tensor,
                                                     finish_model)

F32, I32, BOOL = 0, 2, 6
_DTYPES = {F32: np.float32, I32: np.int32, BOOL: np.bool_}


def build_typed_model(tensors, operators, inputs, outputs) -> bytes:
    """Like ``build_model`` but tensors are (shape, constant or None, TFLite type code)."""
    builder, B = flatbuffers.Builder(1024), _schema("Buffer")
    B.Start(builder)
    buffers, tensor_offsets = [B.End(builder)], []
    for index, (shape, data, type_code) in enumerate(tensors):
        buffer_index = 0
        if data is not None:
            payload = builder.CreateByteVector(np.asarray(data, _DTYPES[type_code]).tobytes())
            B.Start(builder)
            B.AddData(builder, payload)
            buffers.append(B.End(builder))
            buffer_index = len(buffers) - 1
        tensor_offsets.append(_tensor(builder, index, shape, type_code, buffer_index))
    return finish_model(builder, buffers, tensor_offsets, operators, inputs, outputs)


def _run(tensors, operator, x):
    model, *_ = convert_tflite(build_typed_model(tensors, [operator], [0], [len(tensors) - 1]))
    return model, CpuExecutor(model).run([x])[0]


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7


def test_strided_slice_masks_become_nnapi_scalars():
    options = _options("StridedSliceOptions", BeginMask=0b001, EndMask=0b100, ShrinkAxisMask=0b010)
    op = (BUILTIN.STRIDED_SLICE, [0, 1, 2, 3], [4], OPTIONS.StridedSliceOptions, options)
    tensors = [((2, 3, 4), None, F32), ((3,), [1, 1, 1], I32), ((3,), [2, 2, 0], I32),
               ((3,), [1, 1, 2], I32), ((2, 2), None, F32)]
    model, y = _run(tensors, op, X)
    assert model.main.operations[0].type == Op.STRIDED_SLICE
    np.testing.assert_array_equal(y, X[0:2, 1, 1::2])


def test_gather_reads_its_axis_option():
    op = (BUILTIN.GATHER, [0, 1], [2], OPTIONS.GatherOptions, _options("GatherOptions", Axis=-1))
    tensors = [((2, 3, 4), None, F32), ((2,), [3, 0], I32), ((2, 3, 2), None, F32)]
    _, y = _run(tensors, op, X)
    np.testing.assert_array_equal(y, X[..., [3, 0]])


@pytest.mark.parametrize("keep_dims", [False, True])
def test_sum_and_arg_max(keep_dims):
    op = (BUILTIN.SUM, [0, 1], [2], OPTIONS.ReducerOptions,
          _options("ReducerOptions", KeepDims=keep_dims))
    shape = (2, 1, 4) if keep_dims else (2, 4)
    tensors = [((2, 3, 4), None, F32), ((1,), [-2], I32), (shape, None, F32)]
    model, y = _run(tensors, op, X)
    assert model.main.operations[0].type == Op.REDUCE_SUM
    np.testing.assert_array_equal(y, X.sum(axis=1, keepdims=keep_dims))
    arg = (BUILTIN.ARG_MAX, [0, 1], [2], 0, None)
    tensors = [((2, 3, 4), None, F32), ((1,), [2], I32), ((2, 3), None, I32)]
    _, y = _run(tensors, arg, X * np.float32([1, -1, 1, -1]))
    np.testing.assert_array_equal(y, (X * np.float32([1, -1, 1, -1])).argmax(axis=2))


def test_depth_to_space_and_transpose():
    x = np.arange(16, dtype=np.float32).reshape(1, 2, 2, 4)
    op = (BUILTIN.DEPTH_TO_SPACE, [0], [1], OPTIONS.DepthToSpaceOptions,
          _options("DepthToSpaceOptions", BlockSize=2))
    _, y = _run([((1, 2, 2, 4), None, F32), ((1, 4, 4, 1), None, F32)], op, x)
    expected = x.reshape(1, 2, 2, 2, 2, 1).transpose(0, 1, 3, 2, 4, 5).reshape(1, 4, 4, 1)
    np.testing.assert_array_equal(y, expected)
    op = (BUILTIN.TRANSPOSE, [0, 1], [2], 0, None)
    _, y = _run([((2, 3, 4), None, F32), ((3,), [2, 0, 1], I32), ((4, 2, 3), None, F32)], op, X)
    np.testing.assert_array_equal(y, X.transpose(2, 0, 1))


def test_comparison_gives_bool_and_prelu_uses_alpha():
    op = (BUILTIN.GREATER, [0, 1], [2], 0, None)
    model, y = _run([((2, 3, 4), None, F32), ((4,), [0, 1, 2, 3], F32), ((2, 3, 4), None, BOOL)],
                    op, X)
    np.testing.assert_array_equal(y, X > np.float32([0, 1, 2, 3]))
    op = (BUILTIN.PRELU, [0, 1], [2], 0, None)
    _, y = _run([((2, 3, 4), None, F32), ((4,), [0.5, 1, 2, 0], F32), ((2, 3, 4), None, F32)],
                op, X)
    np.testing.assert_array_equal(y, np.where(X >= 0, X, X * np.float32([0.5, 1, 2, 0])))


def test_squeeze_without_dims_squeezes_every_unit_axis():
    x = np.arange(6, dtype=np.float32).reshape(1, 6, 1)
    _, y = _run([((1, 6, 1), None, F32), ((6,), None, F32)], (BUILTIN.SQUEEZE, [0], [1], 0, None), x)
    np.testing.assert_array_equal(y, x.reshape(6))


def test_inexpressible_options_are_named():
    options = _options("StridedSliceOptions", EllipsisMask=1)
    op = (BUILTIN.STRIDED_SLICE, [0, 1, 2, 3], [4], OPTIONS.StridedSliceOptions, options)
    tensors = [((2, 3, 4), None, F32), ((3,), None, I32), ((3,), [1, 1, 1], I32),
               ((3,), [1, 1, 1], I32), ((1, 1, 1), None, F32)]
    with pytest.raises(ValueError, match=r"operator 0 \(STRIDED_SLICE\): STRIDED_SLICE with a "
                                         "non-constant begin/end/strides"):
        convert_tflite(build_typed_model(tensors, [op], [0, 1], [4]))
    arg = (BUILTIN.ARG_MAX, [0, 1], [2], 0, None)
    tensors = [((2, 3, 4), None, F32), ((1,), None, I32), ((2, 3), None, I32)]
    with pytest.raises(ValueError, match="ARG_MAX with a non-constant axis"):
        convert_tflite(build_typed_model(tensors, [arg], [0, 1], [2]))
