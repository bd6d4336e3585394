"""The README's API path: load_tflite + Model.from_hal + Compilation/Execution runs the face
detector on given inputs and agrees with LiteRT's reference outputs."""
from __future__ import annotations

import numpy as np

from nnscope.runtime.compilation import Compilation
from nnscope.runtime.execution import Execution
from nnscope.runtime.manager import get_device
from nnscope.runtime.model import Model
from nnscope.runtime.tflite import load_tflite
from tests.support.paths import MODEL_FIXTURES

FACE = MODEL_FIXTURES / "face_detection_short_range.tflite"
REFERENCE = MODEL_FIXTURES / "face_detection_short_range.litert-reference.npz"


def test_load_compile_execute_matches_litert():
    hal, input_names, output_names = load_tflite(FACE)
    assert (input_names, output_names) == (["input"], ["regressors", "classificators"])
    model = Model.from_hal(hal, name="face")
    compilation = Compilation(model, [get_device("nnapi-reference")])
    compilation.finish()
    reference = np.load(REFERENCE)
    execution = Execution(compilation)
    execution.set_input(0, reference["input1"])
    outputs = [np.zeros(model.operands[i].dimensions, np.float32) for i in model.outputs]
    for index, buffer in enumerate(outputs):
        execution.set_output(index, buffer)
    execution.compute()
    for position, actual in enumerate(outputs):
        expected = reference[f"output1_{position}"]
        scale = float(np.abs(expected).max())
        np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5 * scale)
