"""TFLite operator -> NNAPI operation converters, one function per builtin operator.

Each converter reads the operator's options and emits NNAPI operations whose scalar inputs
carry them: padding (TFLite SAME/VALID -> NNAPI implicit padding codes 1/2), strides, fused
activation (NONE/RELU/RELU_N1_TO_1/RELU6 -> FuseCode), dilation, depth multiplier, axis, beta.
Convolutions always use the full implicit signature with ``layout = false`` (NHWC).
DEQUANTIZE of a constant (float16 or quantized weights) is folded into a float32 constant.

Example:
    >>> sorted(CONVERTERS)[:3]
    ['ABS', 'ADD', 'ARG_MAX']
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from nnscope.runtime.hal.types import FuseCode, OperandType, OperationType as Op
from nnscope.runtime.tflite._builder import GraphBuilder, UnsupportedOperator
from nnscope.runtime.tflite._hard_swish import hard_swish
from nnscope.runtime.tflite._reader import TfliteOperator
from nnscope.runtime.tflite._lowered_operators import LOWERED_CONVERTERS
from nnscope.runtime.tflite._recurrent_operators import RECURRENT_CONVERTERS
from nnscope.runtime.tflite._tensor_operators import TENSOR_CONVERTERS

_PADDING = {0: 1, 1: 2}  # tflite.Padding SAME/VALID -> NNAPI PaddingCode SAME/VALID
_FUSE = {0: FuseCode.NONE, 1: FuseCode.RELU, 2: FuseCode.RELU1, 3: FuseCode.RELU6}
_FUSE_OPS = {FuseCode.RELU: Op.RELU, FuseCode.RELU1: Op.RELU1, FuseCode.RELU6: Op.RELU6}
_FUSE_NAMES = {4: "TANH", 5: "SIGN_BIT"}


def _fuse(op: TfliteOperator) -> int:
    options = op.options
    if options is None or not hasattr(options, "FusedActivationFunction"):
        return int(FuseCode.NONE)
    code = options.FusedActivationFunction()
    if code not in _FUSE:
        raise UnsupportedOperator(f"{op.name} with fused activation "
                                  f"{_FUSE_NAMES.get(code, code)}")
    return int(_FUSE[code])


def _padding(op: TfliteOperator) -> int:
    return _PADDING[op.options.Padding()]


def _shape(b: GraphBuilder, tensor_index: int) -> tuple[int, ...]:
    return b.graph.tensors[tensor_index].shape


def _bias(b: GraphBuilder, op: TfliteOperator, out_channels: int) -> int:
    """The bias operand, or a zero constant when TFLite omits it."""
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        return b.tensor(op.inputs[2])
    x, w = b.operands[b.tensor(op.inputs[0])], b.operands[b.tensor(op.inputs[1])]
    if x.type in (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16):
        return b.constant(np.zeros(out_channels), x.type)
    return b.constant(np.zeros(out_channels), OperandType.TENSOR_INT32, x.scale * w.scale)


def _conv_2d(b: GraphBuilder, op: TfliteOperator) -> None:
    o = op.options
    out_channels = _shape(b, op.inputs[1])[0]
    inputs = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), _bias(b, op, out_channels),
              b.scalar(_padding(op)), b.scalar(o.StrideW()), b.scalar(o.StrideH()),
              b.scalar(_fuse(op)), b.scalar(False),
              b.scalar(o.DilationWFactor()), b.scalar(o.DilationHFactor())]
    b.add(Op.CONV_2D, inputs, [b.tensor(op.outputs[0])])


def _depthwise_conv_2d(b: GraphBuilder, op: TfliteOperator) -> None:
    o = op.options
    out_channels = _shape(b, op.inputs[1])[3]
    multiplier = out_channels // max(_shape(b, op.inputs[0])[3], 1)
    inputs = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), _bias(b, op, out_channels),
              b.scalar(_padding(op)), b.scalar(o.StrideW()), b.scalar(o.StrideH()),
              b.scalar(int(multiplier)), b.scalar(_fuse(op)), b.scalar(False),
              b.scalar(o.DilationWFactor()), b.scalar(o.DilationHFactor())]
    b.add(Op.DEPTHWISE_CONV_2D, inputs, [b.tensor(op.outputs[0])])


def _pool(nnapi_type: Op) -> Callable:
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        o = op.options
        inputs = [b.tensor(op.inputs[0]), b.scalar(_padding(op)), b.scalar(o.StrideW()),
                  b.scalar(o.StrideH()), b.scalar(o.FilterWidth()), b.scalar(o.FilterHeight()),
                  b.scalar(_fuse(op)), b.scalar(False)]
        b.add(nnapi_type, inputs, [b.tensor(op.outputs[0])])
    return convert


def _binary(nnapi_type: Op) -> Callable:
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        inputs = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), b.scalar(_fuse(op))]
        b.add(nnapi_type, inputs, [b.tensor(op.outputs[0])])
    return convert


def _unary(nnapi_type: Op) -> Callable:
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        b.add(nnapi_type, [b.tensor(op.inputs[0])], [b.tensor(op.outputs[0])])
    return convert


def _with_activation(b: GraphBuilder, op_type: Op, inputs: list, fuse: int, output: int) -> None:
    """Emit ``op_type`` into ``output``, through a temporary and a RELU* op when fused."""
    if fuse == FuseCode.NONE:
        b.add(op_type, inputs, [output])
        return
    temporary = b.temporary(output)
    b.add(op_type, inputs, [temporary])
    b.add(_FUSE_OPS[FuseCode(fuse)], [temporary], [output])


def _concatenation(b: GraphBuilder, op: TfliteOperator) -> None:
    rank = len(_shape(b, op.outputs[0]))
    axis = op.options.Axis()
    axis = axis + rank if axis < 0 else axis
    inputs = [b.tensor(i) for i in op.inputs] + [b.scalar(int(axis))]
    _with_activation(b, Op.CONCATENATION, inputs, _fuse(op), b.tensor(op.outputs[0]))


def _reshape(b: GraphBuilder, op: TfliteOperator) -> None:
    shape = np.array(_shape(b, op.outputs[0]), np.int32)
    new_shape = b.constant(shape, OperandType.TENSOR_INT32)
    b.add(Op.RESHAPE, [b.tensor(op.inputs[0]), new_shape], [b.tensor(op.outputs[0])])


def _pad(b: GraphBuilder, op: TfliteOperator) -> None:
    b.add(Op.PAD, [b.tensor(op.inputs[0]), b.tensor(op.inputs[1])], [b.tensor(op.outputs[0])])


def _dequantize(b: GraphBuilder, op: TfliteOperator) -> None:
    if b.value(op.inputs[0]) is None or op.outputs[0] in b.graph.outputs:
        b.add(Op.DEQUANTIZE, [b.tensor(op.inputs[0])], [b.tensor(op.outputs[0])])
        return
    b.fold(op.outputs[0], b.dequantized(op.inputs[0]))


def _fully_connected(b: GraphBuilder, op: TfliteOperator) -> None:
    if op.options is not None and op.options.WeightsFormat() != 0:
        raise UnsupportedOperator("FULLY_CONNECTED with shuffled weights")
    units = _shape(b, op.inputs[1])[0]
    inputs = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), _bias(b, op, units),
              b.scalar(_fuse(op))]
    output = b.tensor(op.outputs[0])
    out_shape = _shape(b, op.outputs[0])
    if len(out_shape) == 2:
        b.add(Op.FULLY_CONNECTED, inputs, [output])
        return
    flat = b.temporary(output, (int(np.prod(out_shape[:-1])), units))
    b.add(Op.FULLY_CONNECTED, inputs, [flat])
    shape = b.constant(np.array(out_shape, np.int32), OperandType.TENSOR_INT32)
    b.add(Op.RESHAPE, [flat, shape], [output])


def _softmax(b: GraphBuilder, op: TfliteOperator) -> None:
    beta = float(op.options.Beta()) if op.options is not None else 1.0
    b.add(Op.SOFTMAX, [b.tensor(op.inputs[0]), b.scalar(beta)], [b.tensor(op.outputs[0])])


def _mean(b: GraphBuilder, op: TfliteOperator) -> None:
    keep = int(bool(op.options.KeepDims())) if op.options is not None else 0
    inputs = [b.tensor(op.inputs[0]), b.tensor(op.inputs[1]), b.scalar(keep)]
    b.add(Op.MEAN, inputs, [b.tensor(op.outputs[0])])



def _resize(nnapi_type: Op) -> Callable:
    """RESIZE_*: the output tensor's height/width, NHWC, TFLite's align/half-pixel flags."""
    def convert(b: GraphBuilder, op: TfliteOperator) -> None:
        _, height, width, _ = _shape(b, op.outputs[0])
        o = op.options
        align = bool(o.AlignCorners()) if o is not None else False
        half = bool(o.HalfPixelCenters()) if o is not None else False
        inputs = [b.tensor(op.inputs[0]), b.scalar(int(width)), b.scalar(int(height)),
                  b.scalar(False), b.scalar(align), b.scalar(half)]
        b.add(nnapi_type, inputs, [b.tensor(op.outputs[0])])
    return convert


def _transpose_conv(b: GraphBuilder, op: TfliteOperator) -> None:
    """TFLite inputs (output_shape, weights, input[, bias]) -> NNAPI's implicit signature."""
    o = op.options
    x, w = b.tensor(op.inputs[2]), b.tensor(op.inputs[1])
    out_channels = _shape(b, op.inputs[1])[0]
    if len(op.inputs) > 3 and op.inputs[3] >= 0:
        bias = b.tensor(op.inputs[3])
    elif b.operands[x].type in (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16):
        bias = b.constant(np.zeros(out_channels), b.operands[x].type)
    else:
        bias = b.constant(np.zeros(out_channels), OperandType.TENSOR_INT32,
                          b.operands[x].scale * b.operands[w].scale)
    out_shape = b.constant(np.array(_shape(b, op.outputs[0]), np.int32), OperandType.TENSOR_INT32)
    inputs = [x, w, bias, out_shape, b.scalar(_padding(op)), b.scalar(o.StrideW()),
              b.scalar(o.StrideH()), b.scalar(_fuse(op)), b.scalar(False)]
    b.add(Op.TRANSPOSE_CONV_2D, inputs, [b.tensor(op.outputs[0])])


