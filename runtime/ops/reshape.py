"""Shape operations: RESHAPE, CONCATENATION, PAD (AOSP ``Reshape.cpp``, ``Concatenation.cpp``, ``Pad.cpp``).

RESHAPE takes a TENSOR_INT32 shape with at most one -1. CONCATENATION takes n tensors and an INT32
axis (negative counts from the end); quant8 inputs with other scales/zero points than the output
are requantized like TFLite's ``ConcatenationWithScaling``. PAD takes a [rank, 2] TENSOR_INT32
paddings tensor and pads with 0 (float) or the output zero point (quant8).

Example:
    >>> import numpy as np
    >>> from nnscope.runtime.hal.types import Operand, OperandType as T, Operation, OperationType as O
    >>> t = Operand(T.TENSOR_FLOAT32, (2, 2)); shape = Operand(T.TENSOR_INT32, (1,))
    >>> ctx = OpContext(Operation(O.RESHAPE, (0, 1), (2,)),
    ...                 [np.zeros((2, 2), np.float32), np.int32([-1])], [t, shape], [t])
    >>> execute_reshape(ctx)[0].shape
    (4,)
"""
from __future__ import annotations

import numpy as np

from nnscope.runtime.hal.types import Operand, OperandType as T, OperationType, numpy_dtype
from nnscope.runtime.ops import _common as c
from nnscope.runtime.ops.budget import OutputPlan
from nnscope.runtime.ops.registry import OpContext, register

_TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)


# ----------------------------------------------------------------------------- RESHAPE
def _validate_reshape(inputs, outputs) -> None:
    c.expect_count(inputs, 2, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, (*_TYPES, T.TENSOR_INT32))
    c.expect_type(inputs, 1, T.TENSOR_INT32)
    c.expect_rank(inputs, 1, exact=1)
    c.expect_same_type(outputs, 0, in_type, "output")
    c.expect_rank(inputs, 0, max_rank=4)


def execute_reshape(ctx: OpContext) -> list:
    x, shape = ctx.inputs
    target = [int(d) for d in np.asarray(shape).ravel()]
    c.expect(target.count(-1) <= 1, f"input 1: at most one -1 allowed in shape {target}")
    if -1 in target:
        known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
        c.expect(known > 0 and x.size % known == 0,
                 f"input 1: shape {target} does not fit {x.size} elements")
        target[target.index(-1)] = x.size // known
    c.expect(int(np.prod(target, dtype=np.int64)) == x.size,
             f"input 1: shape {target} does not fit {x.size} elements")
    return [x.reshape(target)]


# ----------------------------------------------------------------------------- CONCATENATION
def _validate_concat(inputs, outputs) -> None:
    c.expect(len(inputs) >= 2, f"expected at least 2 inputs (tensors and axis), got {len(inputs)}")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _TYPES)
    rank = len(inputs[0].dimensions)
    for index in range(len(inputs) - 1):
        c.expect_same_type(inputs, index, in_type)
        c.expect_rank(inputs, index, max_rank=4)
        c.expect(len(inputs[index].dimensions) in (0, rank) or rank == 0,
                 f"input {index}: expected rank {rank} like input 0, got "
                 f"{len(inputs[index].dimensions)}")
    c.expect_type(inputs, len(inputs) - 1, T.INT32)
    c.expect_same_type(outputs, 0, in_type, "output")
    c.expect_rank(outputs, 0, max_rank=4, what="output")


def _rescale(x: np.ndarray, operand: Operand, out: Operand) -> np.ndarray:
    if operand.scale == out.scale and operand.zero_point == out.zero_point:
        return x
    scale = np.float32(operand.scale) * (np.float32(1.0) / np.float32(out.scale))
    bias = np.float32(-operand.zero_point) * scale
    value = c.round_half_away(x.astype(np.float32) * scale + bias) + out.zero_point
    return c.saturate_cast(value, numpy_dtype(out.type))


def execute_concatenation(ctx: OpContext) -> list:
    *tensors, axis = ctx.inputs
    rank = tensors[0].ndim
    c.expect(-rank <= axis < rank, f"input {len(tensors)}: axis {axis} out of range for rank {rank}")
    out = ctx.output_operands[0]
    if c.is_quant8(out.type):
        tensors = [_rescale(x, op, out) for x, op in zip(tensors, ctx.input_operands)]
    try:
        return [np.concatenate(tensors, axis=axis)]
    except ValueError as error:
        raise c.OpValidationError(f"CONCATENATION: {error}") from None


# ----------------------------------------------------------------------------- PAD
def _validate_pad(inputs, outputs) -> None:
    c.expect_count(inputs, 2, "inputs")
    c.expect_count(outputs, 1, "outputs")
    in_type = c.expect_type(inputs, 0, _TYPES)
    c.expect_type(inputs, 1, T.TENSOR_INT32)
    c.expect_rank(inputs, 1, exact=2)
    c.expect_same_type(outputs, 0, in_type, "output")
    c.expect_rank(inputs, 0, max_rank=4)


def execute_pad(ctx: OpContext) -> list:
    x, paddings = ctx.inputs
    paddings = c.checked_paddings(x, paddings)
    out = ctx.output_operands[0]
    value = out.zero_point if c.is_quant8(out.type) else 0
    return [c.constant_pad(x, paddings.tolist(), value)]


def _infer_concatenation(ctx: OpContext) -> OutputPlan | None:
    tensors = [x for x in ctx.inputs[:-1] if isinstance(x, np.ndarray)]
    if len(tensors) < 2:
        return None
    return OutputPlan([(sum(x.size for x in tensors),)])


register(OperationType.RESHAPE, "reshape", _validate_reshape, execute_reshape)
register(OperationType.CONCATENATION, "reshape", _validate_concat, execute_concatenation,
         infer_shapes=_infer_concatenation)
register(OperationType.PAD, "reshape", _validate_pad, execute_pad, infer_shapes=c.infer_pad)
