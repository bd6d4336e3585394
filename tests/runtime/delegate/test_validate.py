"""Per-operator validation: for each model built for one delegate category, the verdict gives
the category the NNAPI delegate's rules give for that operator at that feature level (and the
operator is taken at the level where the rule no longer applies); lowering notes."""
from __future__ import annotations

import pytest

from nnscope.runtime.delegate import Category, decide
from nnscope.runtime.delegate.validate import operation_level
from nnscope.runtime.hal.types import OperationType
from nnscope.runtime.tflite._reader import read_graph
from nnscope.runtime.delegate.validate import validate_operators
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
