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

from nnscope.runtime.hal.types import OperandLifetime as L, OperandType as T, OperationType as Op
from nnscope.runtime.tflite._flatbuffer import Quant
from nnscope.runtime.tflite._writer import (ANY as _ANY, F32 as _F32, Q8 as _Q8, Untranslatable, Writer,
                                    check_types as _check_types, layout as _layout)
from nnscope.runtime.tflite._writer_shapes import SHAPE_TRANSLATORS

_PADDING = {1: 0, 2: 1}  # NNAPI PaddingCode SAME/VALID -> tflite.Padding SAME/VALID
_SAME, _VALID = 0, 1


def _fuse(w: Writer, index: int) -> int:
    code = w.scalar(index)
    if code not in (0, 1, 2, 3):
        raise Untranslatable(f"fused activation {code}")
    return int(code)


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
    Op.FULLY_CONNECTED: _fully_connected, Op.SOFTMAX: _softmax, Op.PRELU: _prelu,
    Op.DEQUANTIZE: _dequantize, Op.CAST: _cast,
    **SHAPE_TRANSLATORS,  # reshaping, slicing, reductions, layout moves (_writer_shapes)
}
