"""DEQUANTIZE and QUANTIZE (AOSP ``Dequantize.cpp``, ``Quantize.cpp``).

DEQUANTIZE reads TENSOR_QUANT8_ASYMM, _ASYMM_SIGNED, _SYMM or _SYMM_PER_CHANNEL and writes
TENSOR_FLOAT32 or TENSOR_FLOAT16 (``scale * (q - zeroPoint)`` in float32, then cast). QUANTIZE
reads float32/float16 and writes quant8 asymm or signed (``zp + round(x / scale)``, rounding half
away from zero, clamped).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> f = Operand(T.TENSOR_FLOAT32, (3,))
    >>> q = Operand(T.TENSOR_QUANT8_ASYMM_SIGNED, (3,), scale=0.5, zero_point=-1)
    >>> ctx = OpContext(Operation(O.QUANTIZE, (0,), (1,)), [np.float32([-0.75, 0, 100])], [f], [q])
    >>> execute_quantize(ctx)[0].tolist()
    [-3, -1, 127]
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import OperandType as T, OperationType, numpy_dtype
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.registry import OpContext, register

_QUANT_IN = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM,
             T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
_FLOATS = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)
_QUANT_OUT = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


def _validate_dequantize(inputs, outputs) -> None:
    c.expect_count(inputs, 1, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _QUANT_IN)
    c.expect_type(outputs, 0, _FLOATS, "output")
    c.expect_rank(inputs, 0, max_rank=4)
    if in_type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        c.expect(inputs[0].channel_quant is not None,
                 "input 0: TENSOR_QUANT8_SYMM_PER_CHANNEL needs per-channel scales")


def execute_dequantize(ctx: OpContext) -> list:
    out_dtype = numpy_dtype(ctx.output_operands[0].type)
    return [c.dequantize(ctx.inputs[0], ctx.input_operands[0], dtype=out_dtype)]


def _validate_quantize(inputs, outputs) -> None:
    c.expect_count(inputs, 1, "inputs")
    c.expect_count(outputs, 1, "outputs")
    c.expect_type(inputs, 0, _FLOATS)
    c.expect_type(outputs, 0, _QUANT_OUT, "output")
    c.expect(outputs[0].scale > 0, f"output 0: expected scale > 0, got {outputs[0].scale}")


def execute_quantize(ctx: OpContext) -> list:
    return [c.quantize(ctx.inputs[0], ctx.output_operands[0])]


register(OperationType.DEQUANTIZE, "quantization", _validate_dequantize, execute_dequantize)
register(OperationType.QUANTIZE, "quantization", _validate_quantize, execute_quantize)
