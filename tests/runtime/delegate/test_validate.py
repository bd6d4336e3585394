"""Per-operator validation: for each model built for one delegate category, the verdict gives
the category the NNAPI delegate's rules give for that operator at that feature level (and the
operator is taken at the level where the rule no longer applies); lowering notes."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.delegate import Category, decide
from nnscope.runtime.delegate.int8 import passes_int8_as_uint8
from nnscope.runtime.delegate.validate import operation_level
from nnscope.runtime.hal.types import OperationType
from nnscope.runtime.tflite._reader import read_graph
from nnscope.runtime.delegate.validate import validate_operators
from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph, Quant
from tests.support.tflite_models import (category_models, hard_swish_operator, int8_operator,
                                        squared_difference)

MODELS = category_models()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_category_model_gets_its_category(name):
    model = MODELS[name]
    verdict = decide(model.data, model.level).verdicts[0]
    assert not verdict.supported
    assert model.category in [f.category for f in verdict.failures], verdict.failures
    if model.accepted_at is not None:
        assert decide(model.data, model.accepted_at).verdicts[0].supported


@pytest.mark.parametrize("name", ["unsupported_operator", "input_type", "output_type", "rank",
                                  "operand_value", "missing_operand", "android_version", "hybrid"])
def test_the_reported_reason_is_the_category(name):
    """The report's reason (the first failure) names the category itself."""
    model = MODELS[name]
    verdict = decide(model.data, model.level).verdicts[0]
    assert verdict.category == model.category
    assert verdict.reason.startswith(model.category.words + ": ")


def test_int8_convolution_at_api_28_fails_on_type_and_per_channel_quantization():
    """As the delegate collects every failure: int8 is not a type NNAPI 1.1 convolves, and its
    per-channel filter needs NNAPI 1.2."""
    verdict = decide(MODELS["quantization"].data, 28).verdicts[0]
    categories = [f.category for f in verdict.failures]
    assert categories[0] == Category.UNSUPPORTED_INPUT_TYPE
    assert Category.UNSUPPORTED_QUANTIZATION_TYPE in categories


def test_a_lowered_operator_is_noted():
    verdict = decide(squared_difference()).verdicts[0]
    assert verdict.supported
    assert verdict.note == "lowered into 2 NNAPI operations (SUB, MUL)"


#: What the NNAPI delegate builds HARD_SWISH from below API 30 (NNAPI 1.0 operations).
HARD_SWISH_BELOW_30 = ("MUL", "MUL", "MUL", "ADD")


@pytest.mark.parametrize("type_name", ["FLOAT32", "UINT8", "INT8"])
@pytest.mark.parametrize("level", [27, 28, 29])
def test_hard_swish_below_api_30_is_delegated_built_from_mul_and_add(level, type_name):
    """The delegate takes HARD_SWISH at every level (no Android version in its rule, float32
    or 8-bit quantized) and below API 30 builds it from NNAPI 1.0 operations."""
    verdict = decide(hard_swish_operator(type_name), level).verdicts[0]
    assert verdict.supported, verdict.reason
    assert verdict.operations == HARD_SWISH_BELOW_30
    assert verdict.note == "lowered into 4 NNAPI operations (MUL, MUL, MUL, ADD)"


@pytest.mark.parametrize("type_name", ["FLOAT32", "UINT8", "INT8"])
def test_hard_swish_at_api_30_is_nnapis_own(type_name):
    verdict = decide(hard_swish_operator(type_name), 30).verdicts[0]
    assert verdict.supported, verdict.reason
    assert verdict.operations == ("HARD_SWISH",)
    assert verdict.note == ""


@pytest.mark.parametrize("level", [27, 28, 29, 30])
def test_a_float16_hard_swish_is_refused_for_its_input_type_at_every_level(level):
    """The delegate's rule takes float32 and 8-bit quantized inputs only."""
    verdict = decide(hard_swish_operator("FLOAT16"), level).verdicts[0]
    assert verdict.category == Category.UNSUPPORTED_INPUT_TYPE, verdict.reason


def test_an_unknown_feature_level_is_refused():
    with pytest.raises(ValueError, match="feature level 26"):
        validate_operators(read_graph(squared_difference()), 26)


@pytest.mark.parametrize("operation, level", [(OperationType.ADD, 27), (OperationType.DIV, 28),
                                              (OperationType.ABS, 29), (OperationType.HARD_SWISH, 30)])
def test_operation_levels_follow_nnapi_versions(operation, level):
    assert operation_level(operation) == level


