"""The delegate's int8 -> uint8 conversion below API 30: a partition's NNAPI model and the
values crossing it."""
from __future__ import annotations

import numpy as np

from nnscope.runtime.delegate.int8 import as_uint8_model, int8_to_uint8, uint8_to_int8_in_place
from nnscope.runtime.hal.types import OperandType
from nnscope.runtime.tflite import convert_tflite
from nnscope.runtime.tflite._flatbuffer import FlatbufferGraph, Quant
from tests.support.tflite_models import category_models

_T = OperandType


def test_values_cross_as_the_delegate_converts_them():
    signed = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    unsigned = int8_to_uint8(signed)
    assert unsigned.dtype == np.uint8
    np.testing.assert_array_equal(unsigned.astype(int), signed.astype(int) + 128)
    back = uint8_to_int8_in_place(unsigned)
    assert back.dtype == np.int8 and np.shares_memory(back, unsigned)
    np.testing.assert_array_equal(back, signed)


def _constant(model, operand) -> np.ndarray:
    where = operand.location
    return np.frombuffer(model.operand_values, np.uint8 if operand.type == _T.TENSOR_QUANT8_ASYMM
                         else np.int8, where.length, where.offset)


def test_a_model_keeps_its_real_values_with_signed_operands_made_unsigned():
    """Activations and per-tensor constants: zero point + 128, values + 128; the per-channel
    filter and the int32 bias are unchanged."""
    signed, _, _ = convert_tflite(category_models()["quantization"].data)
    unsigned = as_uint8_model(signed)
    for before, after in zip(signed.main.operands, unsigned.main.operands):
        if before.type == _T.TENSOR_QUANT8_ASYMM_SIGNED:
            assert (after.type, after.zero_point, after.scale) == (
                _T.TENSOR_QUANT8_ASYMM, before.zero_point + 128, before.scale)
        else:
            assert after == before
    kept = {_T.TENSOR_QUANT8_SYMM_PER_CHANNEL, _T.TENSOR_INT32}
    assert {o.type for o in unsigned.main.operands} >= kept
    assert unsigned.operand_values == signed.operand_values  # its only 8-bit constant is per-channel


def test_a_signed_constant_is_stored_plus_128():
    g = FlatbufferGraph()
    x = g.tensor("x", (1, 4), "INT8", quant=Quant((0.5,), (-3,)))
    values = np.array([[-128, -1, 0, 127]], np.int8)
    c = g.tensor("c", (1, 4), "INT8", values.tobytes(), quant=Quant((0.5,), (-3,)))
    y = g.tensor("y", (1, 4), "INT8", quant=Quant((1.0,), (-3,)))
    g.operator("ADD", [x, c], [y], "AddOptions", FusedActivationFunction=0)
    g.inputs, g.outputs = [x], [y]
    signed, _, _ = convert_tflite(g.serialize())
    unsigned = as_uint8_model(signed)
    constant = next(o for o in unsigned.main.operands
                    if o.location is not None and o.type == _T.TENSOR_QUANT8_ASYMM)
    assert constant.zero_point == 125
    assert _constant(unsigned, constant).tolist() == [0, 127, 128, 255]
