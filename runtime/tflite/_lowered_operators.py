"""TFLite builtins with no one-to-one NNAPI 1.3 operation, lowered to several (merged into
``_operators.CONVERTERS``), as the NNAPI delegate does for its older feature levels.

- LEAKY_RELU: PRELU with a constant alpha of the input's type.
- SQUARED_DIFFERENCE / SQUARE: SUB then MUL (float only: a quantized difference has no scale).
- SPLIT_V: one SLICE per output. PACK: RESHAPE each input, then CONCATENATION.
  UNPACK: SPLIT, then RESHAPE each piece.
- MIRROR_PAD / REVERSE_V2: GATHER along each padded / reversed axis with constant indices.
- BATCH_MATMUL with a constant right-hand side: FULLY_CONNECTED (weights transposed), with a
  TRANSPOSE for ``adj_x`` and a RESHAPE back to the batched shape.
- DENSIFY: the sparse constant is densified by the reader; its output is a folded constant.
- SHAPE of a fully known shape: a folded INT32 constant.
- STRIDED_SLICE with ellipsis / new-axis masks: one entry per dimension, then a RESHAPE.
- QUANTIZE of a quantized input (a requantisation): DEQUANTIZE to float32, then QUANTIZE.

Example:
    >>> sorted(LOWERED_CONVERTERS)[:3]
    ['BATCH_MATMUL', 'DENSIFY', 'LEAKY_RELU']
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnscope.runtime.hal.types import FuseCode, OperandType, OperationType as Op
from nnscope.runtime.tflite._builder import GraphBuilder, UnsupportedOperator
from nnscope.runtime.tflite._reader import TfliteOperator

_T = OperandType
_FLOATS = (_T.TENSOR_FLOAT32, _T.TENSOR_FLOAT16)


def _shape(b: GraphBuilder, tensor_index: int) -> tuple[int, ...]:
    return b.graph.tensors[tensor_index].shape


def _int32(b: GraphBuilder, values) -> int:
    return b.constant(np.asarray(values, np.int32).reshape(-1), _T.TENSOR_INT32)


def _axis(axis: int, rank: int) -> int:
    return int(axis) + rank if axis < 0 else int(axis)


def _leaky_relu(b: GraphBuilder, op: TfliteOperator) -> None:
    x = b.tensor(op.inputs[0])
    alpha = float(op.options.Alpha()) if op.options is not None else 0.2
    operand = b.operands[x]
    if operand.type in _FLOATS:
        alpha_operand = b.constant(np.array([alpha]), operand.type)
    elif operand.type in (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED):
        # alpha = (q - zero_point) * scale exactly: q = +-1 (or 0) with scale |alpha|.
        scale = abs(alpha) or 1.0
        signed = operand.type == _T.TENSOR_QUANT8_ASYMM_SIGNED
        q, zero_point = ((1 if alpha > 0 else 0), 0) if alpha >= 0 else \
            ((-1, 0) if signed else (0, 1))
        alpha_operand = b.constant(np.array([q]), operand.type, scale, zero_point)
    else:
        raise UnsupportedOperator(f"LEAKY_RELU on {operand.type.name}")
    b.add(Op.PRELU, [x, alpha_operand], [b.tensor(op.outputs[0])])


def _float_only(b: GraphBuilder, op: TfliteOperator) -> int:
    x = b.tensor(op.inputs[0])
    if b.operands[x].type not in _FLOATS:
        raise UnsupportedOperator(f"{op.name} on {b.operands[x].type.name} (only float "
                                  "lowers exactly to NNAPI SUB and MUL)")
    return x


def _squared_difference(b: GraphBuilder, op: TfliteOperator) -> None:
    x = _float_only(b, op)
    out = b.tensor(op.outputs[0])
    difference = b.temporary(out)
    none = b.scalar(int(FuseCode.NONE))
    b.add(Op.SUB, [x, b.tensor(op.inputs[1]), none], [difference])
    b.add(Op.MUL, [difference, difference, none], [out])


def _square(b: GraphBuilder, op: TfliteOperator) -> None:
    x = _float_only(b, op)
    b.add(Op.MUL, [x, x, b.scalar(int(FuseCode.NONE))], [b.tensor(op.outputs[0])])


def _split_v(b: GraphBuilder, op: TfliteOperator) -> None:
    shape = _shape(b, op.inputs[0])
    axis = _axis(int(b.constant_input(op, 2, "axis").reshape(-1)[0]), len(shape))
    x, begin = b.tensor(op.inputs[0]), [0] * len(shape)
    for output in op.outputs:
        size = list(_shape(b, output))
        b.add(Op.SLICE, [x, _int32(b, begin), _int32(b, size)], [b.tensor(output)])
        begin[axis] += size[axis]


def _pack(b: GraphBuilder, op: TfliteOperator) -> None:
    out = b.tensor(op.outputs[0])
    out_shape = _shape(b, op.outputs[0])
    axis = _axis(op.options.Axis() if op.options is not None else 0, len(out_shape))
    piece_shape = list(out_shape)
    piece_shape[axis] = 1
    pieces = []
    for tensor_index in op.inputs:
        x = b.tensor(tensor_index)
        piece = b.temporary(x, tuple(piece_shape))
        b.add(Op.RESHAPE, [x, _int32(b, piece_shape)], [piece])
        pieces.append(piece)
    b.add(Op.CONCATENATION, pieces + [b.scalar(axis)], [out])


def _unpack(b: GraphBuilder, op: TfliteOperator) -> None:
    shape = _shape(b, op.inputs[0])
    axis = _axis(op.options.Axis() if op.options is not None else 0, len(shape))
    x = b.tensor(op.inputs[0])
    piece_shape = list(shape)
    piece_shape[axis] = 1
    pieces = [b.temporary(x, tuple(piece_shape)) for _ in op.outputs]
    b.add(Op.SPLIT, [x, b.scalar(axis), b.scalar(len(op.outputs))], pieces)
    for piece, output in zip(pieces, op.outputs):
        b.add(Op.RESHAPE, [piece, _int32(b, _shape(b, output))], [b.tensor(output)])


def _gather_chain(b: GraphBuilder, x: int, out: int, index_per_axis: dict[int, np.ndarray]) -> None:
    """GATHER along each axis in turn (the last one writes ``out``); a copy when none."""
    current, shape = x, list(b.operands[x].dimensions)
    axes = sorted(index_per_axis)
    if not axes:  # nothing to pad or reverse: an identity RESHAPE
        b.add(Op.RESHAPE, [x, _int32(b, shape)], [out])
        return
    for count, axis in enumerate(axes):
        indexes = index_per_axis[axis]
        shape[axis] = len(indexes)
        target = out if count == len(axes) - 1 else b.temporary(x, tuple(shape))
        b.add(Op.GATHER, [current, b.scalar(axis), _int32(b, indexes)], [target])
        current = target


def _mirror_pad(b: GraphBuilder, op: TfliteOperator) -> None:
    shape = _shape(b, op.inputs[0])
    paddings = b.constant_input(op, 1, "paddings").reshape(len(shape), 2)
    symmetric = op.options is not None and op.options.Mode() == 1  # 0 REFLECT, 1 SYMMETRIC
    shift = 0 if symmetric else 1
    index_per_axis = {}
    for axis, (before, after) in enumerate((int(p[0]), int(p[1])) for p in paddings):
        if before == after == 0:
            continue
        size = shape[axis]
        if max(before, after) > size - shift:
            raise UnsupportedOperator(f"MIRROR_PAD wider than axis {axis} allows")
        left = np.arange(before - 1 + shift, shift - 1, -1)
        right = np.arange(size - 1 - shift, size - 1 - shift - after, -1)
        index_per_axis[axis] = np.concatenate([left, np.arange(size), right])
    _gather_chain(b, b.tensor(op.inputs[0]), b.tensor(op.outputs[0]), index_per_axis)


def _reverse(b: GraphBuilder, op: TfliteOperator) -> None:
    shape = _shape(b, op.inputs[0])
    axes = {_axis(int(a), len(shape)) for a in b.constant_input(op, 1, "axis").reshape(-1)}
    index_per_axis = {axis: np.arange(shape[axis] - 1, -1, -1) for axis in axes}
    _gather_chain(b, b.tensor(op.inputs[0]), b.tensor(op.outputs[0]), index_per_axis)


def _batch_matmul(b: GraphBuilder, op: TfliteOperator) -> None:
    o = op.options
    rhs = b.value(op.inputs[1])
    if rhs is None:
        raise UnsupportedOperator("BATCH_MATMUL with a non-constant right-hand side (NNAPI "
                                  "has BATCH_MATMUL only from feature level 6)")
    if int(np.prod(rhs.shape[:-2], dtype=np.int64)) != 1:
        raise UnsupportedOperator("BATCH_MATMUL with a batched right-hand side")
    if len(b.graph.tensors[op.inputs[1]].scales) > 1:
        raise UnsupportedOperator("BATCH_MATMUL with per-channel right-hand side scales")
    matrix = rhs.reshape(rhs.shape[-2:])
    weights = matrix if (o is not None and o.AdjY()) else matrix.T  # (N, K)
    w = b.constant_like(op.inputs[1], np.ascontiguousarray(weights))
    x = b.tensor(op.inputs[0])
    if o is not None and o.AdjX():
        x = _transpose_last_two(b, x)
    out = b.tensor(op.outputs[0])
    out_shape = _shape(b, op.outputs[0])
    flat = b.temporary(out, (int(np.prod(out_shape[:-1], dtype=np.int64)), weights.shape[0]))
    bias = _zero_bias(b, x, w, weights.shape[0])
    b.add(Op.FULLY_CONNECTED, [x, w, bias, b.scalar(int(FuseCode.NONE))], [flat])
    b.add(Op.RESHAPE, [flat, _int32(b, out_shape)], [out])


def _transpose_last_two(b: GraphBuilder, x: int) -> int:
    dims = b.operands[x].dimensions
    perm = list(range(len(dims) - 2)) + [len(dims) - 1, len(dims) - 2]
    transposed = b.temporary(x, tuple(dims[p] for p in perm))
    b.add(Op.TRANSPOSE, [x, _int32(b, perm)], [transposed])
    return transposed


def _zero_bias(b: GraphBuilder, x: int, w: int, units: int) -> int:
    x_operand, w_operand = b.operands[x], b.operands[w]
    if x_operand.type in _FLOATS:
        return b.constant(np.zeros(units), x_operand.type)
    return b.constant(np.zeros(units), _T.TENSOR_INT32, x_operand.scale * w_operand.scale)


def _quantize(b: GraphBuilder, op: TfliteOperator) -> None:
    """QUANTIZE of a float input; a requantisation (int8/uint8 in) through float32."""
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    if b.operands[x].type in _FLOATS:
        b.add(Op.QUANTIZE, [x], [out])
        return
    real = b.float_temporary(b.operands[x].dimensions)
    b.add(Op.DEQUANTIZE, [x], [real])
    b.add(Op.QUANTIZE, [real], [out])


def _strided_slice(b: GraphBuilder, op: TfliteOperator) -> None:
    """NNAPI STRIDED_SLICE; an ellipsis or new-axis mask (constant begin/end/strides) is first
    rewritten to one entry per input dimension, new axes then added by a RESHAPE."""
    o = op.options
    masks = [int(o.BeginMask()), int(o.EndMask()), int(o.ShrinkAxisMask())] if o else [0, 0, 0]
    ellipsis, new_axis = (int(o.EllipsisMask()), int(o.NewAxisMask())) if o else (0, 0)
    if o is not None and getattr(o, "Offset", lambda: False)():
        raise UnsupportedOperator("STRIDED_SLICE with offset=true")
    x, out = b.tensor(op.inputs[0]), b.tensor(op.outputs[0])
    if not ellipsis and not new_axis:
        inputs = [x] + [b.tensor(i) for i in op.inputs[1:4]] + [b.scalar(m) for m in masks]
        b.add(Op.STRIDED_SLICE, inputs, [out])
        return
    spec = [b.constant_input(op, k, "begin/end/strides").reshape(-1) for k in (1, 2, 3)]
    rank = len(_shape(b, op.inputs[0]))
    begin, end, strides, masks = _canonical_slice(spec, masks, ellipsis, new_axis, rank)
    sliced_shape = _sliced_shape(_shape(b, op.inputs[0]), begin, end, strides, masks)
    target = out if sliced_shape == _shape(b, op.outputs[0]) else b.temporary(x, sliced_shape)
    inputs = [x, _int32(b, begin), _int32(b, end), _int32(b, strides)] + \
        [b.scalar(m) for m in masks]
    b.add(Op.STRIDED_SLICE, inputs, [target])
    if target != out:
        b.add(Op.RESHAPE, [target, _int32(b, _shape(b, op.outputs[0]))], [out])


def _canonical_slice(spec, masks, ellipsis: int, new_axis: int, rank: int):
    """Per input dimension (begin, end, strides, [begin, end, shrink masks])."""
    begin, end, strides = [0] * rank, [0] * rank, [1] * rank
    out_masks, full = [0, 0, 0], [True] * rank
    dim, count = 0, len(spec[0])
    for k in range(count):
        if ellipsis >> k & 1:
            real_after = sum(1 for j in range(k + 1, count) if not new_axis >> j & 1)
            dim = rank - real_after  # the ellipsis spans the dimensions up to here
            continue
        if new_axis >> k & 1:
            continue
        if dim >= rank:
            raise UnsupportedOperator("STRIDED_SLICE with more entries than dimensions")
        begin[dim], end[dim], strides[dim] = int(spec[0][k]), int(spec[1][k]), int(spec[2][k])
        full[dim] = False
        for m in range(3):
            out_masks[m] |= (masks[m] >> k & 1) << dim
        dim += 1
    for d in range(rank):
        if full[d]:
            out_masks[0] |= 1 << d
            out_masks[1] |= 1 << d
    return begin, end, strides, out_masks


def _sliced_shape(shape, begin, end, strides, masks) -> tuple[int, ...]:
    index = []
    for d in range(len(shape)):
        start = None if masks[0] >> d & 1 else begin[d]
        stop = None if masks[1] >> d & 1 else end[d]
        index.append(begin[d] if masks[2] >> d & 1 else slice(start, stop, strides[d]))
    return tuple(np.broadcast_to(np.float32(0), shape)[tuple(index)].shape)


def _densify(b: GraphBuilder, op: TfliteOperator) -> None:
    value = b.constant_input(op, 0, "input")
    b.fold(op.outputs[0], value.reshape(_shape(b, op.outputs[0])), keep_type=True)


def _shape_op(b: GraphBuilder, op: TfliteOperator) -> None:
    shape = _shape(b, op.inputs[0])
    if any(d <= 0 for d in shape) or b.graph.tensors[op.outputs[0]].type_name != "INT32":
        raise UnsupportedOperator("SHAPE of an unknown shape or as INT64 (NNAPI has no SHAPE)")
    b.fold(op.outputs[0], np.array(shape, np.int32), keep_type=True)


#: TFLite builtin operator name -> converter(builder, operator).
LOWERED_CONVERTERS: dict[str, Callable[[GraphBuilder, TfliteOperator], None]] = {
    "LEAKY_RELU": _leaky_relu, "SQUARED_DIFFERENCE": _squared_difference, "SQUARE": _square,
    "SPLIT_V": _split_v, "PACK": _pack, "UNPACK": _unpack, "MIRROR_PAD": _mirror_pad,
    "REVERSE_V2": _reverse, "BATCH_MATMUL": _batch_matmul, "DENSIFY": _densify,
    "SHAPE": _shape_op, "QUANTIZE": _quantize, "STRIDED_SLICE": _strided_slice,
}
