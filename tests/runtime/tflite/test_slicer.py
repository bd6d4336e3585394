"""``slice_model``: a slice of every operator runs on LiteRT exactly as the whole model; a
slice of some operators keeps their options, custom options and quantisation."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.tflite import TfliteFormatError
from nnscope.runtime.tflite._reader import read_graph
from nnscope.runtime.tflite.slicer import slice_model
from tests.support.paths import MODEL_FIXTURES
from tests.support.tflite_models import category_models, litert_outputs, with_custom

pytest.importorskip("ai_edge_litert")


@pytest.mark.parametrize("name", ["face_detection_short_range", "face_landmark"])
def test_a_slice_of_every_operator_is_the_model(name):
    data = (MODEL_FIXTURES / f"{name}.tflite").read_bytes()
    reference = np.load(MODEL_FIXTURES / f"{name}.litert-reference.npz")
    graph = read_graph(data)
    whole = slice_model(data, range(len(graph.operators)), graph.inputs, graph.outputs)
    for expected, actual in zip(litert_outputs(data, [reference["input0"]]),
                                litert_outputs(whole, [reference["input0"]])):
        np.testing.assert_array_equal(actual, expected)


def test_a_custom_operator_keeps_its_code_and_options():
    data = with_custom()
    graph = read_graph(data)
    custom = graph.operators[1]
    part = slice_model(data, [1], [custom.inputs[0]], custom.outputs)
    sliced = read_graph(part)
    assert [op.name for op in sliced.operators] == ["CUSTOM:Convolution2DTransposeBias"]
    x = np.random.default_rng(0).standard_normal(graph.tensors[custom.inputs[0]].shape).astype(np.float32)
    assert litert_outputs(part, [x])[0].shape == (1, 8, 8, 3)


def test_per_channel_quantisation_survives():
    data = category_models()["quantization"].data
    (tensor,) = [t for t in read_graph(slice_model(data, [0], [0], [3])).tensors if t.name == "w"]
    assert tensor.scales == pytest.approx((0.01, 0.02, 0.03)) and tensor.quantized_dimension == 0


def test_a_missing_operator_or_tensor_is_a_format_error():
    data = with_custom()
    with pytest.raises(TfliteFormatError, match="operators"):
        slice_model(data, [7], [0], [1])
    with pytest.raises(TfliteFormatError, match="tensor 99"):
        slice_model(data, [0], [99], [1])


def test_an_options_table_without_fields_is_copied():
    from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph  # noqa: PLC0415
    g = FlatbufferGraph()
    x, y, z = (g.tensor(name, (1, 4), "FLOAT32") for name in "xyz")
    g.operator("ABS", [x], [y], "AbsOptions")
    g.operator("RELU", [y], [z])
    g.inputs, g.outputs = [x], [z]
    part = slice_model(g.serialize(), [0], [x], [y])
    assert litert_outputs(part, [np.array([[-1, 2, -3, 4]], np.float32)])[0].tolist() == [[1, 2, 3, 4]]


def test_a_while_keeps_the_subgraphs_it_calls():
    """A Keras LSTM as TF converts it: WHILE loops whose cond and body are other subgraphs."""
    data = (MODEL_FIXTURES / "generated" / "keras_lstm_gru.tflite").read_bytes()
    graph = read_graph(data)
    x = np.random.default_rng(0).standard_normal((1, 10, 8)).astype(np.float32)
    whole = slice_model(data, range(len(graph.operators)), graph.inputs, graph.outputs)
    np.testing.assert_array_equal(litert_outputs(whole, [x])[0], litert_outputs(data, [x])[0])
