"""Build small typed/quantized/sparse .tflite models and run them on LiteRT and on nnscope.

``Tensor`` describes one tensor (shape, TFLite type, constant data, quantisation, sparsity);
``build`` writes the flatbuffer with ``finish_model``. ``litert_run`` needs ``ai_edge_litert``
(a ``bench``/``test`` extra, never a runtime dependency) and skips the test without it.
"""
from __future__ import annotations

from dataclasses import dataclass

import flatbuffers
import numpy as np
import pytest

from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.tflite import convert_tflite
from tests.runtime.tflite.test_tflite_loader import _schema, _vector, finish_model

F32, F16, I32, U8, I64, BOOL, I16, I8 = 0, 1, 2, 3, 4, 6, 7, 9
DTYPES = {F32: np.float32, F16: np.float16, I32: np.int32, U8: np.uint8, I64: np.int64,
          BOOL: np.bool_, I16: np.int16, I8: np.int8}


@dataclass
class Tensor:
    shape: tuple
    type: int = F32
    data: object = None
    scale: object = None          # float, or a list for per-channel
    zero_point: object = 0
    axis: int = 0                 # quantized dimension
    sparsity: object = None       # (traversal_order, block_map, [level, ...]) - see _sparsity
    variable: bool = False        # a TFLite variable tensor (a recurrent cell's state)


def build(tensors, operators, inputs, outputs) -> bytes:
    """operators: (builtin code or custom name, inputs, outputs, options type, options builder)."""
    builder, B = flatbuffers.Builder(1024), _schema("Buffer")
    B.Start(builder)
    buffers, offsets = [B.End(builder)], []
    for index, tensor in enumerate(tensors):
        buffer_index = 0
        if tensor.data is not None:
            values = np.asarray(tensor.data, DTYPES[tensor.type])
            payload = builder.CreateByteVector(values.tobytes())
            B.Start(builder)
            B.AddData(builder, payload)
            buffers.append(B.End(builder))
            buffer_index = len(buffers) - 1
        offsets.append(_tensor(builder, index, tensor, buffer_index))
    return finish_model(builder, buffers, offsets, operators, inputs, outputs)


def _tensor(builder, index, tensor: Tensor, buffer_index):
    T = _schema("Tensor")
    name, dims = builder.CreateString(f"t{index}"), _vector(builder, tensor.shape)
    quant = _quantization(builder, tensor) if tensor.scale is not None else None
    sparsity = _sparsity(builder, *tensor.sparsity) if tensor.sparsity is not None else None
    T.Start(builder)
    T.AddShape(builder, dims)
    T.AddType(builder, tensor.type)
    T.AddBuffer(builder, buffer_index)
    T.AddName(builder, name)
    if quant is not None:
        T.AddQuantization(builder, quant)
    if sparsity is not None:
        T.AddSparsity(builder, sparsity)
    if tensor.variable:
        T.AddIsVariable(builder, True)
    return T.End(builder)


def _quantization(builder, tensor: Tensor):
    Q = _schema("QuantizationParameters")
    scales = np.atleast_1d(np.asarray(tensor.scale, np.float32))
    zero_points = np.broadcast_to(np.asarray(tensor.zero_point, np.int64), scales.shape)
    scale_vec = _vector(builder, scales, np.float32)
    zero_vec = _vector(builder, zero_points, np.int64)
    Q.Start(builder)
    Q.AddScale(builder, scale_vec)
    Q.AddZeroPoint(builder, zero_vec)
    Q.AddQuantizedDimension(builder, tensor.axis)
    return Q.End(builder)


def _sparsity(builder, traversal_order, block_map, levels):
    """levels: ("dense", size) or ("csr", segments, indices) in traversal order."""
    S, D, IV = _schema("SparsityParameters"), _schema("DimensionMetadata"), _schema("Int32Vector")

    def int32_vector(values):
        values_vec = _vector(builder, values)
        IV.Start(builder)
        IV.AddValues(builder, values_vec)
        return IV.End(builder)

    metas = []
    for level in levels:
        segments = int32_vector(level[1]) if level[0] == "csr" else None
        indices = int32_vector(level[2]) if level[0] == "csr" else None
        D.Start(builder)
        if level[0] == "dense":
            D.AddFormat(builder, 0)
            D.AddDenseSize(builder, level[1])
        else:
            D.AddFormat(builder, 1)
            D.AddArraySegmentsType(builder, 1)  # SparseIndexVector.Int32Vector
            D.AddArraySegments(builder, segments)
            D.AddArrayIndicesType(builder, 1)
            D.AddArrayIndices(builder, indices)
        metas.append(D.End(builder))
    S.StartDimMetadataVector(builder, len(metas))
    for meta in reversed(metas):
        builder.PrependUOffsetTRelative(meta)
    meta_vec = builder.EndVector()
    order_vec, block_vec = _vector(builder, traversal_order), _vector(builder, block_map)
    S.Start(builder)
    S.AddTraversalOrder(builder, order_vec)
    S.AddBlockMap(builder, block_vec)
    S.AddDimMetadata(builder, meta_vec)
    return S.End(builder)


def litert_run(data: bytes, inputs) -> list[np.ndarray]:
    """LiteRT's outputs for ``inputs`` (one thread); skips when LiteRT is not installed."""
    interpreter_module = pytest.importorskip(
        "ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert, the bench extra) is not "
        "installed; it is the oracle for the TFLite operator mapping")
    interpreter = interpreter_module.Interpreter(  # TFLite's own kernels, no XNNPack
        model_content=data, num_threads=1, experimental_op_resolver_type=(
            interpreter_module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
    interpreter.allocate_tensors()
    for detail, value in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def nnscope_run(data: bytes, inputs) -> list[np.ndarray]:
    model, *_ = convert_tflite(data)
    return CpuExecutor(model).run(list(inputs))