def _strided_slice_int32() -> bytes:
    g = FlatbufferGraph()
    x, y = g.tensor("x", (1, 4), "INT32"), g.tensor("y", (1, 2), "INT32")
    begin, end, strides = (g.tensor(n, (2,), "INT32", np.array(v, np.int32).tobytes())
                           for n, v in (("begin", [0, 1]), ("end", [1, 3]), ("strides", [1, 1])))
    g.operator("STRIDED_SLICE", [x, begin, end, strides], [y], "StridedSliceOptions")
    g.inputs, g.outputs = [x], [y]
    return g.serialize()


def _pack_to_rank5() -> bytes:
    g = FlatbufferGraph()
    a, b = (g.tensor(n, (1, 2, 2, 2), "FLOAT32") for n in "ab")
    y = g.tensor("y", (2, 1, 2, 2, 2), "FLOAT32")
    g.operator("PACK", [a, b], [y], "PackOptions", ValuesCount=2, Axis=0)
    g.inputs, g.outputs = [a, b], [y]
    return g.serialize()


@pytest.mark.parametrize("build, category", [(_strided_slice_int32, Category.UNSUPPORTED_INPUT_TYPE),
                                             (_pack_to_rank5, Category.UNSUPPORTED_OPERAND_RANK)])
def test_an_nnapi_signature_refusal_gets_the_delegates_category(build, category):
    """An operator the loader maps but whose NNAPI operation refuses the operand (an int32
    STRIDED_SLICE, a PACK lowered to a rank-5 CONCATENATION) is named by what it refuses, as
    TensorFlow-converted models showed (they were all 'unsupported operand value')."""
    verdict = decide(build(), 30).verdicts[0]
    assert verdict.category == category, verdict.reason


# --------------------------------------------------------------------------- int8 below API 30
def _i32(values) -> tuple:
    return np.array(values, np.int32), "INT32"


def _q8_unary(op: str, out_scale: float, out_zero_point: int, **fields) -> bytes:
    g = FlatbufferGraph()
    x = g.tensor("x", (1, 8), "INT8", quant=Quant((0.05,), (-3,)))
    y = g.tensor("y", (1, 8), "INT8", quant=Quant((out_scale,), (out_zero_point,)))
    g.operator(op, [x], [y], **fields)
    g.inputs, g.outputs = [x], [y]
    return g.serialize()


def _quantize_float_to_int8() -> bytes:
    g = FlatbufferGraph()
    x = g.tensor("x", (1, 8), "FLOAT32")
    y = g.tensor("y", (1, 8), "INT8", quant=Quant((0.05,), (-3,)))
    g.operator("QUANTIZE", [x], [y])
    g.inputs, g.outputs = [x], [y]
    return g.serialize()


#: int8 operators the delegate passes to NNAPI as uint8 below API 30, and the first level
#: that takes them (by the operator's own rules: quantized TANH, MEAN and ARG_MAX from NNAPI
#: 1.2; PAD and RESIZE_BILINEAR take float32 only before 1.2, convolutions no int8; TRANSPOSE
#: comes with 1.1).
CONVERTED = {
    "RELU": (lambda: int8_operator("RELU"), 27),
    "MAX_POOL_2D": (lambda: int8_operator("MAX_POOL_2D", out_shape=(1, 2, 2, 2),
                                          options="Pool2DOptions", Padding=1, StrideW=2,
                                          StrideH=2, FilterWidth=2, FilterHeight=2), 27),
    "RESHAPE": (lambda: int8_operator("RESHAPE", out_shape=(1, 32), extra=[_i32([1, 32])],
                                      options="ReshapeOptions", NewShape=[1, 32]), 27),
    "LOGISTIC": (lambda: _q8_unary("LOGISTIC", 1 / 256, -128), 27),
    "SOFTMAX": (lambda: _q8_unary("SOFTMAX", 1 / 256, -128, options="SoftmaxOptions", Beta=1.0), 27),
    "TANH": (lambda: _q8_unary("TANH", 1 / 128, 0), 29),
    "TRANSPOSE": (lambda: int8_operator("TRANSPOSE", out_shape=(1, 4, 2, 4), extra=[_i32([0, 1, 3, 2])]), 28),
    "PAD": (lambda: int8_operator("PAD", out_shape=(1, 6, 6, 2),
                                  extra=[_i32([[0, 0], [1, 1], [1, 1], [0, 0]])]), 29),
    "RESIZE_BILINEAR": (lambda: int8_operator("RESIZE_BILINEAR", out_shape=(1, 8, 8, 2), extra=[_i32([8, 8])],
                                              options="ResizeBilinearOptions"), 29),
    "MEAN": (lambda: int8_operator("MEAN", out_shape=(1, 1, 1, 2), extra=[_i32([1, 2])],
                                   options="ReducerOptions", KeepDims=True), 29),
    "ARG_MAX": (lambda: int8_operator("ARG_MAX", out_shape=(1, 4, 4), out_type="INT32", extra=[_i32([3])],
                                      options="ArgMaxOptions", OutputType=2), 29),
    "CONV_2D": (lambda: MODELS["quantization"].data, 29),
}


