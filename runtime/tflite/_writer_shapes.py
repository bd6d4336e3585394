"""NNAPI -> LiteRT translators of the operations that move data: reshaping, padding,
concatenation, slicing, gathering, transposes, layout moves (depth/space/batch) and
nearest-neighbour resizing, and the MEAN/REDUCE_MAX/REDUCE_MIN reductions (merged into
``_writer_ops.TRANSLATORS``). Where LiteRT's result has rank 0, NNAPI's has shape [1]: a
RESHAPE follows. STRIDED_SLICE shrinking an axis must slice one element of it, as NNAPI requires.

Example:
    >>> sorted(op.name for op in SHAPE_TRANSLATORS)[:3]
    ['BATCH_TO_SPACE_ND', 'CONCATENATION', 'DEPTH_TO_SPACE']
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import OperandLifetime as L, OperandType as T, OperationType as Op
from nnscope.runtime.tflite._flatbuffer import Quant
from nnscope.runtime.tflite._writer import (ANY as _ANY, F32 as _F32, Q8 as _Q8, Untranslatable, Writer,
                                    check_types as _check_types, layout as _layout)


def _concatenation(w: Writer, op) -> None:
    _check_types(w, op, _ANY, len(op.inputs) - 1)
    tensors = [w.operand(i) for i in (*op.inputs[:-1], *op.outputs)]
    if tensors[0].type in _Q8 and len({(t.scale, t.zero_point) for t in tensors}) > 1:
        raise Untranslatable("quantized CONCATENATION with differing scales (XNNPACK refuses it)")
    rank = len(w.operand(op.outputs[0]).dimensions)
    axis = w.scalar(op.inputs[-1])
    w.emit("CONCATENATION", [w.tensor(i) for i in op.inputs[:-1]], [w.tensor(op.outputs[0])],
           "ConcatenationOptions", Axis=axis + rank if axis < 0 else axis, FusedActivationFunction=0)


def _reshape(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    x, shape = op.inputs
    fields = {"NewShape": [int(d) for d in w.value(shape).reshape(-1)]} if w.is_constant(shape) else {}
    w.emit("RESHAPE", [w.tensor(x), w.tensor(shape)], [w.tensor(op.outputs[0])],
           "ReshapeOptions" if fields else None, **fields)


def _pad(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    w.emit("PAD", [w.tensor(op.inputs[0]), w.tensor(op.inputs[1])], [w.tensor(op.outputs[0])])


def _pad_v2(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    x = w.operand(op.inputs[0])
    value, dtype = w.scalar(op.inputs[2]), {T.TENSOR_FLOAT32: np.float32, T.TENSOR_QUANT8_ASYMM: np.uint8,
                                            T.TENSOR_QUANT8_ASYMM_SIGNED: np.int8}[x.type]
    type_name, quant = ("FLOAT32", None) if x.type == T.TENSOR_FLOAT32 else \
        ("UINT8" if dtype is np.uint8 else "INT8", Quant((float(x.scale),), (int(x.zero_point),)))
    constant = w.constant(np.array([value], dtype), type_name, quant)
    w.emit("PADV2", [w.tensor(op.inputs[0]), w.tensor(op.inputs[1]), constant], [w.tensor(op.outputs[0])])


def _reduce(builtin: str, types) -> callable:
    """MEAN, REDUCE_MAX, REDUCE_MIN: constant axes; every axis reduced gives NNAPI's [1]."""
    def translate(w: Writer, op) -> None:
        _check_types(w, op, types)
        axes = w.value(op.inputs[1]).astype(np.int32)
        rank, keep = len(w.operand(op.inputs[0]).dimensions), bool(w.scalar(op.inputs[2]))
        out = w.tensor(op.outputs[0])
        if keep or len({int(a) % rank for a in axes.reshape(-1)}) < rank:
            w.emit(builtin, [w.tensor(op.inputs[0]), w.int32(axes)], [out], "ReducerOptions", KeepDims=keep)
            return
        kept = w.new(op.outputs[0], (1,) * rank)
        w.emit(builtin, [w.tensor(op.inputs[0]), w.int32(axes)], [kept], "ReducerOptions", KeepDims=True)
        w.emit("RESHAPE", [kept, w.int32([1])], [out], "ReshapeOptions", NewShape=[1])
    return translate


