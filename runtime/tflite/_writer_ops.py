"""NNAPI operation -> LiteRT builtin operators, one translator per operation type.

Each translator reads the operation's scalar operands (padding, strides, fused activation,
layout, ...) and emits builtins through a :class:`~runtime.tflite._writer.Writer`. NNAPI's
FuseCode numbers are TFLite's ActivationFunctionType (NONE, RELU, RELU_N1_TO_1, RELU6).
Explicit convolution padding is SAME or VALID when it equals them, else a PAD before a VALID
convolution; ``layout = true`` (NCHW) goes through TRANSPOSEs around the NHWC builtin. Types
are those LiteRT computes like NNAPI (checked by the CTS): float32 everywhere, uint8/int8
(per-tensor, per-channel int8 weights) where LiteRT has the quantized kernel. Anything else
raises :class:`~runtime.tflite._writer.Untranslatable`. EXP is left out on purpose: XNNPACK's
differs from NNAPI's reference beyond the CTS float tolerance on 1 % of large inputs; so is
QUANTIZE: LiteRT's is one step off NNAPI's (``round(x / scale)``) on 0.1 % of inputs; and so is
RESIZE_BILINEAR: its interpolation differs in the last bits, and an ARGMAX downstream of equal
values then picks another index (random-graph seed 98).

Example:
    >>> sorted(op.name for op in TRANSLATORS)[:3]
    ['ABS', 'ADD', 'AVERAGE_POOL_2D']
"""
from __future__ import annotations

import numpy as np

from runtime.hal.types import OperandLifetime as L, OperandType as T, OperationType as Op
from runtime.tflite._flatbuffer import Quant
from runtime.tflite._writer import Untranslatable, Writer

_F32 = frozenset({T.TENSOR_FLOAT32})
_Q8 = frozenset({T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED})
_ANY = _F32 | _Q8
_PADDING = {1: 0, 2: 1}  # NNAPI PaddingCode SAME/VALID -> tflite.Padding SAME/VALID
_SAME, _VALID = 0, 1


def _check_types(w: Writer, op, allowed, inputs: int = 1) -> None:
    """The first ``inputs`` inputs and every output have a type in ``allowed``, and one type."""
    types = {w.operand(i).type for i in (*op.inputs[:inputs], *op.outputs)}
    if len(types) != 1 or not types <= allowed:
        raise Untranslatable(f"{op.type.name} on {sorted(t.name for t in types)}")


def _fuse(w: Writer, index: int) -> int:
    code = w.scalar(index)
    if code not in (0, 1, 2, 3):
        raise Untranslatable(f"fused activation {code}")
    return int(code)


def _layout(w: Writer, op, position: int) -> bool:
    return bool(w.scalar(op.inputs[position])) if len(op.inputs) > position else False


