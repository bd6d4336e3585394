"""The NNAPI -> TFLite translator (``runtime.tflite._writer``): what it writes reads back with
our own loader and computes, on our CPU executor and on LiteRT, what the NNAPI model computes."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime import Model
from nnscope.runtime.hal.types import FuseCode, OperandType as T, OperationType as Op
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.tflite import convert_tflite, load_tflite
from nnscope.runtime.tflite._translate import supported, translate
from nnscope.runtime.tflite._writer import Untranslatable
from tests.support.paths import REPO

MODELS = REPO / "tests" / "data" / "models"


@pytest.mark.parametrize("name", ["face_detection_short_range", "face_landmark"])
def test_translation_reads_back_and_computes_the_same(name):
    hal, _, _ = load_tflite(MODELS / f"{name}.tflite")
    translation = translate(hal)
    assert translation.flatbuffer[4:8] == b"TFL3" and not translation.quantized
    again, inputs, outputs = convert_tflite(translation.flatbuffer, name)
    assert len(inputs) == len(hal.main.input_indexes) and len(outputs) == len(hal.main.output_indexes)
    x = np.load(MODELS / f"{name}.litert-reference.npz")["input1"]
    for ours, theirs in zip(CpuExecutor(hal).run([x]), CpuExecutor(again).run([x])):
        np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5)


def _conv_nchw_explicit() -> Model:
    """CONV_2D in NCHW with explicit padding (1, 0, 2, 1): neither SAME nor VALID -> PAD."""
    model = Model("conv-nchw")
    x = model.add_operand(T.TENSOR_FLOAT32, (1, 2, 5, 4))
    w = model.add_operand(T.TENSOR_FLOAT32, (3, 3, 2, 2))
    b = model.add_operand(T.TENSOR_FLOAT32, (3,))
    model.set_operand_value(w, np.random.default_rng(3).standard_normal((3, 3, 2, 2)).astype(np.float32))
    model.set_operand_value(b, np.float32([0.5, -1, 2]))
    scalars = []
    for value in (1, 0, 2, 1, 1, 2, int(FuseCode.RELU)):
        scalars.append(model.add_operand(T.INT32))
        model.set_operand_value(scalars[-1], value)
    layout = model.add_operand(T.BOOL)
    model.set_operand_value(layout, True)
    out = model.add_operand(T.TENSOR_FLOAT32, (1, 3, 3, 4))  # NCHW: H (5+3-3)//2+1, W 4+1-2+1
    model.add_operation(Op.CONV_2D, [x, w, b, *scalars, layout], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    return model


def test_nchw_explicit_padding_matches_the_reference_on_litert():
    interpreter = pytest.importorskip("ai_edge_litert.interpreter")
    hal = _conv_nchw_explicit().to_hal()
    translation = translate(hal)
    names = [op.type.name for op in convert_tflite(translation.flatbuffer)[0].main.operations]
    assert names.count("TRANSPOSE") == 2 and "PAD" in names and "CONV_2D" in names
    x = np.random.default_rng(4).standard_normal((1, 2, 5, 4)).astype(np.float32)
    litert = interpreter.Interpreter(model_content=translation.flatbuffer, num_threads=1)
    litert.allocate_tensors()
    litert.set_tensor(litert.get_input_details()[0]["index"], x)
    litert.invoke()
    actual = litert.get_tensor(litert.get_output_details()[0]["index"])
    np.testing.assert_allclose(actual, CpuExecutor(hal).run([x])[0], rtol=1e-5, atol=1e-5)


def test_untranslatable_operations_are_named():
    model = Model("lrn")
    x = model.add_operand(T.TENSOR_FLOAT32, (1, 2, 2, 3))
    params = [model.add_operand(t) for t in (T.INT32, T.FLOAT32, T.FLOAT32, T.FLOAT32)]
    for operand, value in zip(params, (1, 1.0, 0.5, 0.75)):
        model.set_operand_value(operand, value)
    out = model.add_operand(T.TENSOR_FLOAT32, (1, 2, 2, 3))
    model.add_operation(Op.LOCAL_RESPONSE_NORMALIZATION, [x, *params], [out])
    model.identify_inputs_and_outputs([x], [out])
    model.finish()
    hal = model.to_hal()
    assert not supported(hal, hal.main.operations[0])
    with pytest.raises(Untranslatable, match="LOCAL_RESPONSE_NORMALIZATION"):
        translate(hal)
