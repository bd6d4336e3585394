"""HARD_SWISH in the loader: NNAPI's own operation from feature level 30 (or none given);
below 30, MUL, MUL, MUL and ADD with the stage quantization TFLite's NNAPI delegate gives them
(``TransformHardSwishIntoSupportedOps``), computing what NNAPI's HARD_SWISH computes."""
from __future__ import annotations

import numpy as np
import pytest

from nnscope.runtime.hal.types import OperandLifetime, OperationType, numpy_dtype
from nnscope.runtime.ops.executor import CpuExecutor
from nnscope.runtime.tflite import convert_tflite
from tests.support.tflite_models import hard_swish_operator

O = OperationType
BELOW_30 = [O.MUL, O.MUL, O.MUL, O.ADD]


def _operations(data: bytes, level) -> list:
    model, _, _ = convert_tflite(data, feature_level=level)
    return [operation.type for operation in model.main.operations]


@pytest.mark.parametrize("type_name", ["FLOAT32", "FLOAT16", "UINT8", "INT8"])
def test_below_api_30_hard_swish_is_mul_and_add_and_from_30_its_own(type_name):
    data = hard_swish_operator(type_name)
    for level in (27, 28, 29):
        assert _operations(data, level) == BELOW_30
    assert _operations(data, 30) == _operations(data, None) == [O.HARD_SWISH]


def _stages(data: bytes) -> tuple[list, list]:
    """(the three MUL outputs' (scale, zero point), the two constants' (value, scale, zero
    point)) of the model built at API 29."""
    model, _, _ = convert_tflite(data, feature_level=29)
    operands, operations = model.main.operands, model.main.operations
    outputs = [operands[o.outputs[0]] for o in operations[:3]]
    constants = [operands[o.inputs[1]] for o in operations[:2]]
    stored = [int(np.frombuffer(model.operand_values, numpy_dtype(c.type), 1, c.location.offset)[0])
              for c in constants]
    assert all(c.lifetime == OperandLifetime.CONSTANT_COPY for c in constants)
    return ([(o.scale, o.zero_point) for o in outputs],
            [(q, c.scale, c.zero_point) for q, c in zip(stored, constants)])


def test_uint8_stages_are_quantized_as_the_delegate_quantizes_them():
    """Input [-6.4, 6.35] (scale 0.05, zero point 128): x/3 clamped to [-1, 1] in 255 steps,
    x/2 at half the scale, the product in [0, 3.2]; each constant the step 64."""
    stages, constants = _stages(hard_swish_operator("UINT8"))
    assert stages == [(pytest.approx(2 / 255), 127), (pytest.approx(0.025), 128),
                      (pytest.approx(3.2 / 255), 0)]
    assert constants == [(64, pytest.approx(1 / 3 / 64), 0), (64, pytest.approx(0.5 / 64), 0)]


def test_int8_stages_are_the_delegates_uint8_ones_minus_128():
    """The delegate passes an int8 HARD_SWISH to NNAPI as uint8 (zero point + 128); signed
    here, each stage and constant is the uint8 one minus 128 until ``delegate.int8`` flips it."""
    stages, constants = _stages(hard_swish_operator("INT8"))
    assert stages == [(pytest.approx(2 / 255), -1), (pytest.approx(0.025), 0),
                      (pytest.approx(3.2 / 255), -128)]
    assert constants == [(-64, pytest.approx(1 / 3 / 64), -128),
                         (-64, pytest.approx(0.5 / 64), -128)]


def _run(data: bytes, level, x: np.ndarray) -> np.ndarray:
    model, _, _ = convert_tflite(data, feature_level=level)
    return CpuExecutor(model).run([x])[0]


def test_float_mul_and_add_compute_nnapis_hard_swish():
    x = np.linspace(-5, 5, 32, dtype=np.float32).reshape(1, 4, 4, 2)
    data = hard_swish_operator("FLOAT32")
    np.testing.assert_allclose(_run(data, 29, x), _run(data, 30, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("type_name, dtype", [("UINT8", np.uint8), ("INT8", np.int8)])
def test_quantized_mul_and_add_stay_within_a_step_of_nnapis_hard_swish(type_name, dtype):
    """Three requantizations on the way (x/3 and the product in 255 steps each) cost at most
    one output step against the one-kernel HARD_SWISH, over every input step."""
    data = hard_swish_operator(type_name, shape=(1, 8, 16, 2))
    x = (np.arange(256) + int(np.iinfo(dtype).min)).astype(dtype).reshape(1, 8, 16, 2)
    lowered, own = _run(data, 29, x).astype(int), _run(data, 30, x).astype(int)
    assert np.abs(lowered - own).max() <= 1