def _squeeze(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    dims = w.operand(op.inputs[0]).dimensions
    if len(op.inputs) > 1 and w.operand(op.inputs[1]).lifetime != L.NO_VALUE:
        axes = [int(a) % len(dims) for a in w.value(op.inputs[1]).reshape(-1)]
    elif 0 in dims:
        raise Untranslatable("SQUEEZE of every size-1 axis with unknown dimensions")
    else:
        axes = [a for a, d in enumerate(dims) if d == 1]
    out, finish = _rank_one(w, op.outputs[0], len(set(axes)) == len(dims))
    w.emit("SQUEEZE", [w.tensor(op.inputs[0])], [out], "SqueezeOptions", SqueezeDims=axes)
    finish()


def _rank_one(w: Writer, index: int, scalar: bool) -> tuple[int, callable]:
    """(tensor to write, finish()): where LiteRT's result has rank 0, NNAPI's has shape [1]."""
    target = w.tensor(index)
    if not scalar:
        return target, lambda: None
    staged = w.new(index, ())
    return staged, lambda: w.emit("RESHAPE", [staged, w.int32([1])], [target], "ReshapeOptions",
                                  NewShape=[1])


def _slice(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    w.emit("SLICE", [w.tensor(i) for i in op.inputs[:3]], [w.tensor(op.outputs[0])])


def _strided_slice(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    masks = [int(w.scalar(i)) for i in op.inputs[4:7]]
    rank = len(w.operand(op.inputs[0]).dimensions)
    if masks[2] and not _shrinks_one(w, op, masks):
        raise Untranslatable("STRIDED_SLICE shrinking an axis whose slice is not one element")
    out, finish = _rank_one(w, op.outputs[0], masks[2] & ((1 << rank) - 1) == (1 << rank) - 1)
    w.emit("STRIDED_SLICE", [w.tensor(i) for i in op.inputs[:4]], [out],
           "StridedSliceOptions", BeginMask=masks[0], EndMask=masks[1], ShrinkAxisMask=masks[2])
    finish()


def _shrinks_one(w: Writer, op, masks) -> bool:
    """NNAPI requires a shrunk axis to slice exactly one element (positive stride); LiteRT
    takes the first element whatever the slice."""
    dims = w.operand(op.inputs[0]).dimensions
    begin, end, strides = (w.value(i).reshape(-1) for i in op.inputs[1:4])
    for axis, dim in enumerate(dims):
        if not masks[2] >> axis & 1:
            continue
        b = 0 if masks[0] >> axis & 1 else int(begin[axis]) + (dim if begin[axis] < 0 else 0)
        e = dim if masks[1] >> axis & 1 else int(end[axis]) + (dim if end[axis] < 0 else 0)
        if not dim or strides[axis] <= 0 or min(e, dim) - max(b, 0) != 1:
            return False
    return True


def _resize(builtin: str, options: str) -> callable:
    """(input, width, height | scales, [layout, [align_corners, half_pixel]]) -> size [h, w]."""
    def translate(w: Writer, op) -> None:
        _check_types(w, op, _F32)
        ins, nchw = op.inputs, _layout(w, op, 3)
        out_dims = w.operand(op.outputs[0]).dimensions
        height, width = (out_dims[2], out_dims[3]) if nchw else (out_dims[1], out_dims[2])
        if w.operand(ins[1]).type == T.INT32:
            width, height = w.scalar(ins[1]), w.scalar(ins[2])
        elif not (height and width):
            in_dims = w.operand(ins[0]).dimensions
            in_h, in_w = (in_dims[2], in_dims[3]) if nchw else (in_dims[1], in_dims[2])
            if not (in_h and in_w):
                raise Untranslatable(f"{builtin} by scale with an unknown input size")
            scales = (np.float32(w.scalar(ins[1])), np.float32(w.scalar(ins[2])))
            width, height = (int(np.floor(np.float32(n) * k)) for n, k in zip((in_w, in_h), scales))
        flags = [bool(w.scalar(i)) for i in ins[4:6]] + [False, False]
        source = w.nhwc_in(ins[0], nchw)
        out, finish = w.nhwc_out(op.outputs[0], nchw)
        w.emit(builtin, [source, w.int32([height, width])], [out], options,
               AlignCorners=flags[0], HalfPixelCenters=flags[1])
        finish()
    return translate


def _batch_to_space(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    nchw = _layout(w, op, 2)
    source = w.nhwc_in(op.inputs[0], nchw)
    out, finish = w.nhwc_out(op.outputs[0], nchw)
    w.emit("BATCH_TO_SPACE_ND", [source, w.tensor(op.inputs[1]), w.int32([[0, 0], [0, 0]])], [out])
    finish()


def _space_to_batch(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    nchw = _layout(w, op, 3)
    source = w.nhwc_in(op.inputs[0], nchw)
    out, finish = w.nhwc_out(op.outputs[0], nchw)
    w.emit("SPACE_TO_BATCH_ND", [source, w.tensor(op.inputs[1]), w.tensor(op.inputs[2])], [out])
    finish()


def _gather(w: Writer, op) -> None:
    x, axis, indices = op.inputs
    if w.operand(x).type not in _ANY or w.operand(x).type != w.operand(op.outputs[0]).type:
        raise Untranslatable(f"GATHER of {w.operand(x).type.name}")
    w.emit("GATHER", [w.tensor(x), w.tensor(indices)], [w.tensor(op.outputs[0])], "GatherOptions",
           Axis=int(w.scalar(axis)), BatchDims=0)


def _transpose(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    rank = len(w.operand(op.inputs[0]).dimensions)
    perm = w.value(op.inputs[1]).reshape(-1) if len(op.inputs) > 1 and \
        w.operand(op.inputs[1]).lifetime != L.NO_VALUE else np.arange(rank)[::-1]
    w.emit("TRANSPOSE", [w.tensor(op.inputs[0]), w.int32(perm)], [w.tensor(op.outputs[0])])


def _block(builtin: str, options: str) -> callable:
    def translate(w: Writer, op) -> None:
        _check_types(w, op, _ANY)
        nchw = _layout(w, op, 2)
        source = w.nhwc_in(op.inputs[0], nchw)
        out, finish = w.nhwc_out(op.outputs[0], nchw)
        w.emit(builtin, [source], [out], options, BlockSize=w.scalar(op.inputs[1]))
        finish()
    return translate


#: NNAPI operation type -> translator(writer, operation), for the operations above.
SHAPE_TRANSLATORS = {
    Op.CONCATENATION: _concatenation, Op.RESHAPE: _reshape, Op.PAD: _pad, Op.PAD_V2: _pad_v2,
    Op.MEAN: _reduce("MEAN", _F32), Op.REDUCE_MAX: _reduce("REDUCE_MAX", _ANY),
    Op.REDUCE_MIN: _reduce("REDUCE_MIN", _ANY), Op.TRANSPOSE: _transpose,
    Op.SQUEEZE: _squeeze, Op.SLICE: _slice, Op.STRIDED_SLICE: _strided_slice, Op.GATHER: _gather,
    Op.RESIZE_NEAREST_NEIGHBOR: _resize("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions"),
    Op.BATCH_TO_SPACE_ND: _batch_to_space, Op.SPACE_TO_BATCH_ND: _space_to_batch,
    Op.DEPTH_TO_SPACE: _block("DEPTH_TO_SPACE", "DepthToSpaceOptions"),
    Op.SPACE_TO_DEPTH: _block("SPACE_TO_DEPTH", "SpaceToDepthOptions"),
}
