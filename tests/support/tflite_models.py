"""Tiny .tflite models built for the delegate tests, with the runtime's flatbuffer builder.

``CATEGORY_MODELS`` maps each NNAPI delegate validation category to a one-operator model (and
the feature level at which the delegate's rules give that category for it) that LiteRT runs;
``conv_gelu_conv`` puts a builtin with no NNAPI form at level 30 in the middle of a delegable
chain; ``with_custom`` does the same with MediaPipe's ``Convolution2DTransposeBias`` (LiteRT
resolves it); ``relu_chains`` makes delegated partitions of 1, 2, 3 and 4 operators split by
GELUs, for the partition limit; ``int8_cnn`` is a fully int8-quantized network (as TF's
converter writes one) with an int8 requantization in the middle, and ``int8_operator`` builds a
one-operator int8 model, for the delegate's int8 rules below API 30; ``conv_hard_swish_conv``
and ``hard_swish_operator`` hold a HARD_SWISH, which NNAPI has from level 30 only (the
delegate builds it from MUL and ADD below).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from nnscope.runtime.delegate import Category
from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph, Quant

RNG = np.random.default_rng(36)  # feeds; every builder seeds its own weights (same bytes each call)


def _f32(g: FlatbufferGraph, name: str, shape, data=None) -> int:
    payload = None if data is None else np.asarray(data, np.float32).tobytes()
    return g.tensor(name, shape, "FLOAT32", payload)


def _conv(g: FlatbufferGraph, x: int, shape_in, channels: int, name: str, bias: bool = True) -> int:
    cin, rng = shape_in[-1], np.random.default_rng(len(g.tensors))
    w = _f32(g, f"{name}_w", (channels, 3, 3, cin), rng.standard_normal((channels, 3, 3, cin)) * 0.3)
    inputs = [x, w]
    if bias:
        inputs.append(_f32(g, f"{name}_b", (channels,), rng.standard_normal(channels) * 0.1))
    y = _f32(g, name, (*shape_in[:-1], channels))
    g.operator("CONV_2D", inputs, [y], "Conv2DOptions", Padding=0, StrideW=1, StrideH=1,
               DilationWFactor=1, DilationHFactor=1)
    return y


def _finish(g: FlatbufferGraph, inputs, outputs) -> bytes:
    g.inputs, g.outputs = list(inputs), list(outputs)
    return g.serialize()


def conv_gelu_conv(size: int = 16, channels: int = 8) -> bytes:
    """CONV_2D -> GELU (no NNAPI form at level 30) -> CONV_2D, float32 [1,size,size,3]."""
    return _conv_between_conv("GELU", size, channels)


def conv_relu_conv(size: int = 16, channels: int = 8) -> bytes:
    """:func:`conv_gelu_conv` with a RELU (delegated) in the middle: all on NNAPI."""
    return _conv_between_conv("RELU", size, channels)


def _conv_between_conv(middle: str, size: int, channels: int) -> bytes:
    """CONV_2D -> ``middle`` (an elementwise builtin without options) -> CONV_2D."""
    g = FlatbufferGraph()
    shape = (1, size, size, 3)
    x = _f32(g, "input", shape)
    a = _conv(g, x, shape, channels, "conv0")
    b = _f32(g, middle.lower(), (1, size, size, channels))
    g.operator(middle, [a], [b])
    y = _conv(g, b, (1, size, size, channels), channels, "conv1")
    return _finish(g, [x], [y])


def conv_hard_swish_conv(size: int = 16, channels: int = 8) -> bytes:
    """:func:`conv_gelu_conv` with a HARD_SWISH in the middle, as MobileNetV3 uses it: all
    delegated at every level (below 30 the delegate builds it from MUL and ADD)."""
    return _conv_between_conv("HARD_SWISH", size, channels)


#: A quantized HARD_SWISH's input [-6.4, 6.35] and output [-0.39, 7.26] (scale, zero point).
_HARD_SWISH_QUANT = {"UINT8": ((0.05, 128), (0.03, 13)), "INT8": ((0.05, 0), (0.03, -115))}


def hard_swish_operator(type_name: str = "FLOAT32", shape=(1, 4, 4, 2)) -> bytes:
    """One HARD_SWISH on ``type_name``: FLOAT32, FLOAT16, or UINT8 / INT8 quantized as
    :data:`_HARD_SWISH_QUANT` (the output in its own range, as TF's converter writes it)."""
    g = FlatbufferGraph()
    quant = [None, None]
    if type_name in _HARD_SWISH_QUANT:
        quant = [Quant((scale,), (zero_point,))
                 for scale, zero_point in _HARD_SWISH_QUANT[type_name]]
    x, y = (g.tensor(n, shape, type_name, quant=q) for n, q in zip("xy", quant))
    g.operator("HARD_SWISH", [x], [y])
    return _finish(g, [x], [y])


def with_custom() -> bytes:
    """CONV_2D -> Convolution2DTransposeBias (a custom operator LiteRT runs) -> RELU."""
    g = FlatbufferGraph()
    x = _f32(g, "input", (1, 4, 4, 2))
    a = _conv(g, x, (1, 4, 4, 2), 2, "conv0")
    w = _f32(g, "up_w", (3, 2, 2, 2), np.random.default_rng(5).standard_normal((3, 2, 2, 2)) * 0.3)
    bias = _f32(g, "up_b", (3,), [0.1, -0.2, 0.3])
    b = _f32(g, "up", (1, 8, 8, 3))
    g.custom("Convolution2DTransposeBias", [a, w, bias], [b], struct.pack("<iii", 1, 2, 2))
    y = _f32(g, "output", (1, 8, 8, 3))
    g.operator("RELU", [b], [y])
    return _finish(g, [x], [y])


def with_unknown_custom(name: str = "NoSuchOp") -> bytes:
    """RELU -> a custom operator nothing knows."""
    g = FlatbufferGraph()
    x, y, z = (_f32(g, n, (1, 4)) for n in ("input", "relu", "output"))
    g.operator("RELU", [x], [y])
    g.custom(name, [y], [z])
    return _finish(g, [x], [z])


def relu_chains(lengths=(1, 2, 3, 4)) -> bytes:
    """Chains of RELUs of the given lengths, one GELU between each two: one delegated
    partition per chain."""
    g = FlatbufferGraph()
    x = current = _f32(g, "input", (1, 8))
    for number, length in enumerate(lengths):
        if number:
            nxt = _f32(g, f"gelu{number}", (1, 8))
            g.operator("GELU", [current], [nxt])
            current = nxt
        for k in range(length):
            nxt = _f32(g, f"relu{number}_{k}", (1, 8))
            g.operator("RELU" if k % 2 == 0 else "RELU6", [current], [nxt])
            current = nxt
    return _finish(g, [x], [current])


# --------------------------------------------------------------------------- one per category
@dataclass(frozen=True)
class CategoryModel:
    """A one-operator model whose operator the delegate refuses with ``category`` at
    ``level`` (and, when ``accepted_at`` is given, takes at that level)."""

    data: bytes
    level: int
    category: Category
    feed: tuple
    accepted_at: int | None = None
    #: What NNAPI computes once it takes the operator, when LiteRT's CPU kernel computes
    #: otherwise (a hybrid layer: LiteRT quantizes the activations, the delegate dequantizes
    #: the weights); None: LiteRT's outputs.
    delegated_reference: tuple | None = None


def _unary(op: str, shape, type_name: str = "FLOAT32", out_type: str | None = None,
           options=None, out_shape=None, extra=(), **fields) -> bytes:
    g = FlatbufferGraph()
    x = g.tensor("x", shape, type_name)
    consts = [g.tensor(f"c{i}", np.asarray(v).shape, t, np.asarray(v).tobytes()) for i, (v, t) in enumerate(extra)]
    y = g.tensor("y", out_shape or shape, out_type or type_name)
    g.operator(op, [x, *consts], [y], options, **fields)
    return _finish(g, [x], [y])


def _div_int32() -> CategoryModel:
    g = FlatbufferGraph()
    x, d, y = g.tensor("x", (1, 4), "INT32"), g.tensor("d", (1, 4), "INT32"), g.tensor("y", (1, 4), "INT32")
    g.operator("DIV", [x, d], [y], "DivOptions", FusedActivationFunction=0)
    feed = (np.array([[7, -9, 12, 5]], np.int32), np.array([[2, 4, 5, 1]], np.int32))
    return CategoryModel(_finish(g, [x, d], [y]), 30, Category.UNSUPPORTED_INPUT_TYPE, feed)


def _arg_max_int64() -> CategoryModel:
    data = _unary("ARG_MAX", (2, 5), out_type="INT64", options="ArgMaxOptions", out_shape=(2,),
                  extra=[(np.array([1], np.int32), "INT32")], OutputType=4)
    return CategoryModel(data, 30, Category.UNSUPPORTED_OUTPUT_TYPE,
                         (RNG.standard_normal((2, 5)).astype(np.float32),))


def _concat_rank5() -> CategoryModel:
    g = FlatbufferGraph()
    a, b = g.tensor("a", (1, 2, 2, 2, 2), "FLOAT32"), g.tensor("b", (1, 2, 2, 2, 2), "FLOAT32")
    y = g.tensor("y", (1, 2, 2, 2, 4), "FLOAT32")
    g.operator("CONCATENATION", [a, b], [y], "ConcatenationOptions", Axis=4, FusedActivationFunction=0)
    feed = tuple(RNG.standard_normal((1, 2, 2, 2, 2)).astype(np.float32) for _ in range(2))
    return CategoryModel(_finish(g, [a, b], [y]), 30, Category.UNSUPPORTED_OPERAND_RANK, feed)


def _batch_to_space_crops() -> CategoryModel:
    data = _unary("BATCH_TO_SPACE_ND", (4, 2, 2, 1), out_shape=(1, 3, 3, 1),
                  extra=[(np.array([2, 2], np.int32), "INT32"),
                         (np.array([[0, 1], [0, 1]], np.int32), "INT32")])
    return CategoryModel(data, 30, Category.UNSUPPORTED_OPERAND_VALUE,
                         (RNG.standard_normal((4, 2, 2, 1)).astype(np.float32),))


def _conv_int8_per_channel() -> CategoryModel:
    g = FlatbufferGraph()
    x = g.tensor("x", (1, 4, 4, 2), "INT8", quant=Quant((0.1,), (0,)))
    w = g.tensor("w", (3, 1, 1, 2), "INT8", RNG.integers(-20, 20, (3, 1, 1, 2)).astype(np.int8).tobytes(),
                 quant=Quant((0.01, 0.02, 0.03), (0, 0, 0), 0))
    b = g.tensor("b", (3,), "INT32", np.array([5, -5, 0], np.int32).tobytes(),
                 quant=Quant((0.001, 0.002, 0.003), (0, 0, 0), 0))
    y = g.tensor("y", (1, 4, 4, 3), "INT8", quant=Quant((0.05,), (0,)))
    g.operator("CONV_2D", [x, w, b], [y], "Conv2DOptions", Padding=1, StrideW=1, StrideH=1,
               DilationWFactor=1, DilationHFactor=1)
    feed = (RNG.integers(-100, 100, (1, 4, 4, 2)).astype(np.int8),)
    return CategoryModel(_finish(g, [x], [y]), 28, Category.UNSUPPORTED_QUANTIZATION_TYPE, feed, 29)


def _conv_without_bias() -> CategoryModel:
    g = FlatbufferGraph()
    x = _f32(g, "x", (1, 5, 5, 2))
    _conv(g, x, (1, 5, 5, 2), 3, "y", bias=False)
    return CategoryModel(_finish(g, [x], [2]), 30, Category.MISSING_REQUIRED_OPERAND,
                         (RNG.standard_normal((1, 5, 5, 2)).astype(np.float32),))


def _abs() -> CategoryModel:
    return CategoryModel(_unary("ABS", (1, 6)), 28, Category.UNSUPPORTED_ANDROID_VERSION,
                         (RNG.standard_normal((1, 6)).astype(np.float32),), 29)


def _hybrid_fully_connected() -> CategoryModel:
    g = FlatbufferGraph()
    x = _f32(g, "x", (1, 4))
    weights = RNG.integers(-100, 100, (3, 4)).astype(np.int8)
    w = g.tensor("w", (3, 4), "INT8", weights.tobytes(), quant=Quant((0.02,), (0,)))
    bias = np.array([0.1, 0.2, -0.3], np.float32)
    b = _f32(g, "b", (3,), bias)
    y = _f32(g, "y", (1, 3))
    g.operator("FULLY_CONNECTED", [x, w, b], [y], "FullyConnectedOptions", FusedActivationFunction=0)
    feed = RNG.standard_normal((1, 4)).astype(np.float32)
    dequantized = (feed @ (weights.astype(np.float32) * np.float32(0.02)).T + bias).astype(np.float32)
    return CategoryModel(_finish(g, [x], [y]), 28, Category.UNSUPPORTED_HYBRID_OPERATOR,
                         (feed,), 29, (dequantized,))


def _gelu() -> CategoryModel:
    return CategoryModel(_unary("GELU", (1, 6)), 30, Category.UNSUPPORTED_OPERATOR,
                         (RNG.standard_normal((1, 6)).astype(np.float32),))


def category_models() -> dict[str, CategoryModel]:
    """One model per delegate validation category, by a short name."""
    return {"unsupported_operator": _gelu(), "input_type": _div_int32(),
            "output_type": _arg_max_int64(), "rank": _concat_rank5(),
            "operand_value": _batch_to_space_crops(), "quantization": _conv_int8_per_channel(),
            "missing_operand": _conv_without_bias(), "android_version": _abs(),
            "hybrid": _hybrid_fully_connected()}


# --------------------------------------------------------------------------- int8
def _q8(g: FlatbufferGraph, name: str, shape, scale: float, zero_point: int, data=None) -> int:
    payload = None if data is None else np.asarray(data, np.int8).tobytes()
    return g.tensor(name, shape, "INT8", payload, quant=Quant((scale,), (zero_point,)))


def _int8_filter(g: FlatbufferGraph, name: str, shape, axis: int, seed: int) -> tuple[int, np.ndarray]:
    """A per-channel int8 filter (scales along ``axis``, zero points 0) and its scales."""
    rng = np.random.default_rng(seed)
    channels = shape[axis]
    scales = rng.uniform(0.004, 0.02, channels)
    values = rng.integers(-127, 128, shape).astype(np.int8)
    w = g.tensor(name, shape, "INT8", values.tobytes(),
                 quant=Quant(tuple(scales), (0,) * channels, axis))
    return w, scales


def _int32_bias(g: FlatbufferGraph, name: str, scales: np.ndarray, seed: int) -> int:
    values = np.random.default_rng(seed).integers(-500, 500, len(scales)).astype(np.int32)
    return g.tensor(name, (len(scales),), "INT32", values.tobytes(),
                    quant=Quant(tuple(scales), (0,) * len(scales), 0))


def int8_cnn() -> bytes:
    """int8 [1,8,8,3] -> CONV_2D (per-channel filter, RELU) -> QUANTIZE (int8 to int8: the
    delegate takes it only from API 30) -> DEPTHWISE_CONV_2D (per-channel) -> ADD (with the
    requantized tensor) -> AVERAGE_POOL_2D -> RESHAPE -> FULLY_CONNECTED (per-tensor weights),
    int8 logits [1,10]: TF's converter's full-integer form. (No SOFTMAX after it: a one-step
    change of a logit, as implementations round differently, moves it by several steps.)"""
    g = FlatbufferGraph()
    x = _q8(g, "input", (1, 8, 8, 3), 0.02, -5)
    w0, s0 = _int8_filter(g, "conv_w", (8, 3, 3, 3), 0, 1)
    a = _q8(g, "conv", (1, 8, 8, 8), 0.1, -128)
    g.operator("CONV_2D", [x, w0, _int32_bias(g, "conv_b", 0.02 * s0, 2)], [a], "Conv2DOptions",
               Padding=0, StrideW=1, StrideH=1, DilationWFactor=1, DilationHFactor=1,
               FusedActivationFunction=1)
    b = _q8(g, "requantized", (1, 8, 8, 8), 0.16, -100)
    g.operator("QUANTIZE", [a], [b])
    w1, s1 = _int8_filter(g, "dw_w", (1, 3, 3, 8), 3, 3)
    c = _q8(g, "depthwise", (1, 8, 8, 8), 0.15, 3)
    g.operator("DEPTHWISE_CONV_2D", [b, w1, _int32_bias(g, "dw_b", 0.16 * s1, 4)], [c],
               "DepthwiseConv2DOptions", Padding=0, StrideW=1, StrideH=1, DepthMultiplier=1,
               DilationWFactor=1, DilationHFactor=1, FusedActivationFunction=0)
    d = _q8(g, "add", (1, 8, 8, 8), 0.2, -10)
    g.operator("ADD", [c, b], [d], "AddOptions", FusedActivationFunction=0)
    e = _q8(g, "pool", (1, 4, 4, 8), 0.2, -10)
    g.operator("AVERAGE_POOL_2D", [d], [e], "Pool2DOptions", Padding=1, StrideW=2, StrideH=2,
               FilterWidth=2, FilterHeight=2, FusedActivationFunction=0)
    shape = g.tensor("shape", (2,), "INT32", np.array([1, 128], np.int32).tobytes())
    f = _q8(g, "flat", (1, 128), 0.2, -10)
    g.operator("RESHAPE", [e, shape], [f], "ReshapeOptions", NewShape=[1, 128])
    weights = np.random.default_rng(5).integers(-127, 128, (10, 128))
    w2 = _q8(g, "fc_w", (10, 128), 0.001, 0, weights)
    logits = _q8(g, "logits", (1, 10), 0.2, 0)
    g.operator("FULLY_CONNECTED", [f, w2, _int32_bias(g, "fc_b", np.full(10, 0.2 * 0.001), 6)],
               [logits], "FullyConnectedOptions", FusedActivationFunction=0)
    return _finish(g, [x], [logits])


def int8_operator(op: str, shape=(1, 4, 4, 2), out_shape=None, out_type: str = "INT8",
                  zero_point: int = -3, options=None, extra=(), before=(), **fields) -> bytes:
    """One ``op`` on an int8 input ``x`` (scale 0.05, ``zero_point``): ``extra`` are constant
    inputs after it and ``before`` constant inputs before it, each (array, TFLite type); the
    output has ``out_type`` (int8 like the input, bool, int32 or float32 as given)."""
    g = FlatbufferGraph()
    head = [g.tensor(f"b{i}", np.shape(v), t, np.asarray(v).tobytes()) for i, (v, t) in enumerate(before)]
    x = _q8(g, "x", shape, 0.05, zero_point)
    tail = [g.tensor(f"c{i}", np.shape(v), t, np.asarray(v).tobytes()) for i, (v, t) in enumerate(extra)]
    out = out_shape or shape
    y = _q8(g, "y", out, 0.05, zero_point) if out_type == "INT8" else g.tensor("y", out, out_type)
    g.operator(op, [*head, x, *tail], [y], options, **fields)
    return _finish(g, [x], [y])


def squared_difference() -> bytes:
    """SQUARED_DIFFERENCE: lowered by the loader into SUB then MUL."""
    g = FlatbufferGraph()
    a, b, y = (_f32(g, n, (1, 4)) for n in "aby")
    g.operator("SQUARED_DIFFERENCE", [a, b], [y])
    return _finish(g, [a, b], [y])


def litert_outputs(data: bytes, feed) -> list[np.ndarray]:
    """LiteRT's own outputs for the whole model (the oracle)."""
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    interpreter = Interpreter(model_content=data, num_threads=1)
    interpreter.allocate_tensors()
    for detail, value in zip(interpreter.get_input_details(), feed):
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def relu_and_its_shape() -> bytes:
    """RELU -> y, and SHAPE(y) as a second output (as Keras' squeeze-and-excite blocks read
    a shape the loader knows but NNAPI has no operation for)."""
    g = FlatbufferGraph()
    x, y = _f32(g, "x", (1, 8)), _f32(g, "y", (1, 8))
    s = g.tensor("s", (2,), "INT32")
    g.operator("RELU", [x], [y])
    g.operator("SHAPE", [y], [s], "ShapeOptions", OutType=2)
    return _finish(g, [x], [y, s])


def reshape_to_a_computed_shape() -> bytes:
    """RESHAPE of x [1,8] to the shape fed as a second input (LiteRT sizes its output only when
    it runs; stored as the placeholder [1,1], as TF's converter writes it), then a
    FULLY_CONNECTED [.,4] -> [.,3] and a RELU: a graph with dynamic-sized tensors."""
    g = FlatbufferGraph()
    x, shape = _f32(g, "x", (1, 8)), g.tensor("shape", (2,), "INT32")
    w = _f32(g, "w", (3, 4), np.random.default_rng(3).standard_normal((3, 4)))
    y, z, out = _f32(g, "y", (1, 1)), _f32(g, "z", (1, 3)), _f32(g, "out", (1, 3))
    g.operator("RESHAPE", [x, shape], [y])
    g.operator("FULLY_CONNECTED", [y, w, -1], [z], "FullyConnectedOptions")
    g.operator("RELU", [z], [out])
    return _finish(g, [x, shape], [out])
