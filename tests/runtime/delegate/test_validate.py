"""Per-operator validation: for each model built for one delegate category, the verdict gives
the category the NNAPI delegate's rules give for that operator at that feature level (and the
operator is taken at the level where the rule no longer applies); lowering notes."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.delegate import Category, decide
from nnscope.runtime.delegate.validate import operation_level
from nnscope.runtime.hal.types import OperationType
from nnscope.runtime.tflite._reader import read_graph
from nnscope.runtime.delegate.validate import validate_operators
from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph
from tests.support.tflite_models import category_models, squared_difference

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