@pytest.mark.parametrize("name", sorted(CONVERTED))
def test_an_int8_operator_the_delegate_converts_is_taken_below_api_30(name):
    """Below API 30 the delegate hands these operators' int8 tensors to NNAPI as uint8, so
    they are not refused for TENSOR_QUANT8_ASYMM_SIGNED (which NNAPI has from 1.3 only); from
    the level their own rules allow they are delegated, and the level below refuses them for
    a reason of their own."""
    build, first = CONVERTED[name]
    data = build()
    for level in range(first, 31):
        verdict = decide(data, level).verdicts[0]
        assert verdict.supported, (level, verdict.reason)
    if first > 27:
        verdict = decide(data, first - 1).verdicts[0]
        assert not verdict.supported
        assert "ASYMM_SIGNED" not in verdict.reason, verdict.reason


#: int8 operators the delegate does not convert, each refused at API 29 for what it is:
#: (model, category at 29, taken at 30).
REFUSED_AT_29 = {
    "SQUEEZE": (lambda: int8_operator("SQUEEZE", shape=(1, 8), out_shape=(8,), options="SqueezeOptions",
                                      SqueezeDims=[0]), Category.UNSUPPORTED_ANDROID_VERSION, True),
    "SPLIT": (lambda: int8_operator("SPLIT", before=[_i32(3)], options="SplitOptions", NumSplits=1),
              Category.UNSUPPORTED_INPUT_TYPE, True),
    "QUANTIZE to int8": (_quantize_float_to_int8, Category.UNSUPPORTED_OUTPUT_TYPE, True),
    "DEQUANTIZE of a zero point other than 0": (
        lambda: int8_operator("DEQUANTIZE", out_type="FLOAT32", zero_point=-3),
        Category.UNSUPPORTED_INPUT_TYPE, True),
    "CAST": (lambda: int8_operator("CAST", out_type="INT32"), Category.UNSUPPORTED_INPUT_TYPE, False),
}


@pytest.mark.parametrize("name", sorted(REFUSED_AT_29))
def test_an_int8_operator_the_delegate_does_not_convert_needs_api_30(name):
    build, category, taken_at_30 = REFUSED_AT_29[name]
    data = build()
    verdict = decide(data, 29).verdicts[0]
    assert verdict.category == category, verdict.reason
    at_30 = decide(data, 30).verdicts[0]
    assert at_30.supported == taken_at_30, at_30.reason
    assert not any(f.message.startswith("an int8") for f in at_30.failures)


def test_an_int8_dequantize_with_zero_point_0_is_taken_at_api_29_but_not_28():
    """At API 29 the delegate passes it as TENSOR_QUANT8_SYMM (NNAPI 1.2); 1.1 dequantizes
    uint8 only."""
    data = int8_operator("DEQUANTIZE", out_type="FLOAT32", zero_point=0)
    assert decide(data, 29).verdicts[0].supported
    assert decide(data, 28).verdicts[0].category == Category.UNSUPPORTED_INPUT_TYPE


def test_an_int8_convolution_with_a_float_filter_is_not_converted():
    """The delegate converts CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED only when their
    weights are quantized too."""
    g = FlatbufferGraph()
    x = g.tensor("x", (1, 4), "INT8", quant=Quant((0.05,), (0,)))
    w = g.tensor("w", (2, 4), "FLOAT32", np.ones((2, 4), np.float32).tobytes())
    y = g.tensor("y", (1, 2), "INT8", quant=Quant((0.05,), (0,)))
    g.operator("FULLY_CONNECTED", [x, w], [y], "FullyConnectedOptions", FusedActivationFunction=0)
    g.inputs, g.outputs = [x], [y]
    graph = read_graph(g.serialize())
    assert not passes_int8_as_uint8(graph, graph.operators[0])
    quantized = read_graph(MODELS["quantization"].data)
    assert passes_int8_as_uint8(quantized, quantized.operators[0])