def _same_pads(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _explicit(w: Writer, x: int, pads, strides, kernel, dilation, nchw: bool):
    """tflite padding for explicit (left, right, top, bottom) pads, or None when neither."""
    if not any(pads):
        return _VALID
    dims = w.operand(x).dimensions
    height, width = (dims[2], dims[3]) if nchw else (dims[1], dims[2])
    if height and width and (pads[2], pads[3]) == _same_pads(height, kernel[0], strides[1], dilation[1]) \
            and (pads[0], pads[1]) == _same_pads(width, kernel[1], strides[0], dilation[0]):
        return _SAME
    return None


def _conv_args(w: Writer, op, implicit_count: int, extra: int):
    """(padding or explicit pads, strides, extra scalars, fuse, nchw, dilation) of a conv."""
    ins = op.inputs
    implicit = len(ins) in implicit_count and (len(ins) == min(implicit_count)
                                               or w.operand(ins[implicit_count[0]]).type == T.BOOL)
    first = 3 if implicit else 6
    pads = (w.scalar(ins[3]),) if implicit else tuple(w.scalar(i) for i in ins[3:7])
    strides = (w.scalar(ins[first + 1]), w.scalar(ins[first + 2]))
    extras = [w.scalar(i) for i in ins[first + 3:first + 3 + extra]]
    fuse = _fuse(w, ins[first + 3 + extra])
    nchw = _layout(w, op, first + 4 + extra)
    dilation = (1, 1)
    if len(ins) > first + 5 + extra:
        dilation = (w.scalar(ins[first + 5 + extra]), w.scalar(ins[first + 6 + extra]))
    return pads, strides, extras, fuse, nchw, dilation


def _padded(w: Writer, x: int, source: int, pads, strides, kernel, dilation, nchw: bool):
    """(input tensor, tflite padding): explicit pads that are not SAME/VALID become a PAD."""
    if len(pads) == 1:
        return source, _PADDING[pads[0]]
    padding = _explicit(w, x, pads, strides, kernel, dilation, nchw)
    if padding is not None:
        return source, padding
    left, right, top, bottom = pads
    dims = list(w.operand(x).dimensions)
    n, h, wd, c = (dims[0], dims[2], dims[3], dims[1]) if nchw else dims
    padded = w.new(x, (n, h + top + bottom if h else 0, wd + left + right if wd else 0, c))
    w.emit("PAD", [source, w.int32([[0, 0], [top, bottom], [left, right], [0, 0]])], [padded])
    return padded, _VALID


def _bias(w: Writer, op, x: int, f: int) -> int:
    """The bias tensor; int32 biases carry the scales LiteRT/XNNPACK expect (input x filter)."""
    b = op.inputs[2]
    bias = w.operand(b)
    if bias.lifetime == L.NO_VALUE:
        return -1
    if bias.type != T.TENSOR_INT32:
        return w.tensor(b)
    filt = w.operand(f)
    if filt.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        scales = tuple(float(w.operand(x).scale * s) for s in filt.channel_quant.scales)
        return w.constant(w.value(b), "INT32", Quant(scales, (0,) * len(scales), 0))
    return w.tensor(b)


def _check_filter(w: Writer, x: int, f: int, channel_dim: int) -> None:
    """LiteRT's quantized convolutions: uint8 with a uint8 filter, int8 with a symmetric one."""
    xt, ft = w.operand(x).type, w.operand(f)
    if xt == T.TENSOR_FLOAT32 and ft.type == T.TENSOR_FLOAT32:
        return
    if xt == T.TENSOR_QUANT8_ASYMM and ft.type == T.TENSOR_QUANT8_ASYMM:
        return
    if xt == T.TENSOR_QUANT8_ASYMM_SIGNED:
        if ft.type == T.TENSOR_QUANT8_ASYMM_SIGNED and ft.zero_point == 0:
            return
        if ft.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL and ft.channel_quant.channel_dim == channel_dim:
            return
    raise Untranslatable(f"convolution of {xt.name} with a {ft.type.name} filter")


def _conv_2d(w: Writer, op) -> None:
    x, f = op.inputs[0], op.inputs[1]
    _check_types(w, op, _ANY)
    _check_filter(w, x, f, 0)
    pads, strides, _, fuse, nchw, dilation = _conv_args(w, op, (7, 8, 10), 0)
    kernel = w.operand(f).dimensions[1:3]
    source, padding = _padded(w, x, w.nhwc_in(x, nchw), pads, strides, kernel, dilation, nchw)
    out, finish = w.nhwc_out(op.outputs[0], nchw)
    w.emit("CONV_2D", [source, w.tensor(f), _bias(w, op, x, f)], [out], "Conv2DOptions",
           Padding=padding, StrideW=strides[0], StrideH=strides[1], FusedActivationFunction=fuse,
           DilationWFactor=dilation[0], DilationHFactor=dilation[1])
    finish()


def _depthwise_conv_2d(w: Writer, op) -> None:
    x, f = op.inputs[0], op.inputs[1]
    _check_types(w, op, _ANY)
    _check_filter(w, x, f, 3)
    pads, strides, (multiplier,), fuse, nchw, dilation = _conv_args(w, op, (8, 9, 11), 1)
    kernel = w.operand(f).dimensions[1:3]
    source, padding = _padded(w, x, w.nhwc_in(x, nchw), pads, strides, kernel, dilation, nchw)
    out, finish = w.nhwc_out(op.outputs[0], nchw)
    w.emit("DEPTHWISE_CONV_2D", [source, w.tensor(f), _bias(w, op, x, f)], [out],
           "DepthwiseConv2DOptions", Padding=padding, StrideW=strides[0], StrideH=strides[1],
           DepthMultiplier=multiplier, FusedActivationFunction=fuse,
           DilationWFactor=dilation[0], DilationHFactor=dilation[1])
    finish()


def _pool(builtin: str, types) -> callable:
    def translate(w: Writer, op) -> None:
        _check_types(w, op, types)
        ins, x = op.inputs, op.inputs[0]
        implicit = len(ins) in (7, 8)
        first = 1 if implicit else 4
        pads = (w.scalar(ins[1]),) if implicit else tuple(w.scalar(i) for i in ins[1:5])
        strides = (w.scalar(ins[first + 1]), w.scalar(ins[first + 2]))
        size = (w.scalar(ins[first + 3]), w.scalar(ins[first + 4]))
        fuse, nchw = _fuse(w, ins[first + 5]), _layout(w, op, first + 6)
        padding = _PADDING[pads[0]] if implicit else \
            _explicit(w, x, pads, strides, (size[1], size[0]), (1, 1), nchw)
        if padding is None:
            raise Untranslatable(f"{builtin} with explicit padding other than SAME/VALID")
        source = w.nhwc_in(x, nchw)
        out, finish = w.nhwc_out(op.outputs[0], nchw)
        w.emit(builtin, [source], [out], "Pool2DOptions", Padding=padding, StrideW=strides[0],
               StrideH=strides[1], FilterWidth=size[0], FilterHeight=size[1],
               FusedActivationFunction=fuse)
        finish()
    return translate


def _binary(builtin: str, types) -> callable:
    def translate(w: Writer, op) -> None:
        _check_types(w, op, types, 2)
        w.emit(builtin, [w.tensor(op.inputs[0]), w.tensor(op.inputs[1])], [w.tensor(op.outputs[0])],
               f"{builtin.title()}Options", FusedActivationFunction=_fuse(w, op.inputs[2]))
    return translate


def _unary(builtin: str, types) -> callable:
    def translate(w: Writer, op) -> None:
        _check_types(w, op, types)
        w.emit(builtin, [w.tensor(op.inputs[0])], [w.tensor(op.outputs[0])])
    return translate


def _pair(builtin: str, types) -> callable:
    def translate(w: Writer, op) -> None:
        _check_types(w, op, types, 2)
        w.emit(builtin, [w.tensor(op.inputs[0]), w.tensor(op.inputs[1])], [w.tensor(op.outputs[0])])
    return translate


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


def _fully_connected(w: Writer, op) -> None:
    x, f = op.inputs[0], op.inputs[1]
    _check_types(w, op, _ANY)
    _check_filter(w, x, f, 0)
    if w.operand(f).type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        raise Untranslatable("FULLY_CONNECTED with per-channel weights")
    w.emit("FULLY_CONNECTED", [w.tensor(x), w.tensor(f), _bias(w, op, x, f)], [w.tensor(op.outputs[0])],
           "FullyConnectedOptions", FusedActivationFunction=_fuse(w, op.inputs[3]), KeepNumDims=False)


def _softmax(w: Writer, op) -> None:
    _check_types(w, op, _ANY)
    rank = len(w.operand(op.inputs[0]).dimensions)
    if len(op.inputs) > 2 and w.scalar(op.inputs[2]) not in (-1, rank - 1):
        raise Untranslatable("SOFTMAX on an axis other than the last")
    if rank > 4:
        raise Untranslatable("SOFTMAX of rank above 4")
    w.emit("SOFTMAX", [w.tensor(op.inputs[0])], [w.tensor(op.outputs[0])], "SoftmaxOptions",
           Beta=float(w.scalar(op.inputs[1])))


def _prelu(w: Writer, op) -> None:
    _check_types(w, op, _F32, 2)
    w.emit("PRELU", [w.tensor(op.inputs[0]), w.tensor(op.inputs[1])], [w.tensor(op.outputs[0])])


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


def _dequantize(w: Writer, op) -> None:
    """CAST, SUB zero point, MUL scale, all float32: NNAPI's ``scale * (q - zeroPoint)`` to the
    bit (LiteRT's DEQUANTIZE multiplies in double: one ulp off, which an EXP downstream grows)."""
    x, out = w.operand(op.inputs[0]), w.operand(op.outputs[0])
    if x.type not in _Q8 or out.type != T.TENSOR_FLOAT32:
        raise Untranslatable(f"DEQUANTIZE of {x.type.name} to {out.type.name}")
    shape = x.dimensions
    cast, centered = w.new(op.inputs[0], shape, "FLOAT32"), w.new(op.inputs[0], shape, "FLOAT32")
    w.emit("CAST", [w.tensor(op.inputs[0])], [cast])
    w.emit("SUB", [cast, w.constant(np.float32([x.zero_point]), "FLOAT32")], [centered],
           "SubOptions", FusedActivationFunction=0)
    w.emit("MUL", [centered, w.constant(np.float32([x.scale]), "FLOAT32")], [w.tensor(op.outputs[0])],
           "MulOptions", FusedActivationFunction=0)


def _cast(w: Writer, op) -> None:
    """float16 -> float32 (float16 weights): TFLite's DEQUANTIZE of a float16 tensor."""
    if (w.operand(op.inputs[0]).type, w.operand(op.outputs[0]).type) != (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32):
        raise Untranslatable("CAST other than float16 -> float32")
    w.emit("DEQUANTIZE", [w.tensor(op.inputs[0])], [w.tensor(op.outputs[0])])


#: NNAPI operation type -> translator(writer, operation).
TRANSLATORS = {
    Op.ADD: _binary("ADD", _ANY), Op.SUB: _binary("SUB", _ANY), Op.MUL: _binary("MUL", _ANY),
    Op.DIV: _binary("DIV", _F32),
    Op.CONV_2D: _conv_2d, Op.DEPTHWISE_CONV_2D: _depthwise_conv_2d,
    Op.AVERAGE_POOL_2D: _pool("AVERAGE_POOL_2D", _ANY), Op.MAX_POOL_2D: _pool("MAX_POOL_2D", _ANY),
    Op.L2_POOL_2D: _pool("L2_POOL_2D", _F32),
    Op.RELU: _unary("RELU", _ANY), Op.RELU1: _unary("RELU_N1_TO_1", _ANY),
    Op.RELU6: _unary("RELU6", _ANY), Op.LOGISTIC: _unary("LOGISTIC", _ANY),
    Op.TANH: _unary("TANH", _ANY), Op.HARD_SWISH: _unary("HARD_SWISH", _ANY),
    Op.ABS: _unary("ABS", _F32), Op.FLOOR: _unary("FLOOR", _F32),  # no EXP: XNNPACK's is ~1e-6 off
    Op.NEG: _unary("NEG", _F32), Op.SQRT: _unary("SQRT", _F32), Op.RSQRT: _unary("RSQRT", _F32),
    Op.LOG: _unary("LOG", _F32), Op.SIN: _unary("SIN", _F32),
    Op.MAXIMUM: _pair("MAXIMUM", _F32), Op.MINIMUM: _pair("MINIMUM", _F32),
    Op.CONCATENATION: _concatenation, Op.RESHAPE: _reshape, Op.PAD: _pad, Op.PAD_V2: _pad_v2,
    Op.FULLY_CONNECTED: _fully_connected, Op.SOFTMAX: _softmax, Op.PRELU: _prelu,
    Op.MEAN: _reduce("MEAN", _F32), Op.REDUCE_MAX: _reduce("REDUCE_MAX", _ANY),
    Op.REDUCE_MIN: _reduce("REDUCE_MIN", _ANY), Op.TRANSPOSE: _transpose,
    Op.SQUEEZE: _squeeze, Op.SLICE: _slice, Op.STRIDED_SLICE: _strided_slice, Op.GATHER: _gather,
    Op.RESIZE_NEAREST_NEIGHBOR: _resize("RESIZE_NEAREST_NEIGHBOR", "ResizeNearestNeighborOptions"),
    Op.BATCH_TO_SPACE_ND: _batch_to_space, Op.SPACE_TO_BATCH_ND: _space_to_batch,
    Op.DEPTH_TO_SPACE: _block("DEPTH_TO_SPACE", "DepthToSpaceOptions"),
    Op.SPACE_TO_DEPTH: _block("SPACE_TO_DEPTH", "SpaceToDepthOptions"),
    Op.DEQUANTIZE: _dequantize, Op.CAST: _cast,
}