def _l2_normalization(b: GraphBuilder, op: TfliteOperator) -> None:
    _with_activation(b, Op.L2_NORMALIZATION, [b.tensor(op.inputs[0])], _fuse(op),
                     b.tensor(op.outputs[0]))


#: TFLite builtin operator name -> converter(builder, operator).
CONVERTERS: dict[str, Callable[[GraphBuilder, TfliteOperator], None]] = {
    **TENSOR_CONVERTERS,  # comparisons, maths, reductions, slicing (_tensor_operators)
    "ADD": _binary(Op.ADD), "MUL": _binary(Op.MUL), "SUB": _binary(Op.SUB),
    "DIV": _binary(Op.DIV),
    "AVERAGE_POOL_2D": _pool(Op.AVERAGE_POOL_2D), "MAX_POOL_2D": _pool(Op.MAX_POOL_2D),
    "L2_POOL_2D": _pool(Op.L2_POOL_2D),
    "CONV_2D": _conv_2d, "DEPTHWISE_CONV_2D": _depthwise_conv_2d,
    "FULLY_CONNECTED": _fully_connected, "CONCATENATION": _concatenation,
    "RESHAPE": _reshape, "PAD": _pad, "DEQUANTIZE": _dequantize,
    "SOFTMAX": _softmax, "MEAN": _mean,
    "RELU": _unary(Op.RELU), "RELU6": _unary(Op.RELU6), "RELU_N1_TO_1": _unary(Op.RELU1),
    "LOGISTIC": _unary(Op.LOGISTIC), "TANH": _unary(Op.TANH),
    "HARD_SWISH": hard_swish,  # MUL and ADD below feature level 30 (_hard_swish)
    "RESIZE_BILINEAR": _resize(Op.RESIZE_BILINEAR),
    "RESIZE_NEAREST_NEIGHBOR": _resize(Op.RESIZE_NEAREST_NEIGHBOR),
    "TRANSPOSE_CONV": _transpose_conv, "L2_NORMALIZATION": _l2_normalization,
    **LOWERED_CONVERTERS,  # several NNAPI operations each (_lowered_operators)
    **RECURRENT_CONVERTERS,  # RNN, SVDF, LSTM families (_recurrent_operators)
}
